/**
 * Webhooks: the endpoints rowi sends events to, how each fares (success rate, lag, the last
 * failure), its deliveries and their attempts, sending one again, a test event, the signing
 * secret (shown once) and its rotation; and the catalogue of event types with an example each.
 * Every figure comes from /v1 with the signed-in key; every record string is rendered as text.
 */
import type { JSX } from 'preact';
import { href } from '../../router.js';
import { Header } from '../../ui.js';
import type { ViewProps } from '../../router.js';
import { DeliveryView } from './deliveries.js';
import { EndpointView } from './endpoint.js';
import { EndpointsView } from './endpoints.js';
import './webhooks.css';

export { EventTypesView } from './event-types.js';

export function WebhooksView({ parts, params }: ViewProps): JSX.Element {
  const [id, sub, deliveryId] = parts;
  if (id === undefined) return <EndpointsView />;
  if (!/^[1-9][0-9]*$/.test(id)) return <NotHere what={`Endpoint “${id}”`} />;
  if (sub === undefined) return <EndpointView id={Number(id)} params={params} />;
  if (sub === 'deliveries' && deliveryId !== undefined && /^[1-9][0-9]*$/.test(deliveryId))
    return <DeliveryView endpointId={Number(id)} id={Number(deliveryId)} />;
  return <NotHere what="This page" />;
}

function NotHere({ what }: { what: string }): JSX.Element {
  return (
    <>
      <Header title="Not here" />
      <p>
        {what} is not a place in the console. <a href={href('webhooks')}>Go to the webhook endpoints</a>.
      </p>
    </>
  );
}
