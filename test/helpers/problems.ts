import type { Reply } from './app.js';

/** Asserts an RFC 9457 problem of the given status and type, in JSON. */
export function expectProblem(reply: Reply, status: number, type: string) {
  const problem = reply.json as Record<string, unknown>;
  const failures: string[] = [];
  if (reply.status !== status) failures.push(`status ${reply.status} ≠ ${status}`);
  if (reply.mediaType !== 'application/problem+json') failures.push(`media type ${reply.mediaType}`);
  if (problem?.type !== `/problems/${type}`) failures.push(`type ${String(problem?.type)} ≠ /problems/${type}`);
  if (problem?.status !== status) failures.push(`problem status ${String(problem?.status)}`);
  for (const member of ['title', 'detail', 'instance', 'request_id']) {
    if (typeof problem?.[member] !== 'string' || problem[member] === '') failures.push(`missing ${member}`);
  }
  if (problem?.request_id !== reply.headers['x-request-id']) failures.push('request_id ≠ X-Request-Id');
  if (failures.length > 0) throw new Error(`not the expected problem (${failures.join('; ')}): ${reply.text}`);
  return problem as {
    type: string;
    title: string;
    status: number;
    detail: string;
    instance: string;
    request_id: string;
    errors?: { in: string; pointer: string; detail: string }[];
  } & Record<string, unknown>;
}
