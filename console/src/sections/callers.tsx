import type { JSX } from 'preact';
import { Header } from '../ui.js';
import type { ViewProps } from './index.js';

export function CallersView(_props: ViewProps): JSX.Element {
  return <Header title="Callers" />;
}
