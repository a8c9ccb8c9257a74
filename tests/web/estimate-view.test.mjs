// Unit tests for web/estimate-view.js and the estimator messages of web/protocol.js (pure).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as V from '../../web/estimate-view.js';
import * as P from '../../web/protocol.js';

const report = () => ({
  memory: {
    weights_bytes: 1000, weights_by_component: { embedding: 400, attention: 200, mlp: 400, norms: 0, lm_head: 0 },
    kv_bytes_per_token: 10, kv_bytes: 500, activations_bytes: 50, runtime_overhead_bytes: 100,
    loader_duplication_bytes: 0, fragmentation_bytes: 25, total_bytes: 1675, usable_bytes: 4000, fits: true,
  },
  latency: {
    unit: 'cpu', ttft_ms: 123.456, prefill_tok_s: 1000, decode_tok_s: 20.5, peak_gflops: 100, effective_gflops: 50,
    bandwidth_gbs: 10, ridge_intensity: 5,
  },
  layers: [{ first_layer: 0, last_layer: 1, count: 2,
    prefill: [{ op: 'q_proj', intensity: 60, attainable_gflops: 50 }, { op: 'norms', intensity: 0, attainable_gflops: 0 }],
    decode: [{ op: 'q_proj', intensity: 1, attainable_gflops: 10 }, { op: 'k_proj', intensity: 1, attainable_gflops: 10 }] }],
  thermal: { duration_s: 900, sustained_tok_s: 18, temp_rise_c: 7.25, time_to_throttle_s: null, energy_per_token_j: 0.1,
    series: [{ t_s: 0, die_c: 25, body_c: 25, tok_s: 20, freq_mhz: 1, power_w: 3 }, { t_s: 60, die_c: 50, body_c: 27, tok_s: 19, freq_mhz: 1, power_w: 3 }] },
  verdict: { memory: 'pass', ttft: 'pass', sustained: 'fail', temperature: 'pass', experience: 'faster-than-reading' },
  explain: { 'memory.kv_bytes': { formula: 'KV = a × b', values: '10 × 50', result: '500 B' } },
  warnings: ['careful'],
});

test('buildDeployment turns knob strings into a deployment', () => {
  const { deployment, error } = V.buildDeployment({ ...V.DEFAULT_KNOBS, context: ' 4096 ', unit: 'npu' });
  assert.equal(error, undefined);
  assert.deepEqual(deployment, {
    weights: 'w4g32', kv: 'int8', context: 4096, prompt_tokens: 128, gen_tokens: 128, unit: 'npu', policy: 'flat-out', minutes: 15,
  });
  // The device's default unit is "not set".
  assert.equal('unit' in V.buildDeployment(V.DEFAULT_KNOBS).deployment, false);
});

test('buildDeployment reports syntax errors by name, leaves ranges to the estimator', () => {
  assert.match(V.buildDeployment({ context: '' }).error, /context must be a whole number/);
  assert.match(V.buildDeployment({ context: '1.5' }).error, /context/);
  assert.match(V.buildDeployment({ weights: 'q3' }).error, /weights must be one of/);
  assert.match(V.buildDeployment({ gen_tokens: 'x' }).error, /generated tokens/);
  assert.match(V.buildDeployment({ minutes: 'abc' }).error, /minutes/);
  // 0 and 10^9 are syntactically fine: the estimator names the limit.
  assert.equal(V.buildDeployment({ context: '0' }).deployment.context, 0);
  assert.equal(V.buildDeployment({ context: '1000000000' }).deployment.context, 1e9);
});

test('comparisonDeployment mirrors the engine: its stored weight formats, f32 KV, measured tokens', () => {
  // An engine that names no formats: f32.
  assert.deepEqual(V.comparisonDeployment({ prompt_tokens: 6, generated_tokens: 16 }), {
    weights: 'f32', embedding_weights: 'f32', kv: 'f32', unit: 'cpu', policy: 'flat-out', prompt_tokens: 6, gen_tokens: 16, context: 22,
  });
  // w4g32 from a Q4_1 file: the linear layers are stored as q4_1, the embedding as q8_0.
  const m = { prompt_tokens: 6, generated_tokens: 16, weights: 'w4g32', embedding: 'q8_0', kernel: 'simd128' };
  const stored = [{ format: 'q8_0', matrices: 1, bytes: 30081024 }, { format: 'q4_1', matrices: 210, bytes: 67000000 }];
  const d = V.comparisonDeployment(m, stored);
  assert.equal(d.weights, 'q4_1');
  assert.equal(d.embedding_weights, 'q8_0');
  assert.equal(d.kv, 'f32');
  // Without the stored list, the requested format; unknown names fall back.
  assert.deepEqual(V.engineFormats(m, undefined), { weights: 'w4g32', embedding: 'q8_0' });
  assert.deepEqual(V.engineFormats({ weights: 'f32', embedding: 'f32' }, [{ format: 'f32', matrices: 211, bytes: 538e6 }]), { weights: 'f32', embedding: 'f32' });
  assert.deepEqual(V.engineFormats({ weights: 'w9', embedding: 'w9' }, [{ format: 'w9', matrices: 3, bytes: 1 }]), { weights: 'f32', embedding: 'f32' });
  assert.equal(V.comparisonDeployment({ prompt_tokens: 6, generated_tokens: 0 }), null);
  assert.equal(V.comparisonDeployment(null), null);
});

