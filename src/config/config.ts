import { Ajv } from 'ajv';
import { isIP } from 'node:net';
import Type, { type Static, type TSchema } from 'typebox';
import { DURABILITY_SETTINGS, SERVING_SETTINGS, START_CHECK_SETTINGS } from './serving.settings.js';
import { AUTH_SETTINGS } from './auth.settings.js';
import { LIMIT_SETTINGS } from './limits.settings.js';
import { WEATHER_SETTINGS } from './weather.settings.js';
import { EVENT_SETTINGS } from './events.settings.js';
import { BACKUP_SETTINGS } from './backup.settings.js';

/**
 * Every setting of rowi, as one schema, in the order of `rowi --help` and of the table in docs/operations.md.
 * `loadConfig` reads each from its flag, its environment variable or its default, in that order
 * of precedence, checks it against the schema, and freezes the result.
 */
export const ConfigSchema = Type.Object({
  ...SERVING_SETTINGS,
  ...AUTH_SETTINGS,
  ...LIMIT_SETTINGS,
  ...WEATHER_SETTINGS,
  ...EVENT_SETTINGS,
  ...BACKUP_SETTINGS,
  ...DURABILITY_SETTINGS,
  ...START_CHECK_SETTINGS,
});

export type Config = Readonly<Static<typeof ConfigSchema>>;
export type ConfigKey = keyof Config;

import { ConfigError } from './config-error.js';

export { ConfigError };

type SettingSchema = TSchema & {
  'x-env': string;
  'x-flag'?: string;
  'x-default-text'?: string;
  'x-secret'?: boolean;
  default: unknown;
  type?: string;
  description?: string;
};

const settings = ConfigSchema.properties as unknown as Record<ConfigKey, SettingSchema>;

/** The command-line flags of `rowi serve`, for `node:util` parseArgs. */
export const CONFIG_FLAGS: Record<string, { type: 'string' }> = Object.fromEntries(
  Object.values(settings)
    .filter((schema) => schema['x-flag'])
    .map((schema) => [schema['x-flag'] as string, { type: 'string' as const }]),
);

/** A setting as `rowi --help` and the configuration table of docs/operations.md describe it. */
export interface SettingDescription {
  env: string;
  flag?: string;
  default: unknown;
  /** The default in words where the value alone says little (an empty string: unset). */
  defaultText?: string;
  description: string;
  /** A secret (a URL with a password): never echoed in messages. */
  secret: boolean;
}

/** A setting's description as plain text (a message, `rowi --help`): without the Markdown code marks the docs' table keeps. */
export const plainText = (description: string): string => description.replaceAll('`', '');

/** One line per setting, for `rowi --help` and the configuration table of docs/operations.md. */
export function describeSettings(): SettingDescription[] {
  return Object.values(settings).map((schema) => {
    const rule = schema as unknown as Record<string, unknown>;
    return {
      env: schema['x-env'],
      ...(schema['x-flag'] ? { flag: `--${schema['x-flag']}` } : {}),
      default: schema.default,
      ...(typeof rule['x-default-text'] === 'string' ? { defaultText: rule['x-default-text'] } : {}),
      description: String(schema.description ?? ''),
      secret: rule['x-secret'] === true,
    };
  });
}

const validator = new Ajv({ allErrors: false, strict: false });

/**
 * Reads every setting from flags (already parsed, by flag name) and the environment. Throws
 * ConfigError naming the first bad setting, its source and the rule it breaks; an empty value
 * (`ROWI_DATABASE_URL=` from an unset shell variable) is refused rather than taken for the
 * default, and so is an environment variable named like a setting that is none (unknownSettings).
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  flags: Record<string, string | undefined> = {},
): Config {
  const config: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(settings)) {
    const flag = schema['x-flag'];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const source = fromFlag !== undefined ? `--${flag}` : schema['x-env'];
    const raw = fromFlag ?? env[schema['x-env']];
    if (raw === undefined) {
      config[key] = schema.default;
      continue;
    }
    if (raw === '') {
      const fallback = schema['x-default-text'] ?? (schema.default === '' ? 'unset' : String(schema.default));
      throw new ConfigError(
        `${source} is empty: give it a value (${explain(schema)}), or leave it out for the default (${fallback})`,
      );
    }
    const value = schema.type === 'integer' ? parseInteger(raw) : raw;
    const check = validator.compile(schema);
    if (!check(value)) {
      throw new ConfigError(
        // A secret (a URL with a password) is never echoed.
        `${source}${schema['x-secret'] ? '' : `=${JSON.stringify(raw)}`} is not a valid setting: ${explain(schema)}`,
      );
    }
    config[key] = value;
  }
  checkTogether(config as Config);
  const unknown = unknownSettings(env);
  if (unknown.length > 0 && config.unknownSettings === 'refuse') {
    throw new ConfigError(
      `${unknown.map(describeUnknown).join('; ')}: ${unknown.length === 1 ? 'not a setting' : 'not settings'} of rowi (rowi --help lists them). ` +
        `Correct or unset ${unknown.length === 1 ? 'it' : 'them'}; ROWI_UNKNOWN_SETTINGS=warn starts anyway, for an environment other programs share`,
    );
  }
  return Object.freeze(config) as Config;
}

/**
 * Names of the environment that start with `ROWI_` (in any case) but are not rowi's and not the
 * tools' (NOT_SETTINGS): misspelt settings, which would otherwise be ignored without a word
 * (`ROWI_DATABSE_URL` starting on a new SQLite file). Never their values: one may hold a password.
 */
