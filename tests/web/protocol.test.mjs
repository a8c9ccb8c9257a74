// Unit tests for web/protocol.js (pure: no DOM, no wasm). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';
import * as V from '../../web/estimate-view.js';
import { smolLmInfo } from './fixtures/model-info.mjs';

const goodParams = () => ({ prompt: 'The capital of France is', chat: false, maxTokens: 16, temperature: 0, topP: 0.9, seed: 42 });

const goodMetrics = () => ({
  load_ms: 812.5,
  prompt_tokens: 6,
  generated_tokens: 16,
  ttft_ms: 120.25,
  prefill_tok_s: 49.9,
  decode_tok_s: 21.3,
  weights_bytes: 538060032,
  weights: 'w4g32',
  embedding: 'q8_0',
  kernel: 'simd128',
  kv_bytes: 506880,
  peak_bytes: 700055552,
  heap_bytes: 650000000,
  finish_reason: 'length',
  token_ms: [45.1, 46.2, 44.9],
});

const goodInfo = () => smolLmInfo();

const fakeBlob = () => ({ size: 10, stream() {}, arrayBuffer() {} });

test('message type constants are distinct and frozen', () => {
  const to = Object.values(P.ToWorker);
  const from = Object.values(P.FromWorker);
  assert.equal(new Set(to).size, to.length);
  assert.equal(new Set(from).size, from.length);
  assert.ok(Object.isFrozen(P.ToWorker) && Object.isFrozen(P.FromWorker));
  assert.deepEqual(to.sort(), ['estimate', 'export-gguf', 'fit', 'generate', 'inject-fault', 'load-file', 'load-url', 'perplexity', 'prune', 'restore', 'set-kernel', 'set-kv-format', 'set-threads', 'stop']);
  assert.ok(from.includes('kernel-set'));
});

test('page -> worker constructors build messages the validator accepts', () => {
  for (const m of [P.loadUrl('models/x.gguf'), P.loadFile(fakeBlob()), P.generate(goodParams()), P.stop()]) {
    assert.equal(P.validateToWorker(m), null, JSON.stringify(m));
  }
  assert.deepEqual(P.generate(goodParams()), { type: 'generate', ...goodParams() });
  assert.deepEqual(P.stop(), { type: 'stop' });
});

test("startOptions: the generate message's fields the wasm start() reads, nothing else", () => {
  assert.deepEqual(Object.keys(P.GENERATE_FIELDS), [...P.START_OPTION_KEYS], 'the generate message carries exactly the start options');
  assert.deepEqual(P.startOptions(P.generate(goodParams())), goodParams(), 'type is left out');
  assert.deepEqual(P.startOptions(P.generate({ ...goodParams(), keep: true })), { ...goodParams(), keep: true });
  assert.equal('keep' in P.startOptions({ ...goodParams(), keep: undefined }), false, 'undefined is left out');
  assert.equal('extra' in P.startOptions({ ...goodParams(), extra: 1 }), false);
  assert.deepEqual(P.startOptions(null), {});
});

test('page -> worker constructors throw on bad input', () => {
  assert.throws(() => P.loadUrl(''), TypeError);
  assert.throws(() => P.loadUrl(42), TypeError);
  assert.throws(() => P.loadFile('not a file'), TypeError);
  assert.throws(() => P.loadFile(null), TypeError);
  assert.throws(() => P.generate({ ...goodParams(), maxTokens: 0 }), /max tokens/);
  assert.throws(() => P.loadUrl('models/x.gguf', 'w3'), /weights must be one of/);
  assert.throws(() => P.loadUrl('models/x.gguf', null), TypeError);
  assert.throws(() => P.loadFile(fakeBlob(), 'Q4_1'), /weights/);
  assert.throws(() => P.setKernel(''), TypeError);
  assert.throws(() => P.setKernel(undefined), TypeError);
  assert.throws(() => P.setKernel('SIMD 128'), /kernel/);
});

test('weight formats: auto first (the page default: every tensor as the file holds it), each with a label', () => {
  assert.equal(P.DEFAULT_WEIGHTS, 'auto');
  assert.ok(P.WEIGHT_FORMATS.includes('auto'));
  assert.equal(P.WEIGHT_FORMATS[0], P.DEFAULT_WEIGHTS);
  assert.ok(Object.isFrozen(P.WEIGHT_FORMATS));
  assert.equal(new Set(P.WEIGHT_FORMATS).size, P.WEIGHT_FORMATS.length);
  for (const f of P.WEIGHT_FORMATS) assert.match(P.WEIGHT_FORMAT_LABELS[f], new RegExp(`^${f}`));
});

