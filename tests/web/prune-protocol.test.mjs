// Unit tests for the pruning panel's messages and helpers in web/protocol.js (pure: no DOM, no
// wasm). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';

const metrics = () => ({
  load_ms: 900, prompt_tokens: 0, generated_tokens: 0, ttft_ms: 0, prefill_tok_s: 0, decode_tok_s: 0,
  weights_bytes: 80_000_000, weights: 'w4g32', embedding: 'q8_0', kernel: 'simd128', kv_bytes: 0, peak_bytes: 600_000_000,
  kv_format: 'f32', kv_tokens: 0, kv_limit: 8192, token_ms: [],
});
const info = (params) => ({
  name: 'SmolLM2 135M Instruct', arch: 'llama', n_layers: 30, hidden: 576, n_heads: 9, n_kv_heads: 3, head_dim: 64,
  ffn: 1536, vocab: 49152, context_length: 8192, params, weights_bytes: 80_000_000,
  weights: { weights: 'w4g32', embedding: 'q8_0', stored: [{ format: 'w4g32', matrices: 210, bytes: 50_000_000 }] },
  kernel: 'simd128', kernels: ['scalar', 'simd128'], chat_template: true,
});
const report = (before, after) => ({
  importance: 'magnitude', allocation: 'uniform', params_before: before, params_after: after,
  kv_f32_bytes_per_token_before: 46080, kv_f32_bytes_per_token_after: 46080,
  removed: { layers: 0, query_heads: 0, kv_heads: 0, qk_dims: 0, v_dims: 0, mlp_channels: 9210 },
  dropped_layers: [], layers: [], shapes: [], pruning: {},
});
const plan = (over = {}) => ({ ratios: { heads: 0, qk_dims: 0, v_dims: 0, mlp: 0.2 }, layers: 0, importance: 'magnitude', allocation: 'uniform', ...over });

test('parsePruneForm reads the panel into a PrunePlan and names a bad knob', () => {
  const form = { mlp: '0.2', heads: '0', qk: '0.25', v: '0', layers: '2', method: 'activation' };
  assert.deepEqual(P.parsePruneForm(form, 30), {
    plan: { ratios: { heads: 0, qk_dims: 0.25, v_dims: 0, mlp: 0.2 }, layers: 2, importance: 'activation', allocation: 'uniform' },
  });
  // Plain words, the input's label and its own range, and which input it is.
  assert.deepEqual(P.parsePruneForm({ ...form, mlp: '0.95' }, 30), { error: 'MLP channels must be from 0% to 90%; got 95%.', field: 'mlp' });
  assert.deepEqual(P.parsePruneForm({ ...form, heads: '' }, 30), { error: 'Query heads must be from 0% to 90%; the box is empty (or not a number).', field: 'heads' });
  assert.equal(P.parsePruneForm({ ...form, qk: '-0.1' }, 30).field, 'qk');
  assert.equal(P.parsePruneForm({ ...form, v: 'x' }, 30).field, 'v');
  assert.deepEqual(P.parsePruneForm({ ...form, layers: '30' }, 30), {
    error: 'Layers dropped must be a whole number from 0 to 29 (the model has 30 layers and keeps at least one); got 30.',
    field: 'layers',
  });
  assert.equal(P.parsePruneForm({ ...form, layers: '29' }, 30).plan.layers, 29);
  assert.match(P.parsePruneForm({ ...form, layers: '1.5' }, 30).error, /^Layers dropped must be a whole number from 0 to 29 .*; got 1\.5\.$/);
  assert.match(P.parsePruneForm({ ...form, layers: '-1' }).error, /^Layers dropped must be a whole number, 0 or more; got -1\.$/);
  assert.equal(P.parsePruneForm({ ...form, method: 'random' }, 30).field, 'method');
  assert.match(P.parsePruneForm({ ...form, method: 'random' }, 30).error, /importance must be one of/);
  assert.equal(P.parsePruneForm({ ...form, allocation: 'global' }, 30).plan.allocation, 'global');
  assert.match(P.parsePruneForm({ ...form, allocation: 'per-layer' }, 30).error, /allocation must be one of uniform, global/);
  assert.equal(P.planIsEmpty(P.parsePruneForm({ ...form, mlp: '0', qk: '0', layers: '0' }).plan), true);
  assert.equal(P.planIsEmpty(P.parsePruneForm(form).plan), false);
});

