import type { JSX } from 'preact';
import { Header } from '../ui.js';
import type { ViewProps } from './index.js';

export function WebhooksView(_props: ViewProps): JSX.Element {
  return <Header title="Webhooks" />;
}
export function EventTypesView(_props: ViewProps): JSX.Element {
  return <Header title="Event types" />;
}
