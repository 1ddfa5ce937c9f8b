/**
 * What the webhook views share: the records /v1 answers with, the delivery statuses, the paths,
 * the message a view leaves for the next one, a timer, the problems explained, and the small
 * renderings of a status, a state, a list of event types and an attempt's answer. It imports no view.
 */
import type { JSX } from 'preact';
import { useEffect } from 'preact/hooks';
import { ApiError } from '../../api.js';
import { Badge, ProblemView } from '../../ui.js';

export interface Endpoint {
  id: number;
  url: string;
  owner_caller_id: number | null;
  description: string;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  failed_attempts: number;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}
export type EndpointWithSecret = Endpoint & { secret: string };

export interface Attempt {
  attempted_at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}
export type DeliveryStatus = 'pending' | 'succeeded' | 'dead';
export interface Delivery {
  id: number;
  endpoint_id: number;
  event_id: string;
  event_type: string;
  resource: string | null;
  sequence: number | null;
  status: DeliveryStatus;
  next_attempt_at: string | null;
  attempts: Attempt[];
  created_at: string;
  updated_at: string;
}

export interface Health {
  endpoint_id: number;
  window_start: string;
  deliveries: Record<string, number>;
  attempts: { total: number; succeeded: number; failed: number };
  success_rate: number | null;
  lag_ms: number | null;
  last_success_at: string | null;
  last_failure: { at: string; delivery_id: number; status_code: number | null; error: string | null } | null;
}

export interface EventType {
  type: string;
  resource: string;
  description: string;
  example: unknown;
}

/** The statuses a delivery has (GET …/deliveries?status=), in the order a person reads them. */
export const STATUSES: { value: DeliveryStatus; label: string; tone: 'good' | 'bad' | 'warn' }[] = [
  { value: 'pending', label: 'pending', tone: 'warn' },
  { value: 'succeeded', label: 'succeeded', tone: 'good' },
  { value: 'dead', label: 'dead', tone: 'bad' },
];
/** A test event, sent by …/ping to one endpoint only: not a type an endpoint subscribes to. */
export const PING = 'webhook.ping';
/** How often an endpoint's page reads its health and deliveries again while it is open. */
export const EVERY_MS = 5000;
export const PAGE_SIZE = 20;

export const endpointPath = (id: number | string) => `/v1/webhook-endpoints/${encodeURIComponent(String(id))}`;

/** A message for the next view shown (after a deletion, the list says so). */
let flash: string | undefined;

/** Leaves `text` for the next view shown. */
export function setFlash(text: string): void {
  flash = text;
}

/** The message left for this view, once: it is gone after it is read. */
export function takeFlash(): string | undefined {
  const text = flash;
  flash = undefined;
  return text;
}

/** Runs `tick` every `ms` while the tab is shown (none when `ms` is undefined). */
export function useEvery(tick: () => void, ms: number | undefined, deps: unknown[] = []): void {
  useEffect(() => {
    if (ms === undefined) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') tick();
    }, ms);
    return () => clearInterval(timer);
  }, [ms, ...deps]);
}

/** What the problems of this section mean, beyond rowi's own words. */
const WEBHOOK_PROBLEMS: Record<string, string> = {
  'delivery-pending':
    'This delivery is still pending: rowi sends it again by itself on its retry schedule. It can be sent again by hand once it has succeeded or gone dead.',
  'endpoint-disabled': 'The endpoint is disabled: enable it first, then try again.',
  'rotation-in-progress':
    'The secret was rotated recently and the previous one still signs beside the new one. It can be rotated again when that overlap ends.',
  'webhook-url-refused':
    'rowi sends only to https addresses on the public internet; loopback, private and link-local addresses are refused unless the deployment lists their hosts in ROWI_WEBHOOK_ALLOW_HOSTS.',
  'webhook-endpoint-forbidden':
    'The key you signed in with may not read every kind of record this endpoint sends, so it may not change it.',
};

/** A problem, explained with what it means for webhooks too. */
export function WebhookProblem({ error, context }: { error: unknown; context: string }): JSX.Element | null {
  if (error === undefined || error === null) return null;
  const kind = error instanceof ApiError ? error.kind : '';
  const required =
    error instanceof ApiError && Array.isArray(error.problem.required_scopes)
      ? (error.problem.required_scopes as unknown[]).map(String)
      : [];
  return (
    <div class="webhook-problem">
      <ProblemView error={error} context={context} />
      {WEBHOOK_PROBLEMS[kind] ? <p class="problem-more">{WEBHOOK_PROBLEMS[kind]}</p> : null}
      {required.length > 0 ? <p class="problem-more">Scopes needed: {required.join(', ')}</p> : null}
    </div>
  );
}

export function statusBadge(status: string): JSX.Element {
  const known = STATUSES.find((entry) => entry.value === status);
  return <Badge tone={known?.tone ?? 'neutral'}>{known?.label ?? status}</Badge>;
}

export function stateBadge(endpoint: Endpoint): JSX.Element {
  return endpoint.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="bad">disabled</Badge>;
}

export function eventsText(events: string[]): string {
  return events.includes('*') ? 'every type (*)' : events.join(', ');
}

/** What an attempt got: the receiver's status, or why none came. */
export function answerText(attempt: Attempt | undefined): string {
  if (attempt === undefined) return 'not tried yet';
  if (attempt.error === null) return `answered ${attempt.status_code ?? '?'}`;
  return attempt.error;
}
