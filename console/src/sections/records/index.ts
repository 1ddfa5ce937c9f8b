/**
 * Records: users, items with their stock and movements, orders with their lines. Lists filtered
 * with the filters each list operation offers (kept in the address, so a filtered list can be
 * shared), paged with the API's cursors; a record opened, changed with PATCH and deleted with the
 * ETag read with it (If-Match), so a change made by someone else in between is refused (412) and
 * explained, never overwritten. Every record string is rendered as text; links are built from ids only.
 *
 * common.tsx (shared parts), filters.tsx (a list's filters), forms.tsx (change and create), then
 * one file per view: users.tsx, items.tsx (with stock.tsx), orders.tsx (with lines.tsx and
 * order-columns.tsx, which a user's page also shows).
 */
export { UsersView } from './users.js';
export { ItemsView } from './items.js';
export { OrdersView } from './orders.js';
