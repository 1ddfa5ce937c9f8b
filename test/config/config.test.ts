import { describe, expect, it } from 'vitest';
import { ConfigError, ConfigSchema, describeSettings, loadConfig, NOT_SETTINGS } from '../../src/config/config.js';
import { documentation } from '../helpers/docs.js';

/**
 * Every setting the documentation (README and docs/) documents accepts every value it documents for it: its
 * default (which is also what the parser uses when the setting is unset), and each value a table
 * gives a meaning to (`0`: unlimited, `full`: …). Read from the documentation's tables themselves, so a
 * new row or value is checked as soon as it is written.
 */
const DOCS = documentation();

interface Row {
  line: number;
  /** The settings the row is about (its first cell naming a ROWI_ variable, or a "Setting" column). */
  settings: string[];
  /** The row's default values, if the table has a Default column. */
  defaults: string[] | undefined;
  /** Values the row gives a meaning to: `value`: meaning. */
  values: string[];
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

/** Every table row that names a ROWI_ setting. */
function documentedRows(): Row[] {
  const rows: Row[] = [];
  let header: string[] | undefined;
  DOCS.split('\n').forEach((text, index) => {
    if (!text.startsWith('|')) {
      header = undefined;
      return;
    }
    const cells = text
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    if (header === undefined) {
      header = cells.map((cell) => cell.toLowerCase());
      return;
    }
    if (cells.every((cell) => /^-+$/.test(cell))) return;
    const settingColumn = header.findIndex((name) => name === 'variable' || name === 'setting');
    const named = (settingColumn === -1 ? cells : [cells[settingColumn]!]).flatMap((cell) =>
      backticked(cell).filter((token) => /^ROWI_[A-Z_]+$/.test(token)),
    );
    if (named.length === 0) return;
    // Time-outs are tabled in seconds for people ("10 s"); the Configuration table has their milliseconds.
    const defaultColumn = header.findIndex((name) => name.startsWith('default'));
    const defaultCell =
      defaultColumn === -1 || /\d s\b/.test(cells[defaultColumn] ?? '') ? undefined : cells[defaultColumn];
    const defaults =
      defaultCell === undefined
        ? undefined
        : backticked(defaultCell).length > 0
          ? backticked(defaultCell)
          : (defaultCell.match(/^\d+$/) ?? ['']);
    const values = cells.flatMap((cell) => [...cell.matchAll(/`([^`]+)`:/g)].map((match) => match[1]!));
    rows.push({ line: index + 1, settings: [...new Set(named)], defaults, values });
  });
  return rows;
}

const settingsByEnv = new Map(describeSettings().map((setting) => [setting.env, setting]));
const keyOf = new Map(
  Object.entries(ConfigSchema.properties).map(([key, schema]) => [
    (schema as unknown as { 'x-env': string })['x-env'],
    key,
  ]),
);

describe('the documented settings against the config parser', () => {
  const rows = documentedRows();

  it('docs: every ROWI_ setting in a table is one the parser reads, and the Configuration table lists every setting', () => {
    expect(rows.length).toBeGreaterThan(40);
    for (const row of rows)
      for (const env of row.settings)
        expect(settingsByEnv.has(env), `documentation line ${row.line}: ${env} is not a setting rowi reads`).toBe(true);
    const documented = new Set(rows.flatMap((row) => row.settings));
    for (const env of settingsByEnv.keys())
      expect(documented.has(env), `${env} is not documented (docs/operations.md "Configuration")`).toBe(true);
  });

  it('docs: each documented default is accepted and is the value used when the setting is unset', () => {
    for (const row of rows.filter((candidate) => candidate.defaults !== undefined)) {
      const defaults =
        row.defaults!.length === row.settings.length ? row.defaults! : row.settings.map(() => row.defaults![0]!);
      row.settings.forEach((env, index) => {
        const documented = defaults[index] ?? '';
        const parsed = loadConfig(documented === '' ? {} : { [env]: documented });
        const key = keyOf.get(env) as keyof typeof parsed;
        expect(
          String(parsed[key]),
          `documentation line ${row.line}: ${env} documents the default ${JSON.stringify(documented)}`,
        ).toBe(String(settingsByEnv.get(env)!.default));
      });
    }
  });

  it('docs: each value a table gives a meaning to (`0`: unlimited, `full`: …) is accepted by the settings of its row', () => {
    const checked: string[] = [];
    for (const row of rows) {
      for (const value of row.values) {
        for (const env of row.settings) {
          expect(() => loadConfig({ [env]: value }), `documentation line ${row.line}: ${env}=${value}`).not.toThrow();
          checked.push(`${env}=${value}`);
        }
      }
    }
    expect(checked).toEqual(
      expect.arrayContaining([
        'ROWI_AUTH_FAILURE_LIMIT=0',
        'ROWI_RATE_LIMIT_ORDERS_CREATE=0',
        'ROWI_WORKERS=1',
        'ROWI_SQLITE_SYNCHRONOUS=normal',
        'ROWI_MAX_HEAP_USED=0',
      ]),
    );
  });

  it('ROWI_AUTH_FAILURE_LIMIT=0: accepted (the policy is off), as docs/operations.md says', () => {
    expect(loadConfig({ ROWI_AUTH_FAILURE_LIMIT: '0' }).authFailureLimit).toBe(0);
  });

  it('--data, ROWI_HOST, ROWI_PUBLIC_URL, ROWI_JWT_ISSUER, ROWI_JWT_JWKS_URL: a bad value stops rowi with the setting and its rule named', () => {
    expect(() => loadConfig({ ROWI_HOST: 'a b' })).toThrow(
      'ROWI_HOST="a b" is not a valid setting: must be an IP address or a host name',
    );
    expect(() => loadConfig({ ROWI_PUBLIC_URL: 'https://api.example.com/v1' })).toThrow(
      'ROWI_PUBLIC_URL="https://api.example.com/v1" is not a valid setting: must be an origin',
    );
    expect(() => loadConfig({ ROWI_JWT_ISSUER: 'issuer.example.com' })).toThrow(
      'ROWI_JWT_ISSUER="issuer.example.com" is not a valid setting: must be an http:// or https:// URL',
    );
    expect(() => loadConfig({ ROWI_JWT_JWKS_URL: 'ftp://x' })).toThrow(
      'ROWI_JWT_JWKS_URL="ftp://x" is not a valid setting: must be an http:// or https:// URL',
    );
  });
});

describe('the environment around the settings', () => {
  it('ROWI_PROT: refused, naming it and the setting it misspells (ROWI_PORT), instead of starting on the default port', () => {
    expect(() => loadConfig({ ROWI_PROT: '18183' })).toThrow(ConfigError);
    expect(() => loadConfig({ ROWI_PROT: '18183' })).toThrow(
      'ROWI_PROT (did you mean ROWI_PORT?): not a setting of rowi (rowi --help lists them). Correct or unset it; ROWI_UNKNOWN_SETTINGS=warn starts anyway',
    );
  });

  it('ROWI_DATABSE_URL: refused, naming ROWI_DATABASE_URL and never echoing the value (it holds a password)', () => {
    const attempt = () => loadConfig({ ROWI_DATABSE_URL: 'postgres://rowi:s3cret@db.example:5432/rowi' });
    expect(attempt).toThrow('ROWI_DATABSE_URL (did you mean ROWI_DATABASE_URL?)');
    expect(attempt).not.toThrow(/s3cret|db\.example/);
  });

  it('unknown names: each is named, the lower-case spelling of a setting too, and a name near none gets no guess', () => {
    expect(() => loadConfig({ rowi_port: '1', ROWI_WROKERS: '2', ROWI_FROBNICATE: 'x' })).toThrow(
      'ROWI_FROBNICATE; ROWI_WROKERS (did you mean ROWI_WORKERS?); rowi_port (did you mean ROWI_PORT?): not settings of rowi',
    );
  });

  it('ROWI_UNKNOWN_SETTINGS=warn: an unknown name is let through (rowi says so on stderr), and the setting misspelt keeps its default', () => {
    const config = loadConfig({ ROWI_PROT: '18183', ROWI_UNKNOWN_SETTINGS: 'warn' });
    expect(config.port).toBe(8080);
    expect(() => loadConfig({ ROWI_UNKNOWN_SETTINGS: 'allow' })).toThrow(
      'ROWI_UNKNOWN_SETTINGS="allow" is not a valid setting: expected one of refuse, warn',
    );
  });

  it("ROWI_KEY and the tools' ROWI_TEST_, ROWI_BENCH_ and ROWI_CI_ names are not settings and are let through; no setting takes such a name", () => {
    expect(() =>
      loadConfig({
        ROWI_KEY: 'rowi_abc',
        ROWI_TEST_PG_URL: 'postgres://x',
        ROWI_BENCH_NODE24: '/x',
        ROWI_CI_NODE24: '/y',
      }),
    ).not.toThrow();
    for (const { env } of describeSettings()) {
      expect(
        NOT_SETTINGS.names.includes(env) || NOT_SETTINGS.prefixes.some((prefix) => env.startsWith(prefix)),
        env,
      ).toBe(false);
    }
  });

  it('an empty variable or flag is refused, naming it and its default, instead of meaning the default (ROWI_DATABASE_URL= from an unset shell variable)', () => {
    expect(() => loadConfig({ ROWI_DATABASE_URL: '' })).toThrow(
      'ROWI_DATABASE_URL is empty: give it a value (must be a postgres:// (or postgresql://) connection URL), or leave it out for the default (unset)',
    );
    expect(() => loadConfig({ ROWI_DATA: '' })).toThrow(
      'ROWI_DATA is empty: give it a value (must be the path of a file), or leave it out for the default (./data/rowi.db)',
    );
    expect(() => loadConfig({}, { data: '' })).toThrow('--data is empty');
    expect(() => loadConfig({ ROWI_PORT: '' })).toThrow(
      'ROWI_PORT is empty: give it a value (expected an integer from 0 to 65535), or leave it out for the default (8080)',
    );
  });

  it("a flag and its variable together: the flag wins, as docs/operations.md says (an image's ROWI_PORT is overridden by --port)", () => {
    expect(loadConfig({ ROWI_PORT: '8080' }, { port: '9090' }).port).toBe(9090);
  });
});
