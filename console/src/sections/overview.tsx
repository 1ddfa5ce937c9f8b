import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, get, type Page } from '../api.js';
import { count, duration, percent } from '../format.js';
import { useCan } from '../identity.js';
import { compare, parseMetrics, readingOf, type Reading, type Traffic } from '../metrics.js';
import { href, type ViewProps } from '../router.js';
import { Badge, Header, ProblemView, Section, Table, Time } from '../ui.js';

/** How often the view reads again while it is open. */
const EVERY_MS = 5000;

interface Check {
  status: 'pass' | 'warn' | 'fail';
  duration_ms: number;
  output?: string;
}
interface Readiness {
  status: 'pass' | 'warn' | 'fail';
  version?: string;
  checks?: Record<string, Check>;
}

const TONES = { pass: 'good', warn: 'warn', fail: 'bad' } as const;

/** Readiness with its checks; a 503 carries them in its problem. */
async function readiness(): Promise<Readiness> {
  try {
    return (await call<Readiness>('/health/ready')).body;
  } catch (error) {
    if (error instanceof ApiError && error.status === 503)
      return { status: 'fail', checks: (error.problem.checks as Record<string, Check> | undefined) ?? {} };
    throw error;
  }
}

/** Runs `tick` now and every EVERY_MS while the view is open and the tab is shown. */
function useEvery(tick: () => void, deps: unknown[]): void {
  useEffect(() => {
    tick();
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') tick();
    }, EVERY_MS);
    return () => clearInterval(timer);
  }, deps);
}

export function OverviewView(_props: ViewProps): JSX.Element {
  const can = useCan();
  return (
    <>
      <Header title="Health" />
      <p class="stat-note">Read again every {EVERY_MS / 1000} seconds while this page is open.</p>
      <ReadinessPanel />
      {can('metrics:read') ? (
        <TrafficPanel />
      ) : (
        <Section title="Traffic">
          <p>The key you signed in with may not read the metrics (scope metrics:read).</p>
        </Section>
      )}
      {can('webhook-endpoints:read') ? <BacklogPanel /> : null}
    </>
  );
}

function ReadinessPanel(): JSX.Element {
  const [state, setState] = useState<{ ready?: Readiness; error?: unknown; at?: string }>({});
  useEvery(() => {
    readiness().then(
      (ready) => setState({ ready, at: new Date().toISOString() }),
      (error: unknown) => setState({ error, at: new Date().toISOString() }),
    );
  }, []);
  const checks = Object.entries(state.ready?.checks ?? {});
  return (
    <Section title="Readiness">
      <ProblemView error={state.error} context="Could not ask for readiness" />
      {state.ready ? (
        <>
          <p class="actions">
            <Badge tone={TONES[state.ready.status]}>
              {state.ready.status === 'pass'
                ? 'Ready'
                : state.ready.status === 'warn'
                  ? 'Ready, with warnings'
                  : 'Not ready'}
            </Badge>
            {state.ready.version ? <span>rowi {state.ready.version}</span> : null}
            <span class="stat-note">
              as of <Time at={state.at} />
            </span>
          </p>
          <Table
            caption="Readiness checks"
            columns={[
              { label: 'Check', render: ([name]) => name.replace(/_/g, ' ') },
              { label: 'Status', render: ([, check]) => <Badge tone={TONES[check.status]}>{check.status}</Badge> },
              { label: 'Took', numeric: true, optional: true, render: ([, check]) => duration(check.duration_ms) },
              { label: 'Note', render: ([, check]) => check.output ?? '' },
            ]}
            rows={checks}
            rowKey={([name]) => name}
            empty="No checks reported."
          />
        </>
      ) : null}
    </Section>
  );
}

