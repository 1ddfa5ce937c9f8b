import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { prefixOf } from '../auth/api-keys.js';
import { hasCredentials } from '../auth/authenticate.js';
import type { RequestAccess } from '../auth/access.js';
import { AppError } from '../errors.js';
import { isProbe } from '../http/probes.js';
import type { Decision } from './rate-limit-stores.js';
import { metrics } from '../observability/metrics.js';
import type { Budget, FailureSubject, Policy, RateLimiter } from './rate-limiter.js';

/**
 * Per-caller rate limits (docs/limits.md), counted with GCRA (the generic cell rate algorithm, a token
 * bucket kept as one timestamp per key): a caller may spend its whole quota at once, then one
 * request every window/quota. Counted after authentication, so per caller, not per address;
 * requests without credentials are counted per client address. Every counted response says
 * where the caller stands (IETF httpapi rate-limit headers, draft 09):
 *
 *   RateLimit-Policy: "caller";q=600;w=60
 *   RateLimit: "caller";r=599;t=1
 *
 * q is the quota per window w (seconds); r what remains, t the seconds until the quota is whole
 * again. Over it: 429 `rate-limited` with Retry-After. Placing orders also spends from a tighter
 * "orders-create" budget: POST /v1/orders one unit, a batch one per order, an import one per order
 * as it runs (budgetSpender). With ROWI_REDIS_URL the counters live in Redis, shared by every
 * instance (one Lua script per request, so no read-then-write race, timed by Redis's clock);
 * while Redis cannot be reached, each instance counts alone, and says so (log, /health/ready).
 */

declare module 'fastify' {
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
  interface FastifyContextConfig {
    /**
     * The route checks a client's credentials itself, wherever the request carries them (the
     * token endpoint's form fields): every request to it counts as presenting credentials, so a
     * failed one spends from the failed-authentication budget like a bad X-API-Key. `presented`
     * reads them once the body is parsed (the client id and the secret, an API key: what a failure
     * is counted against, and what a success proves); `issued`, the credential a success answers
     * with (an access token), proven valid from its first use.
     */
    authenticatesClient?: {
      presented(request: FastifyRequest): { client?: string; credential?: string };
      issued?(payload: unknown): string | undefined;
    };
    /**
     * A tighter budget the route spends from on top of the caller's own, per caller (POST
     * /v1/orders declares 'orders-create'); requests without credentials spend only their address's.
     */
    rateLimitBudget?: Budget;
  }
}

/** How long a failed authentication is held back once an address has used half its budget. */
const FAILURE_DELAY_MS = 250;
/** The most of a client id a failure is counted by (a guesser may send any text). */
const CLIENT_ID_CHARS = 200;

/**
 * Counts every request but the health probes, after authentication (preParsing: every onRequest
 * hook, the route's credential check included, has run; the body is not read yet, so a caller
 * over its limit costs no parsing). Failed authentications are counted per address and per what
 * the guess named (an API key's prefix, an OAuth client id), by the process group and, with Redis,
 * by every instance (auth-failures.ts): past half a budget each 401 is held back a little; past
 * it, requests from that address or naming that key or client get 429 before their credentials
 * are checked, unless they carry a credential proven valid (it authenticated a request before, or
 * rowi issued it), which is checked as usual: a valid key is served from an address others spend.
 */
export function registerRateLimits(app: FastifyInstance, limiter: RateLimiter): void {
  app.decorate('rateLimiter', limiter);
  app.addHook('onReady', async () => limiter.connected());
  app.addHook('onClose', async () => limiter.close());

  const refuseUnlessProven = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => {
    const guess = guessOf(request);
    const throttled = limiter.throttled(guess.subjects);
    if (throttled === undefined || (guess.credential !== undefined && limiter.isProven(guess.credential)))
      return done();
    done(refusal(throttled.policy, throttled.decision, reply));
  };
  app.addHook('onRequest', (request, reply, done) => {
    if (limiter.failurePolicy() === undefined || request.routeOptions.config.authenticatesClient !== undefined)
      return done();
    if (!hasCredentials(request)) return done();
    refuseUnlessProven(request, reply, done);
  });
  // A route that reads its client's credentials from the body is looked at once the body is parsed.
  app.addHook('preHandler', (request, reply, done) => {
    if (limiter.failurePolicy() === undefined || request.routeOptions.config.authenticatesClient === undefined)
      return done();
    refuseUnlessProven(request, reply, done);
  });

  app.addHook('preParsing', (request, reply, payload, done) => {
    if (isProbe(request)) return done(null, payload);
    const context = request.context;
    const policy = limiter.policyOf(context === null ? null : context.budget);
    const budget = request.routeOptions.config.rateLimitBudget;
    const declared = budget !== undefined && context !== null ? limiter.budgetPolicy(budget) : undefined;
    if (policy === undefined && declared === undefined) return done(null, payload);
    const finish = (decisions: Counted[]) => {
      const single = decisions.length === 1 ? decisions[0]! : undefined;
      reply.header(
        'ratelimit-policy',
        single ? single.policy.header : decisions.map((counted) => counted.policy.header).join(', '),
      );
      reply.header('ratelimit', single ? standing(single) : decisions.map(standing).join(', '));
      const refused = decisions.find(({ decision }) => !decision.allowed);
      if (refused === undefined) return done(null, payload);
      done(refusal(refused.policy, refused.decision, reply));
    };
    // In memory the count is synchronous: no promise per request on the hot path.
    const counted = count(limiter, subjectOf(request), policy, declared);
    if (counted instanceof Promise) counted.then(finish, (error: Error) => done(error));
    else finish(counted);
  });

  // A failed authentication spends from its subjects' failure budgets; past half of one, the
  // answer is held back, so guessing keys gets slower before it is refused. A credential that
  // authenticated a request is proven valid.
  app.addHook('onSend', (request, reply, payload, done) => {
    // Only credentials that were wrong count; a request that sent none is not guessing.
    const policy = limiter.failurePolicy();
    if (policy === undefined || !presentsCredentials(request)) return done(null, payload);
    const guess = guessOf(request);
    if (reply.statusCode !== 401) {
      proveCredentials(limiter, request, reply, payload, guess);
      return done(null, payload);
    }
    // A key that was valid once (revoked or expired since) is no longer let past a refusal here.
    if (guess.credential !== undefined && request.routeOptions.config.authenticatesClient === undefined)
      limiter.disprove(guess.credential);
    const hold = (decision: Decision) => {
      if (decision.remaining >= policy.quota / 2) return done(null, payload);
      setTimeout(() => done(null, payload), FAILURE_DELAY_MS);
    };
    const decision = limiter.recordFailure(guess.subjects);
    if (decision instanceof Promise) decision.then(hold, (error: Error) => done(error));
    else hold(decision);
  });
}

