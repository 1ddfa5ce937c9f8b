import type { JSX } from 'preact';
import { Header } from '../ui.js';
import type { ViewProps } from './index.js';

export function EventsView(_props: ViewProps): JSX.Element {
  return <Header title="Events" />;
}