function TrafficPanel(): JSX.Element {
  const before = useRef<Reading | undefined>(undefined);
  const [traffic, setTraffic] = useState<{ figures?: Traffic; reading?: Reading; error?: unknown }>({});
  useEvery(() => {
    call<string>('/metrics', { headers: { accept: 'text/plain' } }).then(
      (answer) => {
        const reading = readingOf(parseMetrics(String(answer.body)), Date.now());
        const figures = compare(before.current, reading);
        before.current = reading;
        setTraffic({ figures, reading });
      },
      (error: unknown) => setTraffic({ error }),
    );
  }, []);
  const { figures, reading } = traffic;
  const window =
    figures?.seconds === null ? 'since this rowi started' : `over the last ${Math.round(figures?.seconds ?? 0)} s`;
  return (
    <Section title="Traffic">
      <ProblemView error={traffic.error} context="Could not read the metrics" />
      {figures && reading ? (
        <>
          <div class="grid">
            <Stat
              label="Requests a second"
              value={figures.perSecond === null ? '—' : figures.perSecond.toFixed(1)}
              note={figures.perSecond === null ? 'shown from the second reading' : window}
            />
            <Stat
              label="p99 response time"
              value={
                figures.p99ms === null ? '—' : figures.p99ms === Infinity ? '> 10 s' : `≤ ${duration(figures.p99ms)}`
              }
              note={window}
            />
            <Stat label="Server errors (5xx)" value={count(figures.errors5xx)} note={window} />
            <Stat label="Refused (4xx)" value={count(figures.errors4xx)} note={window} />
            <Stat label="In flight" value={count(reading.inFlight)} note="requests being served now" />
            <Stat
              label="Database"
              value={reading.databaseUnreachable ? 'Unreachable' : 'Reachable'}
              note="as the last request found it"
            />
          </div>
          <p class="stat-note">
            From GET /metrics of the instance that answered (with --workers, all its workers together).
          </p>
        </>
      ) : null}
    </Section>
  );
}

function Stat({ label, value, note }: { label: string; value: string; note?: string }): JSX.Element {
  return (
    <div class="stat">
      <p class="stat-label">{label}</p>
      <p class="stat-value">{value}</p>
      {note ? <p class="stat-note">{note}</p> : null}
    </div>
  );
}

interface Endpoint {
  id: number;
  url: string;
  enabled: boolean;
  disabled_reason: string | null;
}
interface Health {
  endpoint_id: number;
  deliveries: Record<string, number>;
  success_rate: number | null;
  lag_ms: number | null;
  last_failure: { at: string } | null;
}

/** Webhook backlog: what waits to be delivered, per endpoint (the first 20), from each endpoint's health. */
function BacklogPanel(): JSX.Element {
  const [state, setState] = useState<{
    rows?: { endpoint: Endpoint; health?: Health }[];
    more?: boolean;
    error?: unknown;
  }>({});
  useEvery(() => {
    get<Page<Endpoint>>('/v1/webhook-endpoints', { limit: 20 })
      .then(async (page) => {
        const rows = await Promise.all(
          page.data.map(async (endpoint) => ({
            endpoint,
            health: await get<Health>(`/v1/webhook-endpoints/${endpoint.id}/health`).catch(() => undefined),
          })),
        );
        setState({ rows, more: page.next_cursor !== null });
      })
      .catch((error: unknown) => setState({ error }));
  }, []);
  const rows = state.rows ?? [];
  const waiting = rows.reduce((sum, row) => sum + (row.health?.deliveries.pending ?? 0), 0);
  const worstLag = Math.max(0, ...rows.map((row) => row.health?.lag_ms ?? 0));
  return (
    <Section title="Webhook backlog">
      <ProblemView error={state.error} context="Could not read the webhook endpoints" />
      {state.rows ? (
        <>
          <div class="grid">
            <Stat
              label="Deliveries waiting"
              value={count(waiting)}
              note={state.more ? 'of the first 20 endpoints' : 'all endpoints'}
            />
            <Stat label="Oldest waiting" value={worstLag === 0 ? '—' : duration(worstLag)} />
            <Stat label="Endpoints disabled" value={count(rows.filter((row) => !row.endpoint.enabled).length)} />
          </div>
          <Table
            caption="Webhook endpoints"
            columns={[
              {
                label: 'Endpoint',
                render: (row) => <a href={href('webhooks', row.endpoint.id)}>{row.endpoint.url}</a>,
              },
              {
                label: 'State',
                render: (row) =>
                  row.endpoint.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="bad">disabled</Badge>,
              },
              { label: 'Waiting', numeric: true, render: (row) => count(row.health?.deliveries.pending) },
              { label: 'Lag', numeric: true, render: (row) => duration(row.health?.lag_ms) },
              {
                label: 'Success (24 h)',
                numeric: true,
                optional: true,
                render: (row) => percent(row.health?.success_rate),
              },
              { label: 'Last failure', optional: true, render: (row) => <Time at={row.health?.last_failure?.at} /> },
            ]}
            rows={rows}
            rowKey={(row) => row.endpoint.id}
            empty="No webhook endpoints."
          />
        </>
      ) : null}
    </Section>
  );
}
