import { Histogram, type HistogramConfiguration, type LabelValues } from 'prom-client';

/** One label combination's counts: what an observation on the hot path touches, and nothing else. */
export class Series {
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    private readonly bounds: readonly number[],
    readonly labels: Record<string, string>,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    let bucket = 0;
    while (bucket < this.bounds.length && value > this.bounds[bucket]!) bucket++;
    this.counts[bucket]!++;
    this.sum += value;
    this.count++;
  }
}

interface ExportedValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
}

/**
 * A prom-client histogram for the request path: its caller keeps the Series of each label
 * combination (`series(...)`) and observes into it with a bucket search and three additions.
 * prom-client's own observe checks and hashes the labels on every call, a child included (about
 * 7 µs a request under load). The exposition (text, and the JSON --workers add up) is the one
 * prom-client writes for its histograms.
 */
export class SeriesHistogram<T extends string> extends Histogram<T> {
  private readonly bounds: readonly number[];
  private readonly names: readonly T[];
  private readonly table = new Map<string, Series>();
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(configuration: HistogramConfiguration<T> & { buckets: number[]; labelNames: readonly T[] }) {
    super(configuration);
    this.bounds = [...configuration.buckets].sort((a, b) => a - b);
    this.names = configuration.labelNames;
    this.metricName = configuration.name;
    this.metricHelp = configuration.help;
    // prom-client's constructor sets observe on the instance, which would hide a method of this class.
    this.observe = this.record.bind(this) as Histogram<T>['observe'];
  }

  /** The series of these label values (in the order of labelNames), made on first use. */
  series(...values: string[]): Series {
    const key = values.join('\u0000');
    let series = this.table.get(key);
    if (series === undefined) {
      const labels: Record<string, string> = {};
      this.names.forEach((name, index) => (labels[name] = values[index] ?? ''));
      this.table.set(key, (series = new Series(this.bounds, labels)));
    }
    return series;
  }

  /** Histogram's observe (a value, or labels and a value, or { labels, value }), into the same series. */
  private record(
    labelsOrValue: LabelValues<T> | number | { labels?: LabelValues<T>; value: number },
    value?: number,
  ): void {
    if (typeof labelsOrValue === 'number') return this.series().observe(labelsOrValue);
    const [labels, observed] =
      'value' in labelsOrValue && typeof labelsOrValue.value === 'number' && value === undefined
        ? [labelsOrValue.labels ?? {}, labelsOrValue.value]
        : [labelsOrValue as LabelValues<T>, value!];
    this.series(...this.names.map((name) => String((labels as Record<string, unknown>)[name] ?? ''))).observe(observed);
  }

  override reset(): void {
    // prom-client's constructor calls reset before this class's fields exist.
    (this.table as Map<string, Series> | undefined)?.clear();
  }

  /** What prom-client's registry writes as text: cumulative buckets, +Inf, _sum and _count per series. */
  async getForPromString(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    values: ExportedValue[];
    aggregator: 'sum';
  }> {
    const values: ExportedValue[] = [];
    for (const series of this.table.values()) {
      let cumulative = 0;
      this.bounds.forEach((bound, index) => {
        cumulative += series.counts[index]!;
        values.push({
          labels: { le: bound },
          sharedLabels: series.labels,
          value: cumulative,
          metricName: `${this.metricName}_bucket`,
        });
      });
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: series.labels,
        value: series.count,
        metricName: `${this.metricName}_bucket`,
      });
      values.push({ labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.metricName}_sum` });
      values.push({
        labels: {},
        sharedLabels: series.labels,
        value: series.count,
        metricName: `${this.metricName}_count`,
      });
    }
    return { name: this.metricName, help: this.metricHelp, type: 'histogram', values, aggregator: 'sum' };
  }

  /** The same values with each series' labels merged in, as prom-client's get() gives them (the JSON --workers add up). */
  override async get(): ReturnType<Histogram<T>['get']> {
    const exported = await this.getForPromString();
    const values = exported.values.map(({ labels, sharedLabels, value, metricName }) => ({
      labels: { ...labels, ...sharedLabels },
      value,
      metricName,
    }));
    return { ...exported, values } as unknown as Awaited<ReturnType<Histogram<T>['get']>>;
  }
}
