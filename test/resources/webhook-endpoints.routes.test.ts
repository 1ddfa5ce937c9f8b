import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressPolicy } from '../../src/outbox/ssrf.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';

let test: TestApp;
beforeAll(async () => {
  // No allow-list: the defaults a deployment starts with.
  test = await startApp();
});
afterAll(() => test.close());

const post = (body: unknown, key?: string) =>
  test.call({ method: 'POST', url: '/v1/webhook-endpoints', body, ...(key ? { key } : {}) });
const count = async () =>
  (
    await test.storage.db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
  ).n;

describe('POST /v1/webhook-endpoints', () => {
  it('POST /v1/webhook-endpoints: 201 with Location, the secret once, events ["*"] and enabled by default', async () => {
    const reply = await post({ url: 'https://hooks.example.com/rowi', description: 'sales' });
    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/webhook-endpoints/${reply.json.id}`);
    expect(reply.json).toMatchObject({
      url: 'https://hooks.example.com/rowi',
      description: 'sales',
      events: ['*'],
      enabled: true,
      disabled_reason: null,
      failed_attempts: 0,
      previous_secret_expires_at: null,
      secret: expect.stringMatching(/^whsec_/),
    });
    const read = await test.call({ url: reply.headers.location as string });
    expect(read.json.secret).toBeUndefined();
    expect(read.headers.etag).toBe('"v1"');
  });

  for (const [name, url, detail] of [
    ['no URL', 'not-a-url', /absolute URL/],
    ['another scheme', 'ftp://hooks.example.com/x', /https/],
    ['http to a public host', 'http://hooks.example.com/x', /must use https/],
    ['credentials', 'https://user:pw@hooks.example.com/x', /credentials/],
    ['a fragment', 'https://hooks.example.com/x#frag', /fragment/],
    ['loopback', 'https://127.0.0.1/x', /127\.0\.0\.1, a loopback address/],
    ['loopback by name', 'https://localhost:8443/x', /loopback host/],
    ['IPv6 loopback', 'https://[::1]/x', /::1, a loopback address/],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/x', /IPv4-mapped form of 127\.0\.0\.1, a loopback address/],
    ['a private network', 'https://10.1.2.3/x', /private/],
    ['another private network', 'https://192.168.1.10/x', /private/],
    ['link-local (the cloud metadata address)', 'https://169.254.169.254/latest/meta-data', /link-local/],
    ['IPv6 unique local', 'https://[fd00::1]/x', /private/],
    ['multicast', 'https://224.0.0.1/x', /multicast/],
    ['the unspecified address', 'https://0.0.0.0/x', /the unspecified address/],
    [
      'IPv4-compatible loopback',
      'https://[::127.0.0.1]/x',
      /IPv4-compatible address .* carrying 127\.0\.0\.1, a loopback/,
    ],
    [
      'IPv4-translated loopback',
      'https://[::ffff:0:127.0.0.1]/x',
      /IPv4-translated address .* carrying 127\.0\.0\.1, a loopback/,
    ],
    ['6to4 of loopback', 'https://[2002:7f00:1::]/x', /6to4 address .* carrying 127\.0\.0\.1, a loopback/],
    ['NAT64 of a private address', 'https://[64:ff9b::10.0.0.1]/x', /NAT64 .* form of 10\.0\.0\.1, a private address/],
  ] as const) {
    it(`POST /v1/webhook-endpoints: 422 webhook-url-refused pointing at #/url for ${name}; nothing stored`, async () => {
      const before = await count();
      const problem = expectProblem(await post({ url }), 422, 'webhook-url-refused');
      expect(problem.errors).toEqual([
        expect.objectContaining({ in: 'body', pointer: '#/url', detail: expect.stringMatching(detail) }),
      ]);
      expect(await count()).toBe(before);
    });
  }

  for (const [name, body, pointer] of [
    ['an unknown event type', { url: 'https://hooks.example.com/x', events: ['user.exploded'] }, '#/events/0'],
    [
      'the ping type (sent by hand only)',
      { url: 'https://hooks.example.com/x', events: ['webhook.ping'] },
      '#/events/0',
    ],
    ['no event type', { url: 'https://hooks.example.com/x', events: [] }, '#/events'],
    ['a type twice', { url: 'https://hooks.example.com/x', events: ['user.created', 'user.created'] }, '#/events'],
    ['* beside other types', { url: 'https://hooks.example.com/x', events: ['*', 'user.created'] }, '#/events'],
    [
      'a description of 501 characters',
      { url: 'https://hooks.example.com/x', description: 'd'.repeat(501) },
      '#/description',
    ],
    [
      'a control character in the description',
      { url: 'https://hooks.example.com/x', description: 'bell\u0007' },
      '#/description',
    ],
    ['a URL of 2049 characters', { url: `https://hooks.example.com/${'a'.repeat(2023)}` }, '#/url'],
    ['enabled as a string', { url: 'https://hooks.example.com/x', enabled: 'yes' }, '#/enabled'],
    ['an unknown field', { url: 'https://hooks.example.com/x', secret: 'whsec_mine' }, '#/secret'],
    ['no url', { events: ['*'] }, '#/url'],
  ] as const) {
    it(`POST /v1/webhook-endpoints: 422 validation-failed pointing at ${pointer} for ${name}; nothing stored`, async () => {
      const before = await count();
      const problem = expectProblem(await post(body), 422, 'validation-failed');
      expect(problem.errors?.map((error) => error.pointer)).toContain(pointer);
      expect(await count()).toBe(before);
    });
  }

  for (const [name, url] of [
    ['CR and LF inside the host (the parser drops them: example.com would be called)', 'https://exa\r\nmple.com/'],
    ['a tab inside the host', 'https://exa\tmple.com/'],
    ['a leading space', ' https://hooks.example.com/'],
    ['a space in the path', 'https://hooks.example.com/a b'],
    ['DEL', 'https://hooks.example.com/\u007F'],
    ['a C1 control (NEL)', 'https://hooks.example.com/\u0085'],
    ['a zero-width space in the host', 'https://hooks.exa\u200Bmple.com/'],
    ['a right-to-left override', 'https://hooks.example.com/\u202Egpj.exe'],
    ['a byte order mark', '\uFEFFhttps://hooks.example.com/'],
    ['a no-break space', 'https://hooks.example.com/\u00A0'],
  ] as const) {
    it(`POST and PATCH /v1/webhook-endpoints: 422 validation-failed pointing at #/url for ${name}; nothing stored or changed`, async () => {
      const before = await count();
      expect(expectProblem(await post({ url }), 422, 'validation-failed').errors).toEqual([
        expect.objectContaining({ pointer: '#/url', detail: expect.stringContaining('control characters') }),
      ]);
      expect(await count()).toBe(before);
      const created = (await post({ url: 'https://hooks.example.com/kept' })).json;
      expectProblem(
        await test.call({ method: 'PATCH', url: `/v1/webhook-endpoints/${created.id}`, body: { url } }),
        422,
        'validation-failed',
      );
      expect((await test.call({ url: `/v1/webhook-endpoints/${created.id}` })).json).toMatchObject({
        url: 'https://hooks.example.com/kept',
        updated_at: created.updated_at,
      });
    });
  }

  for (const [name, description] of [
    ['CR and LF', 'sales\r\nX-Injected: 1'],
    ['a line separator', 'sales\u2028system'],
    ['a right-to-left override', 'sales \u202Emetsys'],
    ['a tab', 'sales\tsystem'],
  ] as const) {
    it(`POST /v1/webhook-endpoints: 422 validation-failed pointing at #/description for ${name} in the description`, async () => {
      expect(
        expectProblem(
          await post({ url: 'https://hooks.example.com/x', description }),
          422,
          'validation-failed',
        ).errors?.map((error) => error.pointer),
      ).toEqual(['#/description']);
    });
  }

  it('POST and PATCH /v1/webhook-endpoints: the URL is stored, listed and called as rowi parses it (lower-case host, punycode, backslashes as slashes, a path of at least /)', async () => {
    for (const [given, stored] of [
      ['https://Hooks.EXAMPLE.com', 'https://hooks.example.com/'],
      ['https://hooks.example.com\\rowi\\in', 'https://hooks.example.com/rowi/in'],
      ['https://hooks.b\u00FCcher.example/x', 'https://hooks.xn--bcher-kva.example/x'],
      ['https://hooks.example.com:443/x?a=1', 'https://hooks.example.com/x?a=1'],
    ] as const) {
      const created = await post({ url: given });
      expect(created.json.url, given).toBe(stored);
      expect(
        (await test.call({ method: 'PATCH', url: `/v1/webhook-endpoints/${created.json.id}`, body: { url: given } }))
          .json.url,
      ).toBe(stored);
      expect(
        (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data.find(
          (endpoint: { id: number }) => endpoint.id === created.json.id,
        ).url,
      ).toBe(stored);
    }
  });

  it('POST /v1/webhook-endpoints: 415 for an XML body (webhook endpoints are JSON only)', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      headers: { 'content-type': 'application/xml' },
      body: '<webhook_endpoint><url>https://hooks.example.com/x</url></webhook_endpoint>',
    });
    expectProblem(reply, 415, 'unsupported-media-type');
  });

  it("POST /v1/webhook-endpoints: 403 for an editor (webhook endpoints are the admin's)", async () => {
    const { key } = await createCallerWithKey(test, { role: 'editor' });
    expectProblem(await post({ url: 'https://hooks.example.com/x' }, key), 403, 'insufficient-scope');
  });
});

