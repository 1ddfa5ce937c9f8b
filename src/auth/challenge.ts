/** The WWW-Authenticate challenges of a refused bearer token or key (RFC 6750). */
export const BEARER_CHALLENGE = 'Bearer realm="rowi"';

/** RFC 6750 §3: error and error_description say what was wrong, for clients and people. */
export function challenge(
  error: 'invalid_request' | 'invalid_token' | 'insufficient_scope',
  description: string,
  scope?: string,
): string {
  // error_description is limited to printable ASCII without " and \ (RFC 6750 §3); anything else
  // (… in a detail, a non-ASCII external subject) would make Node refuse the whole header.
  const quoted = description
    .normalize('NFKD')
    .replace(/["\\]/g, "'")
    .replace(/[^\x20-\x7e]/g, '?');
  return `${BEARER_CHALLENGE}, error="${error}", error_description="${quoted}"${scope ? `, scope="${scope}"` : ''}`;
}
