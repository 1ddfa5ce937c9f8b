import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * Response serializers as Fastify builds them (fast-json-stringify), except for problems.
 * Fastify compiles one serializer per response schema of every route when the app starts, and
 * every operation documents a dozen problem statuses (406, 413, 429, 500, 503…, one schema): those
 * were most of the start-up time (app.ready() took about a second), paid by every process and
 * worker. They are never used, since http/problem.ts writes every problem itself (JSON or XML);
 * so a problem status gets its serializer only if something ever asks for it. Success responses
 * are compiled at start as before, so a broken schema still stops the start.
 */
export function serializerFactory(): SerializerFactory {
  const compilers = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = compilers(externalSchemas, options);
    return (route) => {
      if (Number(route.httpStatus) < 400) return compile(route);
      let serialize: ((document: unknown) => string) | undefined;
      return (document) => (serialize ??= compile(route))(document);
    };
  };
}