test('load messages carry an optional weight format; set-kernel names a kernel', () => {
  assert.deepEqual(P.loadUrl('models/x.gguf'), { type: 'load-url', url: 'models/x.gguf' });
  assert.equal('weights' in P.loadUrl('models/x.gguf', undefined), false);
  for (const w of P.WEIGHT_FORMATS) {
    const u = P.loadUrl('models/x.gguf', w);
    assert.deepEqual(u, { type: 'load-url', url: 'models/x.gguf', weights: w });
    assert.equal(P.validateToWorker(u), null);
    const f = P.loadFile(fakeBlob(), w);
    assert.equal(f.weights, w);
    assert.equal(P.validateToWorker(f), null);
  }
  for (const k of ['simd128', 'scalar', 'portable', 'avx2']) {
    const m = P.setKernel(k);
    assert.deepEqual(m, { type: 'set-kernel', name: k });
    assert.equal(P.validateToWorker(m), null);
  }
});

test('validateToWorker rejects malformed messages', () => {
  const bad = [
    null,
    undefined,
    'stop',
    [],
    {},
    { type: 'explode' },
    { type: 'load-url' },
    { type: 'load-url', url: '' },
    { type: 'load-file', file: {} },
    { type: 'load-url', url: 'models/x.gguf', weights: 'w3' },
    { type: 'load-url', url: 'models/x.gguf', weights: null },
    { type: 'load-url', url: 'models/x.gguf', weights: 32 },
    { type: 'load-url', url: 'models/x.gguf', weights: 'W4G32' },
    { type: 'load-file', file: fakeBlob(), weights: 'q4_1' },
    { type: 'load-file', file: fakeBlob(), weights: '' },
    { type: 'set-kernel' },
    { type: 'set-kernel', name: '' },
    { type: 'set-kernel', name: 7 },
    { type: 'set-kernel', name: 'simd 128' },
    { type: 'set-kernel', name: '<img src=x>' },
    { type: 'set-kernel', name: 'k'.repeat(64) },
    { type: 'generate' },
    { type: 'generate', ...goodParams(), prompt: '' },
    { type: 'generate', ...goodParams(), prompt: '   ' },
    { type: 'generate', ...goodParams(), prompt: 5 },
    { type: 'generate', ...goodParams(), chat: 'yes' },
    { type: 'generate', ...goodParams(), maxTokens: 1.5 },
    { type: 'generate', ...goodParams(), maxTokens: -1 },
    { type: 'generate', ...goodParams(), maxTokens: 100000 },
    { type: 'generate', ...goodParams(), maxTokens: '16' },
    { type: 'generate', ...goodParams(), temperature: -0.1 },
    { type: 'generate', ...goodParams(), temperature: NaN },
    { type: 'generate', ...goodParams(), temperature: Infinity },
    { type: 'generate', ...goodParams(), topP: 0 },
    { type: 'generate', ...goodParams(), topP: 1.01 },
    { type: 'generate', ...goodParams(), seed: -1 },
    { type: 'generate', ...goodParams(), seed: 2 ** 32 },
    { type: 'generate', ...goodParams(), seed: 0.5 },
  ];
  for (const m of bad) {
    const e = P.validateToWorker(m);
    assert.equal(typeof e, 'string', `should reject ${JSON.stringify(m)}`);
    assert.ok(e.length > 0);
  }
});

test('generate errors name the knob and the value', () => {
  assert.match(P.checkGenerateParams({ ...goodParams(), temperature: 9 }), /temperature.*9/);
  assert.match(P.checkGenerateParams({ ...goodParams(), topP: 0 }), /top-p.*0/);
  assert.match(P.checkGenerateParams({ ...goodParams(), seed: -3 }), /seed.*-3/);
  assert.match(P.checkGenerateParams({ ...goodParams(), maxTokens: 0 }), /max tokens.*0/);
  assert.equal(P.checkGenerateParams({ ...goodParams(), temperature: 0, topP: 1, seed: 0, maxTokens: 1 }), null);
});

