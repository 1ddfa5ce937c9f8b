/**
 * What follows a commit, wired where it can be seen: each database handle carries one
 * (`db.commits`, made with the handle by connect.ts or postgres.ts), the unit of work tells it when
 * a transaction that wrote events has committed (unit-of-work.ts), and app.ts hands it to the
 * event side (`startEvents({ commits: db.commits, … })`), whose feed wakes its readers on it.
 */
export class Commits {
  readonly #listeners = new Set<() => void>();

  /** Runs `listener` after each unit of work that wrote events has committed; returns the unsubscribe. */
  onEventsCommitted(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The unit of work: a transaction that wrote events has committed. */
  eventsCommitted(): void {
    for (const listener of this.#listeners) listener();
  }
}

/** The handle with the Commits its units of work tell: a new one, or that of the handle it stands beside. */
export function withCommits<T extends object>(kysely: T, commits = new Commits()): T & { readonly commits: Commits } {
  return Object.assign(kysely, { commits });
}