test('prune / restore / perplexity / export-gguf constructors build messages the worker accepts', () => {
  const cal = { url: 'http://x/models/calibration.txt', maxTokens: 1024, window: 256 };
  const msgs = [
    P.prune(plan()),
    P.prune(plan({ importance: 'activation' }), cal),
    P.restore(),
    P.perplexity('http://x/data/constitution.txt', 256),
    P.exportGguf('q8_0'),
  ];
  for (const m of msgs) assert.equal(P.validateToWorker(m), null, JSON.stringify(m));
  assert.deepEqual(P.prune(plan()), { type: 'prune', plan: plan() });
  assert.deepEqual(msgs[1].calibration, cal);
  // Refused: activation without a calibration text, unknown plan keys and ratios, bad dtype.
  assert.throws(() => P.prune(plan({ importance: 'activation' })), /calibration text/);
  assert.throws(() => P.prune({ ...plan(), per_layer: [] }), /per_layer is not a pruning setting/);
  assert.throws(() => P.prune(plan({ ratios: { ffn: 0.2 } })), /ffn is not a ratio/);
  assert.throws(() => P.prune(plan(), { url: 'u', maxTokens: 1024, window: 0 }), /window/);
  assert.throws(() => P.perplexity('', 256), /url/);
  assert.throws(() => P.perplexity('u', 1), /maxTokens/);
  assert.throws(() => P.exportGguf('q4_0'), /dtype/);
  assert.match(P.validateToWorker({ type: 'prune', plan: plan({ layers: -1 }) }), /^prune: layers/);
  assert.match(P.validateToWorker({ type: 'export-gguf', dtype: 'bf16' }), /^export-gguf: dtype/);
});

test('worker -> page pruning messages validate; pruned must agree with its report', () => {
  const m = P.pruned(report(134515008, 126_000_000), info(126_000_000), metrics());
  assert.equal(P.validateFromWorker(m), null);
  assert.equal('token_ms' in m.metrics, false, 'token_ms is stripped');
  assert.throws(() => P.pruned(report(134515008, 126_000_000), info(134515008), metrics()), /not the report's params_after/);
  assert.throws(() => P.pruned({ ...report(1, 1), params_after: -1 }, info(1), metrics()), /params_after/);
  assert.equal(P.validateFromWorker(P.restored(info(134515008), metrics())), null);
  assert.equal(P.validateFromWorker(P.perplexityResult({ perplexity: 9.7, tokens: 256, ms: 1500 }, 134515008)), null);
  assert.throws(() => P.perplexityResult({ perplexity: 0, tokens: 256 }, 1), /perplexity > 0/);
  assert.throws(() => P.perplexityResult({ perplexity: 9, tokens: 256 }, 1.5), /params/);
  assert.equal(P.validateFromWorker(P.exported('m.gguf', new Uint8Array(4))), null);
  assert.throws(() => P.exported('m.gguf', [1, 2]), /Uint8Array/);
  assert.throws(() => P.exported('', new Uint8Array(1)), /name/);
  for (const s of P.PRUNE_STAGES) assert.equal(P.validateFromWorker(P.pruneProgress(s)), null);
  assert.deepEqual(P.pruneProgress('calibrating', 256, 1024), { type: 'prune-progress', stage: 'calibrating', done: 256, total: 1024 });
  assert.throws(() => P.pruneProgress('thinking'), /stage/);
  assert.throws(() => P.pruneProgress('calibrating', -1, 10), /done/);
});

test('formatPruneProgress shows tokens and the time left; exportFileName is a safe file name', () => {
  assert.equal(P.formatPruneProgress('pruning', null, null, 0), 'pruning and re-quantizing…');
  assert.equal(P.formatPruneProgress('calibrating', 0, 1024, 0), 'calibrating · 0 / 1024 tokens');
  assert.equal(P.formatPruneProgress('calibrating', 256, 1024, 1000), 'calibrating · 256 / 1024 tokens · about 3.0 s left');
  assert.equal(P.formatPruneProgress('calibrating', 256, 1024, 10_000), 'calibrating · 256 / 1024 tokens · about 30 s left');
  assert.equal(P.formatPruneProgress('calibrating', 1024, 1024, 4000), 'calibrating · 1024 / 1024 tokens');
  assert.equal(P.exportFileName('SmolLM2 135M Instruct', 120_400_000, true, 'q8_0'), 'smollm2-135m-instruct-pruned-120M-q8_0.gguf');
  assert.equal(P.exportFileName('../../etc/passwd', 134_515_008, false, 'f16'), 'etc-passwd-f16.gguf');
  assert.equal(P.exportFileName('', 1, false, 'q8_0'), 'model-q8_0.gguf');
});
