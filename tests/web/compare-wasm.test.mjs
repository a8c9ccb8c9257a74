// The estimate-vs-measured rows through the built wasm (comparisonDeployment, comparisonRows:
// edgefit_estimate::compare, which the worker runs for the page's table). Needs the built site
// ($EDGEFIT_SITE_DIR/pkg, default build/site/pkg); skipped with a note without one when run by
// hand, a failure under `cargo xtask test` (EDGEFIT_URL set).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const PKG = path.resolve(SITE, 'pkg');
const JS = path.join(PKG, 'edgefit_wasm.js');
const WASM = path.join(PKG, 'edgefit_wasm_bg.wasm');
const built = existsSync(JS) && existsSync(WASM);
const skip = !built && !process.env.EDGEFIT_URL ? `no built site at ${PKG}: run \`cargo xtask build\` first` : false;

async function wasm() {
  assert.ok(built, `the built wasm is missing at ${PKG}: \`cargo xtask build\` makes it`);
  const mod = await import(pathToFileURL(JS).href);
  mod.initSync({ module: readFileSync(WASM) });
  return mod;
}

// A conversation's second turn in kivi4 (a format whose bytes are not per-token × tokens).
const metrics = {
  ttft_ms: 50, prefill_tok_s: 100, decode_tok_s: 20, weights_bytes: 1, kv_bytes: 0, prompt_tokens: 5,
  generated_tokens: 16, kv_tokens: 40, kv_format: 'kivi4', weights: 'w4g32', embedding: 'q8_0', kernel: 'simd128',
};

test('comparisonDeployment: the stored format, the run KV format, a context that holds the conversation', { skip }, async () => {
  const w = await wasm();
  const stored = [{ format: 'q8_0', matrices: 1, bytes: 1 }, { format: 'q4_1', matrices: 210, bytes: 2 }];
  const d = w.comparisonDeployment(metrics, stored);
  assert.equal(d.weights, 'q4_1');
  assert.equal(d.embedding_weights, 'q8_0');
  assert.equal(d.kv, 'kivi4');
  assert.equal(d.unit, 'cpu');
  assert.equal(d.context, 40, 'a conversation holding more than this turn still fits the context');
  assert.equal(w.comparisonDeployment({ ...metrics, kv_tokens: 3 }, []).context, 21);
  assert.throws(() => w.comparisonDeployment({ ...metrics, generated_tokens: 0 }, []), /generated_tokens/);
  assert.throws(() => w.comparisonDeployment({ ...metrics, weights: 'w9' }, []), /w9/);
  assert.throws(() => w.comparisonDeployment(metrics, undefined), /stored weights/);
});

test('comparisonRows: the KV row is the estimator bytes for the tokens held, errors are signed', { skip }, async () => {
  const w = await wasm();
  const spec = w.presetSpec('smollm2-135m');
  const kvHeld = w.kvBytes(spec, 'kivi4', 40);
  const m = { ...metrics, kv_bytes: kvHeld };
  const dep = w.comparisonDeployment(m, []);
  const report = w.estimate(spec, dep, w.deviceProfile('this-browser'));
  const rows = w.comparisonRows(spec, report, m);
  assert.deepEqual(rows.map((r) => r.key), ['ttft', 'prefill', 'decode', 'weights', 'kv']);
  const by = Object.fromEntries(rows.map((r) => [r.key, r]));
  assert.equal(by.kv.estimate, kvHeld);
  assert.equal(by.kv.error_pct, 0);
  assert.ok(Math.abs(by.decode.error_pct - ((report.latency.decode_tok_s - 20) / 20) * 100) < 1e-9);
  const one = w.comparisonRows(spec, report, { ...metrics, generated_tokens: 1 });
  assert.equal(one.find((x) => x.key === 'decode').error_pct, null, 'no decode rate from one token');
});
