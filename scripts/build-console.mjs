// Builds the console (console/src/, served at /console) into dist/console/: one script and one
// style sheet, bundled and minified with Preact, named by their content's hash so rowi can serve
// them with a year-long cache, each also compressed (gzip and brotli, beside it), and manifest.json
// naming them for the page (src/http/console-page.ts).
// scripts/build.mjs calls it whenever it builds the server.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/** The browsers the console is written for: those of the last two years. */
const TARGET = ['chrome120', 'firefox121', 'safari17'];

export async function buildConsole(root) {
  const out = join(root, 'dist', 'console');
  const assets = join(out, 'assets');
  const started = Date.now();
  const result = await build({
    absWorkingDir: root,
    entryPoints: { console: 'console/src/main.tsx' },
    outdir: assets,
    entryNames: '[name]-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: TARGET,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    sourcemap: 'linked',
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
  const script = outputs.find((name) => name.endsWith('.js'));
  const style = outputs.find((name) => name.endsWith('.css'));
  if (script === undefined || style === undefined)
    throw new Error('the console build made no script or no style sheet');
  const iconSource = readFileSync(join(root, 'console', 'icon.svg'));
  const icon = `icon-${createHash('sha256').update(iconSource).digest('hex').slice(0, 8).toUpperCase()}.svg`;
  mkdirSync(assets, { recursive: true });
  writeFileSync(join(assets, icon), iconSource);
  // Each text file also compressed, once, here: rowi sends the form the browser takes.
  for (const name of [script, style, icon]) {
    const data = readFileSync(join(assets, name));
    writeFileSync(join(assets, `${name}.gz`), gzipSync(data, { level: 9 }));
    writeFileSync(
      join(assets, `${name}.br`),
      brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
    );
  }
  // The manifest is replaced in one step, and the files of earlier builds stay a while: a rowi
  // started before this build (a test, a second checkout's run) still finds the files it named.
  const manifest = join(out, `manifest-${process.pid}.json`);
  writeFileSync(manifest, JSON.stringify({ script, style, icon }, null, 2) + '\n');
  renameSync(manifest, join(out, 'manifest.json'));
  const current = new Set(
    [script, style, icon].flatMap((name) => [name, `${name}.gz`, `${name}.br`]).concat(`${script}.map`, `${style}.map`),
  );
  for (const name of readdirSync(assets)) {
    const path = join(assets, name);
    if (!current.has(name) && statSync(path).mtimeMs < started - KEEP_MS) rmSync(path, { force: true });
  }
}

/** How long the files of an earlier build are kept beside the current ones. */
const KEEP_MS = 10 * 60_000;