test('parseGenerateForm turns form strings into numbers or a clear error', () => {
  const ok = P.parseGenerateForm({ prompt: 'hi', chat: true, maxTokens: '16', temperature: '0', topP: '0.95', seed: '7' });
  assert.deepEqual(ok, { params: { prompt: 'hi', chat: true, maxTokens: 16, temperature: 0, topP: 0.95, seed: 7 } });
  const form = { prompt: 'hi', chat: false, maxTokens: '8', temperature: '0', topP: '1', seed: '1' };
  // Plain words: the input as labelled, its own range (the same as the input's min/max), what it holds.
  assert.deepEqual(P.parseGenerateForm({ ...form, maxTokens: '' }), { error: 'Max tokens must be a whole number from 1 to 4096; the box is empty (or not a number).', field: 'maxTokens' });
  assert.deepEqual(P.parseGenerateForm({ ...form, maxTokens: '5000' }), { error: 'Max tokens must be a whole number from 1 to 4096; got 5000.', field: 'maxTokens' });
  assert.deepEqual(P.parseGenerateForm({ ...form, temperature: 'warm' }), { error: 'Temperature must be a number from 0 to 5 (0 is greedy); got warm.', field: 'temperature' });
  assert.deepEqual(P.parseGenerateForm({ ...form, topP: '0' }), { error: 'Top-p must be a number above 0 and at most 1; got 0.', field: 'topP' });
  assert.deepEqual(P.parseGenerateForm({ ...form, seed: '-1' }), { error: 'Seed must be a whole number from 0 to 4294967295; got -1.', field: 'seed' });
  assert.deepEqual(P.parseGenerateForm({ ...form, prompt: '  ' }), { error: 'Write a prompt first: the prompt is empty.', field: 'prompt' });
  assert.equal(P.parseGenerateForm({ ...form, maxTokens: '4096', seed: '4294967295' }).params.maxTokens, 4096);
});

test('worker -> page constructors build valid messages and drop token_ms from metrics', () => {
  const msgs = [
    P.booted('0.1.0', 'simd128'),
    P.booted('0.1.0', 'baseline'),
    P.progress(0, 98362432),
    P.progress(1024, null),
    P.progress(1024),
    P.parsing(98362432),
    P.loaded(goodInfo(), goodMetrics()),
    P.kernelSet({ ...goodInfo(), kernel: 'scalar' }),
    P.started(),
    P.piece(' Paris', [45.1], goodMetrics()),
    P.piece('', [], { ...goodMetrics(), finish_reason: null }),
    P.done('length', goodMetrics()),
    P.done('stopped', { ...goodMetrics(), finish_reason: null }),
    P.error('bad magic'),
    P.error('panicked', true),
  ];
  for (const m of msgs) assert.equal(P.validateFromWorker(m), null, JSON.stringify(m));
  assert.equal('token_ms' in P.piece('x', [1], goodMetrics()).metrics, false);
  assert.equal('token_ms' in P.done('stop', goodMetrics()).metrics, false);
  assert.equal(P.progress(5).total, null);
  assert.deepEqual(P.error('', false), { type: 'error', message: 'unknown error', fatal: false });
});

test('worker -> page constructors throw on bad input', () => {
  assert.throws(() => P.booted(1, 'simd128'), TypeError);
  assert.throws(() => P.booted('0.1.0'), /build must be one of simd128, baseline, threads/);
  assert.match(P.validateFromWorker({ type: 'booted', version: '0.1.0', build: 'sse2' }), /build must be one of/);
  assert.throws(() => P.progress(-1, 10), TypeError);
  assert.throws(() => P.progress(1.5, 10), TypeError);
  assert.throws(() => P.piece(3, [], goodMetrics()), TypeError);
  assert.throws(() => P.done('finished', goodMetrics()), TypeError);
  assert.throws(() => P.loaded({ ...goodInfo(), n_layers: undefined }, goodMetrics()), /n_layers/);
  assert.throws(() => P.kernelSet(undefined), TypeError);
  assert.throws(() => P.kernelSet({ ...goodInfo(), kernel: 'avx2' }), /info.kernel/);
  assert.throws(() => P.loaded(goodInfo(), { ...goodMetrics(), kernel: undefined }), /metrics.kernel/);
});

