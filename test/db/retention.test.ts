import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstEventIdAt } from '../../src/outbox/event-ids.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { sample } from '../helpers/metrics.js';
import { Receiver } from '../helpers/receiver.js';
import { buildUser, createUser } from '../helpers/records.js';
import { createEndpoint, deliveriesOf, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

/**
 * Retention (docs/limits.md "Data kept and its retention"): rows past it are pruned by the
 * background sweep, in batches, on both databases; the rest stay; the metrics show each table.
 * The sweep is run at once here (app.retention.sweep) instead of waiting for its minute.
 */

const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

/** Rows of the audit trail as a request would have written them, `seconds` ago. */
function auditRows(count: number, seconds: number) {
  return Array.from({ length: count }, (_, index) => ({
    at: ago(seconds + index / 1000),
    request_id: `old-${seconds}-${index}`,
    caller_id: null,
    caller_name: null,
    credential: null,
    method: 'GET',
    path: '/v1/users/1',
    resource: 'users',
    record_id: '1',
    action: 'read',
    status: 200,
    duration_ms: 1.5,
    client_ip: '127.0.0.1',
  }));
}

async function insertAuditRows(test: TestApp, rows: ReturnType<typeof auditRows>): Promise<void> {
  for (let start = 0; start < rows.length; start += 200)
    await test.storage.db
      .insertInto('audit_events')
      .values(rows.slice(start, start + 200))
      .execute();
}

const storedAuditIds = async (test: TestApp) =>
  (await test.storage.db.selectFrom('audit_events').select('request_id').execute()).map((row) => row.request_id);

const metricsOf = async (test: TestApp) => (await test.call({ url: '/metrics' })).text;

describe('retention of the audit trail, ROWI_AUDIT_RETENTION=3600', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_AUDIT_RETENTION: '3600', ROWI_AUDIT_FLUSH_INTERVAL: '50' });
  });
  afterAll(() => test.close());

  it('GET /v1/audit-events: events older than the retention are pruned in batches, newer ones kept, when the sweep runs', async () => {
    const prunedBefore = sample(await metricsOf(test), 'rowi_retention_pruned_rows_total', { table: 'audit_events' });
    // 1,201 rows past the retention: two batches of 500, and one more; 5 just inside it.
    await insertAuditRows(test, [...auditRows(1201, 7200), ...auditRows(5, 3000)]);
    const created = await test.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    expect(created.status).toBe(201);
    // The trail is written in batches (every 50 ms here): the sweep runs once the POST's record is stored.
    const requestId = String(created.headers['x-request-id']);
    for (let wait = 0; wait < 100 && !(await storedAuditIds(test)).includes(requestId); wait++)
      await new Promise((resolve) => setTimeout(resolve, 20));

    await test.app.retention.sweep();

    const stored = await storedAuditIds(test);
    expect(stored.filter((id) => id.startsWith('old-7200-'))).toEqual([]);
    expect(stored.filter((id) => id.startsWith('old-3000-')).sort()).toEqual(
      ['old-3000-0', 'old-3000-1', 'old-3000-2', 'old-3000-3', 'old-3000-4'].sort(),
    );
    const listed = await test.call({ url: '/v1/audit-events?limit=500' });
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((event: { request_id: string }) => event.request_id)).toContain(
      String(created.headers['x-request-id']),
    );
    const exposition = await metricsOf(test);
    expect(sample(exposition, 'rowi_retention_pruned_rows_total', { table: 'audit_events' }) - prunedBefore).toBe(1201);
    // The oldest row left is the one 3,000 s (and 4 ms) old; rows are estimated from the key span.
    const age = sample(exposition, 'rowi_table_oldest_row_age_seconds', { table: 'audit_events' });
    expect(age).toBeGreaterThanOrEqual(3000);
    expect(age).toBeLessThan(3300);
    expect(sample(exposition, 'rowi_table_rows', { table: 'audit_events' })).toBeGreaterThanOrEqual(stored.length);
  });

  it('GET /metrics: every growing table has a row estimate, and no oldest age while it is empty', async () => {
    await test.app.retention.sweep();
    const exposition = await metricsOf(test);
    for (const table of [
      'audit_events',
      'events',
      'webhook_deliveries',
      'webhook_attempts',
      'idempotency_keys',
      'operations',
    ])
      expect(exposition).toMatch(new RegExp(`^rowi_table_rows\\{table="${table}"\\} \\d+$`, 'm'));
    expect(exposition).not.toMatch(/^rowi_table_oldest_row_age_seconds\{table="webhook_attempts"\}/m);
  });
});

