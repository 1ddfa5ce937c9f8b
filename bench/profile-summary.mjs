// node bench/profile-summary.mjs FILE.cpuprofile [--top 25] [--marks csv-stringify,jsonText]
//
// Self time in a V8 CPU profile (what `--cpu-prof` writes, e.g. from bench/exports.mjs), by
// function and by module (a package of node_modules, a file of rowi's dist, a built-in of Node),
// idle time left out. One process often runs several loads in turn (the export bench: NDJSON,
// then CSV): with --marks, each second of the profile is given to the first mark that most of its
// samples name (a function or a file, as text in its name or address), and each mark's seconds
// are summarised apart; seconds that name no mark are left out.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, marks: { type: 'string' } },
});
if (positionals.length !== 1)
  throw new Error('usage: node bench/profile-summary.mjs FILE.cpuprofile [--top N] [--marks a,b]');
const profile = JSON.parse(readFileSync(positionals[0], 'utf8'));
const TOP = Number(values.top);
const marks = values.marks ? values.marks.split(',') : [];

const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const nameOf = ({ functionName, url, lineNumber }) =>
  `${functionName || '(anonymous)'} ${url ? `${url.split('/').slice(-2).join('/')}:${lineNumber + 1}` : ''}`.trim();
const moduleOf = ({ functionName, url }) => {
  const found = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
  if (found) return found[1];
  if (url.includes('/dist/src/')) return `rowi ${url.split('/dist/src/')[1]}`;
  if (url.startsWith('node:')) return url;
  return url || `(native) ${functionName}`;
};

// Each sample's node, when it was taken (µs into the profile) and the time it stands for (until the next).
let elapsed = 0;
const samples = profile.samples.map((id, index) => {
  elapsed += profile.timeDeltas[index] ?? 0;
  return { node: nodes.get(id), at: elapsed, micros: profile.timeDeltas[index + 1] ?? 0 };
});

const phaseOf = new Map();
if (marks.length > 0) {
  const counts = new Map();
  for (const { node, at } of samples) {
    const text = `${node.callFrame.functionName} ${node.callFrame.url}`;
    const mark = marks.find((candidate) => text.includes(candidate));
    if (!mark) continue;
    const second = Math.floor(at / 1e6);
    const ofSecond = counts.get(second) ?? new Map();
    ofSecond.set(mark, (ofSecond.get(mark) ?? 0) + 1);
    counts.set(second, ofSecond);
  }
  for (const [second, ofSecond] of counts) phaseOf.set(second, [...ofSecond].sort((a, b) => b[1] - a[1])[0][0]);
}

const phases = new Map();
for (const { node, at, micros } of samples) {
  if (node.callFrame.functionName === '(idle)') continue;
  const phase = marks.length > 0 ? phaseOf.get(Math.floor(at / 1e6)) : 'the whole profile';
  if (phase === undefined) continue;
  const sums = phases.get(phase) ?? { busy: 0, seconds: new Set(), byFunction: new Map(), byModule: new Map() };
  sums.busy += micros;
  sums.seconds.add(Math.floor(at / 1e6));
  add(sums.byFunction, nameOf(node.callFrame), micros);
  add(sums.byModule, moduleOf(node.callFrame), micros);
  phases.set(phase, sums);
}

for (const [phase, sums] of phases) {
  console.log(`${phase}: ${(sums.busy / 1e6).toFixed(2)} s busy in ${sums.seconds.size} s`);
  for (const [title, table] of [
    ['by module', sums.byModule],
    ['by function', sums.byFunction],
  ]) {
    console.log(`  ${title}:`);
    for (const [name, micros] of [...table].sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(
        `  ${((micros / sums.busy) * 100).toFixed(1).padStart(5)}% ${(micros / 1e3).toFixed(0).padStart(7)} ms  ${name}`,
      );
  }
}

function add(table, key, micros) {
  table.set(key, (table.get(key) ?? 0) + micros);
}
