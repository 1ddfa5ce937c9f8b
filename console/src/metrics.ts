/**
 * What the Health view reads from GET /metrics (Prometheus's text format): request counts by
 * status class, the request duration histogram, and a few gauges. A rate or a percentile needs two
 * readings: `compare` takes the one before and the one now.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition; comments and malformed lines are skipped. */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (match === null) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[label[1]!] = label[2]!.replace(/\\(.)/g, (_all, character: string) =>
        character === 'n' ? '\n' : character,
      );
    const value = Number(match[3]);
    if (!Number.isNaN(value)) samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/** One reading of the figures the Health view shows. */
export interface Reading {
  at: number;
  requests: number;
  byClass: Record<string, number>;
  /** Cumulative counts of the duration histogram by upper bound (seconds), over every route. */
  buckets: Map<number, number>;
  inFlight: number;
  databaseUnreachable: boolean;
}

const DURATION = 'rowi_http_request_duration_seconds';

export function readingOf(samples: Sample[], at: number): Reading {
  const byClass: Record<string, number> = {};
  const buckets = new Map<number, number>();
  let requests = 0;
  let inFlight = 0;
  let databaseUnreachable = false;
  for (const sample of samples) {
    if (sample.name === `${DURATION}_count`) {
      requests += sample.value;
      const status = sample.labels.status_class ?? 'other';
      byClass[status] = (byClass[status] ?? 0) + sample.value;
    } else if (sample.name === `${DURATION}_bucket`) {
      const bound = sample.labels.le === '+Inf' ? Infinity : Number(sample.labels.le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + sample.value);
    } else if (sample.name === 'rowi_http_requests_in_flight') inFlight += sample.value;
    else if (sample.name === 'rowi_db_unreachable' && sample.value > 0) databaseUnreachable = true;
  }
  return { at, requests, byClass, buckets, inFlight, databaseUnreachable };
}

/** The figures between two readings (or since the start, without an earlier one). */
export interface Traffic {
  seconds: number | null;
  perSecond: number | null;
  requests: number;
  errors5xx: number;
  errors4xx: number;
  /** The 99th percentile's bucket bound, in ms; null without requests. */
  p99ms: number | null;
}

export function compare(before: Reading | undefined, now: Reading): Traffic {
  const minus = (value: number, earlier: number | undefined) => Math.max(0, value - (earlier ?? 0));
  const requests = minus(now.requests, before?.requests);
  const seconds = before === undefined ? null : (now.at - before.at) / 1000;
  const bounds = [...now.buckets.keys()].sort((a, b) => a - b);
  const total = minus(now.buckets.get(Infinity) ?? 0, before?.buckets.get(Infinity));
  let p99ms: number | null = null;
  if (total > 0) {
    for (const bound of bounds) {
      if (minus(now.buckets.get(bound) ?? 0, before?.buckets.get(bound)) >= total * 0.99) {
        p99ms = bound === Infinity ? Infinity : bound * 1000;
        break;
      }
    }
  }
  return {
    seconds,
    perSecond: seconds === null || seconds <= 0 ? null : requests / seconds,
    requests,
    errors5xx: minus(now.byClass['5xx'] ?? 0, before?.byClass['5xx']),
    errors4xx: minus(now.byClass['4xx'] ?? 0, before?.byClass['4xx']),
    p99ms,
  };
}
