import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isScope } from '../../src/auth/policy.js';
import type { ResourceModule } from '../../src/engine/resource.js';
import { ConflictError } from '../../src/errors.js';
import { declaredProblem } from '../../src/problem-types.js';
import { noContent, operation } from '../../src/http/schemas.js';
import { isEventType } from '../../src/outbox/event-types.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { startNotesApp } from '../helpers/notes.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerThroughApi } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

// notes: a resource declared only in the tests (test/helpers/notes.ts); the engine names no note anywhere.
let test: TestApp;
let importer: Importer;
beforeAll(async () => {
  const folder = tempFolder('notes');
  test = await startNotesApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool') });
  importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
});
afterAll(() => test.close());

const note = (title: string, text = `about ${title}`) => ({ title, text });
const stored = (id: number) =>
  test.storage.db
    .selectFrom('notes' as never)
    .selectAll()
    .where('id' as never, '=', id as never)
    .executeTakeFirst() as Promise<Record<string, unknown> | undefined>;

describe('a resource declared only in a test gets every operation', () => {
  it('POST /v1/notes: 201 with Location, ETag and the note as stored, owned by the caller; a repeated Idempotency-Key answers the first answer again', async () => {
    const headers = { 'idempotency-key': 'note-1' };
    const created = await test.call({ method: 'POST', url: '/v1/notes', body: note('Shelves'), headers });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.any(Number),
      title: 'Shelves',
      text: 'about Shelves',
      created_by: 1,
      created_at: expect.any(String),
      updated_at: created.json.created_at,
    });
    expect(created.headers.location).toBe(`/v1/notes/${created.json.id}`);
    expect(created.headers.etag).toBe('"v1"');
    const again = await test.call({ method: 'POST', url: '/v1/notes', body: note('Shelves'), headers });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json).toEqual(created.json);
    const list = await test.call({ url: '/v1/notes?title=Shelves' });
    expect(list.status).toBe(400);
    const all = await test.call({ url: '/v1/notes' });
    expect(all.json.data.filter((row: { title: string }) => row.title === 'Shelves')).toHaveLength(1);
  });

  it('POST /v1/notes: 422 for a body its schema refuses, and nothing is stored', async () => {
    const before = (await test.call({ url: '/v1/notes?limit=100' })).json.data.length;
    expectProblem(
      await test.call({ method: 'POST', url: '/v1/notes', body: { title: '', text: 'x' } }),
      422,
      'validation-failed',
    );
    expectProblem(
      await test.call({ method: 'POST', url: '/v1/notes', body: { ...note('A'), id: 7 } }),
      422,
      'validation-failed',
    );
    expect((await test.call({ url: '/v1/notes?limit=100' })).json.data.length).toBe(before);
  });

  it('GET /v1/notes/{id}: the note with its ETag, 304 for a current copy, fields= narrows it; 404 for none', async () => {
    const { json } = await test.call({ method: 'POST', url: '/v1/notes', body: note('Read me') });
    const read = await test.call({ url: `/v1/notes/${json.id}` });
    expect(read.status).toBe(200);
    expect(read.json).toEqual(json);
    const current = await test.call({
      url: `/v1/notes/${json.id}`,
      headers: { 'if-none-match': read.headers.etag as string },
    });
    expect(current.status).toBe(304);
    expect((await test.call({ url: `/v1/notes/${json.id}?fields=title` })).json).toEqual({
      id: json.id,
      title: 'Read me',
    });
    expectProblem(await test.call({ url: '/v1/notes/999999' }), 404, 'not-found');
  });

  it('GET /v1/notes: pages with a Link to the next, ?id= reads several by id, sorted as asked; CSV and NDJSON exports', async () => {
    const ids: number[] = [];
    for (const title of ['page-b', 'page-a', 'page-c'])
      ids.push((await test.call({ method: 'POST', url: '/v1/notes', body: note(title) })).json.id);
    const byIds = await test.call({ url: `/v1/notes?id=${ids.join(',')}&sort=title&fields=id,title` });
    expect(byIds.status).toBe(200);
    expect(byIds.json.data).toEqual([
      { id: ids[1], title: 'page-a' },
      { id: ids[0], title: 'page-b' },
      { id: ids[2], title: 'page-c' },
    ]);
    const first = await test.call({ url: `/v1/notes?id=${ids.join(',')}&limit=2` });
    expect(first.json.data).toHaveLength(2);
    expect(first.headers.link).toMatch(/rel="next"/);
    const csv = await test.call({
      url: `/v1/notes?id=${ids.join(',')}&fields=id,title&sort=id`,
      headers: { accept: 'text/csv' },
    });
    expect(csv.status).toBe(200);
    expect(csv.mediaType).toBe('text/csv');
    expect(csv.text.trim().split(/\r?\n/)).toEqual([
      'id,title',
      `${ids[0]},page-b`,
      `${ids[1]},page-a`,
      `${ids[2]},page-c`,
    ]);
    const ndjson = await test.call({ url: `/v1/notes?id=${ids[0]}`, headers: { accept: 'application/x-ndjson' } });
    expect(ndjson.mediaType).toBe('application/x-ndjson');
    expect(JSON.parse(ndjson.text.trim())).toMatchObject({ id: ids[0], title: 'page-b' });
  });

  it('PUT and PATCH /v1/notes/{id}: checked against If-Match (412 on a stale ETag, nothing written); a change moves the version, one that changes nothing keeps it', async () => {
    const { json } = await test.call({ method: 'POST', url: '/v1/notes', body: note('Draft') });
    const url = `/v1/notes/${json.id}`;
    const replaced = await test.call({
      method: 'PUT',
      url,
      body: note('Final', 'done'),
      headers: { 'if-match': '"v1"' },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.json).toMatchObject({ title: 'Final', text: 'done' });
    expect(replaced.headers.etag).toBe('"v2"');
    expectProblem(
      await test.call({ method: 'PATCH', url, body: { text: 'late' }, headers: { 'if-match': '"v1"' } }),
      412,
      'precondition-failed',
    );
    expect(await stored(json.id)).toMatchObject({ text: 'done', version: 2 });
    const same = await test.call({ method: 'PATCH', url, body: { title: 'Final' } });
    expect(same.headers.etag).toBe('"v2"');
    const changed = await test.call({ method: 'PATCH', url, body: { text: 'edited' } });
    expect(changed.json).toMatchObject({ title: 'Final', text: 'edited' });
    expect(changed.headers.etag).toBe('"v3"');
    expectProblem(await test.call({ method: 'PATCH', url, body: { created_by: 99 } }), 422, 'read-only-field');
  });

  it('DELETE /v1/notes/{id}: 204, then 404; the events tell of each change, newest first', async () => {
    const { json } = await test.call({ method: 'POST', url: '/v1/notes', body: note('Short-lived') });
    await test.call({ method: 'PATCH', url: `/v1/notes/${json.id}`, body: { text: 'changed' } });
    expect((await test.call({ method: 'DELETE', url: `/v1/notes/${json.id}` })).status).toBe(204);
    expectProblem(await test.call({ url: `/v1/notes/${json.id}` }), 404, 'not-found');
    expect(await stored(json.id)).toBeUndefined();
    const events = await test.call({ url: '/v1/events?limit=100' });
    expect(events.status).toBe(200);
    const mine = events.json.data.filter((event: { path: string }) => event.path === `/v1/notes/${json.id}`);
    expect(mine.map((event: { type: string }) => event.type)).toEqual(['note.deleted', 'note.updated', 'note.created']);
    expect(mine[1].data).toMatchObject({ id: json.id, text: 'changed' });
  });

  it('POST /v1/notes/batch: every entry as its single request, all or nothing', async () => {
    const { json } = await test.call({ method: 'POST', url: '/v1/notes', body: note('Batched') });
    const batch = await test.call({
      method: 'POST',
      url: '/v1/notes/batch',
      body: { create: [note('From a batch')], change: [{ id: json.id, text: 'by batch' }] },
    });
    expect(batch.status).toBe(200);
    expect(batch.json.create[0]).toMatchObject({ status: 201, record: { title: 'From a batch' } });
    expect(batch.json.change[0]).toMatchObject({ status: 200, record: { id: json.id, text: 'by batch' } });
    const refused = await test.call({
      method: 'POST',
      url: '/v1/notes/batch',
      body: { create: [note('Never stored')], delete: [{ id: 999999 }] },
    });
    expectProblem(refused, 422, 'batch-entry-refused');
    expect(refused.json.failed_entry).toMatchObject({ status: 404 });
    const titles = (await test.call({ url: '/v1/notes?limit=100' })).json.data.map(
      (row: { title: string }) => row.title,
    );
    expect(titles).not.toContain('Never stored');
  });

  it('POST /v1/notes/import: an NDJSON file becomes notes, owned by the importer; a bad row is refused with its line', async () => {
    const upload = await importer.upload(
      'notes',
      `${JSON.stringify(note('Imported 1'))}\n${JSON.stringify({ title: 'x' })}\n${JSON.stringify(note('Imported 2'))}\n`,
      {
        type: 'application/x-ndjson',
        query: '?mode=partial',
      },
    );
    expect(upload.status).toBe(202);
    const done = await importer.finished(upload.headers.location as string);
    expect(done.json).toMatchObject({ status: 'succeeded', target: 'notes' });
    expect(done.json.errors).toEqual([expect.objectContaining({ row: 2, problem: 'validation-failed' })]);
    const titles = (await test.call({ url: '/v1/notes?limit=100' })).json.data.map(
      (row: { title: string }) => row.title,
    );
    expect(titles).toEqual(expect.arrayContaining(['Imported 1', 'Imported 2']));
  });

  it('ownership: a caller that sees only its own notes lists, reads and changes only those; another caller’s note is 404 as a missing one', async () => {
    const shop = await createCallerThroughApi(test, 'notes-shop', { role: 'editor', record_access: { notes: 'own' } });
    const theirs = (await test.call({ method: 'POST', url: '/v1/notes', body: note('Admin only') })).json;
    const mine = await test.call({ method: 'POST', url: '/v1/notes', body: note('Shop note'), key: shop.key });
    expect(mine.status).toBe(201);
    expect(mine.json.created_by).toBe(shop.id);
    const listed = await test.call({ url: '/v1/notes?limit=100', key: shop.key });
    expect(listed.json.data.map((row: { id: number }) => row.id)).toEqual([mine.json.id]);
    expectProblem(await test.call({ url: `/v1/notes/${theirs.id}`, key: shop.key }), 404, 'not-found');
    expectProblem(
      await test.call({ method: 'PATCH', url: `/v1/notes/${theirs.id}`, body: { text: 'x' }, key: shop.key }),
      404,
      'not-found',
    );
    expect(await stored(theirs.id)).toMatchObject({ text: theirs.text });
    const reader = await createCallerThroughApi(test, 'notes-reader', { role: 'reader' });
    expectProblem(
      await test.call({ method: 'POST', url: '/v1/notes', body: note('No'), key: reader.key }),
      403,
      'insufficient-scope',
    );
    const titles = (await test.call({ url: '/v1/notes?limit=100' })).json.data.map(
      (row: { title: string }) => row.title,
    );
    expect(titles).not.toContain('No');
  });

  it('the OpenAPI document describes every operation of notes, with its scopes', async () => {
    const document = (await test.call({ url: '/v1/openapi.json', key: null })).json;
    const operations = Object.entries(document.paths as Record<string, Record<string, { operationId: string }>>)
      .filter(([path]) => path.startsWith('/v1/notes'))
      .flatMap(([path, methods]) =>
        Object.entries(methods).map(([method, spec]) => `${method.toUpperCase()} ${path} ${spec.operationId}`),
      );
    expect(operations).toEqual(
      expect.arrayContaining([
        'GET /v1/notes listNotes',
        'POST /v1/notes createNote',
        'GET /v1/notes/{id} getNote',
        'PUT /v1/notes/{id} replaceNote',
        'PATCH /v1/notes/{id} patchNote',
        'DELETE /v1/notes/{id} deleteNote',
        'POST /v1/notes/batch batchNotes',
        expect.stringMatching(/^POST \/v1\/notes\/import /),
      ]),
    );
    expect(document.paths['/v1/notes'].post['x-permission']).toBe('notes:create');
  });
});

