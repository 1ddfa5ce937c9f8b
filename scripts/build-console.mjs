// Builds the console (console/src/, served at /console) into dist/console/: one script and one
// style sheet, bundled and minified with Preact, named by their content's hash so rowi can serve
// them with a year-long cache, and manifest.json naming them for the page (src/http/console-page.ts).
// scripts/build.mjs calls it whenever it builds the server.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/** The browsers the console is written for: those of the last two years. */
const TARGET = ['chrome120', 'firefox121', 'safari17'];

export async function buildConsole(root) {
  const out = join(root, 'dist', 'console');
  const assets = join(out, 'assets');
  rmSync(out, { recursive: true, force: true });
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
  writeFileSync(join(out, 'manifest.json'), JSON.stringify({ script, style, icon }, null, 2) + '\n');
}
