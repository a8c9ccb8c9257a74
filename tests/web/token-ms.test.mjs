// Per step the worker sends only what is new: the wasm's metricsSince(n) gives the metrics with the
// decode latencies from entry n on, and the page appends each piece's entries (web/run-view.js).
// This runs the worker's loop on the built wasm with the default model, in Node, and checks the
// page's rebuilt list is the engine's whole metrics().token_ms and every other metric is the full
// metrics'. Needs the built site ($EDGEFIT_SITE_DIR/pkg and its models/, default build/site);
// skipped with a note without one when run by hand, a failure under `cargo xtask test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as P from '../../web/protocol.js';
import * as R from '../../web/run-view.js';

const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const PKG = path.resolve(SITE, 'pkg');
const JS = path.join(PKG, 'edgefit_wasm.js');
const WASM = path.join(PKG, 'edgefit_wasm_bg.wasm');
const MODEL = path.resolve(SITE, 'models', P.DEFAULT_MODEL_FILE);
const built = existsSync(JS) && existsSync(WASM) && existsSync(MODEL);
const skip = !built && !process.env.EDGEFIT_URL ? `no built site with the default model at ${SITE}: run \`cargo xtask build\` first` : false;

test('appendTokenMs rebuilds the list from the pieces, numbering tokens from 1', () => {
  const log = R.createTokenLog();
  assert.equal(R.appendTokenMs(log, [3.5]), 1);
  assert.equal(R.appendTokenMs(log, []), 0);
  assert.equal(R.appendTokenMs(log, [4, 5.25]), 2);
  assert.deepEqual(R.latencySeries(log), [[1, 2, 3], [3.5, 4, 5.25]]);
});

test('the pieces of a real generation carry only new latencies, and the page rebuilds metrics().token_ms', { skip }, async (t) => {
  assert.ok(built, `the built wasm or the default model is missing under ${SITE}: \`cargo xtask build\` makes them`);
  const w = await import(pathToFileURL(JS).href);
  w.initSync({ module: readFileSync(WASM) });
  const engine = w.Engine.loadGguf(new Uint8Array(readFileSync(MODEL)));
  engine.start(P.startOptions(P.generate({ prompt: 'The capital of France is', chat: false, maxTokens: 24, temperature: 0, topP: 1, seed: 0, keep: false })));
  // The worker's loop (web/worker.js generate): prefill chunks, then one metricsSince per step.
  for (let fed = engine.prefillChunk(); fed.done < fed.total; fed = engine.prefillChunk());
  const log = R.createTokenLog();
  let sent = 0;
  let pieces = 0;
  let last = null;
  for (;;) {
    const text = engine.step();
    const m = engine.metricsSince(sent);
    assert.ok(Array.isArray(m.token_ms) && m.token_ms.length <= 1, `one step adds at most one latency, got ${JSON.stringify(m.token_ms)}`);
    sent += m.token_ms.length;
    const msg = P.piece(text ?? '', m.token_ms, m, null);
    assert.equal(P.validateFromWorker(msg), null);
    R.appendTokenMs(log, msg.tokenMs); // the page
    pieces += 1;
    last = msg;
    if (text === undefined || text === null) break;
  }
  const full = engine.metrics();
  assert.ok(full.token_ms.length >= 10, `${full.token_ms.length} decode steps`);
  assert.deepEqual(log.ms, full.token_ms, 'the appended pieces are the whole list');
  const { token_ms: _a, heap_bytes: _b, ...rest } = full;
  const { heap_bytes: _c, ...got } = last.metrics;
  assert.deepEqual(got, rest, 'every other metric is the full metrics\'');
  assert.equal(engine.metricsSince(full.token_ms.length + 5).token_ms.length, 0, 'from past the end: nothing, not an error');
  engine.free();
  t.diagnostic(`${pieces} pieces, ${log.ms.length} latencies rebuilt`);
});
