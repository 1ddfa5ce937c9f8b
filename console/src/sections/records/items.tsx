/** Items: the list with each item's stock (filters, New item) and an item's page (change, delete, stock). */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call, type Page } from '../../api.js';
import { count } from '../../format.js';
import { useCan } from '../../identity.js';
import { href, navigate, type ViewProps } from '../../router.js';
import { Header, Notice, PagedTable, ProblemView, Section, Time, useLoad, usePaged, type Column } from '../../ui.js';
import {
  BackLink,
  NotLoaded,
  Provenance,
  ChangeAndDelete,
  DeleteProblem,
  recordPath,
  setFlash,
  takeFlash,
  useDelete,
  useRecord,
} from './common.js';
import { FilterForm, listQuery, type FilterSpec } from './filters.js';
import { ChangeForm, CreateForm, type EditSpec } from './forms.js';
import { Movements, StockPanel } from './stock.js';
import type { Item, Stock } from './types.js';

const ITEM_FILTERS: FilterSpec[] = [
  { name: 'q', label: 'Search', kind: 'text', hint: 'Any part of the name or SKU, in any case' },
  { name: 'name', label: 'Exact name', kind: 'text', more: true },
  { name: 'sku', label: 'SKU', kind: 'text' },
  { name: 'created_by', label: 'Created by caller', kind: 'id', more: true },
  { name: 'created_after', label: 'Created after', kind: 'datetime', more: true },
  { name: 'created_before', label: 'Created before', kind: 'datetime', more: true },
  {
    name: 'sort',
    label: 'Sort by',
    kind: 'select',
    options: [
      ['', 'Oldest first'],
      ['-id', 'Newest first'],
      ['name', 'Name A–Z'],
      ['sku', 'SKU'],
      ['price', 'Price, lowest first'],
      ['-price', 'Price, highest first'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const ITEM_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Name', kind: 'text', maxLength: 200, hint: '1–200 characters' },
  {
    name: 'sku',
    label: 'SKU',
    kind: 'text',
    maxLength: 64,
    hint: 'Unique; letters, digits, “.”, “_”, “/” or “-”',
  },
  { name: 'price', label: 'Price', kind: 'money', maxLength: 13, hint: 'A decimal, at most 2 places: 12.50' },
];

export function ItemsView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <ItemList params={params} /> : <ItemRecord id={parts[0]} />}
    </div>
  );
}

function ItemList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const [creating, setCreating] = useState(false);
  const paged = usePaged<Item>(
    '/v1/items',
    listQuery(
      params,
      ITEM_FILTERS.map((filter) => filter.name),
    ),
  );
  // The stock of the items on this page, in one call (GET /v1/items/stock?id=…).
  const ids = paged.rows.map((item) => item.id).join(',');
  const readsStock = can('stock:read');
  const stock = useLoad(
    (signal) =>
      readsStock && ids !== ''
        ? call<Page<Stock>>('/v1/items/stock', { query: { id: ids, limit: 500 }, signal }).then((answer) =>
            Object.fromEntries(answer.body.data.map((row) => [row.item_id, row])),
          )
        : Promise.resolve({} as Record<number, Stock>),
    [ids, readsStock],
  );
  const stockOf = (item: Item) => stock.data?.[item.id];
  const columns: Column<Item>[] = [
    { label: 'Id', render: (item) => item.id, numeric: true, optional: true },
    { label: 'Name', render: (item) => <a href={href('items', item.id)}>{item.name}</a> },
    { label: 'SKU', render: (item) => <code>{item.sku}</code> },
    { label: 'Price', render: (item) => item.price, numeric: true },
  ];
  if (readsStock)
    columns.push(
      { label: 'On hand', render: (item) => count(stockOf(item)?.quantity), numeric: true },
      { label: 'Reserved', render: (item) => count(stockOf(item)?.reserved), numeric: true, optional: true },
    );
  columns.push({ label: 'Last changed', render: (item) => <Time at={item.updated_at} />, optional: true });
  return (
    <>
      <Header title="Items and stock">
        {can('items:create') && !creating ? (
          <button type="button" onClick={() => setCreating(true)}>
            New item
          </button>
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      {creating ? (
        <CreateForm
          title="New item"
          fields={ITEM_FIELDS}
          onClose={() => setCreating(false)}
          create={async (body) => {
            const created = await call<Item>('/v1/items', { method: 'POST', body });
            setFlash('Item created.');
            navigate(href('items', created.body.id));
          }}
        />
      ) : null}
      <FilterForm section="items" params={params} filters={ITEM_FILTERS} label="Filter items" />
      <ProblemView error={stock.error} context="Could not read the stock of these items" />
      <PagedTable paged={paged} caption="Items" columns={columns} rowKey={(item) => item.id} empty="No item matches." />
    </>
  );
}

function ItemRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('items', id);
  const item = useRecord<Item>(path);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, item.etag, 'items', `Item #${id} deleted.`);
  // Setting the stock makes a movement: the list of movements reads again.
  const [stockRound, setStockRound] = useState(0);
  const record = item.record;
  return (
    <>
      <BackLink section="items" label="Items and stock" />
      <Header title={record?.name ?? `Item #${id}`}>
        <ChangeAndDelete
          mayChange={record !== undefined && can('items:update') && !editing}
          mayDelete={record !== undefined && can('items:delete')}
          onChange={() => {
            setEditing(true);
            setNotice(undefined);
          }}
          confirm="Delete this item and its stock?"
          remove={remove}
        />
      </Header>
      <Notice>{notice}</Notice>
      <DeleteProblem remove={remove} reload={item.reload} />
      {record === undefined ? (
        <NotLoaded
          error={item.error}
          loading={item.loading}
          what={`item #${id}`}
          section="items"
          listLabel="Items and stock"
        />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={item.etag}
              title="Change item"
              record={record}
              fields={ITEM_FIELDS}
              save={(patch) => call<Item>(path, { method: 'PATCH', body: patch, ifMatch: item.etag })}
              onSaved={(answer) => {
                item.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={item.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="Item">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Name</dt>
              <dd>{record.name}</dd>
              <dt>SKU</dt>
              <dd>
                <code>{record.sku}</code>
              </dd>
              <dt>Price</dt>
              <dd>{record.price}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          {can('stock:read') ? (
            <>
              <StockPanel itemId={record.id} onSet={() => setStockRound((round) => round + 1)} />
              <Movements itemId={record.id} round={stockRound} />
            </>
          ) : null}
        </>
      )}
    </>
  );
}
