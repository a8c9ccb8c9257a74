// The estimator's precomputed tables (the site build's estimator-tables.json: the ranges' bands and
// the runtimes refitted on the validation set) against the same tables computed by the wasm on a
// first estimate, and the runtime list the page keeps before the catalog against the wasm's.
//
// Two instances of the built wasm (the module imported twice under different URLs): one computes
// its tables on its first estimate, as a tab without the file does; the other is seeded from the
// file first, as the worker does. Their reports must agree, and the seeded first estimate must not
// pay for the refits. Needs the built site ($EDGEFIT_SITE_DIR, as formats.test.mjs); skipped
// with a note without one when run by hand, a failure under `cargo xtask test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as V from '../../web/estimate-view.js';

const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const PKG = path.resolve(SITE, 'pkg');
const JS = path.join(PKG, 'edgefit_wasm.js');
const WASM = path.join(PKG, 'edgefit_wasm_bg.wasm');
const TABLES = path.resolve(SITE, 'estimator-tables.json');
const built = existsSync(JS) && existsSync(WASM) && existsSync(TABLES);
const required = Boolean(process.env.EDGEFIT_URL);
const skip = !built && !required ? `no built site with estimator-tables.json at ${SITE}: run \`cargo xtask site\` first` : false;

async function instance(tag) {
  const mod = await import(`${pathToFileURL(JS).href}?instance=${tag}`);
  mod.initSync({ module: readFileSync(WASM) });
  return mod;
}

function firstEstimate(mod) {
  const spec = mod.presetSpec('llama-3.2-1b');
  const dev = mod.deviceProfile('snapdragon-8-gen3');
  const t0 = performance.now();
  const rep = mod.estimate(spec, { weights: 'q4_0' }, dev);
  return { rep, ms: performance.now() - t0 };
}

test('seeded tables give the computed reports, without the refits on the first estimate', { skip }, async () => {
  assert.ok(built, `the built site is missing at ${SITE}: \`cargo xtask site\` makes it`);
  const computed = await instance('computed');
  const seeded = await instance('seeded');
  const text = readFileSync(TABLES, 'utf8');
  assert.equal(seeded.seedEstimatorTables(text), true, 'a fresh instance takes the tables');
  assert.equal(seeded.seedEstimatorTables(text), false, 'a second seed keeps the first');

  const a = firstEstimate(computed);
  const b = firstEstimate(seeded);
  console.log(`first estimate: ${a.ms.toFixed(0)} ms computing the tables, ${b.ms.toFixed(0)} ms seeded (node, this machine)`);
  for (const k of ['decode_tok_s_range', 'prefill_tok_s_range', 'ttft_ms_range']) {
    for (const i of [0, 1]) {
      const x = a.rep.latency[k][i];
      const y = b.rep.latency[k][i];
      assert.ok(Math.abs(x - y) <= 1e-9 * Math.abs(x), `${k}[${i}]: computed ${x}, seeded ${y}`);
    }
  }
  assert.ok(Math.abs(a.rep.latency.decode_tok_s - b.rep.latency.decode_tok_s) <= 1e-9 * a.rep.latency.decode_tok_s);
  assert.equal(a.rep.latency.range_basis, b.rep.latency.range_basis);
  assert.ok(b.ms < a.ms, `seeded ${b.ms} ms should be under computed ${a.ms} ms`);
  // What the wasm computes is what the build wrote (same key, same bands).
  const mine = JSON.parse(computed.estimatorTables());
  const file = JSON.parse(text);
  assert.equal(mine.key, file.key);
  assert.equal(mine.bands.pooled.length, file.bands.pooled.length);
});

test('tables of other data are refused, naming both keys', { skip }, async () => {
  const mod = await instance('foreign');
  const t = JSON.parse(readFileSync(TABLES, 'utf8'));
  const key = t.key;
  t.key = 'ffffffffffffffff';
  assert.throws(() => mod.seedEstimatorTables(JSON.stringify(t)), (e) => e.message.includes('made from other data') && e.message.includes(key));
  assert.throws(() => mod.seedEstimatorTables('{"key": 1}'), /estimator tables/);
});

test('estimate-view.js RUNTIMES equals the wasm runtimeIds(), each with its units', { skip }, async () => {
  const mod = await instance('runtimes');
  const list = mod.runtimeIds();
  assert.deepEqual(list.map((r) => r.id), [...V.RUNTIMES]);
  for (const r of list) {
    assert.ok(r.name.length > 0 && r.units.length > 0 && r.units.every((u) => V.UNITS.includes(u)), JSON.stringify(r));
  }
});

test('estimate-view.js WEIGHT_FORMATS equals the wasm estimateWeightFormats(), in order', { skip }, async () => {
  const mod = await instance('weights');
  assert.deepEqual([...V.WEIGHT_FORMATS], mod.estimateWeightFormats());
  assert.ok(V.WEIGHT_FORMATS.includes(V.DEFAULT_KNOBS.weights), 'the knob default is a listed format');
});

test('estimate-view.js COMPUTE_DTYPES equals the wasm computeDtypes(), in order', { skip }, async () => {
  const mod = await instance('compute');
  assert.deepEqual([...V.COMPUTE_DTYPES], mod.computeDtypes());
  assert.equal(V.DEFAULT_KNOBS.compute, '', "the knob's default is the runtime's own precision");
});
