// The same-run baseline: bare Fastify (no logging, no hooks, no validation, no database)
// answering each measured operation with a constant body shaped like rowi's, so the difference
// to rowi is what rowi adds on top of HTTP and JSON. It prints its URL on stdout once listening.
import Fastify from 'fastify';

const constant = (name) => JSON.parse(process.env[name] ?? '{}');
const user = constant('BARE_RECORD');
const stock = constant('BARE_STOCK');
const order = constant('BARE_ORDER');

const app = Fastify({ logger: false });
app.get('/v1/users/:id', async () => user);
app.get('/v1/items/:id/stock', async () => stock);
// Fastify has parsed the JSON body before the handler runs; the answer ignores it, as "the cost
// of HTTP+JSON alone" includes reading the request but no work on it.
app.post('/v1/orders', async (_request, reply) => reply.code(201).send(order));
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening ${address}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
