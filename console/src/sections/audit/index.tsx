/**
 * The audit trail (GET /v1/audit-events): every request, allowed or refused, newest first, with
 * the API's filters (caller, user acted for, method, path and those below it, resource, record
 * id, action, a status or a class of statuses, time). The filters live in the route's query, so a
 * filtered view is a link: `#/audit?resource=orders&record_id=12`.
 */

import type { JSX } from 'preact';
import type { ViewProps } from '../../router.js';
import { AuditDetails } from './details.js';
import { AuditList } from './list.js';
import { filtersOf } from './shared.js';
import './audit.css';

export function AuditView({ parts, params }: ViewProps): JSX.Element {
  const filters = filtersOf(params);
  if (parts[0] !== undefined) return <AuditDetails id={parts[0]} filters={filters} />;
  return <AuditList filters={filters} />;
}
