import { AggregatorRegistry, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/observability/metrics-histogram.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, number][] = [
  ['/v1/users/{id}', '2xx', 0.0004],
  ['/v1/users/{id}', '2xx', 0.001],
  ['/v1/users/{id}', '2xx', 0.05],
  ['/v1/users/{id}', '4xx', 2.5],
  ['/v1/orders', '2xx', 0.2],
];

/** The same observations in prom-client's Histogram and in rowi's, each in its own registry. */
function both() {
  const theirs = new Registry();
  const ours = new Registry();
  const configuration = {
    name: 'duration_seconds',
    help: 'Duration',
    labelNames: ['route', 'status_class'] as const,
    buckets: BUCKETS,
  };
  const histogram = new Histogram({ ...configuration, registers: [theirs] });
  const series = new SeriesHistogram({ ...configuration, registers: [ours] });
  for (const [route, statusClass, seconds] of OBSERVED) {
    histogram.labels(route, statusClass).observe(seconds);
    series.series(route, statusClass).observe(seconds);
  }
  return { theirs, ours, series };
}

describe('SeriesHistogram (request durations without prom-client on the hot path)', () => {
  it('GET /metrics: writes exactly what prom-client writes for the same observations', async () => {
    const { theirs, ours } = both();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain(
      'duration_seconds_bucket{le="0.001",route="/v1/users/{id}",status_class="2xx"} 2',
    );
  });

  it("GET /metrics with --workers: two processes' series add up as prom-client's do", async () => {
    const { theirs, ours } = both();
    const aggregatedTheirs = AggregatorRegistry.aggregate([
      await theirs.getMetricsAsJSON(),
      await theirs.getMetricsAsJSON(),
    ]);
    const aggregatedOurs = AggregatorRegistry.aggregate([await ours.getMetricsAsJSON(), await ours.getMetricsAsJSON()]);
    expect(await aggregatedOurs.metrics()).toBe(await aggregatedTheirs.metrics());
    expect(await aggregatedOurs.metrics()).toContain(
      'duration_seconds_count{route="/v1/users/{id}",status_class="2xx"} 6',
    );
  });

  it('observe with labels records into the same series; reset empties them', async () => {
    const { ours, series } = both();
    series.observe({ route: '/v1/orders', status_class: '2xx' }, 0.3);
    expect(await ours.metrics()).toContain('duration_seconds_count{route="/v1/orders",status_class="2xx"} 2');
    series.reset();
    expect(await ours.metrics()).not.toContain('duration_seconds_count');
  });
});
