import { Ajv } from 'ajv';
import { isIP } from 'node:net';
import Type, { type Static, type TSchema } from 'typebox';
import { DURABILITY_SETTINGS, SERVING_SETTINGS } from './settings.js';
import { LIMIT_SETTINGS } from './settings-limits.js';
import { WEATHER_SETTINGS } from './settings-weather.js';
import { EVENT_SETTINGS } from './settings-events.js';

/**
 * Every setting of rowi, as one schema, in the order of `rowi --help` and of the table in docs/operations.md.
 * `loadConfig` reads each from its flag, its environment variable or its default, in that order
 * of precedence, checks it against the schema, and freezes the result.
 */
export const ConfigSchema = Type.Object({ ...SERVING_SETTINGS, ...LIMIT_SETTINGS, ...WEATHER_SETTINGS, ...EVENT_SETTINGS, ...DURABILITY_SETTINGS });

export type Config = Readonly<Static<typeof ConfigSchema>>;
export type ConfigKey = keyof Config;


/** A bad setting: the program stops before it listens and exits with code 2 (docs/operations.md "Configuration"). */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

type SettingSchema = TSchema & { 'x-env': string; 'x-flag'?: string; default: unknown; type?: string; description?: string };

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
 * ConfigError naming the first bad setting, its source and the rule it breaks.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  flags: Record<string, string | undefined> = {},
): Config {
  const config: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(settings)) {
    const flag = schema['x-flag'];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const fromEnv = env[schema['x-env']];
    const source = fromFlag !== undefined ? `--${flag}` : schema['x-env'];
    const raw = fromFlag ?? (fromEnv === '' ? undefined : fromEnv);
    if (raw === undefined) {
      config[key] = schema.default;
      continue;
    }
    const value = schema.type === 'integer' ? parseInteger(raw) : raw;
    const check = validator.compile(schema);
    if (!check(value)) {
      throw new ConfigError(
        // A secret (a URL with a password) is never echoed.
        `${source}${(schema as { 'x-secret'?: boolean })['x-secret'] ? '' : `=${JSON.stringify(raw)}`} is not a valid setting: ${explain(schema)}`,
      );
    }
    config[key] = value;
  }
  checkTogether(config as Config);
  return Object.freeze(config) as Config;
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
      throw new ConfigError(`ROWI_TRUST_PROXY=${JSON.stringify(config.trustProxy)} is not a valid setting: ${JSON.stringify(entry)} is not an IP address or CIDR range`);
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
