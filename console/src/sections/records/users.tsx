/** Users: the list (filters, New user) and a user's page (change, delete, their orders). */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call } from '../../api.js';
import { useCan } from '../../identity.js';
import { href, navigate, type ViewProps } from '../../router.js';
import { Header, Notice, PagedTable, Section, Time, usePaged, type Column } from '../../ui.js';
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
import { orderColumns } from './order-columns.js';
import type { Order, User } from './types.js';

const USER_FILTERS: FilterSpec[] = [
  { name: 'q', label: 'Search', kind: 'text', hint: 'Any part of the name or email, in any case' },
  { name: 'name', label: 'Exact name', kind: 'text', more: true },
  { name: 'email', label: 'Email', kind: 'email' },
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
      ['-name', 'Name Z–A'],
      ['email', 'Email A–Z'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const USER_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Name', kind: 'text', maxLength: 200, hint: '1–200 characters' },
  { name: 'email', label: 'Email', kind: 'email', maxLength: 254, hint: 'Unique, compared in any case' },
];

export function UsersView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <UserList params={params} /> : <UserRecord id={parts[0]} />}
    </div>
  );
}

function UserList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const [creating, setCreating] = useState(false);
  const paged = usePaged<User>(
    '/v1/users',
    listQuery(
      params,
      USER_FILTERS.map((filter) => filter.name),
    ),
  );
  const columns: Column<User>[] = [
    { label: 'Id', render: (user) => user.id, numeric: true, optional: true },
    { label: 'Name', render: (user) => <a href={href('users', user.id)}>{user.name}</a> },
    { label: 'Email', render: (user) => user.email },
    { label: 'Created', render: (user) => <Time at={user.created_at} />, optional: true },
    { label: 'Last changed', render: (user) => <Time at={user.updated_at} />, optional: true },
  ];
  return (
    <>
      <Header title="Users">
        {can('users:create') && !creating ? (
          <button type="button" onClick={() => setCreating(true)}>
            New user
          </button>
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      {creating ? (
        <CreateForm
          title="New user"
          fields={USER_FIELDS}
          onClose={() => setCreating(false)}
          create={async (body) => {
            const created = await call<User>('/v1/users', { method: 'POST', body });
            setFlash('User created.');
            navigate(href('users', created.body.id));
          }}
        />
      ) : null}
      <FilterForm section="users" params={params} filters={USER_FILTERS} label="Filter users" />
      <PagedTable paged={paged} caption="Users" columns={columns} rowKey={(user) => user.id} empty="No user matches." />
    </>
  );
}

function UserRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('users', id);
  const user = useRecord<User>(path);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, user.etag, 'users', `User #${id} deleted.`);
  const record = user.record;
  return (
    <>
      <BackLink section="users" label="Users" />
      <Header title={record?.name ?? `User #${id}`}>
        <ChangeAndDelete
          mayChange={record !== undefined && can('users:update') && !editing}
          mayDelete={record !== undefined && can('users:delete')}
          onChange={() => {
            setEditing(true);
            setNotice(undefined);
          }}
          confirm="Delete this user? Their orders stay, without a user."
          remove={remove}
        />
      </Header>
      <Notice>{notice}</Notice>
      <DeleteProblem remove={remove} reload={user.reload} />
      {record === undefined ? (
        <NotLoaded error={user.error} loading={user.loading} what={`user #${id}`} section="users" listLabel="Users" />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={user.etag}
              title="Change user"
              record={record}
              fields={USER_FIELDS}
              save={(patch) => call<User>(path, { method: 'PATCH', body: patch, ifMatch: user.etag })}
              onSaved={(answer) => {
                user.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={user.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="User">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Name</dt>
              <dd>{record.name}</dd>
              <dt>Email</dt>
              <dd>{record.email}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          {can('orders:read') ? <OrdersOfUser userId={record.id} /> : null}
        </>
      )}
    </>
  );
}

function OrdersOfUser({ userId }: { userId: number }): JSX.Element {
  const paged = usePaged<Order>('/v1/orders', { user_id: userId, limit: 10, sort: '-id' });
  return (
    <Section title="Orders of this user">
      <PagedTable
        paged={paged}
        caption="Orders of this user"
        columns={orderColumns(false)}
        rowKey={(order) => order.id}
        empty="This user has no orders."
      />
    </Section>
  );
}