test('validateFromWorker rejects malformed messages', () => {
  const m = goodMetrics();
  const bad = [
    null,
    42,
    { type: 'nope' },
    { type: 'booted' },
    { type: 'progress', loaded: '5', total: 10 },
    { type: 'progress', loaded: 5, total: -10 },
    { type: 'progress', loaded: 5 },
    { type: 'parsing', bytes: -1 },
    { type: 'loaded', info: goodInfo() },
    { type: 'loaded', info: { ...goodInfo(), chat_template: 'yes' }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), params: -5 }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), name: 3 }, metrics: m },
    { type: 'piece', text: 'x', metrics: m },
    { type: 'piece', text: 'x', tokenMs: [-1], metrics: m },
    { type: 'piece', text: 'x', tokenMs: ['1'], metrics: m },
    { type: 'piece', text: null, tokenMs: [], metrics: m },
    { type: 'piece', text: 'x', tokenMs: [], metrics: { ...m, decode_tok_s: 'fast' } },
    { type: 'piece', text: 'x', tokenMs: [], metrics: { ...m, kv_bytes: undefined } },
    { type: 'piece', text: 'x', tokenMs: [], metrics: { ...m, ttft_ms: NaN } },
    { type: 'piece', text: 'x', tokenMs: [], metrics: { ...m, finish_reason: 'eos' } },
    { type: 'piece', text: 'x', tokenMs: [], metrics: { ...m, token_ms: [1, 'x'] } },
    { type: 'loaded', info: { ...goodInfo(), weights: undefined }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), weights: { weights: 'w4g32', embedding: 'q8_0' } }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), weights: { weights: 'w4g32', embedding: 'q8_0', stored: [{ format: 'q4_1', matrices: -1, bytes: 5 }] } }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), kernels: [] }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), kernels: 'simd128' }, metrics: m },
    { type: 'loaded', info: { ...goodInfo(), kernel: 'avx2' }, metrics: m },
    { type: 'loaded', info: goodInfo(), metrics: { ...m, weights: undefined } },
    { type: 'loaded', info: goodInfo(), metrics: { ...m, embedding: '' } },
    { type: 'loaded', info: goodInfo(), metrics: { ...m, kernel: 3 } },
    { type: 'kernel-set' },
    { type: 'kernel-set', info: { ...goodInfo(), kernel: undefined } },
    { type: 'kernel-set', info: { ...goodInfo(), kernels: [1] } },
    { type: 'done', reason: 'stop' },
    { type: 'done', reason: 'eos', metrics: m },
    { type: 'error' },
    { type: 'error', message: '', fatal: false },
    { type: 'error', message: 'x' },
  ];
  for (const msg of bad) {
    const e = P.validateFromWorker(msg);
    assert.equal(typeof e, 'string', `should reject ${JSON.stringify(msg)}`);
  }
});

test('errorMessage extracts a message from anything thrown', () => {
  assert.equal(P.errorMessage(new Error('bad magic')), 'bad magic');
  assert.equal(P.errorMessage(new TypeError('')), 'TypeError');
  assert.equal(P.errorMessage('plain'), 'plain');
  assert.equal(P.errorMessage({ message: 'obj' }), 'obj');
  assert.equal(P.errorMessage(undefined), 'unknown error');
  assert.equal(P.errorMessage(7), '7');
});

test('number formatting: plain numbers, no units, empty when absent', () => {
  assert.equal(P.formatNumber(12.345, 1), '12.3');
  assert.equal(P.formatNumber(812.5, 0), '813');
  assert.equal(P.formatNumber(undefined), '');
  assert.equal(P.formatNumber(NaN), '');
  assert.equal(P.formatBytes(538060032), '538060032');
  assert.equal(P.formatBytes(1.6), '2');
  assert.equal(P.formatBytes(null), '');
});

test('human-readable sizes', () => {
  assert.equal(P.formatMB(98362432), '93.8 MiB');
  assert.equal(P.formatMB(538060032), '513.1 MiB');
  assert.equal(P.formatMB(96576768), '92.1 MiB', 'the default model: the same figure as the estimator');
  assert.equal(P.formatMB, V.formatBinary, 'one function for bytes on the whole page');
  assert.equal(P.formatMB(506880), '495.0 KiB');
  assert.equal(P.formatMB(undefined), '');
  assert.equal(P.formatProgress(0, 98362432), '0.0 / 93.8 MiB');
  assert.equal(P.formatProgress(49181216, 98362432), '46.9 / 93.8 MiB');
  assert.equal(P.formatProgress(2 * 2 ** 20, null), '2.0 MiB');
  assert.equal(P.formatProgress(49181216, 98362432, 2000), '46.9 / 93.8 MiB · about 2.0 s left');
  assert.equal(P.formatProgress(9836243, 98362432, 3000), '9.4 / 93.8 MiB · about 27 s left');
  assert.equal(P.formatProgress(98362432, 98362432, 3000), '93.8 / 93.8 MiB', 'nothing left when done');
  assert.equal(P.formatProgress(0, 98362432, 3000), '0.0 / 93.8 MiB', 'no guess before the first byte');
  assert.equal(P.timeLeft(1, 2, NaN), '');
  assert.equal(P.formatParams(134515008), '135 M');
  assert.equal(P.formatParams(1_240_000_000), '1.24 B');
  assert.equal(P.formatParams(15_200_000), '15.2 M');
  assert.equal(P.formatParams(900), '900');
});

