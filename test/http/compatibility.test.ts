import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { apiDocument } from '../../src/process/startup.js';
import { breakingChanges } from '../helpers/openapi-compat.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The committed snapshot of the document (docs/compatibility.md): what clients were written against. */
const SNAPSHOT = 'openapi/v1.json';
const snapshot = (): Json => JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Json;
const copy = (): Json => structuredClone(snapshot());

describe('compatibility within /v1', () => {
  it(`the document this code serves is ${SNAPSHOT}: no breaking change, and any addition committed with the code`, async () => {
    const current = JSON.parse(JSON.stringify(await apiDocument(loadConfig({})))) as Json;
    const breaking = breakingChanges(snapshot(), current);
    expect(
      breaking,
      `breaking changes against ${SNAPSHOT} (docs/compatibility.md says how a removal is announced; to make one on purpose, run npm run openapi and commit the snapshot with the change)`,
    ).toEqual([]);
    expect(
      current,
      `the document changed: run npm run openapi and commit ${SNAPSHOT} with the change (and npm run client for the typed client)`,
    ).toEqual(snapshot());
  });
});

describe('breakingChanges: what it finds', () => {
  it('finds nothing between the snapshot and itself, nor in additions (a new path, a new optional field, a new enum value of an input)', () => {
    const after = copy();
    after.paths['/v1/new-things'] = structuredClone(after.paths['/v1/users']);
    after.components.schemas.UserCreate.properties.nickname = { type: 'string', maxLength: 10 };
    after.components.schemas.User.properties.nickname = { type: 'string', maxLength: 10 };
    expect(breakingChanges(snapshot(), snapshot())).toEqual([]);
    expect(breakingChanges(snapshot(), after)).toEqual([]);
  });

  it.each<[string, (document: Json) => void, RegExp]>([
    ['a removed path', (document) => delete document.paths['/v1/users/{id}'], /^\/v1\/users\/\{id\}: path removed$/],
    [
      'a removed operation',
      (document) => delete document.paths['/v1/users/{id}'].delete,
      /^DELETE \/v1\/users\/\{id\}: operation removed$/,
    ],
    [
      'a removed response field',
      (document) => delete document.components.schemas.User.properties.email,
      /POST \/v1\/users 201: response field email removed/,
    ],
    [
      'a removed enum value',
      (document) => {
        const status = document.components.schemas.Order.properties.status;
        status.anyOf = status.anyOf.filter((member: Json) => member.enum[0] !== 'cancelled');
      },
      /enum value "cancelled" removed/,
    ],
    [
      'a new required field of an input',
      (document) => {
        document.components.schemas.UserCreate.properties.nickname = { type: 'string', maxLength: 10 };
        document.components.schemas.UserCreate.required.push('nickname');
      },
      /POST \/v1\/users body: new required field nickname/,
    ],
    [
      'a new required parameter',
      (document) => {
        document.paths['/v1/users'].get.parameters.push({
          in: 'query',
          name: 'tenant',
          required: true,
          schema: { type: 'string', maxLength: 10 },
        });
      },
      /GET \/v1\/users: new required parameter query tenant/,
    ],
    [
      'a narrowed bound of an input',
      (document) => {
        document.components.schemas.UserCreate.properties.name.maxLength = 10;
      },
      /POST \/v1\/users body\.name: maxLength narrowed \(200 → 10\)/,
    ],
    [
      'a new pattern of an input',
      (document) => {
        document.paths['/v1/users'].get.parameters.find(
          (parameter: Json) => parameter.name === 'cursor',
        ).schema.pattern = '^[a-z]+$';
      },
      /GET \/v1\/users parameter query cursor: new pattern/,
    ],
    [
      'a changed pattern of an input',
      (document) => {
        document.components.schemas.ItemCreate.properties.sku.pattern = '^[A-Z]+$';
      },
      /POST \/v1\/items body\.sku: pattern changed/,
    ],
    [
      'a changed type',
      (document) => {
        document.components.schemas.User.properties.id.type = 'string';
      },
      /POST \/v1\/users 201\.id: type narrowed or changed \(integer → string\)/,
    ],
  ])('finds %s', (_case, change, expected) => {
    const after = copy();
    change(after);
    expect(
      breakingChanges(snapshot(), after).some((line) => expected.test(line)),
      breakingChanges(snapshot(), after).slice(0, 5).join('\n'),
    ).toBe(true);
  });
});