describe('retention with two instances on one database', () => {
  let first: TestApp;
  beforeAll(async () => {
    first = await startApp({ ROWI_AUDIT_RETENTION: '60' });
  });
  afterAll(() => first.close());

  it('GET /v1/audit-events: two sweeps at once delete each old row once and leave the new ones, when two instances prune', async () => {
    const { buildApp } = await import('../../src/app.js');
    const { openStorage } = await import('../../src/db/connect.js');
    const pino = (await import('pino')).default;
    const storage = await openStorage(first.config, pino({ level: 'silent' }));
    const second = await buildApp({ config: first.config, storage, logger: pino({ level: 'silent' }) });
    try {
      const before = sample(await metricsOf(first), 'rowi_retention_pruned_rows_total', { table: 'audit_events' });
      await insertAuditRows(first, [...auditRows(2400, 600), ...auditRows(3, 10)]);

      await Promise.all([first.app.retention.sweep(), second.retention.sweep()]);

      expect((await storedAuditIds(first)).filter((id) => id.startsWith('old-')).sort()).toEqual(
        ['old-10-0', 'old-10-1', 'old-10-2'].sort(),
      );
      // Both instances count into this process's registry: together, each row once.
      const after = sample(await metricsOf(first), 'rowi_retention_pruned_rows_total', { table: 'audit_events' });
      expect(after - before).toBe(2400);
    } finally {
      await second.close();
      await storage.close();
    }
  });
});

describe('retention of events, webhook deliveries and their attempts, ROWI_EVENTS_RETENTION=60', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_EVENTS_RETENTION: '60' });
  });
  afterAll(() => test.close());

  it('GET /v1/events: events, deliveries and attempts older than the retention are pruned, newer ones kept', async () => {
    const endpoint = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      body: { url: 'https://hooks.example.com/rowi', description: 'retention', enabled: false },
    });
    expect(endpoint.status).toBe(201);
    const created = await test.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    expect(created.status).toBe(201);
    const db = test.storage.db;
    const oldEvents = Array.from({ length: 700 }, (_, index) => ({
      id: `${firstEventIdAt(ago(3600)).slice(0, 16)}${index.toString(16).padStart(6, '0')}aaaaaaaaaa`,
      type: 'user.created',
      resource: 'users',
      path: '/v1/users/1',
      data: '{}',
    }));
    for (let start = 0; start < oldEvents.length; start += 100)
      await db
        .insertInto('events')
        .values(oldEvents.slice(start, start + 100))
        .execute();
    const delivery = (createdAt: string, eventId: string) => ({
      endpoint_id: endpoint.json.id,
      event_id: eventId,
      event_type: 'user.created',
      status: 'succeeded' as const,
      attempts: 1,
      next_attempt_at: null,
      lease_until: null,
      created_at: createdAt,
      updated_at: createdAt,
    });
    const old = await db
      .insertInto('webhook_deliveries')
      .values(delivery(ago(3600), oldEvents[0]!.id))
      .returning('id')
      .executeTakeFirstOrThrow();
    const recent = await db
      .insertInto('webhook_deliveries')
      .values(delivery(ago(5), 'evt_recent'))
      .returning('id')
      .executeTakeFirstOrThrow();
    for (const { id } of [old, recent])
      await db
        .insertInto('webhook_attempts')
        .values({ delivery_id: id, attempted_at: ago(5), status_code: 204, duration_ms: 3, error: null })
        .execute();

    await test.app.retention.sweep();

    const events = await db.selectFrom('events').select(['id', 'type']).execute();
    expect(events.filter((event) => oldEvents.some((each) => each.id === event.id))).toEqual([]);
    expect(events.map((event) => event.type)).toContain('user.created');
    const listed = await test.call({ url: '/v1/events?limit=500' });
    expect(listed.status).toBe(200);
    expect(listed.json.data.length).toBe(events.length);
    const deliveries = await db.selectFrom('webhook_deliveries').select('id').execute();
    expect(deliveries.map((row) => Number(row.id))).toEqual([Number(recent.id)]);
    const attempts = await db.selectFrom('webhook_attempts').select('delivery_id').execute();
    expect(attempts.map((row) => Number(row.delivery_id))).toEqual([Number(recent.id)]);
  });
});

