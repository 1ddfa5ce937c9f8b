import { fork, type ChildProcess } from 'node:child_process';
import type { Config } from '../config/config.js';
import type { FirstAdmin } from './banner.js';

/**
 * The preparer of `rowi serve --workers N`: a short-lived child process that does for the primary
 * what needs the whole of rowi, so that the primary itself loads none of it (docs/performance.md
 * "Memory"). It reads and checks the settings (a bad one: it says so and exits 2, and so does the
 * primary), opens the database, checks it and migrates it, then once the primary listens creates
 * the first admin on an empty database, and ends (process/serve.ts, prepareForPrimary); the
 * primary writes the banner once it has ended, so that only the workers are left. A start check of
 * SQLite still running then keeps it until the check ends; damage it finds is told to the primary,
 * which tells the workers.
 *
 * The variable is not a ROWI_ name: it is no setting, and the preparer removes it from its
 * environment at once.
 */
export const PREPARER_ENV = '__ROWI_PREPARES_FOR_PRIMARY';

export type PreparerMessage =
  | { type: 'rowi:configured'; config: Config; workers: number }
  | { type: 'rowi:prepared' }
  | { type: 'rowi:listening' }
  | { type: 'rowi:first-admin'; storage: string; firstAdmin: FirstAdmin | undefined; checkGoesOn: boolean }
  | { type: 'rowi:damage'; detail: string };

export const isPreparerMessage = (message: unknown): message is PreparerMessage =>
  typeof message === 'object' &&
  message !== null &&
  ['rowi:configured', 'rowi:prepared', 'rowi:listening', 'rowi:first-admin', 'rowi:damage'].includes(
    (message as { type?: string }).type ?? '',
  );

/** The preparer ended before it had done what was asked: it has said why; the primary ends with its exit code. */
export class PreparerEnded extends Error {
  override name = 'PreparerEnded';
  constructor(readonly exitCode: number) {
    super(`the preparer ended with exit code ${exitCode}`);
  }
}

export class Preparer {
  readonly #child: ChildProcess;
  readonly #ended: Promise<never>;
  readonly #exited: Promise<void>;

  /** Starts the preparer: this same command, with the same arguments, settings and Node flags. */
  constructor() {
    this.#child = fork(process.argv[1]!, process.argv.slice(2), {
      execArgv: process.execArgv,
      env: { ...process.env, [PREPARER_ENV]: '1' },
    });
    this.#exited = new Promise((resolve) => this.#child.once('exit', () => resolve()));
    this.#ended = new Promise((_resolve, reject) => {
      this.#child.once('exit', (code) => reject(new PreparerEnded(code ?? 1)));
    });
    // Nobody may be waiting when it ends (after the banner, its check going on): not a failure.
    this.#ended.catch(() => {});
  }

  /** The settings, checked, and how many workers they ask for. */
  configured(): Promise<{ config: Config; workers: number }> {
    return this.#next('rowi:configured');
  }

  /** The database opened, checked and migrated. */
  async prepared(): Promise<void> {
    await this.#next('rowi:prepared');
  }

  /**
   * Once the primary listens: the first admin, created on an empty database, and what the banner
   * says of the database; resolves once the preparer has ended (unless its check goes on).
   */
  async listening(): Promise<{ storage: string; firstAdmin: FirstAdmin | undefined }> {
    const answer = this.#next('rowi:first-admin');
    this.#child.send({ type: 'rowi:listening' } satisfies PreparerMessage);
    const { storage, firstAdmin, checkGoesOn } = await answer;
    if (!checkGoesOn) await this.#exited;
    return { storage, firstAdmin };
  }

  /** Damage the start's check of SQLite found once rowi was serving. */
  onDamage(heard: (detail: string) => void): void {
    this.#child.on('message', (message: unknown) => {
      if (isPreparerMessage(message) && message.type === 'rowi:damage') heard(message.detail);
    });
  }

  kill(): void {
    if (this.#child.exitCode === null) this.#child.kill('SIGKILL');
  }

  #next<T extends PreparerMessage['type']>(type: T): Promise<Extract<PreparerMessage, { type: T }>> {
    let listener: ((message: unknown) => void) | undefined;
    const heard = new Promise<Extract<PreparerMessage, { type: T }>>((resolve) => {
      listener = (message: unknown) => {
        if (isPreparerMessage(message) && message.type === type)
          resolve(message as Extract<PreparerMessage, { type: T }>);
      };
      this.#child.on('message', listener);
    });
    return Promise.race([heard, this.#ended]).finally(() => this.#child.off('message', listener!));
  }
}
