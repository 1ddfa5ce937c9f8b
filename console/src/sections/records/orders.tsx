/** Orders: the list (filters) and an order's page (status, change, lines, delete). */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call, type Page } from '../../api.js';
import { count } from '../../format.js';
import { useCan } from '../../identity.js';
import type { ViewProps } from '../../router.js';
import {
  ConfirmButton,
  Header,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Table,
  useAction,
  useLoad,
  usePaged,
} from '../../ui.js';
import {
  BackLink,
  NotLoaded,
  Provenance,
  WriteProblem,
  ChangeAndDelete,
  DeleteProblem,
  recordPath,
  takeFlash,
  useDelete,
  useRecord,
} from './common.js';
import { FilterForm, listQuery, type FilterSpec } from './filters.js';
import { ChangeForm, type EditSpec } from './forms.js';
import { LinesForm, orderLineColumns } from './lines.js';
import { StatusBadge, UserRef, orderColumns } from './order-columns.js';
import type { Item, Order, User } from './types.js';

const ORDER_FILTERS: FilterSpec[] = [
  { name: 'q', label: 'Search', kind: 'text', hint: 'Any part of the reference, in any case' },
  {
    name: 'status',
    label: 'Status',
    kind: 'select',
    options: [
      ['', 'Any'],
      ['placed', 'Placed'],
      ['fulfilled', 'Fulfilled'],
      ['cancelled', 'Cancelled'],
    ],
  },
  { name: 'user_id', label: 'User id', kind: 'id' },
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
      ['-total', 'Total, highest first'],
      ['total', 'Total, lowest first'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const ORDER_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Reference', kind: 'text', maxLength: 200, hint: "The caller's reference, 1–200 characters" },
  { name: 'user_id', label: 'User id', kind: 'id', hint: 'The user the order is for' },
];

export function OrdersView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <OrderList params={params} /> : <OrderRecord id={parts[0]} />}
    </div>
  );
}

function OrderList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const query = listQuery(
    params,
    ORDER_FILTERS.map((filter) => filter.name),
  );
  // The user's name beside each order, in the same call, when the key may read users.
  if (can('users:read')) query.expand = 'user';
  const paged = usePaged<Order>('/v1/orders', query);
  return (
    <>
      <Header title="Orders" />
      <Notice>{notice}</Notice>
      <FilterForm section="orders" params={params} filters={ORDER_FILTERS} label="Filter orders" />
      <PagedTable
        paged={paged}
        caption="Orders"
        columns={orderColumns(true)}
        rowKey={(order) => order.id}
        empty="No order matches."
      />
    </>
  );
}

function OrderRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('orders', id);
  // Read without expand: an expanded answer's ETag is weak, and If-Match needs the record's own.
  const order = useRecord<Order>(path);
  const [editing, setEditing] = useState(false);
  const [editingLines, setEditingLines] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, order.etag, 'orders', `Order #${id} deleted.`);
  const transition = useAction(async (to: 'cancelled' | 'fulfilled') => {
    const answer =
      to === 'cancelled'
        ? await call<Order>(`${path}/cancel`, { method: 'POST', ifMatch: order.etag })
        : await call<Order>(path, { method: 'PATCH', body: { status: 'fulfilled' }, ifMatch: order.etag });
    order.replace(answer);
    setNotice(to === 'cancelled' ? 'Order cancelled: its reserved stock returned.' : 'Order fulfilled.');
  });
  const record = order.record;
  const placed = record?.status === 'placed';

  // The names of the user and the items, each read once, when the key may read them.
  const userId = record?.user_id ?? null;
  const user = useLoad(
    (signal) =>
      userId !== null && can('users:read')
        ? call<User>(`/v1/users/${userId}`, { signal }).then(
            (answer) => answer.body,
            () => undefined,
          )
        : Promise.resolve(undefined),
    [userId],
  );
  const itemIds = [...new Set(record?.lines.map((line) => line.item_id) ?? [])].join(',');
  const items = useLoad(
    (signal) =>
      itemIds !== '' && can('items:read')
        ? call<Page<Item>>('/v1/items', { query: { id: itemIds, limit: 500 }, signal }).then((answer) =>
            Object.fromEntries(answer.body.data.map((item) => [item.id, item])),
          )
        : Promise.resolve({} as Record<number, Item>),
    [itemIds],
  );
  const lineColumns = orderLineColumns(items.data, can);

  return (
    <>
      <BackLink section="orders" label="Orders" />
      <Header title={record?.name ?? `Order #${id}`}>
        {record && placed && can('orders:update') ? (
          <ConfirmButton
            key="Mark fulfilled"
            label="Mark fulfilled"
            confirm="Mark this order fulfilled? Its reserved stock leaves the inventory."
            danger={false}
            disabled={transition.busy}
            onConfirm={() => {
              setNotice(undefined);
              void transition.run('fulfilled');
            }}
          />
        ) : null}
        {record && placed && can('orders:cancel') ? (
          <ConfirmButton
            key="Cancel order"
            label="Cancel order"
            confirm="Cancel this order? Its reserved stock returns."
            disabled={transition.busy}
            onConfirm={() => {
              setNotice(undefined);
              void transition.run('cancelled');
            }}
          />
        ) : null}
        <ChangeAndDelete
          mayChange={record !== undefined && can('orders:update') && !editing}
          mayDelete={record !== undefined && can('orders:delete')}
          onChange={() => {
            setEditing(true);
            setNotice(undefined);
          }}
          confirm="Delete this order?"
          remove={remove}
        />
      </Header>
      <Notice>{notice}</Notice>
      <WriteProblem
        error={transition.error}
        context="The order's status was not changed"
        onReload={() => {
          transition.clear();
          order.reload();
        }}
      />
      <DeleteProblem remove={remove} reload={order.reload} />
      {record === undefined ? (
        <NotLoaded
          error={order.error}
          loading={order.loading}
          what={`order #${id}`}
          section="orders"
          listLabel="Orders"
        />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={order.etag}
              title="Change order"
              record={record}
              fields={placed ? ORDER_FIELDS : ORDER_FIELDS.filter((field) => field.name === 'name')}
              save={(patch) => call<Order>(path, { method: 'PATCH', body: patch, ifMatch: order.etag })}
              onSaved={(answer) => {
                order.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={order.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="Order">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Reference</dt>
              <dd>{record.name}</dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge status={record.status} />
              </dd>
              <dt>User</dt>
              <dd>
                <UserRef order={{ ...record, user: user.data }} />
                {user.data ? <span class="records-muted"> {user.data.email}</span> : null}
              </dd>
              <dt>Total</dt>
              <dd class="records-total">{record.total}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          <Section title="Lines">
            <ProblemView error={items.error} context="Could not read the items' names" />
            <Table
              caption="Lines"
              columns={lineColumns}
              rows={record.lines}
              rowKey={(line) => line.item_id}
              empty="No lines."
            />
            <p class="records-sum">
              <span>
                {count(record.lines.length)} {record.lines.length === 1 ? 'line' : 'lines'},{' '}
                {count(record.lines.reduce((sum, line) => sum + line.quantity, 0))} units
              </span>
              <span>
                Total <strong>{record.total}</strong>
              </span>
            </p>
            {placed && can('orders:update') && !editingLines ? (
              <button
                type="button"
                onClick={() => {
                  setEditingLines(true);
                  setNotice(undefined);
                }}
              >
                Change lines
              </button>
            ) : null}
            {editingLines && placed ? (
              <LinesForm
                key={order.etag}
                order={record}
                items={items.data}
                save={(lines) => call<Order>(path, { method: 'PATCH', body: { lines }, ifMatch: order.etag })}
                onSaved={(answer) => {
                  order.replace(answer);
                  setEditingLines(false);
                  setNotice(`Lines saved: the total is now ${answer.body.total}.`);
                }}
                onReload={order.reload}
                onClose={() => setEditingLines(false)}
              />
            ) : null}
          </Section>
        </>
      )}
    </>
  );
}
