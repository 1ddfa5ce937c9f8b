import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { NotFoundError } from '../../errors.js';
import { problemTypeOf } from '../../problem-types.js';
import { OPENAPI_PATH } from '../../http/openapi.js';
import { PROBLEM_TYPE_BASE } from '../../http/problem.js';
import { sendEmpty } from '../../http/records.js';
import { noContent, operation, representation, closedObject } from '../../http/schemas.js';

const IndexSchema = Type.Object(
  {
    name: Type.String(),
    version: Type.String(),
    links: Type.Object(
      {
        self: Type.String(),
        openapi: Type.String({ description: 'the OpenAPI 3.1 document' }),
        users: Type.String(),
        items: Type.String(),
        orders: Type.String(),
        weather: Type.String({ description: 'places and their weather' }),
        limits: Type.String({ description: 'the limits that apply to the caller' }),
      },
      { additionalProperties: false },
    ),
  },
  closedObject('index', 'Index'),
);

const ProblemTypeSchema = Type.Object(
  {
    type: Type.String({ format: 'uri-reference' }),
    status: Type.Integer(),
    title: Type.String(),
    description: Type.String(),
  },
  closedObject('problem_type', 'ProblemType'),
);

/** The service's own resources: the index of collections, the root redirect, problem types. */
const rootRoutes: FastifyPluginAsyncTypebox<{ version: string }> = async (app, { version }) => {
  app.get(
    '/',
    {
      schema: operation({
        operationId: 'root',
        permission: 'public',
        summary: 'Redirects to the API index',
        description: 'A permanent redirect (308) to /v1, the index of the collections.',
        tags: ['service'],
        response: { 308: noContent('Permanent redirect to /v1', { Location: Type.String() }) },
      }),
    },
    async (_request, reply) => sendEmpty(reply.header('location', '/v1'), 308),
  );

  app.get(
    '/v1',
    {
      schema: operation({
        operationId: 'getIndex',
        permission: 'public',
        summary: 'Index of the collections',
        description:
          'The service\'s name and version, and a link to every collection and to this OpenAPI document (also in the Link header, rel="service-desc"). Public.',
        tags: ['service'],
        response: { 200: representation(IndexSchema, 'Links to every collection') },
      }),
    },
    async (_request, reply) => {
      // RFC 8631: the service description, discoverable from the index.
      reply.header('link', `<${OPENAPI_PATH}>; rel="service-desc"; type="application/openapi+json"`);
      return {
        name: 'rowi',
        version,
        links: {
          self: '/v1',
          openapi: OPENAPI_PATH,
          users: '/v1/users',
          items: '/v1/items',
          orders: '/v1/orders',
          weather: '/v1/weather',
          limits: '/v1/limits',
        },
      };
    },
  );

  app.get(
    `${PROBLEM_TYPE_BASE}:type`,
    {
      schema: operation({
        operationId: 'getProblemType',
        permission: 'public',
        summary: 'Documentation of a problem type (the `type` of a problem resolves here)',
        description:
          "The status, title and meaning of one problem type (RFC 9457): every problem's `type` is a URL here. 404 for a type rowi does not have. Public.",
        tags: ['service'],
        params: Type.Object({ type: Type.String({ maxLength: 64 }) }),
        response: { 200: representation(ProblemTypeSchema, 'What the problem type means') },
      }),
    },
    async (request) => {
      const name = request.params.type;
      const problemType = problemTypeOf(name);
      if (problemType === undefined) throw new NotFoundError(`There is no problem type ${name}.`);
      return { type: `${PROBLEM_TYPE_BASE}${name}`, ...problemType };
    },
  );
};

export default rootRoutes;
