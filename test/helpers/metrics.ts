/**
 * The value of one sample of a Prometheus text exposition: the line of that metric name whose
 * labels include all of `labels`; 0 when there is none (a counter not yet incremented).
 */
export function sample(exposition: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of exposition.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((pair) => [
        pair[1]!,
        pair[2]!,
      ]),
    );
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return 0;
}
