// Preloaded into a rowi process by the bench (node --import): keeps a histogram of the event
// loop's delay (perf_hooks.monitorEventLoopDelay, 1 ms resolution) and, on SIGWINCH (a signal nothing else in rowi uses; close-with-grace takes SIGUSR2 as a shutdown) writes it to
// stderr as one JSON line, {"loop_delay_ms":{"p50":…,"p99":…,"max":…}}, then starts afresh; so
// the bench reads the delay the server saw during each load. Workers of --workers inherit it.
import { monitorEventLoopDelay } from 'node:perf_hooks';

const histogram = monitorEventLoopDelay({ resolution: 1 });
histogram.enable();
process.on('SIGWINCH', () => {
  const ms = (nanoseconds) => Math.round(nanoseconds / 1e4) / 100;
  process.stderr.write(
    `${JSON.stringify({ loop_delay_ms: { pid: process.pid, p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max), count: histogram.count }, memory_mb: Object.fromEntries(Object.entries(process.memoryUsage()).map(([k, v]) => [k, Math.round(v / 1048576)])) })}\n`,
  );
  histogram.reset();
});
