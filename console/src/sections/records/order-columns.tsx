/** An order's status badge, its user and the columns of a list of orders (the orders list, a user's orders). */
import type { JSX } from 'preact';
import { count } from '../../format.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { Badge, Time, type Column } from '../../ui.js';
import type { Order, OrderStatus } from './types.js';

export const STATUS_TONES: Record<OrderStatus, 'good' | 'bad' | 'warn' | 'neutral'> = {
  placed: 'warn',
  fulfilled: 'good',
  cancelled: 'neutral',
};

export function StatusBadge({ status }: { status: OrderStatus }): JSX.Element {
  return (
    <span class="records-nowrap">
      <Badge tone={STATUS_TONES[status] ?? 'neutral'}>{status}</Badge>
    </span>
  );
}

export function UserRef({ order }: { order: Order }): JSX.Element {
  const can = useCan();
  if (order.user_id === null) return <span>none (the user was deleted)</span>;
  const name = order.user?.name;
  const text = name ?? `user #${order.user_id}`;
  return can('users:read') ? <a href={href('users', order.user_id)}>{text}</a> : <span>{text}</span>;
}

export function orderColumns(withUser: boolean): Column<Order>[] {
  const columns: Column<Order>[] = [
    { label: 'Id', render: (order) => order.id, numeric: true, optional: true },
    { label: 'Reference', render: (order) => <a href={href('orders', order.id)}>{order.name}</a> },
  ];
  if (withUser) columns.push({ label: 'User', render: (order) => <UserRef order={order} /> });
  columns.push(
    { label: 'Status', render: (order) => <StatusBadge status={order.status} /> },
    { label: 'Lines', render: (order) => count(order.lines.length), numeric: true, optional: true },
    { label: 'Total', render: (order) => order.total, numeric: true },
    { label: 'Created', render: (order) => <Time at={order.created_at} />, optional: true },
  );
  return columns;
}
