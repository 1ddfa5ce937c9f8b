/** What the audit views share: an audit event, the filters of the route, a status's badge. */
import type { JSX } from 'preact';
import { href } from '../../router.js';
import { Badge } from '../../ui.js';

export type { AuditEvent } from '../../../../clients/typescript/src/types.js';

/**
 * The filters of the view, each a query parameter of the API. The route keeps a status class in
 * `status` ("4xx", one field of the form), the API takes it as `status_class`.
 */
const FILTERS = [
  'caller_id',
  'user_id',
  'method',
  'path',
  'resource',
  'record_id',
  'action',
  'status',
  'status_class',
  'after',
  'before',
] as const;
export type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The link to the audit trail of one record: `auditOf('orders', 12)`; other sections may use it. */
export function auditOf(resource: string, recordId: string | number): string {
  return href('audit', { resource, record_id: String(recordId) });
}

export function filtersOf(params: URLSearchParams): Filters {
  const filters: Filters = {};
  for (const name of FILTERS) {
    const value = params.get(name);
    if (value !== null && value !== '') filters[name] = value;
  }
  // "4xx" in the status field is a class of statuses; a method in the address may be in lower case.
  if (filters.status !== undefined && /^[1-5]xx$/i.test(filters.status)) {
    filters.status_class = filters.status.toLowerCase();
    delete filters.status;
  }
  if (filters.method !== undefined) filters.method = filters.method.toUpperCase();
  return filters;
}

function statusTone(status: number): 'good' | 'bad' | 'warn' | 'neutral' {
  if (status >= 500) return 'bad';
  if (status >= 400) return 'warn';
  if (status >= 200 && status < 300) return 'good';
  return 'neutral';
}

export function StatusBadge({ status }: { status: number }): JSX.Element {
  return <Badge tone={statusTone(status)}>{status}</Badge>;
}

/** The query of the current filters, as the route keeps them (a status class in status). */
export function routeQuery(filters: Filters): Record<string, string | undefined> {
  const { status_class, ...rest } = filters;
  return { ...rest, status: status_class ?? rest.status };
}