describe('the app declares what its resources add, and undoes it when it closes', () => {
  it("a declaration the catalogues refuse (an event type rowi has) fails the build and leaves nothing of the module's declared", async () => {
    const letters: ResourceModule = {
      access: { name: 'letters', owned: false, actingMayCreate: true },
      events: { 'user.created': { resource: 'letters', description: 'Not a letter event.' } },
      routes: async () => {},
    };
    await expect(startApp({}, undefined, { resources: [letters] })).rejects.toThrow(
      /user\.created is declared already/,
    );
    expect(isScope('letters:read')).toBe(false);
    // The running app's own declarations stand.
    expect(isScope('notes:read')).toBe(true);
    expect(isEventType('note.created')).toBe(true);
  });

  it('an app closed takes its resources out: their scopes, event types and problem types are known no more', async () => {
    const drafts: ResourceModule = {
      access: { name: 'drafts', owned: false, actingMayCreate: true },
      events: { 'draft.created': { resource: 'drafts', description: 'A draft was created.' } },
      problems: {
        'draft-taken': { status: 409, title: 'Draft taken', description: 'Another draft has this title.' },
      },
      routes: async (app) => {
        app.post(
          '/v1/drafts',
          {
            schema: operation({
              operationId: 'createDraft',
              permission: 'drafts:create',
              summary: 'Create a draft',
              tags: ['drafts'],
              problems: [409],
              response: { 204: noContent('Never: every draft is taken') },
            }),
          },
          async () => {
            throw new ConflictError(declaredProblem('draft-taken'), 'Another draft is titled Plans.');
          },
        );
      },
    };
    const other = await startApp({}, undefined, { resources: [drafts] });
    expect(isScope('drafts:read')).toBe(true);
    expect(isEventType('draft.created')).toBe(true);
    const scopes = (await other.call({ url: '/v1/openapi.json', key: null })).json.components.securitySchemes;
    expect(JSON.stringify(scopes)).toContain('drafts:read');
    const taken = await other.call({ method: 'POST', url: '/v1/drafts' });
    expectProblem(taken, 409, 'draft-taken');
    expect(taken.json).toMatchObject({ title: 'Draft taken', detail: 'Another draft is titled Plans.' });
    const described = await other.call({ url: '/problems/draft-taken', key: null });
    expect(described.status).toBe(200);
    expect(described.json).toMatchObject({
      status: 409,
      title: 'Draft taken',
      description: 'Another draft has this title.',
    });
    await other.close();
    expect(isScope('drafts:read')).toBe(false);
    expect(isEventType('draft.created')).toBe(false);
    expectProblem(await test.call({ url: '/problems/draft-taken', key: null }), 404, 'not-found');
  });
});
