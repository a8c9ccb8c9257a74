// Checks the page's KV format list against the built wasm's `kvFormats()`, and the wasm's
// `kvBytes()` the page shows beside the engine's measured KV bytes.
//
// The page reads the real-run picker's list from the wasm (the worker sends it in `catalog`);
// estimate-view.js keeps KV_FORMATS only for the estimate knob before the catalog arrives, and
// this test keeps it equal to the wasm's. Needs the built site like formats.test.mjs: skipped
// with a note without a build, failed under `cargo xtask test` (EDGEFIT_URL set).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as P from '../../web/protocol.js';
import * as V from '../../web/estimate-view.js';

// The site the page's tests run against: $EDGEFIT_SITE_DIR (`cargo xtask test` sets it to dist/),
// else $EDGEFIT_BUILD_DIR/site (`cargo xtask build`'s development site).
const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const PKG = path.resolve(SITE, 'pkg');
const JS = path.join(PKG, 'edgefit_wasm.js');
const WASM = path.join(PKG, 'edgefit_wasm_bg.wasm');
const built = existsSync(JS) && existsSync(WASM);
const required = Boolean(process.env.EDGEFIT_URL);
const skip = !built && !required ? `no built site at ${PKG}: run \`cargo xtask build\` first` : false;

let mod = null;
async function wasm() {
  assert.ok(built, `the built wasm is missing at ${PKG}: \`cargo xtask build\` makes it`);
  if (!mod) {
    mod = await import(pathToFileURL(JS).href);
    mod.initSync({ module: readFileSync(WASM) });
  }
  return mod;
}

test('estimate-view.js KV_FORMATS equals the wasm kvFormats(), in order; each has a picker label', { skip }, async () => {
  const m = await wasm();
  assert.equal(typeof m.kvFormats, 'function', 'the wasm exports kvFormats()');
  const fromWasm = m.kvFormats();
  assert.equal(P.checkKvFormatList(fromWasm), null, 'the wasm list is a valid catalog list');
  assert.deepEqual([...V.KV_FORMATS], fromWasm, 'web/estimate-view.js KV_FORMATS must list the wasm kvFormats() in order');
  for (const f of fromWasm) assert.ok(P.KV_FORMAT_LABELS[f], `protocol.js KV_FORMAT_LABELS has ${f}`);
  assert.ok(V.KV_FORMATS.includes(V.DEFAULT_KNOBS.kv), 'the knob default is a listed format');
  assert.equal(V.DEFAULT_KNOBS.kv, m.defaultKvFormat(), 'the page defaults to the engine\'s KV format (edgefit_estimate::DEFAULT_KV_FORMAT)');
});

test('wasm kvBytes(spec, format, tokens): 0 for no token, grows with tokens, k8v16 < f16 < f32, throws on a bad name', { skip }, async () => {
  const m = await wasm();
  assert.equal(typeof m.kvBytes, 'function', 'the wasm exports kvBytes()');
  const spec = m.presetSpec('smollm2-135m');
  for (const f of m.kvFormats()) {
    assert.equal(m.kvBytes(spec, f, 0), 0, `${f}: no token, no bytes`);
    const a = m.kvBytes(spec, f, 100);
    const b = m.kvBytes(spec, f, 200);
    assert.ok(Number.isFinite(a) && a > 0 && b > a, `${f}: ${a} for 100 tokens, ${b} for 200`);
  }
  const at = (f) => m.kvBytes(spec, f, 64);
  assert.ok(at('k8v16') < at('f16') && at('f16') < at('f32'), `k8v16 ${at('k8v16')} < f16 ${at('f16')} < f32 ${at('f32')}`);
  assert.throws(() => m.kvBytes(spec, 'f33', 10));
});
