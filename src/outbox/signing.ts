import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhook signatures as the Standard Webhooks specification defines them: the secret is
 * `whsec_` and base64 of random bytes; what is signed is `<webhook-id>.<webhook-timestamp>.<body>`
 * with HMAC-SHA256 under the decoded secret; the `webhook-signature` header holds `v1,<base64>`,
 * one per secret that signs, separated by spaces (two during a rotation's overlap).
 */
const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

export function newSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The three headers of a delivery, signed with each of `secrets`. */
export function webhookHeaders(
  secrets: readonly string[],
  id: string,
  timestamp: number,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => signature(secret, id, timestamp, body)).join(' '),
  };
}
