/**
 * The direction of imports inside src/ (docs/architecture.md draws it), checked by
 * `npm run lint:imports` in `.ci/run`: a wrong-way import or a cycle fails the run. The rules
 * name folders, never files: a new file follows the rule of the folder it lands in.
 *
 * Layers, from the bottom: the foundation (config/, observability/, errors.ts, problem-types.ts, version.ts), the
 * database (db/), the HTTP engine (http/), authentication (auth/), the audit trail and rate
 * limits (audit-trail/, rate-limits/), the outbox and its readers (outbox/: the feed, webhooks
 * and the bus; on the database only), upstream clients (upstream/), the resource engine (engine/:
 * the collection operations, batches, imports, operations, reading in bulk), the resources
 * (resources/, one folder each), the API put together (api/: what spans resources, such as the
 * records one may embed and the collections files are imported into), the app (app.ts), which
 * wires them together, and the process (process/: the command, the cluster, startup, the threads),
 * which runs the app. A layer imports only the layers below it.
 *
 * The typed client (clients/typescript/src) is checked with this file too: only the rules that
 * name no folder of src/ reach it (no cycle, every import resolvable).
 */
const FOUNDATION = '^src/(config|observability)/|^src/(errors|problem-types|version)\\.ts$';
const PROCESS = '^src/process/|^src/app\\.ts$';

/** A rule forbidding `from` to import any of `to`. */
function below(name, from, to, comment) {
  return { name, comment, severity: 'error', from: { path: from }, to: { path: to } };
}

export default {
  forbidden: [
    {
      name: 'no-cycle',
      comment: 'Modules that import each other, directly or around a circle: one of them belongs lower.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'resolvable',
      comment: 'An import that names no file: a typo, or a file moved without its importers.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    below(
      'foundation-imports-nothing',
      FOUNDATION,
      '^src/(db|http|auth|audit-trail|rate-limits|outbox|upstream|engine|resources|api)/|' + PROCESS,
      'config, observability, errors and version are the bottom layer.',
    ),
    {
      name: 'config-is-the-bottom',
      comment: 'The settings are read before anything else exists: config/ imports nothing else of rowi.',
      severity: 'error',
      from: { path: '^src/config/' },
      to: { path: '^src/', pathNot: '^src/config/' },
    },
    below(
      'db-knows-no-caller',
      '^src/db/',
      '^src/(http|auth|audit-trail|rate-limits|outbox|upstream|engine|resources|api)/|' + PROCESS,
      'The database layer serves every layer above it and knows none of them.',
    ),
    below(
      'http-knows-no-resource',
      '^src/http/',
      '^src/(auth|audit-trail|rate-limits|outbox|upstream|engine|resources|api)/|' + PROCESS,
      'The HTTP engine knows no resource and no detail of authentication.',
    ),
    below(
      'auth-knows-no-resource',
      '^src/auth/',
      '^src/(audit-trail|rate-limits|outbox|upstream|engine|resources|api)/|' + PROCESS,
      'Authentication knows no resource.',
    ),
    below(
      'audit-and-limits-know-no-resource',
      '^src/(audit-trail|rate-limits)/',
      '^src/(outbox|upstream|engine|resources|api)/|' + PROCESS,
      'The audit trail and the rate limits serve every route and know none.',
    ),
    below(
      'outbox-knows-no-resource',
      '^src/outbox/',
      '^src/(http|auth|audit-trail|rate-limits|upstream|engine|resources|api)/|' + PROCESS,
      'The outbox, the feed, webhook delivery and the bus serve the resources and know none; they stand on the database and the foundation.',
    ),
    below(
      'upstream-knows-no-resource',
      '^src/upstream/',
      '^src/(db|http|auth|audit-trail|rate-limits|outbox|engine|resources|api)/|' + PROCESS,
      'Upstream clients speak to other services and know nothing of rowi above the foundation.',
    ),
    below(
      'engine-knows-no-resource',
      '^src/engine/',
      '^src/(upstream|resources|api)/|' + PROCESS,
      'The engine does for every resource what is the same; a resource declares what differs, and the engine names none.',
    ),
    below(
      'resources-below-the-api',
      '^src/resources/',
      '^src/api/|' + PROCESS,
      'Resources are put together by the API and wired by the process, not the other way.',
    ),
    below('api-below-the-process', '^src/api/', PROCESS, 'The API is wired by the process, not the other way.'),
    below(
      'console-is-a-client',
      '^console/',
      '^src/',
      'The console (console/) is a client of the public API over HTTP, like any script: it imports no module of the server.',
    ),
    below(
      'app-below-the-process',
      '^src/app\\.ts$',
      '^src/process/',
      'The process builds the app and runs it; what the app runs on a thread of the process is passed in (AppThreads).',
    ),
    {
      name: 'resources-are-folders',
      comment:
        'src/resources/ holds one folder a resource; what several share is the engine (src/engine/) or the API (src/api/).',
      severity: 'error',
      from: {},
      to: { path: '^src/resources/[^/]+\\.ts$' },
    },
    {
      name: 'resources-one-way',
      comment:
        'A resource imports another only down this order: users -> orders -> items (a user with orders cannot be deleted; an order moves stock). Anything shared by several belongs to the engine (src/engine/) or to the API (src/api/).',
      severity: 'error',
      from: { path: '^src/resources/([^/]+)/' },
      to: { path: '^src/resources/([^/]+)/', pathNot: ['^src/resources/$1/', '^src/resources/(orders|items)/'] },
    },
    {
      name: 'orders-know-no-user-module',
      comment: 'Orders sit below users: users -> orders -> items.',
      severity: 'error',
      from: { path: '^src/resources/(orders|items)/' },
      to: { path: '^src/resources/users/' },
    },
    {
      name: 'items-know-no-orders',
      comment: 'Items sit below orders: users -> orders -> items.',
      severity: 'error',
      from: { path: '^src/resources/items/' },
      to: { path: '^src/resources/orders/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|test|bench)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.tsx', '.js'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'types', 'node', 'default'],
    },
  },
};
