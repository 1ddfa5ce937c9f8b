import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../errors.js';

export const CONSOLE_PATH = '/console';

/** What the build wrote (scripts/build-console.mjs): the hashed names of the page's files. */
interface Manifest {
  script: string;
  style: string;
  icon: string;
}

/** The media type of each kind of file the build writes into the console's assets. */
const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  map: 'application/json; charset=utf-8',
};

/**
 * The console runs on rowi's own files and talks to rowi alone: no inline script or style, no
 * eval, no frame, no form posted anywhere, no base to rewrite its links.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/**
 * The compressed forms the build wrote beside each file, by preference: the one sent is the first
 * that Accept-Encoding takes (a coding with q=0 is refused; `*` takes any).
 */
const CODINGS = ['br', 'gzip'] as const;
type Coding = (typeof CODINGS)[number];

export function codingFor(acceptEncoding: string | undefined): Coding | undefined {
  if (!acceptEncoding) return undefined;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.toLowerCase().split(',')) {
    const [name = '', ...parameters] = part.split(';').map((piece) => piece.trim());
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    weights.set(name, q === undefined ? 1 : Number(q.slice(2)) || 0);
  }
  return CODINGS.find((coding) => (weights.get(coding) ?? weights.get('*') ?? 0) > 0);
}

/** A hashed file never changes: a year, and the browser need not ask again. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * Where the build put the console: beside the bundled server (dist/rowi/ → dist/console/), or,
 * running from the sources (src/http/ → dist/console/), in the checkout's dist/.
 */
function consoleFolder(): string | undefined {
  const candidates = [
    join(import.meta.dirname, '..', 'console'),
    join(import.meta.dirname, '..', '..', 'dist', 'console'),
  ];
  return candidates.find((folder) => existsSync(join(folder, 'manifest.json')));
}

const page = (manifest: Manifest) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>rowi console</title>
<link rel="icon" type="image/svg+xml" href="${CONSOLE_PATH}/assets/${manifest.icon}">
<link rel="stylesheet" href="${CONSOLE_PATH}/assets/${manifest.style}">
<script type="module" src="${CONSOLE_PATH}/assets/${manifest.script}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The rowi console needs JavaScript.</noscript>
</body>
</html>
`;

/**
 * The console at /console: a page of the browser app built from console/ (Preact), a client of
 * the public /v1 API and nothing else, signed in with an API key held in the tab's memory. The
 * files are read when the console is first opened, never before: a rowi whose console nobody
 * opens holds none of it. Public, like the docs page: the page holds no data, the API decides
 * what a key may see.
 */
export function registerConsolePage(app: FastifyInstance): void {
  const common = { hide: true, 'x-permission': 'public', 'x-json-fixed-by': 'the page' } as const;
  let loaded: Promise<{ html: string; folder: string }> | undefined;
  const load = () => {
    loaded ??= (async () => {
      const folder = consoleFolder();
      if (folder === undefined) {
        loaded = undefined;
        throw new NotFoundError('The console is not built here: `npm run build` builds it into dist/console/.');
      }
      const manifest = JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8')) as Manifest;
      return { html: page(manifest), folder };
    })();
    return loaded;
  };
  const files = new Map<string, Promise<Buffer | undefined>>();
  const read = (folder: string, name: string) => {
    let file = files.get(name);
    if (file === undefined) {
      file = readFile(join(folder, 'assets', name)).catch(() => undefined);
      files.set(name, file);
    }
    return file;
  };

  app.get(CONSOLE_PATH, { schema: common }, async (_request, reply) => {
    const { html } = await load();
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', CONSOLE_CSP)
      .header('cache-control', 'no-cache')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .send(html);
  });
  app.get<{ Params: { asset: string } }>(
    `${CONSOLE_PATH}/assets/:asset`,
    { schema: common },
    async (request, reply) => {
      const { asset } = request.params;
      const type = TYPES[asset.slice(asset.lastIndexOf('.') + 1)];
      // Only a name the build writes: letters, digits and dashes, a dot, an extension.
      if (type === undefined || !/^[A-Za-z0-9-]+\.(js|css|svg|js\.map|css\.map)$/.test(asset))
        throw new NotFoundError(`Nothing is found at ${CONSOLE_PATH}/assets/${asset}.`);
      const { folder } = await load();
      const body = await read(folder, asset);
      if (body === undefined) {
        files.delete(asset);
        throw new NotFoundError(`Nothing is found at ${CONSOLE_PATH}/assets/${asset}.`);
      }
      reply
        .type(type)
        .header('cache-control', IMMUTABLE)
        .header('x-content-type-options', 'nosniff')
        .header('vary', 'accept-encoding');
      const coding = asset.endsWith('.map') ? undefined : codingFor(request.headers['accept-encoding']);
      const compressed =
        coding === undefined ? undefined : await read(folder, `${asset}.${coding === 'br' ? 'br' : 'gz'}`);
      if (coding !== undefined && compressed !== undefined)
        return reply.header('content-encoding', coding).send(compressed);
      return reply.send(body);
    },
  );
}
