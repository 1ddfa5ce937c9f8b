import { describe, expect, it } from 'vitest';
import {
  ALL_SCOPES,
  isGrantable,
  isScope,
  missingScopes,
  parseScopeList,
  permissionOf,
  scopesOf,
  type Scope,
} from '../../src/auth/policy.js';

import { ADMIN, CHANNEL, EDITOR, READER } from '../helpers/roles.js';

const sorted = (scopes: Iterable<string>) => [...scopes].sort();

describe('policy: scopesOf', () => {
  it('scopesOf: every data read and the events (of what it may read) when the role is reader', () => {
    expect(sorted(scopesOf('reader', [], []))).toEqual(sorted(READER));
  });

  it('scopesOf: read, create and update on every data resource, no delete, when the role is editor', () => {
    expect(sorted(scopesOf('editor', [], []))).toEqual(sorted(EDITOR));
  });

  it('scopesOf: orders placed and cancelled, its customers created, the catalogue and its events read, when the role is channel', () => {
    expect(sorted(scopesOf('channel', [], []))).toEqual(sorted(CHANNEL));
  });

  it('scopesOf: every scope, including delete, caller management and the audit trail, when the role is admin', () => {
    expect(sorted(scopesOf('admin', [], []))).toEqual(sorted(ADMIN));
    expect(sorted(ALL_SCOPES)).toEqual(sorted(ADMIN));
  });

  it('scopesOf: the role plus the grant when an extra scope is given', () => {
    expect(sorted(scopesOf('editor', ['orders:delete'], []))).toEqual(sorted([...EDITOR, 'orders:delete']));
    expect(sorted(scopesOf('reader', ['audit-events:read', 'stock:update'], []))).toEqual(
      sorted([...READER, 'audit-events:read', 'stock:update']),
    );
  });

  it('scopesOf: the role minus the scope when a removed scope is given', () => {
    expect(sorted(scopesOf('editor', [], ['users:read']))).toEqual(
      sorted(EDITOR.filter((scope) => scope !== 'users:read')),
    );
    expect(sorted(scopesOf('admin', [], ['callers:delete', 'orders:delete']))).toEqual(
      sorted(ADMIN.filter((scope) => scope !== 'callers:delete' && scope !== 'orders:delete')),
    );
  });

  it('scopesOf: removed wins when the same scope is both granted and removed', () => {
    expect(scopesOf('reader', ['orders:delete'], ['orders:delete']).has('orders:delete')).toBe(false);
  });

  it('scopesOf: caller management is never added when a grant names callers:*', () => {
    for (const role of ['reader', 'editor'] as const) {
      const scopes = scopesOf(role, ['callers:read', 'callers:create', 'callers:update', 'callers:delete'], []);
      expect(sorted(scopes)).toEqual(sorted(role === 'reader' ? READER : EDITOR));
    }
  });

  it('scopesOf: unknown and misspelt grants are ignored when given as extra scopes', () => {
    expect(sorted(scopesOf('reader', ['orders:destroy', 'everything', 'Orders:delete', ''], []))).toEqual(
      sorted(READER),
    );
  });
});

describe('policy: grants and scope lists', () => {
  it('isGrantable: false for every callers:* scope and true for every other scope', () => {
    for (const scope of ALL_SCOPES) expect([scope, isGrantable(scope)]).toEqual([scope, !scope.startsWith('callers:')]);
  });

  it('isScope: true only for <resource>:<action> pairs that exist', () => {
    expect(ADMIN.every((scope) => isScope(scope))).toBe(true);
    expect(
      ['orders', 'orders:', ':read', 'orders:write', 'callers:grant', 'audit-events:delete', 'ORDERS:READ'].filter(
        (text) => isScope(text),
      ),
    ).toEqual([]);
  });

  it('parseScopeList: the scopes in order, without empty entries, when the text has extra spaces', () => {
    expect(parseScopeList(' users:read  orders:create ')).toEqual(['users:read', 'orders:create']);
    expect(parseScopeList('')).toEqual([]);
    expect(parseScopeList(undefined)).toEqual([]);
  });
});

