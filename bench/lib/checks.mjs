// What the run checks before it loads anything: servers compared answer the same request alike,
// so that the difference measured is what one of them does more, not another answer.
import { HIGH_LIMITS } from './rowi-env.mjs';

/** The baseline returns, byte for byte, the record rowi answers with its credentials. */
export async function sameAnswer(rowi, bareUrl, path) {
  const [rowiReply, bareReply] = await Promise.all([
    fetch(`${rowi.url}${path}`, { headers: { accept: 'application/json', ...(await rowi.credentials()) } }),
    fetch(`${bareUrl}${path}`),
  ]);
  if (rowiReply.status !== 200) throw new Error(`rowi answered ${rowiReply.status} to GET ${path}`);
  const [rowiBody, bareBody] = [await rowiReply.text(), await bareReply.text()];
  if (rowiBody !== bareBody) throw new Error(`the baseline does not return rowi's record:\n${rowiBody}\n${bareBody}`);
}

/**
 * Servers compared (each with its credentials, or without authentication) answer the probe alike:
 * same status, body, ETag and Content-Type, so the loads differ only in what the servers do.
 */
export async function sameRecord(variants, path) {
  const answers = [];
  for (const { label, url, headers } of variants) {
    const reply = await fetch(`${url}${path}`, { headers: { accept: 'application/json', ...headers } });
    answers.push({
      label,
      answer: JSON.stringify([
        reply.status,
        reply.headers.get('etag'),
        reply.headers.get('content-type'),
        await reply.text(),
      ]),
    });
  }
  const differing = answers.filter(({ answer }) => answer !== answers[0].answer);
  if (answers[0].answer.startsWith('[200,') && differing.length === 0) return;
  throw new Error(
    `GET ${path} is not answered alike:\n${answers.map(({ label, answer }) => `${label}: ${answer}`).join('\n')}`,
  );
}

/** An order cannot be placed twice alike, so the baseline's answer is compared with rowi's sample order. */
export async function sameOrderAnswer(bareUrl, sampleOrder, body) {
  const reply = await fetch(`${bareUrl}/v1/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await reply.text();
  if (reply.status !== 201 || text !== JSON.stringify(sampleOrder)) {
    throw new Error(
      `the baseline does not answer POST /v1/orders as rowi does:\n${reply.status} ${text}\n201 ${JSON.stringify(sampleOrder)}`,
    );
  }
}

/** Status, content type, whether there is an ETag, and the body of a GET with the server's credentials. */
export async function answerOf(server, path) {
  const reply = await fetch(`${server.url}${path}`, {
    headers: { accept: 'application/json', ...(await server.credentials()) },
  });
  return {
    status: reply.status,
    contentType: reply.headers.get('content-type'),
    etag: reply.headers.get('etag') !== null,
    body: await reply.json(),
  };
}

/** The shape of a JSON value: its members and their types, not its values. */
function shapeOf(value) {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shapeOf(value[0])];
  if (value === null) return 'null';
  if (typeof value === 'object')
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, shapeOf(value[key])]),
    );
  return typeof value;
}

/** Two servers answer alike but for the values: same status, content type, ETag or none, and body shape. */
export function sameShape(what, answers) {
  const summary = ({ status, contentType, etag, body }) => JSON.stringify([status, contentType, etag, shapeOf(body)]);
  if (answers.every((answer) => summary(answer) === summary(answers[0]))) return;
  throw new Error(
    `${what} is not answered alike (status, content type, ETag, shape):\n${answers.map((answer) => `${answer.label}: ${summary(answer)}`).join('\n')}`,
  );
}

/**
 * Whether a rowi counts the probe's requests where it should: `counted` is what /v1/limits says
 * ("instance", "redis"), and the probe's answer carries RateLimit-Policy and RateLimit; null: its
 * limits are off, /v1/limits says so and the answer carries neither header.
 */
export async function countsRequests(server, path, counted) {
  const headers = { accept: 'application/json', ...(await server.credentials()) };
  const limitsReply = await fetch(`${server.url}/v1/limits`, { headers });
  if (limitsReply.status !== 200)
    throw new Error(`${server.name}: GET /v1/limits answered ${limitsReply.status}: ${await limitsReply.text()}`);
  const limits = await limitsReply.json();
  const reply = await fetch(`${server.url}${path}`, { headers });
  await reply.arrayBuffer();
  const found = { policy: reply.headers.get('ratelimit-policy'), state: reply.headers.get('ratelimit') };
  const problem =
    counted === null
      ? (limits.rate_limit !== null || found.policy !== null || found.state !== null) && 'should count nothing'
      : (limits.counted !== counted ||
          limits.rate_limit?.quota !== Number(HIGH_LIMITS.ROWI_RATE_LIMIT_ADMIN) ||
          found.policy === null ||
          found.state === null) &&
        `should count in "${counted}" with the bench's limits`;
  if (reply.status !== 200 || problem) {
    throw new Error(
      `${server.name} ${problem || `answered ${reply.status}`}: GET /v1/limits says ${JSON.stringify({ rate_limit: limits.rate_limit, counted: limits.counted })}; GET ${path} answered ${reply.status} with RateLimit-Policy ${found.policy} and RateLimit ${found.state}`,
    );
  }
}

// The stock ledger after the orders loads: for every item, its movements sum to its stock
// (quantity and reserved), and its reservations to the units of its placed orders' lines.
const LEDGER = {
  items: 'select count(*) as n from stock',
  orders: 'select count(*) as n from orders',
  differing: `
    select s.item_id, s.quantity, s.reserved,
      (select coalesce(sum(m.quantity_change), 0) from stock_movements m where m.item_id = s.item_id) as moved_quantity,
      (select coalesce(sum(m.reserved_change), 0) from stock_movements m where m.item_id = s.item_id) as moved_reserved,
      (select coalesce(sum(l.quantity), 0) from order_lines l join orders o on o.id = l.order_id where l.item_id = s.item_id and o.status = 'placed') as placed_units
    from stock s`,
};

function ledgerOf(items, orders, rows) {
  const differing = rows
    .map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, Number(value)])))
    .filter(
      (row) =>
        row.moved_quantity !== row.quantity || row.moved_reserved !== row.reserved || row.placed_units !== row.reserved,
    )
    .map(
      (row) =>
        `item ${row.item_id}: stock ${row.quantity}/${row.reserved}, movements ${row.moved_quantity}/${row.moved_reserved}, placed lines ${row.placed_units}`,
    );
  return { items: Number(items), orders: Number(orders), differing };
}

/** The ledger of a SQLite file (read while its server runs: WAL lets a reader see the last commit). */
export async function ledgerOfSqlite(file) {
  const { openSqliteConnection } = await import('../../dist/src/db/sqlite-connection.js');
  const connection = await openSqliteConnection(file, { synchronous: 'full', busyTimeoutMs: 5000, readOnly: true });
  try {
    const one = (text) => connection.prepare(text).all([])[0].n;
    return ledgerOf(one(LEDGER.items), one(LEDGER.orders), connection.prepare(LEDGER.differing).all([]));
  } finally {
    connection.close();
  }
}

/** The ledger of the bench's PostgreSQL schema (the URL names it in its search_path). */
export async function ledgerOfPostgres(url) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, statement_timeout: 60_000 });
  await client.connect();
  try {
    const one = async (text) => (await client.query(text)).rows[0].n;
    return ledgerOf(await one(LEDGER.items), await one(LEDGER.orders), (await client.query(LEDGER.differing)).rows);
  } finally {
    await client.end();
  }
}