test('percentError and formatPercent', () => {
  assert.equal(V.percentError(110, 100), 10);
  assert.equal(V.percentError(90, 100), -10);
  assert.equal(V.percentError(1, 0), null);
  assert.equal(V.percentError(NaN, 1), null);
  assert.equal(V.formatPercent(12.345), '+12.3 %');
  assert.equal(V.formatPercent(-4), '\u22124.0 %');
  assert.equal(V.formatPercent(null), '');
});

test('comparisonRows pairs estimates with measurements', () => {
  const rows = V.comparisonRows(report(), { ttft_ms: 100, prefill_tok_s: 800, decode_tok_s: 25, weights_bytes: 1000, kv_bytes: 160, prompt_tokens: 5, generated_tokens: 16 });
  assert.deepEqual(rows.map((r) => r.key), ['ttft', 'prefill', 'decode', 'weights', 'kv']);
  const by = Object.fromEntries(rows.map((r) => [r.key, r]));
  assert.ok(Math.abs(by.ttft.error - 23.456) < 1e-9);
  assert.equal(by.weights.error, 0);
  // KV for the tokens held: 10 bytes/token × (5 + 16 − 1) = 200 against 160 measured.
  assert.equal(by.kv.estimate, 200);
  assert.equal(by.kv.error, 25);
  // One generated token: no decode rate was measured.
  const one = V.comparisonRows(report(), { ttft_ms: 100, prefill_tok_s: 800, decode_tok_s: 0, weights_bytes: 1, kv_bytes: 1, generated_tokens: 1 });
  assert.equal(one.find((r) => r.key === 'decode').error, null);
});

test('summaryCells: raw integers for bytes, plain numbers elsewhere, explain keys', () => {
  const cells = Object.fromEntries(V.summaryCells(report()).map((c) => [c.id, c]));
  for (const id of ['est-weights-bytes', 'est-kv-bytes', 'est-total-bytes', 'est-ttft-ms', 'est-decode-tps', 'est-sustained-tps', 'est-temp-rise']) {
    assert.ok(cells[id], id);
    assert.match(cells[id].value, /^\d+(\.\d+)?$/, `${id}: ${cells[id].value}`);
  }
  assert.equal(cells['est-kv-bytes'].value, '500');
  assert.equal(cells['est-kv-bytes'].explain, 'memory.kv_bytes');
  assert.equal(cells['est-ttft-ms'].value, '123.5');
  assert.equal(cells['est-throttle-s'].value, 'never');
  // Empty report: empty cells, no throw.
  assert.equal(V.summaryCells(null).find((c) => c.id === 'est-total-bytes').value, '');
});

test('explanation returns readable strings or null', () => {
  assert.deepEqual(V.explanation(report(), 'memory.kv_bytes'), { formula: 'KV = a × b', values: '10 × 50', result: '500 B', note: '' });
  assert.equal(V.explanation(report(), 'nope'), null);
});

test('formatBinary', () => {
  assert.equal(V.formatBinary(512), '512 B');
  assert.equal(V.formatBinary(1536), '1.5 KiB');
  assert.equal(V.formatBinary(64 * 2 ** 20), '64.0 MiB');
  assert.equal(V.formatBinary(3 * 2 ** 30), '3.00 GiB');
  assert.equal(V.formatBinary(undefined), '');
});

test('memorySegments stack the components on the usable-memory scale', () => {
  const { segments, scale, usableAt } = V.memorySegments(report().memory);
  assert.equal(scale, 4000);
  assert.equal(usableAt, 1);
  assert.deepEqual(segments.map((s) => s.key), ['w-embedding', 'w-attention', 'w-mlp', 'kv_bytes', 'activations_bytes', 'runtime_overhead_bytes', 'fragmentation_bytes']);
  const sum = segments.reduce((a, s) => a + s.bytes, 0);
  assert.equal(sum, report().memory.total_bytes);
  assert.ok(Math.abs(segments.reduce((a, s) => a + s.fraction, 0) - 1675 / 4000) < 1e-12);
});