describe('PATCH /v1/webhook-endpoints/{id}', () => {
  it('PATCH /v1/webhook-endpoints/{id}: 200 with the changes and a new ETag; 422 for a refused URL, nothing changed; 412 on a stale If-Match', async () => {
    const created = (await post({ url: 'https://hooks.example.com/a', events: ['user.created'] })).json;
    const changed = await test.call({
      method: 'PATCH',
      url: `/v1/webhook-endpoints/${created.id}`,
      body: { url: 'https://hooks.example.com/b', events: ['order.created', 'stock.changed'], enabled: false },
    });
    expect(changed.status).toBe(200);
    expect(changed.json).toMatchObject({
      url: 'https://hooks.example.com/b',
      events: ['order.created', 'stock.changed'],
      enabled: false,
    });
    expect(changed.headers.etag).toBe('"v2"');
    expectProblem(
      await test.call({
        method: 'PATCH',
        url: `/v1/webhook-endpoints/${created.id}`,
        body: { url: 'https://10.0.0.8/hook' },
      }),
      422,
      'webhook-url-refused',
    );
    expectProblem(
      await test.call({
        method: 'PATCH',
        url: `/v1/webhook-endpoints/${created.id}`,
        headers: { 'if-match': '"v1"' },
        body: { description: 'late' },
      }),
      412,
      'precondition-failed',
    );
    expect((await test.call({ url: `/v1/webhook-endpoints/${created.id}` })).json).toMatchObject({
      url: 'https://hooks.example.com/b',
      description: '',
    });
    expect((await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${created.id}` })).status).toBe(204);
    expectProblem(await test.call({ url: `/v1/webhook-endpoints/${created.id}` }), 404, 'not-found');
  });
});

describe('AddressPolicy', () => {
  it('AddressPolicy: an allow-listed host or network may be sent to, over http too; others stay refused', () => {
    const policy = new AddressPolicy('127.0.0.1,10.20.0.0/16,hooks.internal');
    expect(policy.urlRefusal('http://127.0.0.1:8080/x')).toBeUndefined();
    expect(policy.urlRefusal('http://10.20.3.4/x')).toBeUndefined();
    expect(policy.urlRefusal('http://hooks.internal/x')).toBeUndefined();
    expect(policy.refusal('10.20.9.9')).toBeUndefined();
    expect(policy.refusal('10.21.0.1')).toMatch(/private/);
    expect(policy.refusal('::ffff:10.20.1.1')).toBeUndefined();
    expect(policy.refusal('8.8.8.8')).toBeUndefined();
    expect(policy.urlRefusal('http://127.0.0.2/x')).toMatch(/https/);
    expect(policy.urlRefusal('https://127.0.0.2/x')).toMatch(/loopback/);
  });

  it('AddressPolicy.lookup: refuses a name that resolves to a loopback address, at connection time', async () => {
    const policy = new AddressPolicy('');
    const error = await new Promise<NodeJS.ErrnoException | null>((resolve) =>
      policy.lookup('localhost', {}, (failure) => resolve(failure)),
    );
    expect(error?.code).toBe('EADDRNOTALLOWED');
    expect(error?.message).toMatch(/localhost resolves to .* loopback/);
  });
});

describe('the audit trail of webhook endpoints', () => {
  it('POST, PATCH, rotate-secret and DELETE of /v1/webhook-endpoints: each in the audit trail, with its action and record', async () => {
    const audited = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '50' });
    try {
      const created = await audited.call({
        method: 'POST',
        url: '/v1/webhook-endpoints',
        body: { url: 'https://hooks.example.com/audited' },
      });
      const id = created.json.id as number;
      await audited.call({ method: 'PATCH', url: `/v1/webhook-endpoints/${id}`, body: { description: 'audited' } });
      await audited.call({ method: 'POST', url: `/v1/webhook-endpoints/${id}/rotate-secret` });
      await audited.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${id}` });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const trail = (await audited.call({ url: '/v1/audit-events?resource=webhook-endpoints' })).json.data.reverse();
      expect(
        trail.map((event: { method: string; action: string; status: number; record_id: string | null }) => [
          event.method,
          event.action,
          event.status,
          event.record_id,
        ]),
      ).toEqual([
        ['POST', 'create', 201, null],
        ['PATCH', 'update', 200, String(id)],
        ['POST', 'update', 200, String(id)],
        ['DELETE', 'delete', 204, String(id)],
      ]);
      // The secret never reaches the trail.
      expect(JSON.stringify(trail)).not.toContain(created.json.secret);
    } finally {
      await audited.close();
    }
  });
});
