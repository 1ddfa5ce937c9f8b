import type { UpstreamFailureKind } from './upstream-failure.js';

/**
 * The Cache-Status header (RFC 9211) of one weather lookup, with cache name `rowi`. The value is
 * a Structured Fields list (RFC 8941) with one member: a token followed by parameters. Booleans
 * (hit, stored, collapsed) are bare keys, fwd is a token, fwd-status and ttl integers (ttl is
 * negative past freshness, §2.4), and detail an sf-string, so it may say anything printable.
 */
export interface CacheStatusParts {
  /** Answered from the cache without asking the provider (§2.1). */
  hit?: boolean;
  /** Why the provider was asked (§2.2): nothing cached, or only a stale answer. */
  fwd?: 'uri-miss' | 'stale';
  /** The provider's HTTP status, when there was one (§2.3). */
  fwdStatus?: number;
  /** Seconds of freshness left (§2.4). */
  ttl?: number;
  /** The provider's answer was stored (§2.5). */
  stored?: boolean;
  /** This lookup shared another lookup's provider call (§2.6). */
  collapsed?: boolean;
  detail?: string;
}

export function formatCacheStatus(parts: CacheStatusParts): string {
  let value = 'rowi';
  if (parts.hit) value += '; hit';
  if (parts.fwd !== undefined) value += `; fwd=${parts.fwd}`;
  if (parts.fwdStatus !== undefined) value += `; fwd-status=${Math.trunc(parts.fwdStatus)}`;
  if (parts.ttl !== undefined) value += `; ttl=${Math.trunc(parts.ttl)}`;
  if (parts.stored) value += '; stored';
  if (parts.collapsed) value += '; collapsed';
  if (parts.detail !== undefined) value += `; detail=${sfString(parts.detail)}`;
  return value;
}

/** The `detail` of a lookup that did not get a fresh answer, by why. */
export function detailFor(kind: UpstreamFailureKind): string {
  return kind === 'circuit-open' ? 'circuit-open' : `upstream-${kind}`;
}

/** An RFC 8941 §3.3.3 sf-string: printable ASCII, with `"` and `\` escaped. */
function sfString(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`;
}