test('metricCells: every cell is a plain number string or empty', () => {
  const cells = P.metricCells(goodMetrics());
  assert.deepEqual(cells, {
    'metric-load-ms': '813',
    'metric-ttft-ms': '120.3',
    'metric-prefill-tps': '49.9',
    'metric-decode-tps': '21.3',
    'metric-weights-bytes': '538060032',
    'metric-kv-bytes': '506880',
    'metric-peak-bytes': '700055552',
    'metric-heap-bytes': '650000000',
    'metric-prompt-tokens': '6',
    'metric-generated-tokens': '16',
  });
  for (const v of Object.values(cells)) assert.match(v, /^\d+(\.\d+)?$/);
});

test('metricCells leaves unmeasured values empty', () => {
  const afterLoad = { ...goodMetrics(), prompt_tokens: 0, generated_tokens: 0, ttft_ms: 0, prefill_tok_s: 0, decode_tok_s: 0, kv_bytes: 0 };
  const cells = P.metricCells(afterLoad);
  assert.equal(cells['metric-load-ms'], '813');
  assert.equal(cells['metric-weights-bytes'], '538060032');
  assert.equal(cells['metric-ttft-ms'], '');
  assert.equal(cells['metric-prefill-tps'], '');
  assert.equal(cells['metric-decode-tps'], '');
  assert.equal(cells['metric-kv-bytes'], '');
  assert.equal(cells['metric-generated-tokens'], '0');
  // One token: TTFT is known, a decode rate is not.
  const one = P.metricCells({ ...goodMetrics(), generated_tokens: 1 });
  assert.equal(one['metric-ttft-ms'], '120.3');
  assert.equal(one['metric-decode-tps'], '');
  // Nothing at all.
  for (const v of Object.values(P.metricCells(undefined))) assert.equal(v, '');
});

test('weights and stored formats for the metrics area and the model info', () => {
  assert.equal(P.formatWeightsUsed(goodMetrics()), 'w4g32 · embedding q8_0');
  assert.equal(P.formatWeightsUsed({ weights: 'f32', embedding: 'f32' }), 'f32 · embedding f32');
  assert.equal(P.formatWeightsUsed({ weights: 'f16' }), 'f16');
  // One name for what the engine holds: the requested format with the file's own one it kept.
  assert.equal(P.formatWeightsUsed({ ...goodMetrics(), stored: goodInfo().weights.stored }), "w4g32 (the file's q4_1 kept) · embedding q8_0");
  assert.equal(P.describeWeights('w4g32', goodInfo().weights.stored, 'q8_0'), "w4g32 (the file's q4_1 kept)");
  assert.equal(P.describeWeights('q8_0', [{ format: 'q8_0', matrices: 211, bytes: 1 }], 'q8_0'), 'q8_0');
  assert.equal(P.describeWeights('f16', undefined), 'f16');
  assert.equal(P.describeWeights('', []), '');
  // The model's name for people: the file name, else general.name.
  assert.equal(P.displayName('https://x.test/edgefit/models/smollm2-135m-instruct-q4_1.gguf', goodInfo()), 'smollm2-135m-instruct-q4_1');
  assert.equal(P.displayName('My Model.GGUF', goodInfo()), 'My Model');
  assert.equal(P.displayName(null, goodInfo()), 'SmolLM2 135M Instruct');
  assert.equal(P.displayName('', { name: ' ' }), 'model');
  assert.equal(P.formatWeightsUsed({}), '');
  assert.equal(P.formatWeightsUsed(null), '');
  assert.equal(P.formatStored(goodInfo().weights.stored), 'q8_0 × 1 (28.7 MiB), q4_1 × 210 (63.9 MiB)');
  assert.equal(P.formatStored([{ format: 'f32', matrices: 211, bytes: 538060032 }]), 'f32 × 211 (513.1 MiB)');
  assert.equal(P.formatStored([]), '');
  assert.equal(P.formatStored(undefined), '');
});

