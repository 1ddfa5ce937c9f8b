/** An item's stock: on hand and reserved, setting it (PUT with If-Match), and its movements. */
import type { ComponentChildren, JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call } from '../../api.js';
import { count } from '../../format.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import {
  Badge,
  Field,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Time,
  useAction,
  usePaged,
  type Column,
} from '../../ui.js';
import { WriteProblem, useRecord } from './common.js';
import type { Movement, Stock } from './types.js';

/** An item's stock (its own record and ETag), and setting its on-hand quantity (PUT with If-Match). */
export function StockPanel({ itemId, onSet }: { itemId: number; onSet: () => void }): JSX.Element {
  const can = useCan();
  const path = `/v1/items/${itemId}/stock`;
  const stock = useRecord<Stock>(path);
  const [quantity, setQuantity] = useState('');
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const save = useAction(async (value: number) => {
    const answer = await call<Stock>(path, { method: 'PUT', body: { quantity: value }, ifMatch: stock.etag });
    stock.replace(answer);
    setQuantity('');
    setNotice(`On hand set to ${count(answer.body.quantity)}.`);
    onSet();
  });
  const record = stock.record;
  return (
    <Section title="Stock">
      <ProblemView error={stock.error} context="Could not read the stock" />
      {record === undefined ? (
        stock.loading ? (
          <p>Loading…</p>
        ) : null
      ) : (
        <>
          <div class="grid">
            <Stat label="On hand" value={count(record.quantity)} note="Units free to order" />
            <Stat label="Reserved" value={count(record.reserved)} note="Held by placed orders" />
            <Stat
              label="In the warehouse"
              value={count(record.quantity + record.reserved)}
              note="On hand and reserved"
            />
          </div>
          <p class="stat-note">
            Last changed <Time at={record.updated_at} />
          </p>
          {can('stock:update') ? (
            <form
              class="form-row records-stock-form"
              onSubmit={(event) => {
                event.preventDefault();
                setNotice(undefined);
                void save.run(Number(quantity));
              }}
            >
              <Field label="Set on hand to" hint="Units counted, 0 or more; replaces the quantity on hand">
                <input
                  type="number"
                  name="quantity"
                  min={0}
                  step={1}
                  required
                  inputMode="numeric"
                  value={quantity}
                  onInput={(event) => setQuantity(event.currentTarget.value)}
                />
              </Field>
              <button type="submit" class="primary" disabled={save.busy}>
                {save.busy ? 'Setting…' : 'Set stock'}
              </button>
            </form>
          ) : null}
          <Notice>{notice}</Notice>
          <WriteProblem
            error={save.error}
            context="Stock not set"
            onReload={() => {
              save.clear();
              stock.reload();
            }}
          />
        </>
      )}
    </Section>
  );
}

export function Stat({ label, value, note }: { label: string; value: ComponentChildren; note?: string }): JSX.Element {
  return (
    <div class="stat">
      <p class="stat-label">{label}</p>
      <p class="stat-value">{value}</p>
      {note ? <p class="stat-note">{note}</p> : null}
    </div>
  );
}

export const MOVEMENT_KINDS: Record<Movement['kind'], { label: string; tone: 'good' | 'bad' | 'warn' | 'neutral' }> = {
  set: { label: 'set', tone: 'neutral' },
  reserve: { label: 'reserved', tone: 'warn' },
  release: { label: 'released', tone: 'good' },
  fulfil: { label: 'fulfilled', tone: 'neutral' },
};

export function signed(value: number): string {
  return value > 0 ? `+${count(value)}` : value < 0 ? `−${count(-value)}` : '0';
}

export function Movements({ itemId, round }: { itemId: number; round: number }): JSX.Element {
  const [kind, setKind] = useState('');
  const paged = usePaged<Movement>(
    `/v1/items/${itemId}/stock/movements`,
    { kind: kind || undefined, sort: '-id', limit: 20 },
    [round],
  );
  const can = useCan();
  const columns: Column<Movement>[] = [
    { label: 'When', render: (movement) => <Time at={movement.created_at} /> },
    {
      label: 'Kind',
      render: (movement) => (
        <span class="records-nowrap">
          <Badge tone={MOVEMENT_KINDS[movement.kind].tone}>{MOVEMENT_KINDS[movement.kind].label}</Badge>
        </span>
      ),
    },
    { label: 'Change', render: (movement) => signed(movement.quantity_change), numeric: true },
    { label: 'On hand', render: (movement) => count(movement.quantity_after), numeric: true },
    { label: 'Reserved change', render: (movement) => signed(movement.reserved_change), numeric: true, optional: true },
    { label: 'Reserved', render: (movement) => count(movement.reserved_after), numeric: true, optional: true },
    {
      label: 'Order',
      render: (movement) =>
        movement.order_id === null ? (
          '—'
        ) : can('orders:read') ? (
          <a href={href('orders', movement.order_id)}>order #{movement.order_id}</a>
        ) : (
          `order #${movement.order_id}`
        ),
    },
  ];
  return (
    <Section title="Stock movements">
      <div class="filters">
        <Field label="Kind">
          <select name="kind" value={kind} onChange={(event) => setKind(event.currentTarget.value)}>
            <option value="">All</option>
            <option value="set">Set by a count</option>
            <option value="reserve">Reserved by an order</option>
            <option value="release">Released by an order</option>
            <option value="fulfil">Left with a fulfilled order</option>
          </select>
        </Field>
      </div>
      <PagedTable
        paged={paged}
        caption="Stock movements"
        columns={columns}
        rowKey={(movement) => movement.id}
        empty="No movement of this item's stock yet."
      />
    </Section>
  );
}