export function unknownSettings(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter((name) => /^rowi_/i.test(name) && !KNOWN_NAMES.has(name))
    .filter(
      (name) => !NOT_SETTINGS.names.includes(name) && !NOT_SETTINGS.prefixes.some((prefix) => name.startsWith(prefix)),
    )
    .sort();
}

/**
 * ROWI_ names that are never settings: the API key the documentation's examples export, and the
 * variables of the tools around rowi (its tests, benchmarks and CI), which child processes inherit.
 * No setting may take one of these names (test/config/config.test.ts).
 */
export const NOT_SETTINGS: { names: readonly string[]; prefixes: readonly string[] } = {
  names: ['ROWI_KEY'],
  prefixes: ['ROWI_TEST_', 'ROWI_BENCH_', 'ROWI_CI_'],
};

const KNOWN_NAMES = new Set(Object.values(settings).map((schema) => schema['x-env']));

/** `ROWI_PROT (did you mean ROWI_PORT?)`. */
export function describeUnknown(name: string): string {
  const nearest = nearestName(name.toUpperCase(), [...KNOWN_NAMES]);
  return nearest === undefined ? name : `${name} (did you mean ${nearest}?)`;
}

/**
 * The candidate nearest to `name` by edit distance (insertions, deletions, substitutions and
 * transpositions of neighbours: PROT is one step from PORT), if it is near enough to be a
 * misspelling of it: at most a third of the name apart.
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (best === undefined || distance < best.distance) best = { candidate, distance };
  }
  return best !== undefined && best.distance <= Math.max(1, Math.floor(name.replace(/^(ROWI_|--)/i, '').length / 3))
    ? best.candidate
    : undefined;
}

/** Optimal string alignment distance (Damerau–Levenshtein without moves across a change). */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_row, i) =>
    Array.from({ length: b.length + 1 }, (_cell, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        distance = Math.min(distance, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = distance;
    }
  }
  return rows[a.length]![b.length]!;
}

/** Settings that only mean something together. */
function checkTogether(config: Config): void {
  const groups: [string, string[]][] = [
    ['serving HTTPS', ['ROWI_TLS_CERT', 'ROWI_TLS_KEY']],
    ['accepting external bearer tokens', ['ROWI_JWT_ISSUER', 'ROWI_JWT_AUDIENCE', 'ROWI_JWT_JWKS_URL']],
  ];
  const values: Record<string, string> = {
    ROWI_TLS_CERT: config.tlsCert,
    ROWI_TLS_KEY: config.tlsKey,
    ROWI_JWT_ISSUER: config.jwtIssuer,
    ROWI_JWT_AUDIENCE: config.jwtAudience,
    ROWI_JWT_JWKS_URL: config.jwtJwksUrl,
  };
  for (const entry of config.trustProxy === '' ? [] : config.trustProxy.split(',')) {
    if (!isAddressOrRange(entry)) {
      throw new ConfigError(
        `ROWI_TRUST_PROXY=${JSON.stringify(config.trustProxy)} is not a valid setting: ${JSON.stringify(entry)} is not an IP address or CIDR range`,
      );
    }
  }
  for (const [purpose, names] of groups) {
    const missing = names.filter((name) => values[name] === '');
    if (missing.length > 0 && missing.length < names.length) {
      throw new ConfigError(`${missing.join(' and ')} must be set too: ${purpose} needs ${names.join(', ')}`);
    }
  }
}

function isAddressOrRange(text: string): boolean {
  const [address = '', prefix, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

function parseInteger(raw: string): number | string {
  return /^-?\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : raw;
}

function explain(schema: SettingSchema): string {
  const rule = schema as unknown as Record<string, unknown>;
  if (typeof rule['x-error'] === 'string') return rule['x-error'];
  if (schema.type === 'integer') return `expected an integer from ${rule.minimum} to ${rule.maximum}`;
  if (Array.isArray(rule.anyOf)) {
    const choices = (rule.anyOf as { const: string }[]).map((option) => option.const);
    return `expected one of ${choices.join(', ')}`;
  }
  return plainText(String(schema.description ?? 'invalid value'));
}
