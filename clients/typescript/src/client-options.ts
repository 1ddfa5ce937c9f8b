/** How a client reaches rowi: where it is, the credential, and what goes with every request (createRowiClient, importFile). */
export interface RowiClientOptions {
  /** Where rowi is, e.g. `http://127.0.0.1:8080` (the paths begin with /v1). */
  baseUrl: string;
  /** An API key (`rowi_…`), sent as X-API-Key. Give this or `token`. */
  apiKey?: string;
  /** An access token (from POST /oauth/token, or your identity provider's), sent as a bearer token. */
  token?: string;
  /** Headers for every request, e.g. a `traceparent`. */
  headers?: Record<string, string>;
  /** A fetch of your own (tests, proxies); the global fetch otherwise. */
  fetch?: typeof globalThis.fetch;
}