describe('policy: permissionOf and missingScopes', () => {
  it('permissionOf: orders:cancel needs orders:read too and is recorded as an update, when the route cancels one order', () => {
    expect(permissionOf('orders:cancel', '/v1/orders/:id/cancel')).toEqual({
      scope: 'orders:cancel',
      also: ['orders:read'],
      resource: 'orders',
      action: 'update',
    });
  });

  it('permissionOf: the declared scope alone when the route addresses a collection', () => {
    expect(permissionOf('orders:create', '/v1/orders')).toMatchObject({ scope: 'orders:create', also: [] });
    expect(permissionOf('audit-events:read', '/v1/audit-events')).toMatchObject({
      scope: 'audit-events:read',
      also: [],
    });
  });

  it('permissionOf: <collection>:read as well when the route addresses one record', () => {
    expect(permissionOf('orders:delete', '/v1/orders/:id')).toMatchObject({
      scope: 'orders:delete',
      also: ['orders:read'],
    });
    expect(permissionOf('users:update', '/v1/users/:id')).toMatchObject({
      scope: 'users:update',
      also: ['users:read'],
    });
    expect(permissionOf('callers:delete', '/v1/callers/:id/keys/:key_id')).toMatchObject({
      scope: 'callers:delete',
      also: ['callers:read'],
    });
  });

  it("permissionOf: the item's read as well when a sub-resource of an item is addressed, and the stock's own read to change it", () => {
    expect(permissionOf('stock:update', '/v1/items/:id/stock')).toMatchObject({
      scope: 'stock:update',
      also: ['items:read', 'stock:read'],
    });
    expect(permissionOf('stock:read', '/v1/items/:id/stock/movements')).toMatchObject({
      scope: 'stock:read',
      also: ['items:read'],
    });
  });

  it("permissionOf: no duplicate when the declared scope already is the collection's read", () => {
    expect(permissionOf('users:read', '/v1/users/:id')).toMatchObject({ scope: 'users:read', also: [] });
  });

  it('permissionOf: the resource and action the audit trail records, none for a public route', () => {
    expect(permissionOf('stock:update', '/v1/items/:id/stock')).toMatchObject({ resource: 'stock', action: 'update' });
    expect(permissionOf('audit-events:read', '/v1/audit-events')).toMatchObject({
      resource: 'audit-events',
      action: 'read',
    });
    expect(permissionOf('public', '/v1/openapi.json')).toEqual({
      scope: 'public',
      also: [],
      resource: null,
      action: null,
    });
  });

  it('permissionOf: no scope, the resource its URL names and the action of its method, when any credential may call the route', () => {
    expect(permissionOf('authenticated', '/v1/callers/me')).toEqual({
      scope: 'authenticated',
      also: [],
      resource: 'callers',
      action: null,
    });
  });

  it('permissionOf: nothing more when the route is public', () => {
    expect(permissionOf('public', '/problems/:type')).toMatchObject({ scope: 'public', also: [] });
    expect(permissionOf('public', '/v1/openapi.json')).toMatchObject({ scope: 'public', also: [] });
  });

  it('missingScopes: empty when every needed scope is held', () => {
    expect(
      missingScopes(new Set(['orders:delete', 'orders:read']), permissionOf('orders:delete', '/v1/orders/:id')),
    ).toEqual([]);
    expect(missingScopes(new Set(), permissionOf('public', '/'))).toEqual([]);
  });

  it('missingScopes: empty for a credential holding no scope at all when the route needs only authentication', () => {
    expect(missingScopes(new Set(), permissionOf('authenticated', '/v1/callers/me'))).toEqual([]);
  });

  it('missingScopes: each scope not held, the declared one first, when some are lacking', () => {
    const permission = permissionOf('orders:delete', '/v1/orders/:id');
    expect(missingScopes(new Set(['orders:read']), permission)).toEqual(['orders:delete']);
    expect(missingScopes(new Set(['orders:delete']), permission)).toEqual(['orders:read']);
    expect(missingScopes(new Set<Scope>(), permission)).toEqual(['orders:delete', 'orders:read']);
  });

  it('missingScopes: a removed read blocks updates of a record but not creating one when an editor loses users:read', () => {
    const held = scopesOf('editor', [], ['users:read']);
    expect(missingScopes(held, permissionOf('users:update', '/v1/users/:id'))).toEqual(['users:read']);
    expect(missingScopes(held, permissionOf('users:create', '/v1/users'))).toEqual([]);
  });
});
