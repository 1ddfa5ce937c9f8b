import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES, declareDataResource, isOwnedResource, isScope, ROLE_SCOPES } from '../../src/auth/policy.js';
import { creatorOf, sightOf } from '../../src/auth/visibility.js';
import { SEES_ALL, visibleIn } from '../../src/db/visibility.js';
import { OPENAPI_PATH } from '../../src/http/openapi.js';
import { declareEventTypes, EVENT_TYPE_NAMES, isEventType } from '../../src/outbox/event-types.js';
import { ownerOf } from '../../src/outbox/outbox.js';
import { startApp, type TestApp } from '../helpers/app.js';

/**
 * A resource that exists only as a declaration (notes: owned, not created by a request acting for a
 * user, belonging to no user), declared before the app is built: the API lists its scopes, its
 * record access and its events, and who sees and owns its records follows its rule.
 */
const NOTE_SCOPES = ['notes:read', 'notes:create', 'notes:update', 'notes:delete'];
const NOTE_EVENTS = ['note.created', 'note.updated', 'note.deleted'];

const before = { scopes: [...ALL_SCOPES], events: [...EVENT_TYPE_NAMES], reader: [...ROLE_SCOPES.reader] };
let undo: (() => void)[] = [];
let test: TestApp;

beforeAll(async () => {
  undo = [
    declareDataResource('notes', { owned: true, actingMayCreate: false }),
    declareEventTypes({
      'note.created': { resource: 'notes', description: 'A note was created; data is the note.' },
      'note.updated': { resource: 'notes', description: "A note's text changed; data is the note as stored." },
      'note.deleted': { resource: 'notes', description: 'A note was deleted; data holds its id.' },
    }),
  ];
  test = await startApp();
});

afterAll(async () => {
  await test.close();
  for (const step of undo.reverse()) step();
  // The files of a worker share its modules: the next one finds the catalogues as they were.
  expect(isScope('notes:read')).toBe(false);
  expect(ALL_SCOPES).toEqual(before.scopes);
  expect(ROLE_SCOPES.reader).toEqual(before.reader);
  expect(EVENT_TYPE_NAMES).toEqual(before.events);
});

/** A request of caller 7, which sees only its own notes, acting for user 3 or for nobody. */
const seer = (userId: number | null) => ({ callerId: 7, ownRecords: new Set(['notes']), userId });

describe('a resource declared before the app is built', () => {
  it(`GET ${OPENAPI_PATH}: lists the notes scopes, record access and event types when notes were declared`, async () => {
    const reply = await test.call({ url: OPENAPI_PATH });
    expect(reply.status).toBe(200);
    const document = reply.json;
    const scopes = Object.keys(document.components.securitySchemes.oauth2.flows.clientCredentials.scopes);
    expect(scopes).toEqual([...before.scopes, ...NOTE_SCOPES]);
    const schemas = document.components.schemas;
    expect(Object.keys(schemas.RecordAccess.properties)).toEqual(['users', 'items', 'orders', 'notes']);
    expect(schemas.WebhookEndpointCreate.properties.events.items).toEqual({
      $ref: '#/components/schemas/SubscribedEventType',
    });
    for (const type of NOTE_EVENTS) {
      expect(JSON.stringify(schemas.Event.properties.type)).toContain(type);
      expect(JSON.stringify(schemas.SubscribedEventType)).toContain(type);
    }
  });

  it('POST /v1/callers: 201 with the notes scopes and record access when a caller is given them', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'notes-reader', role: 'reader', extra_scopes: ['notes:delete'], record_access: { notes: 'own' } },
    });
    expect(reply.status).toBe(201);
    expect(reply.json.extra_scopes).toEqual(['notes:delete']);
    expect(reply.json.scopes).toEqual(expect.arrayContaining(['notes:read', 'notes:delete']));
    expect(reply.json.scopes).not.toContain('notes:create');
    expect(reply.json.record_access).toEqual({ users: 'all', items: 'all', orders: 'all', notes: 'own' });
    const stored = await test.storage.db
      .selectFrom('callers')
      .select(['extra_scopes', 'own_records'])
      .where('id', '=', reply.json.id)
      .executeTakeFirstOrThrow();
    expect(stored).toEqual({ extra_scopes: 'notes:delete', own_records: 'notes' });
  });

  it('POST /v1/callers: 422 when it names a scope of a resource never declared', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'letters-reader', role: 'reader', extra_scopes: ['letters:read'] },
    });
    expect(reply.status).toBe(422);
  });

  it('the roles hold the notes scopes as they hold the other data resources, after the built-in ones', () => {
    expect(ROLE_SCOPES.reader).toEqual([...before.reader, 'notes:read']);
    expect(ROLE_SCOPES.editor.slice(-3)).toEqual(['notes:read', 'notes:create', 'notes:update']);
    expect(ROLE_SCOPES.admin).toEqual(expect.arrayContaining(NOTE_SCOPES));
  });

  it('sightOf: its own notes, not narrowed to the acting user, when notes have no user column', () => {
    expect(sightOf(seer(null), 'notes')).toEqual({ owner: 7, user: null });
    expect(sightOf(seer(3), 'notes')).toEqual({ owner: 7, user: null });
    expect(sightOf({ callerId: 7, ownRecords: new Set(), userId: 3 }, 'notes')).toBe(SEES_ALL);
    expect(visibleIn('notes', { owner: 7, user: 3 })).toBeDefined();
  });

  it('creatorOf: the caller; 403 acting-forbidden when the request acts for a user', () => {
    expect(creatorOf(seer(null), 'notes')).toBe(7);
    expect(() => creatorOf(seer(3), 'notes')).toThrow(/may not create notes/);
  });

  it("ownerOf: the note's created_by, and no user, when notes have no user column", () => {
    expect(ownerOf('notes', { id: 1, created_by: 7, user_id: 3 })).toEqual({ created_by: 7, user_id: null });
  });
});

describe('a declaration undone', () => {
  it('leaves the catalogues as they were', () => {
    const undoLetters = declareDataResource('letters', { owned: true, actingMayCreate: true, userColumn: 'user_id' });
    const undoEvents = declareEventTypes({ 'letter.sent': { resource: 'letters', description: 'A letter was sent.' } });
    expect(isScope('letters:read')).toBe(true);
    expect(ownerOf('letters', { created_by: 7, user_id: 3 })).toEqual({ created_by: 7, user_id: 3 });
    undoEvents();
    undoLetters();
    expect(isScope('letters:read')).toBe(false);
    expect(isOwnedResource('letters')).toBe(false);
    expect(isEventType('letter.sent')).toBe(false);
    expect(ownerOf('letters', { created_by: 7, user_id: 3 })).toEqual({ created_by: null, user_id: null });
    expect(() => visibleIn('letters', SEES_ALL)).toThrow(/no owned table/);
    expect(ALL_SCOPES).toEqual([...before.scopes, ...NOTE_SCOPES]);
    expect(EVENT_TYPE_NAMES).toEqual([...before.events, ...NOTE_EVENTS]);
  });

  it('a second declaration of a resource is refused', () => {
    expect(() => declareDataResource('notes', { owned: false, actingMayCreate: true })).toThrow(/declared already/);
    expect(() => declareDataResource('users', { owned: false, actingMayCreate: true })).toThrow(/declared already/);
    expect(() => declareEventTypes({ 'user.created': { resource: 'users', description: '' } })).toThrow(
      /declared already/,
    );
  });
});