test('the wasm build: simd128 when the engine validates the SIMD probe, baseline otherwise, ?wasm= overrides', () => {
  // This Node validates SIMD; a probe with one opcode changed to an undefined one does not.
  assert.equal(WebAssembly.validate(new Uint8Array(P.SIMD_PROBE)), true);
  const broken = [...P.SIMD_PROBE];
  broken[broken.length - 2] = 0xff;
  assert.equal(WebAssembly.validate(new Uint8Array(broken)), false);
  assert.deepEqual(P.chooseWasmBuild(true), { build: 'simd128' });
  assert.deepEqual(P.chooseWasmBuild(false), { build: 'baseline' });
  assert.deepEqual(P.chooseWasmBuild(true, 'baseline'), { build: 'baseline' });
  assert.match(P.chooseWasmBuild(false, 'simd128').error, /no WebAssembly SIMD/);
  assert.match(P.chooseWasmBuild(true, '<script>').error, /\?wasm=<script> is not a wasm build \(simd128, baseline, threads\)/);
  assert.equal(P.WASM_BUILD_DIRS.baseline, './pkg-baseline/');
});

test('heap_bytes (the wasm allocator’s count) is optional, and a non-negative integer when present', () => {
  assert.equal(P.checkMetrics(goodMetrics()), null);
  const { heap_bytes: _dropped, ...cli } = goodMetrics();
  assert.equal(P.checkMetrics(cli), null, 'the CLI’s engine does not count its heap');
  assert.equal(P.metricCells(cli)['metric-heap-bytes'], '');
  for (const bad of [-1, 1.5, '5', null]) {
    assert.match(P.checkMetrics({ ...goodMetrics(), heap_bytes: bad }), /metrics\.heap_bytes must be a non-negative integer/, String(bad));
  }
});

test('prefilling {done, total}: the prompt fed in chunks, counted, with the time left', () => {
  assert.deepEqual(P.prefilling(64, 1501), { type: 'prefilling', done: 64, total: 1501 });
  assert.equal(P.validateFromWorker({ type: 'prefilling', done: 1501, total: 1501 }), null);
  for (const [done, total] of [[65, 64], [-1, 10], [1.5, 10], [0, 0], [null, 10]]) {
    assert.throws(() => P.prefilling(done, total), /prefilling: done\/total/, `${done}/${total}`);
  }
  assert.equal(P.prefillStatus(128, 1501, 4000), 'generating… reading the prompt: 128 / 1501 tokens · about 43 s left');
  assert.equal(P.prefillStatus(1024, 2048, 1000), 'generating… reading the prompt: 1024 / 2048 tokens · about 1.0 s left');
});

test('perplexityWarning: only above twice the model as loaded', () => {
  assert.equal(P.perplexityWarning(10, 20), '');
  assert.equal(P.perplexityWarning(10, 19.9), '');
  assert.match(P.perplexityWarning(10, 25), /^Warning: perplexity rose 2\.5× \(10\.00 → 25\.00\)/);
  assert.equal(P.perplexityWarning(null, 25), '');
  assert.equal(P.perplexityWarning(10, Number.NaN), '');
});

test('describeLayers: the pruned widths in one line', () => {
  const l = { n_heads: 9, n_kv_heads: 3, qk_dim: 45, v_dim: 45, ffn: 1075 };
  assert.equal(P.describeLayers([l, l]), 'FFN 1075, 9 heads (3 KV), Q/K dim 45, V dim 45 in every layer');
  assert.equal(P.describeLayers([l, { ...l, ffn: 768 }, l]), 'FFN 768\u20131075, 9 heads (3 KV), Q/K dim 45, V dim 45 over the 3 layers');
  assert.equal(P.describeLayers(undefined), '');
  assert.equal(P.describeLayers([]), '');
});

