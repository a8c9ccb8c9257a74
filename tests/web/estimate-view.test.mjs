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
  // So is the runtime's own activation precision; a named one is passed on, a bad one refused.
  assert.equal('compute' in V.buildDeployment(V.DEFAULT_KNOBS).deployment, false);
  assert.equal(V.buildDeployment({ compute: 'f16' }).deployment.compute, 'f16');
  assert.equal(V.buildDeployment({ compute: 'fp16' }).error, 'activations must be one of f32, f16, bf16, int8, got "fp16"');
});

test('buildDeployment: every number refused in plain words with its own range', () => {
  assert.equal(V.buildDeployment({ context: '' }).error, 'context must be a whole number from 1 to 2097152 (tokens), got ""');
  assert.match(V.buildDeployment({ context: '1.5' }).error, /context must be a whole number from 1 to 2097152/);
  assert.match(V.buildDeployment({ weights: 'q3' }).error, /weights must be one of/);
  assert.match(V.buildDeployment({ gen_tokens: 'x' }).error, /generated tokens/);
  assert.match(V.buildDeployment({ minutes: 'abc' }).error, /minutes/);
  // The same range for the same field, whatever the value (no "0 to 4294967295" beside "1..=2097152").
  assert.equal(V.buildDeployment({ context: '0' }).error, 'context must be a whole number from 1 to 2097152 (tokens), got 0');
  assert.equal(V.buildDeployment({ context: '1000000000' }).error, 'context must be a whole number from 1 to 2097152 (tokens), got 1000000000');
  assert.equal(V.buildDeployment({ context: '256', prompt_tokens: '0' }).error, 'prompt tokens must be a whole number from 1 to 256 (the context), got 0');
  assert.equal(V.buildDeployment({ context: '256', prompt_tokens: '200', gen_tokens: '100' }).error, 'prompt tokens + generated tokens (200 + 100) must fit in the context of 256 tokens');
  assert.equal(V.buildDeployment({ context: '2097152' }).deployment.context, 2097152);
  assert.equal(V.MAX_CONTEXT, 2 ** 21, 'edgefit_estimate::deploy::MAX_CONTEXT');
});

test('canCompare needs a prompt and a generated token', () => {
  assert.equal(V.canCompare({ prompt_tokens: 6, generated_tokens: 16 }), true);
  assert.equal(V.canCompare({ prompt_tokens: 6, generated_tokens: 0 }), false);
  assert.equal(V.canCompare({ prompt_tokens: 0, generated_tokens: 3 }), false);
  assert.equal(V.canCompare(null), false);
});

test('formatPercent', () => {
  assert.equal(V.formatPercent(12.345), '+12.3 %');
  assert.equal(V.formatPercent(-4), '\u22124.0 %');
  assert.equal(V.formatPercent(0), '0.0 %');
  assert.equal(V.formatPercent(null), '');
});