describe('retention of the numbering of webhook deliveries, ROWI_EVENTS_RETENTION=60', () => {
  let test: TestApp;
  let hooks: Receiver;
  beforeAll(async () => {
    test = await startApp({ ...WEBHOOK_SETTINGS, ROWI_EVENTS_RETENTION: '60' });
    hooks = await new Receiver().start();
  });
  afterAll(async () => {
    await hooks.stop();
    await test.close();
  });

  it('PATCH /v1/users/{id}: a user none of whose deliveries is kept is numbered from 1 again; one with a delivery kept goes on counting', async () => {
    const endpoint = await createEndpoint(test, hooks, ['user.created', 'user.updated']);
    const { user: quiet } = await createUser(test);
    const rename = (id: number, name: string) => test.call({ method: 'PATCH', url: `/v1/users/${id}`, body: { name } });
    expect((await rename(quiet.id, 'Quiet 2')).status).toBe(200);
    await hooks.waitFor(2);
    // The quiet user's deliveries were made two hours ago: past the retention, pruned by the sweep.
    await test.storage.db
      .updateTable('webhook_deliveries')
      .set({ created_at: ago(7200) })
      .where('resource_key', '=', `/v1/users/${quiet.id}`)
      .execute();
    const { user: busy } = await createUser(test);
    await hooks.waitFor(3);

    await test.app.retention.sweep();

    const numbering = await test.storage.db.selectFrom('webhook_sequences').select(['resource_key', 'last']).execute();
    expect(numbering.map((row) => [row.resource_key, Number(row.last)])).toEqual([[`/v1/users/${busy.id}`, 1]]);
    expect((await rename(quiet.id, 'Quiet 3')).status).toBe(200);
    expect((await rename(busy.id, 'Busy 2')).status).toBe(200);
    const later = await hooks.waitFor(5);
    const sequenceOf = (name: string) =>
      (later.find((received) => received.event.data.name === name)!.event as unknown as { sequence: number }).sequence;
    expect([sequenceOf('Quiet 2'), sequenceOf('Quiet 3'), sequenceOf('Busy 2')]).toEqual([2, 1, 2]);
    const listed = await deliveriesOf(test, endpoint.id);
    expect(listed.map((delivery) => [delivery.resource, delivery.sequence])).toEqual([
      [`/v1/users/${busy.id}`, 2],
      [`/v1/users/${quiet.id}`, 1],
      [`/v1/users/${busy.id}`, 1],
    ]);
  });
});

describe('Idempotency-Key records past their lifetime', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(() => test.close());

  it('POST /v1/users: expired keys are pruned in batches and a live key still replays, when the sweep runs', async () => {
    const body = buildUser();
    const first = await test.call({ method: 'POST', url: '/v1/users', headers: { 'idempotency-key': 'live' }, body });
    expect(first.status).toBe(201);
    const expired = Array.from({ length: 1100 }, (_, index) => ({
      scope: 'caller:1',
      key: `expired-${index}`,
      fingerprint: 'x',
      response: '{}',
      created_at: ago(90_000),
      expires_at: ago(3600 - index),
    }));
    for (let start = 0; start < expired.length; start += 200)
      await test.storage.db
        .insertInto('idempotency_keys')
        .values(expired.slice(start, start + 200))
        .execute();

    await test.app.retention.sweep();

    const keys = await test.storage.db.selectFrom('idempotency_keys').select('key').execute();
    expect(keys.map((row) => row.key)).toEqual(['live']);
    const retry = await test.call({ method: 'POST', url: '/v1/users', headers: { 'idempotency-key': 'live' }, body });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
  });
});