test('exportFormatNote: says why a 4-bit model downloads as q8_0', () => {
  assert.match(P.exportFormatNote('w4g32', 'q8_0'), /saved as q8_0: .*not yet in the loaded 4-bit w4g32/);
  assert.equal(P.exportFormatNote('q8_0', 'q8_0'), '');
  assert.equal(P.exportFormatNote('f16', 'q8_0'), '');
  assert.equal(P.exportFormatNote(undefined, 'q8_0'), '');
  // auto names what the layers hold: the file's q4_1 (4-bit), or a Q4_K_M file's q5_0.
  const q41 = [{ format: 'q4_1', matrices: 210, bytes: 1 }, { format: 'q8_0', matrices: 1, bytes: 1 }];
  assert.match(P.exportFormatNote('auto', 'q8_0', q41), /not yet in the loaded 4-bit q4_1/);
  const km = [{ format: 'q8_0', matrices: 10, bytes: 1 }, { format: 'q5_0', matrices: 81, bytes: 1 }, { format: 'q4_k', matrices: 27, bytes: 1 }];
  assert.match(P.exportFormatNote('auto', 'q8_0', km), /not yet in the loaded q5_0,/);
  assert.equal(P.exportFormatNote('auto', 'q8_0', [{ format: 'q8_0', matrices: 211, bytes: 1 }]), '');
});

test('exportChoice: the loaded format when the engine writes it, else q8_0 with the reason, before the click', () => {
  const q41 = [{ format: 'q4_1', matrices: 210, bytes: 1 }, { format: 'q8_0', matrices: 1, bytes: 1 }];
  assert.deepEqual(P.exportChoice({ weights: 'auto', stored: q41 }), {
    dtype: 'q8_0',
    label: 'Download GGUF (q8_0)',
    note: 'Downloads as q8_0: the engine writes GGUF in f32, f16 or q8_0, not yet in the loaded 4-bit q4_1, so the file is larger than the model in memory.',
  });
  assert.deepEqual(P.exportChoice({ weights: 'f32', stored: [{ format: 'f32', matrices: 211, bytes: 1 }] }), { dtype: 'f32', label: 'Download GGUF (f32)', note: '' });
  assert.equal(P.exportChoice({ weights: 'f16' }).dtype, 'f16');
  assert.equal(P.exportChoice({ weights: 'q8_0' }).note, '');
  assert.match(P.exportChoice({ weights: 'w4g128' }).note, /^Downloads as q8_0: .*not yet in the loaded 4-bit w4g128/);
  assert.deepEqual(P.exportChoice(undefined), { dtype: 'q8_0', label: 'Download GGUF (q8_0)', note: '' });
});

test('describeWeights: auto names the layers\' formats, the embedding named apart unless layers share it', () => {
  const km = [{ format: 'q8_0', matrices: 10, bytes: 1 }, { format: 'q5_0', matrices: 81, bytes: 1 }, { format: 'q4_k', matrices: 27, bytes: 1 }, { format: 'q6_k', matrices: 9, bytes: 1 }];
  assert.equal(P.describeWeights('auto', km, 'q8_0'), "auto (the file's q8_0, q5_0, q4_k, q6_k kept)");
  const q41 = [{ format: 'q4_1', matrices: 210, bytes: 1 }, { format: 'q8_0', matrices: 1, bytes: 1 }];
  assert.equal(P.describeWeights('auto', q41, 'q8_0'), "auto (the file's q4_1 kept)");
  assert.equal(P.formatWeightsUsed({ weights: 'auto', embedding: 'q8_0', stored: q41 }), "auto (the file's q4_1 kept) · embedding q8_0");
});

test('pruneLimits: the engine\'s refusals as disabled controls and one line', () => {
  assert.deepEqual(P.pruneLimits(null), { prune: '', qkDims: '', export: '', text: '' });
  const llama = { arch: 'llama', limits: { prune: null, qk_dims: null, export: null } };
  assert.equal(P.pruneLimits(llama).text, '');
  const gemma = { arch: 'gemma3', limits: { prune: null, qk_dims: 'its q/k RMSNorm', export: 'exporting `gemma3` is not implemented' } };
  const g = P.pruneLimits(gemma);
  assert.equal(g.prune, '');
  assert.equal(g.qkDims, 'its q/k RMSNorm');
  assert.match(g.text, /^Q\/K dims stay whole for gemma3: its q\/k RMSNorm\. No download for gemma3: exporting/);
  const phi = { arch: 'phi3', limits: { prune: 'partial RoPE', qk_dims: 'partial RoPE', export: 'no writer' } };
  assert.match(P.pruneLimits(phi).text, /^phi3 cannot be pruned here: partial RoPE\. No download/);
});