/** Credentials in the headers every route reads, or any request to a route that authenticates clients itself. */
function presentsCredentials(request: FastifyRequest): boolean {
  return hasCredentials(request) || request.routeOptions.config.authenticatesClient !== undefined;
}

/** A credential a request presents, and the subjects a failure of it is counted against. */
interface Guess {
  credential: string | undefined;
  subjects: FailureSubject[];
}

const guesses = new WeakMap<FastifyRequest, Guess>();

/**
 * What the request presents: an API key (X-API-Key, or a token request's client secret), counted
 * against its address and the key's public prefix (and the client id it names); a bearer token,
 * against its address only (a signature is nothing a guess can find a try at a time).
 */
function guessOf(request: FastifyRequest): Guess {
  const known = guesses.get(request);
  if (known !== undefined) return known;
  const subjects: FailureSubject[] = [{ kind: 'address', value: request.ip }];
  let credential: string | undefined;
  const client = request.routeOptions.config.authenticatesClient;
  const key = request.headers['x-api-key'];
  if (client !== undefined) {
    const presented = client.presented(request);
    if (presented.client !== undefined)
      subjects.push({ kind: 'client', value: presented.client.slice(0, CLIENT_ID_CHARS) });
    credential = presented.credential;
  } else if (typeof key === 'string') credential = key.trim();
  else credential = /^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? '')?.[1];
  const prefix = credential === undefined ? undefined : prefixOf(credential);
  if (prefix !== undefined) subjects.push({ kind: 'key', value: prefix });
  const guess = { credential, subjects };
  // Read at most twice a request (before the check and with its answer): the token endpoint's parse is not repeated.
  if (client !== undefined) guesses.set(request, guess);
  return guess;
}

/** A request its credential authenticated proves it (and a token endpoint's success, the token it issued). */
function proveCredentials(
  limiter: RateLimiter,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  guess: Guess,
): void {
  if (guess.credential === undefined) return;
  const client = request.routeOptions.config.authenticatesClient;
  if (client === undefined) {
    if (request.context !== null) limiter.prove(guess.credential);
    return;
  }
  if (reply.statusCode !== 200) return;
  limiter.prove(guess.credential);
  const issued = client.issued?.(payload);
  if (issued !== undefined) limiter.prove(issued);
}

/** Bucket keys of accesses, made once per access (a principal's requests share one while it is fresh: auth/context.ts). */
const subjects = new WeakMap<RequestAccess, string>();

function subjectOf(request: FastifyRequest): string {
  const access = request.context?.access;
  if (access === undefined) return request.ip;
  let subject = subjects.get(access);
  if (subject === undefined) {
    subject = budgetSubjectOf(access);
    subjects.set(access, subject);
  }
  return subject;
}

/** Whose budget: a caller's id, or an external issuer's subject. */
const budgetSubjectOf = (who: { callerId: number | null; name: string }) =>
  who.callerId !== null ? String(who.callerId) : `external:${who.name}`;

/**
 * A declared budget spent by work done outside a request on a caller's behalf (an import's orders,
 * docs/bulk.md "Importing orders"), `step` units at a time: small steps, so that the caller's own
 * requests, which take one unit each, are not starved while the work waits for `step` to fit.
 */
export interface BudgetSpender {
  step: number;
  take(units: number): Promise<{ allowed: boolean; retryMs: number }>;
}

