// Unit tests for the "What fits?" messages in web/protocol.js and the helpers in web/fit-view.js
// (pure: no DOM, no wasm). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';
import * as F from '../../web/fit-view.js';
import { LOADED_MODEL } from '../../web/estimate-view.js';

const bundled = { kind: 'bundled', id: 'snapdragon-8-gen3' };

const row = (rank, over = {}) => ({
  rank, model: 'smollm2-135m', model_name: 'SmolLM2 135M', weights: 'f16', kv: 'f32', prune: 0, context: 8192,
  params: 134_515_008, params_fraction: 1, weights_bytes: 269_030_016, kv_bytes_per_token: 46080,
  peak_memory_bytes: 900_000_000, ttft_ms: 120.5, decode_tok_s: 60.1, sustained_tok_s: 41.234, temp_rise_c: 7.25,
  frontier: false, ...over,
});

/** A FitResult as wasm fit returns it (with its request). */
const solverResult = (rows = [row(1, { frontier: true }), row(2, { kv: 'f16', sustained_tok_s: 44 })]) => ({
  device: 'snapdragon-8-gen3', device_name: 'Snapdragon 8 Gen 3 phone', tried: 10,
  failed: { memory: 3, ttft: 1, sustained: 4, temperature: 2, invalid: 0 },
  rows,
  request: { models: [{ id: 'smollm2-135m', spec: { name: 'SmolLM2 135M', layers: [] } }], weights: [], kv: [], prune_levels: [], contexts: [], base: {} },
});

test('fit requests: every scope and context the page offers is accepted', () => {
  for (const scope of ['all', 'loaded', 'family:llama', 'family:phi3', 'preset:smollm2-135m']) {
    for (const context of [null, 1024, 8192]) {
      const m = P.fit(7, bundled, scope, context);
      assert.deepEqual(m, { type: P.ToWorker.FIT, id: 7, device: bundled, scope, context });
      assert.equal(P.validateToWorker(m), null);
    }
  }
  assert.equal(P.fit(1, { kind: 'this-browser' }, 'all').context, null, 'no context: all of them');
});

test('fit requests: bad fields are refused with text naming them', () => {
  assert.throws(() => P.fit(-1, bundled, 'all'), /id must be a non-negative integer/);
  assert.throws(() => P.fit(1, { kind: 'cloud' }, 'all'), /device.kind must be bundled or this-browser/);
  assert.throws(() => P.fit(1, { kind: 'bundled', id: '' }, 'all'), /device.id/);
  assert.throws(() => P.fit(1, bundled, 'some'), /scope must be all, loaded, family:<name> or preset:<id>, got "some"/);
  assert.throws(() => P.fit(1, bundled, 'family:falcon'), /family must be one of llama, .*got "falcon"/);
  assert.throws(() => P.fit(1, bundled, 'preset:'), /scope must be/);
  assert.throws(() => P.fit(1, bundled, 'all', 3000), /context must be null .* or one of them, got 3000/);
  assert.match(P.validateToWorker({ type: 'fit', id: 1, device: bundled, scope: 'all' }), /^fit: context/);
  assert.match(P.validateToWorker({ type: 'fit', id: 1, device: bundled, scope: 42, context: null }), /^fit: scope must be a string, got 42/);
});

test('parseFitScope splits the scope', () => {
  assert.deepEqual(P.parseFitScope('all'), { kind: 'all' });
  assert.deepEqual(P.parseFitScope('loaded'), { kind: 'loaded' });
  assert.deepEqual(P.parseFitScope('family:gemma2'), { kind: 'family', value: 'gemma2' });
  assert.deepEqual(P.parseFitScope('preset:llama-3.2-1b'), { kind: 'preset', value: 'llama-3.2-1b' });
  assert.ok(P.parseFitScope('preset').error);
});

test('estimate requests carry an optional pruning level in 0..0.9', () => {
  const dep = { weights: 'w4g32' };
  assert.equal('prune' in P.estimate(1, 'panel', { kind: 'preset', id: 'x' }, bundled, dep), false);
  assert.equal('prune' in P.estimate(1, 'panel', { kind: 'preset', id: 'x' }, bundled, dep, 0), false, 'level 0 is left out');
  assert.equal(P.estimate(1, 'panel', { kind: 'preset', id: 'x' }, bundled, dep, 0.25).prune, 0.25);
  for (const bad of [-0.05, 0.95, Number.NaN, '0.2']) {
    assert.throws(() => P.estimate(1, 'panel', { kind: 'preset', id: 'x' }, bundled, dep, bad), /pruning level must be a fraction from 0 to 0.9/);
  }
});

test('fitResult drops the request (every model shape) and keeps the ids', () => {
  const m = P.fitResult(3, solverResult());
  assert.equal(m.type, P.FromWorker.FIT_RESULT);
  assert.equal(m.result.request, undefined);
  assert.deepEqual(m.result.models, ['smollm2-135m']);
  assert.equal(m.result.rows.length, 2);
  assert.equal(P.validateFromWorker(m), null);
  const e = P.fitError(3, 'device: unknown');
  assert.deepEqual(e, { type: P.FromWorker.FIT_ERROR, id: 3, message: 'device: unknown' });
  assert.equal(P.fitError(3, '').message, 'unknown error');
});

