import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

/** Who is signed in, as GET /v1/callers/me answers (the type generated from the OpenAPI document). */
export type { Identity } from '../../clients/typescript/src/types.js';
import type { Identity } from '../../clients/typescript/src/types.js';

export const IdentityContext = createContext<Identity | undefined>(undefined);

/** The signed-in identity; only views shown after signing in use it. */
export function useIdentity(): Identity {
  const identity = useContext(IdentityContext);
  if (identity === undefined) throw new Error('useIdentity outside a signed-in console');
  return identity;
}

/** Whether the signed-in key holds every one of `scopes`. */
export function useCan(): (...scopes: string[]) => boolean {
  const identity = useIdentity();
  return (...scopes) => scopes.every((scope) => (identity.scopes as readonly string[]).includes(scope));
}