/** An import operation as the import runner leaves it, created and (unless `finished` is null) ended at those times. */
function operationRow(name: string, created: string, finished: string | null) {
  return {
    kind: 'import',
    target: 'users',
    status: finished === null ? ('running' as const) : ('failed' as const),
    media_type: 'text/csv',
    mode: 'partial' as const,
    on_conflict: 'error' as const,
    dry_run: 0,
    created_by: 1,
    caller_name: name,
    request_id: name,
    // A live lease held elsewhere: this process's import runner leaves a running one alone.
    holder: finished === null ? 'another-process' : null,
    lease_until: finished === null ? new Date(Date.now() + 3_600_000).toISOString() : null,
    bytes_total: 10,
    summary: finished === null ? null : JSON.stringify({ detail: 'ended', rows_committed: 0, committed: 'none' }),
    version: 1,
    created_at: created,
    updated_at: finished ?? created,
    started_at: created,
    finished_at: finished,
  };
}

describe('retention of finished operations and their row errors, ROWI_IMPORT_RETENTION=3600', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_IMPORT_RETENTION: '3600' });
  });
  afterAll(() => test.close());

  it('GET /v1/operations: operations that ended before the retention are pruned with their errors; those ended since, and unfinished ones however old, are kept', async () => {
    const db = test.storage.db;
    const prunedBefore = sample(await metricsOf(test), 'rowi_retention_pruned_rows_total', { table: 'operations' });
    const ended = Array.from({ length: 520 }, (_, index) =>
      operationRow(`ended-${index}`, ago(9000), ago(7200 + index)),
    );
    for (let start = 0; start < ended.length; start += 100)
      await db
        .insertInto('operations')
        .values(ended.slice(start, start + 100))
        .execute();
    await db
      .insertInto('operations')
      .values([operationRow('recent', ago(9000), ago(600)), operationRow('unfinished', ago(9000), null)])
      .execute();
    const byName = async () =>
      new Map(
        (await db.selectFrom('operations').select(['id', 'caller_name']).execute()).map((row) => [
          row.caller_name,
          Number(row.id),
        ]),
      );
    const ids = await byName();
    await db
      .insertInto('operation_errors')
      .values(
        ['ended-0', 'recent'].map((name) => ({
          operation_id: ids.get(name)!,
          seq: 1,
          row: 2,
          field: 'email',
          problem: 'validation-failed',
          detail: 'is not an email address',
        })),
      )
      .execute();

    await test.app.retention.sweep();

    expect([...(await byName()).keys()].sort()).toEqual(['recent', 'unfinished']);
    const errors = await db.selectFrom('operation_errors').select('operation_id').execute();
    expect(errors.map((row) => Number(row.operation_id))).toEqual([ids.get('recent')]);
    const listed = await test.call({ url: '/v1/operations?limit=100' });
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((operation: { id: number }) => operation.id).sort()).toEqual(
      [ids.get('recent'), ids.get('unfinished')].sort(),
    );
    const exposition = await metricsOf(test);
    expect(sample(exposition, 'rowi_retention_pruned_rows_total', { table: 'operations' }) - prunedBefore).toBe(520);
    // The oldest operation left was created 9,000 s ago (the unfinished one).
    expect(sample(exposition, 'rowi_table_oldest_row_age_seconds', { table: 'operations' })).toBeGreaterThanOrEqual(
      9000,
    );
  });
});

describe('ROWI_AUDIT_READS=false: writes and refusals only', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_AUDIT_READS: 'false', ROWI_AUDIT_FLUSH_INTERVAL: '50' });
  });
  afterAll(() => test.close());

  it('GET /v1/users/{id}: not recorded when answered 200, recorded when refused or missing; writes recorded', async () => {
    const created = await test.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    expect(created.status).toBe(201);
    const read = await test.call({ url: created.headers.location as string });
    const missing = await test.call({ url: '/v1/users/999999' });
    const refused = await test.call({ url: created.headers.location as string, key: null });
    expect([read.status, missing.status, refused.status]).toEqual([200, 404, 401]);
    const ids = (reply: { headers: Record<string, unknown> }) => String(reply.headers['x-request-id']);
    const expected = [created, missing, refused].map(ids);
    const deadline = Date.now() + 3000;
    let stored: string[] = [];
    while (Date.now() < deadline) {
      stored = await storedAuditIds(test);
      if (expected.every((id) => stored.includes(id))) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(stored).toEqual(expect.arrayContaining(expected));
    expect(stored).not.toContain(ids(read));
  });
});