test('fit results that are not what the solver sends are rejected', () => {
  const bad = (mutate) => {
    const r = solverResult();
    mutate(r);
    return () => P.fitResult(1, r);
  };
  assert.throws(bad((r) => { r.rows[1].rank = 5; }), /rows\[1\].rank must be 2, got 5/);
  assert.throws(bad((r) => { r.rows[0].sustained_tok_s = null; }), /rows\[0\].sustained_tok_s must be a finite number/);
  assert.throws(bad((r) => { r.rows[0].model = ''; }), /rows\[0\].model must be a non-empty string/);
  assert.throws(bad((r) => { delete r.failed.temperature; }), /failed.temperature must be a non-negative integer/);
  assert.throws(bad((r) => { r.tried = 1; }), /2 passing and 0 impossible rows of only 1 tried/);
  assert.throws(bad((r) => { r.rows[0].frontier = 'yes'; }), /frontier must be a boolean/);
  assert.match(P.validateFromWorker({ type: 'fit-error', id: 1, message: '' }), /message must be a non-empty string/);
});

test('fit-view: summary, cells, scenario and chart data', () => {
  const r = P.fitResult(1, solverResult()).result;
  assert.equal(F.summaryText(r), '2 of 10 configurations pass the golden four on Snapdragon 8 Gen 3 phone (failed: memory 3, TTFT 1, sustained 4, temperature 2)');
  r.failed.invalid = 2;
  assert.match(F.summaryText(r), /temperature 2; 2 impossible\)$/);

  const cells = F.rowCells(row(4, { frontier: true, prune: 0.3 }));
  assert.equal(cells.length, F.COLUMNS.length);
  assert.deepEqual(cells, ['4', '★', 'smollm2-135m', '30%', 'f16', 'f32', '8192', '134.5', '858.3', '121', '41.23', '7.3']);
  assert.deepEqual(F.scenarioOf(row(1, { prune: 0.1 }), 'snapdragon-8-gen3'), {
    device: 'snapdragon-8-gen3', model: 'smollm2-135m', weights: 'f16', kv: 'f32', context: 8192, prune: 0.1,
  });

  const d = F.chartData([row(1, { sustained_tok_s: 30, frontier: true }), row(2, { sustained_tok_s: 10, params: 2e6 })]);
  assert.deepEqual(d.data[0], [10, 30], 'x ascending');
  assert.deepEqual(d.data[1], [2, null], 'other passing rows first');
  assert.deepEqual(d.data[2], [null, 134.515008], 'frontier rows last (drawn on top)');
  assert.deepEqual(d.rows.map((x) => x.rank), [2, 1]);
});

test('fit-view: scope and context options', () => {
  const opts = F.scopeOptions([{ id: 'smollm2-135m', name: 'SmolLM2 135M' }]);
  assert.equal(opts[0].value, 'all');
  assert.ok(opts.some((o) => o.value === 'family:qwen2'));
  assert.ok(opts.some((o) => o.value === 'preset:smollm2-135m' && o.label === 'preset: SmolLM2 135M'));
  const loaded = opts.find((o) => o.value === 'loaded');
  assert.equal(loaded.disabled, true);
  assert.equal(F.scopeOptions([], 'TinyModel').at(-1).disabled, false);
  for (const o of opts) assert.equal(P.parseFitScope(o.value).error, undefined, o.value);
  assert.deepEqual(F.contextOptions().map((o) => o.value), ['', '1024', '2048', '4096', '8192']);
  assert.equal(F.parseContext(''), null);
  assert.equal(F.parseContext('4096'), 4096);
  assert.equal(F.parseContext('4000'), null);
  assert.equal(F.LOADED_ID, LOADED_MODEL, "the fit's loaded id is the estimator picker's value");
});

test('fit progress: counts validated; the status line counts models and gives the time left', () => {
  assert.equal(P.validateFromWorker(P.fitProgress(4, 0, 12)), null);
  assert.equal(P.validateFromWorker(P.fitProgress(4, 12, 12)), null);
  for (const [id, done, total] of [[-1, 0, 1], [1, 2, 1], [1, 0, 0], [1, 0.5, 2], [1, '1', 2]]) {
    assert.throws(() => P.fitProgress(id, done, total), TypeError, `${id} ${done}/${total}`);
  }
  assert.match(P.validateFromWorker({ type: 'fit-progress', id: 1, done: 3, total: 2 }), /fit-progress: done\/total/);
  const text = F.progressText('all presets', 'Snapdragon 8 Gen 3', 3, 12, 600);
  assert.equal(text, `${F.runningText('all presets', 'Snapdragon 8 Gen 3')} 3 / 12 models · about 1.8 s left`);
  assert.equal(F.progressText('a', 'd', 0, 1, 0), `${F.runningText('a', 'd')} 0 / 1 model`);
});
