import type { JSX } from 'preact';
import { Header } from '../ui.js';
import type { ViewProps } from './index.js';

export function UsersView(_props: ViewProps): JSX.Element {
  return <Header title="Users" />;
}
export function ItemsView(_props: ViewProps): JSX.Element {
  return <Header title="Items and stock" />;
}
export function OrdersView(_props: ViewProps): JSX.Element {
  return <Header title="Orders" />;
}
