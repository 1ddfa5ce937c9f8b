import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { Operation } from './requests.js';
import type { Schema } from './arbitraries.js';

/**
 * What every answer must be, by the OpenAPI document: a status the operation lists, never a 5xx,
 * in a media type it lists for that status, with a body its schema accepts (JSON validated, XML
 * at least XML), and in good time.
 */
export const MAX_ANSWER_MS = 2000;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  ms: number;
}

export class ResponseChecker {
  readonly #ajv = new Ajv({ strict: false, allErrors: false });
  readonly #validators = new Map<string, ValidateFunction>();
  readonly #components: Record<string, Schema>;

  constructor(components: Record<string, Schema>) {
    addFormats.default(this.#ajv);
    this.#components = components;
  }

  /**
   * Why the answer breaks the document, or undefined when it does not. An answer to `fields` (only
   * some fields of each record, docs/reading.md) is checked as every other one: the document says
   * what it may leave out.
   */
  problemWith(operation: Operation, answer: Answer): string | undefined {
    if (answer.ms > MAX_ANSWER_MS) return `took ${Math.round(answer.ms)} ms (at most ${MAX_ANSWER_MS})`;
    if (answer.status >= 500) return `answered ${answer.status}`;
    const documented = operation.responses[String(answer.status)];
    if (documented === undefined)
      return `answered ${answer.status}, which the document does not list (${Object.keys(operation.responses).join(', ')})`;
    if (operation.method === 'HEAD' || answer.status === 304)
      return answer.body === '' ? undefined : 'a body on HEAD or 304';
    const mediaType = String(answer.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim();
    if (documented.content === undefined)
      return answer.body === '' ? undefined : `a body (${mediaType}) where the document says none`;
    const content = documented.content[mediaType];
    if (content === undefined)
      return `media type ${mediaType || '(none)'}, which the document does not list for ${answer.status} (${Object.keys(documented.content).join(', ')})`;
    if (mediaType.endsWith('xml')) return answer.body.startsWith('<?xml') ? undefined : 'an XML answer that is not XML';
    // An event stream: the fuzzer reads its status and headers and cuts it (the stream tests read its events).
    if (mediaType === 'text/event-stream') return undefined;
    // An export in CSV: text (its columns are tested in test/resources/exports.test.ts).
    if (mediaType === 'text/csv') return undefined;
    // NDJSON (an export, the refused rows of an import): each line a JSON value its schema accepts (a record, or any JSON for a string schema).
    if (mediaType === 'application/x-ndjson') return this.#ndjsonProblem(operation, answer, content.schema);
    // Text (the metrics exposition): a string, bounded as its schema says.
    if (mediaType === 'text/plain')
      return typeof content.schema.maxLength === 'number' && answer.body.length > content.schema.maxLength
        ? 'a text longer than its schema allows'
        : undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.body);
    } catch {
      return `a ${mediaType} body that is not JSON`;
    }
    const validate = this.#validator(
      `${operation.method} ${operation.path} ${answer.status} ${mediaType}`,
      content.schema,
    );
    if (!validate(parsed)) return `a body the schema refuses: ${this.#ajv.errorsText(validate.errors)}`;
    if (mediaType.startsWith('application/problem') && (parsed as { status?: unknown }).status !== answer.status)
      return "a problem whose status is not the answer's";
    return undefined;
  }

  #ndjsonProblem(operation: Operation, answer: Answer, schema: Schema): string | undefined {
    if (answer.body !== '' && !answer.body.endsWith('\n')) return 'NDJSON whose last line has no line feed';
    const validate =
      schema.type === 'string' ? undefined : this.#validator(`${operation.method} ${operation.path} ndjson`, schema);
    for (const [index, line] of answer.body.split('\n').slice(0, -1).entries()) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return `NDJSON whose line ${index + 1} is not JSON`;
      }
      if (validate && !validate(parsed))
        return `NDJSON whose line ${index + 1} the schema refuses: ${this.#ajv.errorsText(validate.errors)}`;
    }
    return undefined;
  }

  #validator(key: string, schema: Schema): ValidateFunction {
    let validate = this.#validators.get(key);
    if (!validate) {
      validate = this.#ajv.compile(this.#resolved(schema) as object);
      this.#validators.set(key, validate);
    }
    return validate;
  }

  /** The schema with references to components replaced by the components (without their $id). */
  #resolved(schema: unknown): unknown {
    if (Array.isArray(schema)) return schema.map((item) => this.#resolved(item));
    if (typeof schema !== 'object' || schema === null) return schema;
    const ref = (schema as { $ref?: string }).$ref;
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/'))
      return this.#resolved(this.#components[ref.slice('#/components/schemas/'.length)]);
    return Object.fromEntries(
      Object.entries(schema)
        .filter(([key]) => key !== '$id')
        .map(([key, value]) => [key, this.#resolved(value)]),
    );
  }
}
