import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { toTimestamp } from '../db/clock.js';
import { decimalTextCheck } from './number-text.js';

/**
 * Request validation. One Ajv per kind of input, because they must differ:
 * - bodies are never coerced ("5" is not a number, 5 is not a name) and every violation is
 *   reported, each with a JSON Pointer;
 * - query strings, headers and path parameters arrive as text and are coerced to the declared
 *   types, once the text of each integer or number is found written in decimal digits
 *   (number-text.ts: "007", "1e3", "0x10" and " 5" are refused, where Number() would read them).
 */
function createAjv(options: { coerce: boolean; allErrors: boolean }) {
  const ajv = new Ajv({
    allErrors: options.allErrors,
    coerceTypes: options.coerce,
    useDefaults: options.coerce,
    removeAdditional: false,
    strict: false,
    verbose: true,
  });
  addFormats.default(ajv);
  // Every timestamp a caller sends (bodies and query strings alike) is one rowi can store, read
  // back and serialise: RFC 3339 with an offset, years 0001–9999 in UTC, no leap second. Checked
  // here, before any handler runs, so a refused instant never reaches storage.
  ajv.addFormat('date-time', { type: 'string', validate: (text: string) => toTimestamp(text) !== undefined });
  ajv.addKeyword({ keyword: 'xml' });
  return ajv;
}

const bodyAjv = createAjv({ coerce: false, allErrors: true });
const firstErrorAjv = createAjv({ coerce: false, allErrors: false });
const textAjv = createAjv({ coerce: true, allErrors: false });

/**
 * Bodies of up to this many values (members, items) get every violation reported; larger ones
 * (a million bad order lines in a megabyte) get the first, since reporting each would cost
 * seconds of CPU and megabytes of answer. rowi's largest valid body has a few hundred values.
 */
const EVERY_ERROR_UP_TO_VALUES = 2000;

/**
 * Validators are compiled on a route's first request, not when the app starts: Ajv compiling
 * every schema of every route took a fifth of a second of each start (every process, every
 * worker, every test app). compileAllValidators() compiles whatever is still pending, so a test
 * can make a broken schema fail as it would have failed the start.
 */
const pending = new Set<() => ValidateFunction>();

export const validatorCompiler: FastifySchemaCompiler<unknown> = (route) => {
  let validate: ValidateFunction | undefined;
  const compile = () => {
    pending.delete(compile);
    return (validate ??= compileValidator(route.schema, route.httpPart));
  };
  pending.add(compile);
  const lazy = ((data: unknown) => {
    const compiled = validate ?? compile();
    const valid = compiled(data);
    lazy.errors = compiled.errors;
    return valid;
  }) as ValidateFunction;
  return lazy;
};

/** Compiles every validator not compiled yet; throws what Ajv throws for a broken schema. */
export function compileAllValidators(): number {
  const compilers = [...pending];
  for (const compile of compilers) compile();
  return compilers.length;
}

function compileValidator(schema: unknown, httpPart: string | undefined): ValidateFunction {
  if (httpPart === 'body') return bodyValidator(schema as object);
  const validate = textAjv.compile(schema as object);
  const checkText = decimalTextCheck(schema as object);
  if (checkText === undefined) return validate;
  const checked = ((data: Record<string, unknown>) => {
    const refused = checkText(data);
    if (refused !== undefined) {
      checked.errors = [refused];
      return false;
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return checked;
}

/**
 * A body is checked for its first violation; only when it has one, and is of ordinary size, is it
 * checked again for all of them (a valid body, the common case, is validated once).
 */
function bodyValidator(schema: object): ValidateFunction {
  const first = firstErrorAjv.compile(schema);
  let every: ValidateFunction | undefined;
  const validate = ((data: unknown) => {
    if (first(data)) {
      validate.errors = null;
      return true;
    }
    if (valuesWithin(data, EVERY_ERROR_UP_TO_VALUES)) {
      every ??= bodyAjv.compile(schema);
      every(data);
      validate.errors = every.errors;
    } else {
      validate.errors = first.errors;
    }
    return false;
  }) as ValidateFunction;
  return validate;
}

/** Whether a parsed body holds at most `limit` values, counted without walking past the limit. */
function valuesWithin(data: unknown, limit: number): boolean {
  let count = 0;
  const pending: unknown[] = [data];
  while (pending.length > 0) {
    const value = pending.pop();
    if (++count > limit) return false;
    if (Array.isArray(value)) {
      if (count + value.length > limit) return false;
      pending.push(...value);
    } else if (typeof value === 'object' && value !== null) {
      const members = Object.values(value);
      if (count + members.length > limit) return false;
      pending.push(...members);
    }
  }
  return true;
}

/**
 * Checks one record of an uploaded file (an import's row) against a body schema, as a body is
 * checked: never coerced, every violation reported. Returns the Ajv errors; none when it is valid.
 */
export function recordValidator(schema: object): (value: unknown) => ErrorObject[] {
  const validate = bodyAjv.compile(schema);
  return (value) => (validate(value) ? [] : (validate.errors ?? []));
}
