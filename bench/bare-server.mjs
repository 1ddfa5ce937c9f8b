// The same-run baseline: bare Fastify (no logging, no hooks) answering GET /v1/users/:id with a
// constant record shaped like rowi's. It prints its URL on stdout once listening.
import Fastify from 'fastify';

const record = JSON.parse(process.env.BARE_RECORD ?? '{}');
const app = Fastify({ logger: false });
app.get('/v1/users/:id', async () => record);
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening ${address}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
