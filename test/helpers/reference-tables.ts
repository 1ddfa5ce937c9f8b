import { readFileSync, writeFileSync } from 'node:fs';
import type { Metric } from 'prom-client';
import { describeSettings } from '../../src/config/config.js';
import { PROBLEM_TYPES } from '../../src/problem-types.js';
import { registry } from '../../src/observability/metrics.js';

/**
 * The reference tables of docs/, generated from the code's catalogues: the problem types
 * (src/errors.ts), the metrics (src/observability/metrics.ts) and the settings (src/config/, as
 * `rowi --help` lists them). Each sits in its file between a start and an
 * end marker; `npm run docs` rewrites them, and test/docs/readme-catalogues.test.ts fails while a file
 * holds anything else there.
 */
interface Table {
  file: string;
  name: string;
  rows: () => string;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

export const TABLES: Table[] = [
  {
    file: 'docs/errors.md',
    name: 'problem types, from src/problem-types.ts',
    rows: () =>
      ['| Status | `type` | Title | When |', '|---|---|---|---|']
        .concat(
          Object.entries(PROBLEM_TYPES).map(
            ([type, { status, title, description }]) =>
              `| ${status} | \`${type}\` | ${cell(title)} | ${cell(description)} |`,
          ),
        )
        .join('\n'),
  },
  {
    file: 'docs/operations.md',
    name: 'metrics, from src/observability/metrics.ts',
    rows: () => {
      const rowi = (
        registry.getMetricsAsArray() as unknown as (Metric & { labelNames?: string[]; help: string; name: string })[]
      ).filter((metric) => metric.name.startsWith('rowi_'));
      return ['| Metric | Type | Labels | What it counts |', '|---|---|---|---|']
        .concat(
          rowi.map(
            (metric) =>
              `| \`${metric.name}\` | ${typeOf(metric)} | ${(metric.labelNames ?? []).map((label) => `\`${label}\``).join(', ')} | ${cell(metric.help)} |`,
          ),
        )
        .concat(
          "| `nodejs_eventloop_lag_*`, `process_*`, `nodejs_*` | | | prom-client's event-loop delay, process and runtime metrics |",
        )
        .join('\n');
    },
  },
  {
    file: 'docs/operations.md',
    name: 'settings, from src/config/*.settings.ts',
    rows: () =>
      ['| Variable | Flag | Default | Meaning |', '|---|---|---|---|']
        .concat(
          describeSettings().map((setting) => {
            const fallback =
              setting.defaultText ?? (setting.default === '' ? 'unset' : `\`${String(setting.default)}\``);
            const meaning = `${setting.description}${setting.secret ? ' (never echoed in messages)' : ''}`;
            return `| \`${setting.env}\` | ${setting.flag === undefined ? '' : `\`${setting.flag}\``} | ${cell(fallback)} | ${cell(meaning)} |`;
          }),
        )
        .join('\n'),
  },
];

/** prom-client's own name of the metric's type (histogram, counter, gauge), as the exposition writes it. */
const typeOf = (metric: Metric): string => (metric as unknown as { type: string }).type;

const start = (table: Table) => `<!-- generated: ${table.name}; npm run docs rewrites it, do not edit -->`;
const END = '<!-- end of generated table -->';

/** The file's text with the table regenerated; throws when the file has no markers for it. */
export function regenerated(table: Table): { current: string; expected: string } {
  const current = readFileSync(table.file, 'utf8');
  const from = current.indexOf(start(table));
  const to = current.indexOf(END, from);
  if (from === -1 || to === -1) throw new Error(`${table.file} has no markers for the generated ${table.name} table`);
  const expected = `${current.slice(0, from)}${start(table)}\n${table.rows()}\n${current.slice(to)}`;
  return { current, expected };
}

/** Rewrites the table in its file (npm run docs). */
export function writeTable(table: Table): void {
  writeFileSync(table.file, regenerated(table).expected);
}
