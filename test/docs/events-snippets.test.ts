import { execFileSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';

/** The verification snippets of docs/events.md, run as written against a delivery signed by the standardwebhooks package. */
const DOC = readFileSync(resolve(import.meta.dirname, '../../docs/events.md'), 'utf8');
const NODE = /```js\nimport \{ createHmac, timingSafeEqual \} from 'node:crypto';\n([\s\S]*?)```/.exec(DOC)![1]!;
const PYTHON = /```python\n([\s\S]*?)```/.exec(DOC)![1]!;

const secret = `whsec_${Buffer.from('a secret of thirty-two bytes....').toString('base64')}`;
const body = JSON.stringify({ id: 'evt_01a2140b3c5e000000c0ffee0123', type: 'order.created', data: { id: 7 } });
const id = 'evt_01a2140b3c5e000000c0ffee0123';
const now = new Date();
const headers = {
  'webhook-id': id,
  'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
  'webhook-signature': new Webhook(secret).sign(id, now, body),
};

function nodeVerify(withSecret: string, withHeaders: Record<string, string>, withBody: string): unknown {
  return new Function('createHmac', 'timingSafeEqual', 'args', `${NODE}\nreturn verify(...args);`)(
    createHmac,
    timingSafeEqual,
    [withSecret, withHeaders, withBody],
  );
}

function pythonVerify(withSecret: string, withHeaders: Record<string, string>, withBody: string): string {
  const program = `${PYTHON}\nimport sys\nprint(verify(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].encode())["data"]["id"])`;
  return execFileSync('python3', ['-c', program, withSecret, JSON.stringify(withHeaders), withBody], {
    encoding: 'utf8',
  }).trim();
}

describe('docs/events.md: verifying a signature', () => {
  it('the Node.js snippet: accepts a delivery signed by the standardwebhooks package, refuses a changed body and another secret', () => {
    expect(nodeVerify(secret, headers, body)).toMatchObject({ type: 'order.created' });
    expect(() => nodeVerify(secret, headers, body.replace('7', '8'))).toThrow('bad signature');
    expect(() =>
      nodeVerify(`whsec_${Buffer.from('another secret of 32 bytes......').toString('base64')}`, headers, body),
    ).toThrow('bad signature');
    expect(() =>
      nodeVerify(secret, { ...headers, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000) - 600) }, body),
    ).toThrow('too old');
  });

  it('the Python snippet: accepts a delivery signed by the standardwebhooks package, refuses a changed body', () => {
    expect(pythonVerify(secret, headers, body)).toBe('7');
    expect(() => pythonVerify(secret, headers, body.replace('7', '8'))).toThrow(/bad signature/);
  });
});