test('comparisonCells format the wasm rows: bytes with their human form, dashes for nothing measured', () => {
  const rows = [
    { key: 'ttft', label: 'Time to first token', unit: 'ms', estimate: 123.456, measured: 100, error_pct: 23.456 },
    { key: 'decode', label: 'Decode', unit: 'tok/s', estimate: 20.5, measured: null, error_pct: null },
    { key: 'kv', label: 'KV cache (tokens held)', unit: 'bytes', estimate: 2048, measured: 2048, error_pct: 0 },
  ];
  const cells = V.comparisonCells(rows);
  assert.deepEqual(cells[0], { key: 'ttft', label: 'Time to first token (ms)', estimate: '123.5', measured: '100.0', error: '+23.5 %', percent: '23.456' });
  assert.equal(cells[1].measured, '\u2013');
  assert.equal(cells[1].error, '\u2013');
  assert.equal(cells[1].percent, '');
  assert.equal(cells[2].estimate, '2048 (2.0 KiB)');
  assert.equal(cells[2].error, '0.0 %');
  assert.deepEqual(V.comparisonCells(undefined), []);
  assert.equal(
    V.describeComparison({ weights: 'q4_1', embedding_weights: 'q8_0', kv: 'int8' }, { kernel: 'scalar' }),
    'weights q4_1, embedding q8_0, KV cache int8, kernel scalar',
  );
  assert.equal(V.describeComparison(null), '');
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

test('thermalData: minutes, three series and the decode band around tok/s', () => {
  // No range in the report: the band columns are empty.
  assert.deepEqual(V.thermalData(report()), [[0, 1], [25, 50], [25, 27], [20, 19], [null, null], [null, null]]);
  const r = report();
  r.latency = { ...r.latency, decode_tok_s: 40, decode_tok_s_range: [20, 60] };
  assert.deepEqual(V.thermalData(r), [[0, 1], [25, 50], [25, 27], [20, 19], [10, 9.5], [30, 28.5]]);
  assert.equal(V.thermalData({}), null);
});

test('ranges: every time and speed cell shows its [low, high], sustained takes the decode band', () => {
  const l = {
    ttft_ms: 100, ttft_ms_range: [80, 150], prefill_tok_s: 1280, prefill_tok_s_range: [853.3, 1600],
    decode_tok_s: 40, decode_tok_s_range: [30, 48], decode_overhead_share: 0.25, decode_ms_first: 20,
    runtime: 'llamacpp', unit: 'cpu', threads: 4, op_overhead_us: 5, token_overhead_us: 100,
  };
  const cells = Object.fromEntries(V.summaryCells({ latency: l, thermal: { sustained_tok_s: 20, duration_s: 600 } }).map((c) => [c.id, c]));
  assert.equal(cells['est-ttft-ms'].range, '80.0\u2013150.0');
  assert.equal(cells['est-prefill-tps'].range, '853.3\u20131600.0');
  assert.equal(cells['est-decode-tps'].range, '30.00\u201348.00');
  assert.equal(cells['est-sustained-tps'].range, '15.00\u201324.00');
  assert.equal(cells['est-decode-overhead'].value, '25');
  assert.equal(cells['est-decode-overhead'].human, '5.00 of 20.00 ms per step');
  assert.equal(cells['est-params'].range, undefined);
  assert.equal(V.formatRange([1, Number.NaN], 1), '');
  assert.equal(V.formatRange(undefined, 1), '');
  const note = V.rangeNote({ latency: l });
  assert.match(note, /10th to 90th percentile/);
  assert.match(note, /leave-one-source-out/);
  assert.match(note, /Validation/);
  assert.match(note, /llamacpp on the cpu with 4 threads: 25% of the first decode step is fixed overhead/);
  assert.match(V.rangeNote({ latency: { ...l, decode_overhead_share: 0.8 } }), /bound by fixed per-op and per-token costs/);
  // What holds the rest of the step, from the report's split by bound: the largest first.
  const kernelBound = V.rangeNote({ latency: { ...l, decode_ms_by_bound: { memory: 4, kernel: 10, compute: 0.5, overhead: 0.1 } } });
  assert.match(kernelBound, /the rest is set mostly by the decode kernel\u2019s weight rate \(its unpacking instructions; on a CPU these add to the time of the bytes, which a GPU overlaps\): ops held by it take 10\.00 ms of the step \(the bytes moved 4\.00 ms, the compute roof 0\.50 ms\)/);
  const memBound = V.rangeNote({ latency: { ...l, decode_ms_by_bound: { memory: 12, kernel: 0, compute: 0, overhead: 0 } } });
  assert.match(memBound, /set mostly by the bytes moved \(weights, KV cache, logits head\) over the achieved bandwidth: ops held by it take 12\.00 ms of the step\.$/);
  assert.match(note, /the decode kernel\u2019s weight rate, or the compute roof/, 'without the split: the general sentence');
  assert.equal(V.rangeNote({}), '');
});

test('runtime picker: only runtimes that run on the unit are enabled; a bad pair is refused in plain words', () => {
  const rts = [
    { id: 'llamacpp', name: 'llama.cpp', units: ['cpu', 'gpu'] },
    { id: 'qnn', name: 'QNN', units: ['npu'] },
  ];
  const dev = { units: ['cpu', 'gpu', 'npu'], default_unit: 'cpu' };
  const c = V.runtimeChoices(rts, dev, '', 'llamacpp');
  assert.deepEqual(c.map((x) => [x.id, x.disabled]), [['', false], ['llamacpp', false], ['qnn', true]]);
  assert.equal(c[0].label, 'default (llamacpp)', 'short enough for the picker at 390 px');
  assert.match(c[2].label, /not on the cpu: npu only/);
  assert.deepEqual(V.runtimeChoices(rts, dev, 'npu').map((x) => x.disabled), [false, true, false]);
  assert.equal(V.runtimePairError(rts, 'qnn', 'npu'), null);
  assert.equal(V.runtimePairError(rts, '', 'cpu'), null);
  assert.equal(V.runtimePairError(rts, 'qnn', 'cpu'), 'QNN does not run on the cpu (it runs on the npu): pick another runtime, or the unit it runs on');
});

test('buildDeployment: runtime and threads (empty = the estimator default; the range in words)', () => {
  assert.deepEqual(V.buildDeployment({ runtime: 'mlc', threads: ' 4 ' }).deployment.runtime, 'mlc');
  assert.equal(V.buildDeployment({ runtime: 'mlc', threads: '4' }).deployment.threads, 4);
  const d = V.buildDeployment({}).deployment;
  assert.equal('runtime' in d || 'threads' in d, false);
  assert.match(V.buildDeployment({ runtime: 'tvm' }).error, /runtime must be one of llamacpp, /);
  for (const t of ['0', '257', '2.5', 'x']) {
    assert.equal(V.buildDeployment({ threads: t }).error, `threads must be a whole number from 1 to 256 (or empty for the runtime's default), got "${t}"`);
  }
});

test('warningTexts and describeMeasurements', () => {
  assert.deepEqual(V.warningTexts(report()), ['careful']);
  assert.deepEqual(V.warningTexts({}), []);
  assert.equal(
    V.describeMeasurements({ read_bandwidth_gbs: 21.34, f32_gflops: 6.1, weight_rate_gws: { f32: 2.9, w4g32: 11.25 } }),
    'streaming read 21.3 GB/s · f32 GEMM 6.1 GFLOP/s · GEMV G weights/s: f32 2.90, w4g32 11.25',
  );
  assert.equal(
    V.describeMeasurements({
      kernel: 'scalar', read_bandwidth_gbs: 20, f32_gflops: 5, op_overhead_us: 1.234,
      weight_rate_gws: { q4_1: 3 }, prefill_weight_rate_gws: { q4_1: 4.5 },
    }),
    'scalar kernel · streaming read 20.0 GB/s · f32 GEMM 5.0 GFLOP/s · 1.23 µs per op · GEMV G weights/s: q4_1 3.00 · GEMM (64 rows) G weights/s: q4_1 4.50',
  );
  // The roof of the ops between the matrix products, when measured.
  assert.equal(
    V.describeMeasurements({ read_bandwidth_gbs: 20, f32_gflops: 5, op_overhead_us: 1.5, vector_gflops: 4.456, weight_rate_gws: { q4_1: 3 } }),
    'streaming read 20.0 GB/s · f32 GEMM 5.0 GFLOP/s · 1.50 µs per op · norms, attention, activation 4.46 GFLOP/s · GEMV G weights/s: q4_1 3.00',
  );
  // On N threads: the count first, and the ratios against the 1-thread set (formats in both).
  const one = { read_bandwidth_gbs: 10, f32_gflops: 5, weight_rate_gws: { q4_1: 2, f32: 1 }, prefill_weight_rate_gws: { q4_1: 4 } };
  const two = {
    threads: 2, read_bandwidth_gbs: 15, f32_gflops: 9, weight_rate_gws: { q4_1: 3, f32: 1.9, q8_0: 7 }, prefill_weight_rate_gws: { q4_1: 7.6 }, one_thread: one,
  };
  assert.equal(
    V.describeMeasurements(two),
    '2 threads · streaming read 15.0 GB/s · f32 GEMM 9.0 GFLOP/s · GEMV G weights/s: q4_1 3.00, f32 1.90, q8_0 7.00 · GEMM (64 rows) G weights/s: q4_1 7.60 · against 1 thread: read ×1.50, GEMV ×1.50–1.90, GEMM (64 rows) ×1.90',
  );
  assert.equal(V.describeScaling(two, undefined), '');
  assert.equal(V.describeMeasurements({ ...two, one_thread: undefined }).includes('against'), false);
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
  const cmp = { deployment: { weights: 'q4_1', kv: 'int8' }, rows: [{ key: 'decode', label: 'Decode', unit: 'tok/s', estimate: 1, measured: null, error_pct: null }] };
  assert.equal(P.validateFromWorker(P.estimateResult(4, 'compare', report(), dev, null, cmp)), null);
  assert.throws(() => P.estimateResult(4, 'compare', report(), dev), TypeError, 'a compare answer carries its rows');
  assert.throws(() => P.estimateResult(4, 'panel', report(), dev, null, cmp), TypeError, 'a panel answer does not');
  const badRow = { ...cmp, rows: [{ ...cmp.rows[0], estimate: 'x' }] };
  assert.match(P.validateFromWorker({ type: 'estimate-result', id: 4, purpose: 'compare', report: report(), device: dev, measurements: null, comparison: badRow }), /estimate must be a finite number or null/);
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

test('the comparison note says what the warm-up ran, or nothing without one', () => {
  const m = { warm_up: { passes: 3, prompt_tokens: 16, decode_steps: 3, pass_ms: [412.4, 150.2, 118.6], total_ms: 681.2 } };
  const s = V.describeWarmUp(m);
  assert.match(s, /^Measured after a warm-up of the loaded model: 3 passes \(a 16-token prefill and 3 decode steps each/);
  assert.match(s, /in 681 ms, 412 \u2192 119 ms per pass\./);
  assert.match(s, /compiles wasm in tiers/);
  assert.match(V.describeWarmUp({ warm_up: { passes: 1, prompt_tokens: 9, decode_steps: 2, pass_ms: [80], total_ms: 80 } }), /: 1 pass \(a 9-token prefill and 2 decode steps each, in a cache of their own\) in 80 ms\. /);
  for (const bad of [null, {}, { warm_up: null }, { warm_up: { passes: 0, pass_ms: [] } }, { warm_up: { passes: 2 } }, { warm_up: 'x' }]) {
    assert.equal(V.describeWarmUp(bad), '', JSON.stringify(bad));
  }
});

test('shortDeviceName drops the trailing parenthesis (the picker fits 390 px), keeps a name without one', () => {
  assert.equal(V.shortDeviceName('Snapdragon 8 Gen 3 phone (Xiaomi 14 class, 16 GB LPDDR5X)'), 'Snapdragon 8 Gen 3 phone');
  assert.equal(V.shortDeviceName('Apple A17 Pro (iPhone 15 Pro, 8 GB LPDDR5)'), 'Apple A17 Pro');
  assert.equal(V.shortDeviceName('Raspberry Pi 5 (4x Cortex-A76 @2.4 GHz, 8 GB LPDDR4X, active cooler)'), 'Raspberry Pi 5');
  assert.equal(V.shortDeviceName('Some board'), 'Some board');
  assert.equal(V.shortDeviceName('(only a parenthesis)'), '(only a parenthesis)');
  // A parenthesis inside the trailing one goes with it; an unbalanced name is kept whole.
  assert.equal(V.shortDeviceName('HiSilicon Kirin 9000E (Huawei Mate 40 / MatePad Pro 12.6 (2021) class, 8 GB LPDDR5)'), 'HiSilicon Kirin 9000E');
  assert.equal(V.shortDeviceName('Board (rev (2)) x (a)'), 'Board (rev (2)) x');
  assert.equal(V.shortDeviceName('Board rev 2)'), 'Board rev 2)');
});

test('every bundled device keeps a distinct short name', async () => {
  const { readdir, readFile } = await import('node:fs/promises');
  const dir = new URL('../../models/devices/', import.meta.url);
  const names = [];
  for (const f of (await readdir(dir)).filter((f) => f.endsWith('.json') && f !== 'this-browser.json')) {
    names.push(V.shortDeviceName(JSON.parse(await readFile(new URL(f, dir), 'utf8')).name));
  }
  assert.ok(names.length >= 10, `bundled devices: ${names.length}`);
  assert.equal(new Set(names).size, names.length, `short names repeat: ${names.join(', ')}`);
  for (const n of names) assert.ok(n.length <= 36, `${n}: too long for a phone's picker`);
});

test('pickerName cuts a long model name in the middle, keeping its end (the format)', () => {
  assert.equal(V.pickerName('smollm2-135m-instruct-q4_1'), 'smollm2-135m-instruct-q4_1');
  const cut = V.pickerName('my-own-finetune-of-smollm2-135m-instruct-with-a-very-long-name-q4_1');
  assert.equal([...cut].length, 26);
  assert.equal(cut, 'my-own-finetune-o…ame-q4_1');
  assert.equal(V.pickerName('abcdef', 5), 'abc…f');
});

test('loadedLabel: loaded or pruned, the name cut to fit a phone', () => {
  assert.equal(V.loadedLabel(null), 'loaded: none yet');
  assert.equal(V.loadedLabel('smollm2-135m-instruct-q4_1'), 'loaded: smollm2-135m-instruct-q4_1');
  assert.equal(V.loadedLabel('smollm2-135m-instruct-q4_1, pruned to 119 M'), 'pruned: smollm2-135m…-q4_1 (119 M)');
});
