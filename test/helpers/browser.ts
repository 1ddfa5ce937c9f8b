import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`); no browser is downloaded. */
export const CHROMIUM = process.env.ROWI_TEST_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Why the browser tests cannot run here, or undefined when they can. Without Chromium they skip
 * with this message, except where ROWI_TEST_BROWSER=required (.ci/run installs Chromium and sets
 * it), where a missing browser fails the run.
 */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  const why = `${CHROMIUM} is not installed (apt-get install chromium)`;
  if (process.env.ROWI_TEST_BROWSER === 'required')
    throw new Error(`browser tests: ${why}, and ROWI_TEST_BROWSER=required`);
  console.warn(`\n[rowi tests] ${why}: the browser tests are SKIPPED (.ci/run installs it).\n`);
  return why;
}

/** Headless Chromium, driven by playwright-core. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}
