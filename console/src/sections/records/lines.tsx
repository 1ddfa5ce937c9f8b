/** An order's lines: their columns, and changing them. */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import type { Answer } from '../../api.js';
import { count } from '../../format.js';
import { href } from '../../router.js';
import { Field, useAction, type Column } from '../../ui.js';
import { WriteProblem } from './common.js';
import type { Item, Order, OrderLine } from './types.js';

/**
 * An order's lines, changed as a whole (PATCH {lines}, with If-Match): the quantity of a line, a
 * line added or removed. Only while the order is placed; rowi checks the stock and says which
 * lines are short.
 */
export function LinesForm({
  order,
  items,
  save,
  onSaved,
  onReload,
  onClose,
}: {
  order: Order;
  items: Record<number, Item> | undefined;
  save: (lines: { item_id: number; quantity: number }[]) => Promise<Answer<Order>>;
  onSaved: (answer: Answer<Order>) => void;
  onReload: () => void;
  onClose: () => void;
}): JSX.Element {
  const [lines, setLines] = useState(() =>
    order.lines.map((line) => ({ item_id: String(line.item_id), quantity: String(line.quantity) })),
  );
  const action = useAction(save);
  const change = (index: number, name: 'item_id' | 'quantity', value: string) =>
    setLines((previous) => previous.map((line, at) => (at === index ? { ...line, [name]: value } : line)));
  return (
    <form
      class="form records-lines-form"
      aria-label="Change lines"
      onSubmit={async (event) => {
        event.preventDefault();
        const answer = await action.run(
          lines.map((line) => ({ item_id: Number(line.item_id), quantity: Number(line.quantity) })),
        );
        if (answer !== undefined) onSaved(answer);
      }}
    >
      {lines.map((line, index) => {
        const known = items?.[Number(line.item_id)];
        return (
          <fieldset class="records-line" key={index}>
            <legend class="visually-hidden">Line {index + 1}</legend>
            <Field label="Item id" hint={known ? known.name : undefined}>
              <input
                type="number"
                name="item_id"
                min={1}
                step={1}
                required
                inputMode="numeric"
                class="records-id-input"
                value={line.item_id}
                onInput={(event) => change(index, 'item_id', event.currentTarget.value)}
              />
            </Field>
            <Field label="Quantity">
              <input
                type="number"
                name="quantity"
                min={1}
                max={1000000}
                step={1}
                required
                inputMode="numeric"
                class="records-id-input"
                value={line.quantity}
                onInput={(event) => change(index, 'quantity', event.currentTarget.value)}
              />
            </Field>
            <button
              type="button"
              disabled={lines.length === 1}
              aria-label={`Remove line ${index + 1}`}
              onClick={() => setLines((previous) => previous.filter((_, at) => at !== index))}
            >
              Remove
            </button>
          </fieldset>
        );
      })}
      <WriteProblem error={action.error} context="Lines not saved" onReload={onReload} />
      <div class="actions">
        <button type="button" onClick={() => setLines((previous) => [...previous, { item_id: '', quantity: '1' }])}>
          Add a line
        </button>
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Saving…' : 'Save lines'}
        </button>
        <button type="button" onClick={onClose}>
          Close without saving
        </button>
      </div>
    </form>
  );
}

/** The columns of an order's lines: the item by name (a link when the key may read items) and SKU, quantity, prices. */
export function orderLineColumns(
  items: Record<number, Item> | undefined,
  can: (...scopes: string[]) => boolean,
): Column<OrderLine>[] {
  return [
    {
      label: 'Item',
      render: (line) => {
        const item = items?.[line.item_id];
        const text = item ? item.name : `item #${line.item_id}`;
        return (
          <>
            {can('items:read') ? <a href={href('items', line.item_id)}>{text}</a> : text}
            {item ? (
              <>
                {' '}
                <code class="records-sku">{item.sku}</code>
              </>
            ) : null}
          </>
        );
      },
    },
    { label: 'Quantity', render: (line) => count(line.quantity), numeric: true },
    { label: 'Unit price', render: (line) => line.unit_price, numeric: true },
    { label: 'Line total', render: (line) => line.line_total, numeric: true },
  ];
}
