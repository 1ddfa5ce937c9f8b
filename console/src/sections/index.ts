import type { JSX } from 'preact';
import { AuditView } from './audit/index.js';
import { CallersView } from './callers/index.js';
import { EventsView } from './events/index.js';
import { ImportsView, ExportsView, BackupsView } from './files/index.js';
import { OverviewView } from './overview.js';
import { UsersView, ItemsView, OrdersView } from './records/index.js';
import { WebhooksView, EventTypesView } from './webhooks/index.js';
import type { ViewProps } from '../router.js';

export interface SectionEntry {
  /** The first segment of its routes: `#/webhooks/…`. */
  path: string;
  label: string;
  /** The section shows when the key holds any one of these scopes (none: always). */
  anyOf: string[];
  view: (props: ViewProps) => JSX.Element;
  group: 'Overview' | 'Records' | 'Access' | 'Data in motion';
}

/** The console's sections, in the order of its menu. */
export const SECTIONS: SectionEntry[] = [
  { path: 'overview', label: 'Health', anyOf: [], view: OverviewView, group: 'Overview' },
  { path: 'users', label: 'Users', anyOf: ['users:read'], view: UsersView, group: 'Records' },
  { path: 'items', label: 'Items and stock', anyOf: ['items:read'], view: ItemsView, group: 'Records' },
  { path: 'orders', label: 'Orders', anyOf: ['orders:read'], view: OrdersView, group: 'Records' },
  { path: 'callers', label: 'Callers and keys', anyOf: ['callers:read'], view: CallersView, group: 'Access' },
  { path: 'audit', label: 'Audit trail', anyOf: ['audit-events:read'], view: AuditView, group: 'Access' },
  {
    path: 'webhooks',
    label: 'Webhooks',
    anyOf: ['webhook-endpoints:read'],
    view: WebhooksView,
    group: 'Data in motion',
  },
  { path: 'event-types', label: 'Event types', anyOf: [], view: EventTypesView, group: 'Data in motion' },
  { path: 'events', label: 'Events, live', anyOf: ['events:read'], view: EventsView, group: 'Data in motion' },
  {
    path: 'imports',
    label: 'Imports',
    anyOf: ['operations:read', 'users:create', 'items:create', 'stock:update', 'orders:create'],
    view: ImportsView,
    group: 'Data in motion',
  },
  {
    path: 'exports',
    label: 'Exports',
    anyOf: ['users:read', 'items:read', 'stock:read', 'orders:read', 'audit-events:read', 'events:read'],
    view: ExportsView,
    group: 'Data in motion',
  },
  {
    path: 'backups',
    label: 'Backups',
    anyOf: ['backups:read', 'backups:create'],
    view: BackupsView,
    group: 'Data in motion',
  },
];