test('rooflineData: sorted log-safe x, roof = min(compute, bw × I), points by phase', () => {
  const d = V.rooflineData(report());
  const [xs, roof, pre, dec] = d.data;
  assert.ok(xs.every((x, i) => x > 0 && (i === 0 || x > xs[i - 1])), 'strictly increasing positive x');
  xs.forEach((x, i) => assert.equal(roof[i], Math.min(50, 10 * x)));
  assert.equal(pre[xs.indexOf(60)], 50);
  assert.equal(dec[xs.indexOf(1)], 10);
  assert.equal(d.labels.decode[xs.indexOf(1)], 'q_proj, k_proj');
  assert.equal(pre.filter((v) => v !== null).length, 1, 'zero-intensity ops are left out');
  assert.equal(d.ridge, 5);
  assert.equal(V.rooflineData({}), null);
});

test('thermalData: minutes and three series', () => {
  assert.deepEqual(V.thermalData(report()), [[0, 1], [25, 50], [25, 27], [20, 19]]);
  assert.equal(V.thermalData({}), null);
});

test('warningTexts and describeMeasurements', () => {
  assert.deepEqual(V.warningTexts(report()), ['careful']);
  assert.deepEqual(V.warningTexts({}), []);
  assert.equal(
    V.describeMeasurements({ read_bandwidth_gbs: 21.34, f32_gflops: 6.1, weight_rate_gws: { f32: 2.9, w4g32: 11.25 } }),
    'streaming read 21.3 GB/s · f32 GEMM 6.1 GFLOP/s · GEMV G weights/s: f32 2.90, w4g32 11.25',
  );
});

test('estimate messages: constructors and validators', () => {
  const m = P.estimate(3, 'panel', { kind: 'preset', id: 'llama-3.2-1b' }, { kind: 'bundled', id: 'snapdragon-8-gen3' }, { weights: 'bf16' });
  assert.equal(P.validateToWorker(m), null);
  assert.equal(P.validateToWorker(P.estimate(4, 'compare', { kind: 'loaded' }, { kind: 'this-browser' }, {})), null);
  assert.equal(P.validateToWorker(P.estimate(5, 'panel', { kind: 'config', name: 'x', text: '{}' }, { kind: 'this-browser' }, {})), null);
  assert.throws(() => P.estimate(-1, 'panel', { kind: 'loaded' }, { kind: 'this-browser' }, {}), TypeError);
  assert.throws(() => P.estimate(1, 'other', { kind: 'loaded' }, { kind: 'this-browser' }, {}), TypeError);
  assert.throws(() => P.estimate(1, 'panel', { kind: 'gguf' }, { kind: 'this-browser' }, {}), TypeError);
  assert.throws(() => P.estimate(1, 'panel', { kind: 'loaded' }, { kind: 'bundled' }, {}), TypeError);
  assert.throws(() => P.estimate(1, 'panel', { kind: 'loaded' }, { kind: 'this-browser' }, null), TypeError);

  const dev = { id: 'x', name: 'X', units: ['cpu'], default_unit: 'cpu' };
  assert.equal(P.validateFromWorker(P.estimateResult(3, 'panel', report(), dev)), null);
  assert.equal(P.validateFromWorker(P.estimateResult(3, 'panel', report(), dev, { read_bandwidth_gbs: 1 })), null);
  assert.throws(() => P.estimateResult(3, 'panel', { memory: {} }, dev), TypeError);
  assert.throws(() => P.estimateResult(3, 'panel', report(), { id: 'x' }), TypeError);
  assert.equal(P.validateFromWorker(P.estimateError(3, 'compare', 'context 0 is out of range')), null);
  assert.equal(P.estimateError(3, 'panel', '').message, 'unknown error');
  assert.equal(P.validateFromWorker(P.catalog([{ id: 'a', name: 'A' }], [{ id: 'd', name: 'D' }])), null);
  assert.throws(() => P.catalog([{ id: 1 }], []), TypeError);
  assert.equal(P.validateFromWorker(P.measuring(0, 7)), null);
  assert.equal(P.validateFromWorker(P.measuring(7, 7)), null);
  assert.throws(() => P.measuring(), TypeError, 'progress needs done and total');
  assert.throws(() => P.measuring(8, 7), TypeError, 'done cannot pass total');
  assert.match(P.validateFromWorker({ type: 'measuring', done: 1, total: 0 }), /measuring: done\/total/);
});
