import type { JSX } from 'preact';
import { Header } from '../ui.js';
import type { ViewProps } from './index.js';

export function ImportsView(_props: ViewProps): JSX.Element {
  return <Header title="Imports" />;
}
export function ExportsView(_props: ViewProps): JSX.Element {
  return <Header title="Exports" />;
}
export function BackupsView(_props: ViewProps): JSX.Element {
  return <Header title="Backups" />;
}