/** The caller's share of `budget`, to spend outside a request; undefined when the budget is unlimited (0). */
export function budgetSpender(
  limiter: RateLimiter,
  budget: Budget,
  who: { callerId: number | null; name: string },
): BudgetSpender | undefined {
  const policy = limiter.budgetPolicy(budget);
  if (policy === undefined) return undefined;
  const key = budgetSubjectOf(who);
  return {
    step: Math.max(1, Math.floor(policy.quota / 10)),
    async take(units) {
      const decision = await limiter.take(key, policy, units);
      return { allowed: decision.allowed, retryMs: decision.retryMs };
    },
  };
}

interface Counted {
  policy: Policy;
  decision: Decision;
}

function count(
  limiter: RateLimiter,
  key: string,
  policy: Policy | undefined,
  declared: Policy | undefined,
): Counted[] | Promise<Counted[]> {
  const first = policy === undefined ? undefined : limiter.take(key, policy);
  if (first instanceof Promise)
    return first.then((decision) => countDeclared(limiter, key, [{ policy: policy!, decision }], declared));
  return countDeclared(limiter, key, first === undefined ? [] : [{ policy: policy!, decision: first }], declared);
}

/** The route's declared budget is spent only when the caller's own allowed the request. */
function countDeclared(
  limiter: RateLimiter,
  key: string,
  counted: Counted[],
  declared: Policy | undefined,
): Counted[] | Promise<Counted[]> {
  if (declared === undefined || counted.some(({ decision }) => !decision.allowed)) return counted;
  const decision = limiter.take(key, declared);
  if (decision instanceof Promise)
    return decision.then((resolved) => [...counted, { policy: declared, decision: resolved }]);
  counted.push({ policy: declared, decision });
  return counted;
}

const standing = ({ policy, decision }: Counted) =>
  `"${policy.name}";r=${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`;

function refusal(policy: Policy, decision: Decision, reply: FastifyReply): AppError {
  metrics.rateLimited.inc({ policy: policy.name });
  const retryAfter = Math.max(1, Math.ceil(decision.retryMs / 1000));
  if (!reply.hasHeader('ratelimit-policy')) {
    reply.header('ratelimit-policy', policy.header);
    reply.header('ratelimit', `"${policy.name}";r=0;t=${Math.ceil(decision.resetMs / 1000)}`);
  }
  return new AppError(
    'rate-limited',
    `${policy.tooMany}: the "${policy.name}" policy allows ${policy.quota} per ${policy.windowSeconds} s. Retry after ${retryAfter} s.`,
    {
      headers: { 'retry-after': String(retryAfter) },
      extensions: { policy: policy.name, quota: policy.quota, window_seconds: policy.windowSeconds },
    },
  );
}

/**
 * A request that does the work of several (a batch: one unit per entry) has spent one unit of the
 * caller's own budget when its body is parsed; once it knows how many it holds, it spends the rest
 * here: `units` more from the caller's own budget, and `budget.units` from a budget its entries
 * spend besides (an orders batch: orders-create, one unit per order it places; none when it places
 * none, as a PATCH or DELETE of an order spends none). Throws the 429 of the first budget that
 * cannot take them (what the caller's own took stays spent, as for a single request the declared
 * budget refuses), or 413 batch-too-large when they could never fit in one window, since no wait
 * would help.
 */
export async function spendMore(
  request: FastifyRequest,
  reply: FastifyReply,
  units: number,
  budget?: { name: Budget; units: number },
): Promise<void> {
  const limiter = request.server.rateLimiter;
  // Each: the policy, the units to take now, and those the request took before (its own first one).
  const context = request.context;
  const spends: [Policy | undefined, number, number][] = [
    [limiter.policyOf(context === null ? null : context.budget), units, 1],
  ];
  if (budget !== undefined && context !== null) spends.push([limiter.budgetPolicy(budget.name), budget.units, 0]);
  const counted: Counted[] = [];
  for (const [policy, more, before] of spends) {
    if (policy === undefined || more <= 0) continue;
    if (more + before > policy.quota) {
      throw new AppError(
        'batch-too-large',
        `The batch needs ${more + before} units of the "${policy.name}" rate limit, which allows ${policy.quota} per ${policy.windowSeconds} s; split it into batches of at most ${policy.quota} entries.`,
        { extensions: { max_entries: policy.quota, policy: policy.name } },
      );
    }
    const decision = await limiter.take(subjectOf(request), policy, more);
    if (!decision.allowed) throw refusal(policy, decision, reply);
    counted.push({ policy, decision });
  }
  if (counted.length === 0) return;
  const items = (header: string) =>
    String(reply.getHeader(header) ?? '')
      .split(', ')
      .filter((item) => item !== '');
  const standings = items('ratelimit');
  const policies = items('ratelimit-policy');
  for (const entry of counted) {
    const at = standings.findIndex((item) => item.startsWith(`"${entry.policy.name}";`));
    if (at === -1) {
      standings.push(standing(entry));
      policies.push(entry.policy.header);
    } else standings[at] = standing(entry);
  }
  reply.header('ratelimit-policy', policies.join(', '));
  reply.header('ratelimit', standings.join(', '));
}
