/**
 * A bad setting: the program stops before it listens and exits with code 2 (docs/operations.md "Configuration").
 * A module of its own, so that what only reports one (the primary of `--workers`) loads no schema.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
