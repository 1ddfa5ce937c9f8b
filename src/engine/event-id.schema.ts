import Type from 'typebox';
import { EVENT_ID_PATTERN } from '../outbox/event-ids.js';

/** An event id as a parameter, a header or a field: the events resource's and the webhook deliveries'. */
export const EventId = Type.String({
  pattern: EVENT_ID_PATTERN,
  'x-error': 'must be an event id (evt_ and 28 hexadecimal digits)',
  description: 'the event id: evt_ and 28 hexadecimal digits, sortable by time',
});
