import cluster from 'node:cluster';
import type { AggregatorRegistry, PrometheusContentType } from 'prom-client';

/** A worker asks the primary for every worker's metrics; the primary answers with them added up. */
type MetricsMessage =
  { type: 'rowi:metrics'; id: number } | { type: 'rowi:metrics-answer'; id: number; text?: string; error?: string };

const isMetricsMessage = (message: unknown): message is MetricsMessage =>
  typeof message === 'object' &&
  message !== null &&
  ['rowi:metrics', 'rowi:metrics-answer'].includes((message as { type?: string }).type ?? '');

/** How long a worker waits for the primary's answer (prom-client gives workers 5 s to answer it). */
const ANSWER_TIMEOUT_MS = 8000;

/**
 * In the primary of `rowi serve --workers N`: a worker's request for metrics is answered with
 * every worker's, added up by prom-client's AggregatorRegistry (counters and histograms summed,
 * the event-loop delay averaged), so whichever worker a scrape reaches, it sees the whole service.
 */
export function aggregateWorkerMetrics(): void {
  // Loaded on the first scrape: the primary needs prom-client for nothing else.
  let aggregator: Promise<AggregatorRegistry<PrometheusContentType>> | undefined;
  cluster.on('message', (worker, message: unknown) => {
    if (!isMetricsMessage(message) || message.type !== 'rowi:metrics') return;
    const answer = (fields: { text: string } | { error: string }) => {
      if (worker.isConnected())
        worker.send({ type: 'rowi:metrics-answer', id: message.id, ...fields } satisfies MetricsMessage);
    };
    aggregator ??= import('prom-client').then((promClient) => new promClient.AggregatorRegistry());
    aggregator
      .then((loaded) => loaded.clusterMetrics())
      .then(
        (text) => answer({ text }),
        (error: unknown) => answer({ error: (error as Error).message }),
      );
  });
}

/**
 * In a worker: answers the primary's collection with this process's metrics, and returns the
 * exposition of them all (what /metrics serves), asked of the primary.
 */
export async function workerMetrics(): Promise<() => Promise<string>> {
  const [{ AggregatorRegistry }, { registry }] = await Promise.all([
    import('prom-client'),
    import('../observability/metrics.js'),
  ]);
  // Constructing one installs prom-client's answer to the primary's requests, from our registry.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
  const pending = new Map<number, { resolve: (text: string) => void; reject: (error: Error) => void }>();
  let next = 0;
  process.on('message', (message: unknown) => {
    if (!isMetricsMessage(message) || message.type !== 'rowi:metrics-answer') return;
    const waiting = pending.get(message.id);
    pending.delete(message.id);
    if (message.text !== undefined) waiting?.resolve(message.text);
    else
      waiting?.reject(new Error(`the primary could not collect the workers' metrics: ${message.error ?? 'no answer'}`));
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the primary did not answer with the workers' metrics within ${ANSWER_TIMEOUT_MS} ms`));
      }, ANSWER_TIMEOUT_MS);
      const settle =
        <T>(then: (value: T) => void) =>
        (value: T) => {
          clearTimeout(timer);
          then(value);
        };
      pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      process.send!({ type: 'rowi:metrics', id } satisfies MetricsMessage);
    });
}
