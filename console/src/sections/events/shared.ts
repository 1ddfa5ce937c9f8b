/** What the live and the kept events share: the event types to choose from, links to records. */
import { get } from '../../api.js';
import { href } from '../../router.js';
import { useLoad } from '../../ui.js';

/** The event types to choose from: the catalogue (GET /v1/event-types, public); none while it loads. */
export function useEventTypes(): string[] {
  const catalogue = useLoad((signal) => get<{ data: { type: string }[] }>('/v1/event-types', undefined, signal), []);
  return catalogue.data?.data.map((entry) => entry.type) ?? [];
}

/** The record section a path like /v1/orders/12 points at, as a console link (built from its id). */
const SECTION_OF: Record<string, string> = {
  users: 'users',
  items: 'items',
  orders: 'orders',
  callers: 'callers',
  'webhook-endpoints': 'webhooks',
};
export function consoleLinkOf(path: string): string | undefined {
  const match = /^\/v1\/([a-z-]+)\/([1-9][0-9]{0,15})(?:\/stock)?$/.exec(path);
  const section = match ? SECTION_OF[match[1]!] : undefined;
  return match && section ? href(section, Number(match[2])) : undefined;
}
