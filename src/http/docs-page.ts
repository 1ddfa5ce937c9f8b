import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../errors.js';
import { OPENAPI_PATH } from './openapi.js';

export const DOCS_PATH = '/docs';

/** Swagger UI's files that the page loads, and their media types; nothing else is served. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rowi API</title>
<link rel="stylesheet" href="${DOCS_PATH}/swagger-ui.css">
<link rel="icon" type="image/png" href="${DOCS_PATH}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_PATH}/swagger-ui-bundle.js"></script>
<script src="${DOCS_PATH}/init.js"></script>
</body>
</html>
`;

/**
 * Starts Swagger UI on the document (a file of its own: the page's CSP allows no inline script).
 * The page shows each HEAD once, as a line of its GET's description, rather than as an operation
 * of its own beside every GET; the document itself keeps both.
 */
const INIT = `const HEAD_NOTE = '\\n\\n**HEAD** on this path answers as GET does (status and headers), without a body.';
fetch(${JSON.stringify(OPENAPI_PATH)}, { headers: { accept: 'application/json' } })
  .then((response) => response.json())
  .then((spec) => {
    for (const methods of Object.values(spec.paths)) {
      if (methods.head === undefined || methods.get === undefined) continue;
      methods.get.description = (methods.get.description ?? '') + HEAD_NOTE;
      delete methods.head;
    }
    window.ui = SwaggerUIBundle({
      spec,
      dom_id: '#swagger-ui',
      deepLinking: true,
      displayRequestDuration: true,
      tryItOutEnabled: true,
      persistAuthorization: false,
      validatorUrl: null,
    });
  });
`;

/** Everything the page needs comes from rowi itself: no CDN, no inline script, no framing. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Where the swagger-ui-dist package keeps its files. */
const assetFolder = () => dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/**
 * The docs page at /docs: Swagger UI (from the swagger-ui-dist package, served by rowi, so it
 * works without internet) rendering the OpenAPI document, with a console that calls rowi with the
 * key or token given to its Authorize button. Public, like the document; HTML whatever Accept says.
 */
export function registerDocsPage(app: FastifyInstance): void {
  const folder = assetFolder();
  const files = new Map<string, Promise<Buffer>>();
  const common = { hide: true, 'x-permission': 'public', 'x-json-fixed-by': 'the page' } as const;
  const maxAge = 'public, max-age=3600';

  app.get(DOCS_PATH, { schema: common }, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', CSP)
      .header('cache-control', 'no-cache')
      .send(PAGE),
  );
  app.get(`${DOCS_PATH}/init.js`, { schema: common }, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', maxAge).send(INIT),
  );
  app.get<{ Params: { asset: string } }>(`${DOCS_PATH}/:asset`, { schema: common }, async (request, reply) => {
    const { asset } = request.params;
    const type = Object.hasOwn(ASSETS, asset) ? ASSETS[asset] : undefined;
    if (type === undefined) throw new NotFoundError(`Nothing is found at ${DOCS_PATH}/${asset}.`);
    let file = files.get(asset);
    if (file === undefined) {
      file = readFile(join(folder, asset));
      files.set(asset, file);
    }
    return reply
      .type(type)
      .header('cache-control', maxAge)
      .send(await file);
  });
}
