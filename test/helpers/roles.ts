/**
 * The roles of docs/security.md and docs/access.md written out by hand, so that rowi is checked
 * against the documented rules and not against itself (src/auth/policy.ts is never read here).
 */
export const DATA = ['users', 'items', 'stock', 'orders', 'weather'];
/** Every role follows and cancels the imports it started (docs/bulk.md "Imports"). */
export const OPERATIONS = ['operations:read', 'operations:update'];
export const READER = [...DATA.map((resource) => `${resource}:read`), 'events:read', ...OPERATIONS];
export const EDITOR = [
  ...DATA.flatMap((resource) => ['read', 'create', 'update'].map((action) => `${resource}:${action}`)),
  // Who may update orders may cancel them (docs/access.md).
  'orders:cancel',
  'events:read',
  ...OPERATIONS,
];
/** A sales channel (docs/access.md): places and cancels orders, creates its customers, reads the catalogue and its events. */
export const CHANNEL = [
  'orders:read',
  'orders:create',
  'orders:cancel',
  'users:read',
  'users:create',
  'items:read',
  'stock:read',
  'events:read',
  ...OPERATIONS,
];
export const ADMIN = [
  ...DATA.flatMap((resource) => ['read', 'create', 'update', 'delete'].map((action) => `${resource}:${action}`)),
  'orders:cancel',
  // Acting for a user (docs/access.md).
  'users:act',
  'callers:read',
  'callers:create',
  'callers:update',
  'callers:delete',
  'audit-events:read',
  'events:read',
  'webhook-endpoints:read',
  'webhook-endpoints:create',
  'webhook-endpoints:update',
  'webhook-endpoints:delete',
  'metrics:read',
  ...OPERATIONS,
  'backups:read',
  'backups:create',
];
