import Type from 'typebox';
import { setting } from './serving.settings.js';

/** The settings of authentication: the lifetime of rowi's own tokens, and the external issuer whose tokens rowi accepts. */
export const AUTH_SETTINGS = {
  tokenLifetime: setting(
    Type.Integer({
      minimum: 60,
      maximum: 86_400,
      default: 900,
      description: 'seconds an access token from `POST /oauth/token` lasts',
    }),
    'ROWI_TOKEN_LIFETIME',
  ),
  jwtIssuer: setting(
    Type.String({
      default: '',
      pattern: '^$|^https?://\\S+$',
      'x-error': 'must be an http:// or https:// URL',
      description:
        'issuer (`iss`) of external bearer tokens rowi accepts, with `ROWI_JWT_AUDIENCE` and `ROWI_JWT_JWKS_URL` (all three together); unset: none',
    }),
    'ROWI_JWT_ISSUER',
  ),
  jwtAudience: setting(
    Type.String({ default: '', description: 'audience (`aud`) external bearer tokens must name' }),
    'ROWI_JWT_AUDIENCE',
  ),
  jwtJwksUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^https?://\\S+$',
      'x-error': 'must be an http:// or https:// URL',
      description: 'JWKS URL of the external issuer (cached; fetched again on an unknown `kid`)',
    }),
    'ROWI_JWT_JWKS_URL',
  ),
  jwtUserClaim: setting(
    Type.String({
      default: '',
      pattern: '^$|^[A-Za-z_][A-Za-z0-9_.:-]{0,99}$',
      'x-error': 'must be a claim name (letters, digits, _ . : -)',
      description:
        "claim of external bearer tokens that names the rowi user the token acts for (its value a user id, a number or a decimal string; `sub` when the issuer's subjects are rowi user ids): such a token sees only that user's record and orders (docs/access.md); unset: external tokens act for no user",
    }),
    'ROWI_JWT_USER_CLAIM',
  ),
  jwtAlgorithms: setting(
    Type.String({
      default: 'RS256,ES256,PS256,EdDSA',
      pattern:
        '^(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA)(,(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA))*$',
      'x-error': 'must be a comma-separated list of asymmetric JWS algorithms (RS256, PS256, ES256, EdDSA…)',
      description: 'signature algorithms accepted on external bearer tokens (never `none` or HS*)',
    }),
    'ROWI_JWT_ALGORITHMS',
  ),
};
