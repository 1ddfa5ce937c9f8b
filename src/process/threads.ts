import type { AppThreads } from '../app.js';
import { importThreadStarter } from './import-thread.js';
import { webhookThreadStarter } from './webhook-thread.js';

/** The threads a serving process takes work off its event loop with: imports, and webhook delivery. */
export const APP_THREADS: AppThreads = { imports: importThreadStarter, webhooks: webhookThreadStarter };
