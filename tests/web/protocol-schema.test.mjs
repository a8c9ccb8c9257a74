// Unit tests for the schema table of web/protocol/messages.js: every message kind is described once
// (doc, fields, constructor, validator) and the three agree. Pure: no DOM, no wasm.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';

const metrics = () => ({
  load_ms: 900, prompt_tokens: 0, generated_tokens: 0, ttft_ms: 0, prefill_tok_s: 0, decode_tok_s: 0,
  weights_bytes: 80_000_000, weights: 'w4g32', embedding: 'q8_0', kernel: 'simd128', kv_bytes: 0, peak_bytes: 600_000_000,
  kv_format: 'f32', kv_tokens: 0, kv_limit: 8192,
});
const info = (params = 134515008) => ({
  name: 'SmolLM2', arch: 'llama', n_layers: 30, hidden: 576, n_heads: 9, n_kv_heads: 3, head_dim: 64,
  ffn: 1536, vocab: 49152, context_length: 8192, params, weights_bytes: 80_000_000,
  weights: { weights: 'w4g32', embedding: 'q8_0', stored: [{ format: 'w4g32', matrices: 210, bytes: 50_000_000 }] },
  kernel: 'simd128', kernels: ['scalar', 'simd128'], chat_template: true,
});
const report = { memory: {}, latency: {}, thermal: {}, verdict: {}, explain: {}, layers: [], warnings: [] };
const device = { id: 'x', name: 'X', units: ['cpu'], default_unit: 'cpu' };
const pruneReport = {
  params_before: 134515008, params_after: 120000000, kv_f32_bytes_per_token_before: 1, kv_f32_bytes_per_token_after: 1,
  removed: {}, dropped_layers: [],
};
const plan = { ratios: { mlp: 0.2 }, layers: 0, importance: 'magnitude', allocation: 'uniform' };
const fitRes = { device: 'd', device_name: 'D', tried: 0, failed: { memory: 0, ttft: 0, sustained: 0, temperature: 0, invalid: 0 }, rows: [], models: [] };

/** One valid message of every kind, from its constructor. */
const samples = () => [
  P.loadUrl('models/x.gguf', 'w4g32'),
  P.loadFile({ size: 1, stream() {} }),
  P.setKernel('simd128'),
  P.setKvFormat('int8'),
  P.setThreads(2, 4),
  P.generate({ prompt: 'hi', chat: true, maxTokens: 8, temperature: 0, topP: 1, seed: 1, keep: true }),
  P.stop(),
  P.prune(plan),
  P.restore(),
  P.perplexity('u', 256),
  P.exportGguf('q8_0'),
  P.estimate(1, 'panel', { kind: 'loaded' }, { kind: 'this-browser' }, {}, 0.2),
  P.fit(2, { kind: 'bundled', id: 'd' }, 'all', 2048),
  P.injectFault(3),
  P.booted('0.1.0', 'simd128'),
  P.progress(5, 10),
  P.parsing(10),
  P.loaded(info(), metrics()),
  P.kernelSet(info()),
  P.threadsSet(2),
  P.kvFormatSet('f32', metrics(), 0),
  P.started(),
  P.prefilling(1, 2),
  P.piece('x', [1], metrics(), null),
  P.done('stop', metrics()),
  P.error('bad', true),
  P.cached(true),
  P.catalog([{ id: 'a', name: 'A' }], [{ id: 'd', name: 'D' }], ['f32'], [{ id: 'llamacpp', name: 'llama.cpp', units: ['cpu'] }]),
  P.measuring(1, 7),
  P.estimateResult(3, 'panel', report, device, null, null, { workerMs: 1, tables: 'bundled' }),
  P.estimateError(3, 'panel', 'no'),
  P.fitResult(2, fitRes),
  P.fitError(2, 'no'),
  P.fitProgress(2, 1, 3),
  P.pruneProgress('calibrating', 1, 4),
  P.pruned(pruneReport, info(120000000), metrics()),
  P.restored(info(), metrics()),
  P.perplexityResult({ perplexity: 9.5, tokens: 256 }, 1),
  P.exported('m.gguf', new Uint8Array(2)),
];

test('the enums name every kind of the schema, by the names the page and worker use', () => {
  assert.deepEqual(Object.keys(P.ToWorker).sort(), [
    'ESTIMATE', 'EXPORT_GGUF', 'FIT', 'GENERATE', 'INJECT_FAULT', 'LOAD_FILE', 'LOAD_URL', 'PERPLEXITY', 'PRUNE', 'RESTORE',
    'SET_KERNEL', 'SET_KV_FORMAT', 'SET_THREADS', 'STOP',
  ]);
  assert.deepEqual(Object.keys(P.FromWorker).sort(), [
    'BOOTED', 'CACHED', 'CATALOG', 'DONE', 'ERROR', 'ESTIMATE_ERROR', 'ESTIMATE_RESULT', 'EXPORTED', 'FIT_ERROR', 'FIT_PROGRESS',
    'FIT_RESULT', 'KERNEL_SET', 'KV_FORMAT_SET', 'LOADED', 'MEASURING', 'PARSING', 'PERPLEXITY_RESULT', 'PIECE', 'PREFILLING',
    'PROGRESS', 'PRUNED', 'PRUNE_PROGRESS', 'RESTORED', 'STARTED', 'THREADS_SET',
  ]);
  const kinds = [...Object.values(P.ToWorker), ...Object.values(P.FromWorker)];
  assert.deepEqual(Object.keys(P.MESSAGE_FIELDS).sort(), [...kinds].sort());
  // Every kind has one sample above, so the loops below cover the whole table.
  assert.deepEqual(samples().map((m) => m.type).sort(), [...kinds].sort());
});

test('every kind is documented, and the docs list each kind with its fields', () => {
  const doc = P.describeMessages();
  for (const [type, fields] of Object.entries(P.MESSAGE_FIELDS)) {
    assert.ok(typeof P.MESSAGE_DOCS[type] === 'string' && P.MESSAGE_DOCS[type].length > 10, `${type} has a doc`);
    const line = doc.split('\n').find((l) => l.startsWith(`  ${type} {`));
    assert.ok(line, `describeMessages lists ${type}`);
    for (const f of fields) assert.match(line, new RegExp(`[{ ]${f}\\??[,}]`), `${type}'s line names ${f}`);
  }
  assert.match(doc, /^ {2}load-url \{url, weights\?\}$/m);
  assert.match(doc, /^ {2}piece \{text, tokenMs, metrics, kvEstimateBytes\?\}$/m);
});

test('constructors give exactly the schema fields, and the validators accept what they build', () => {
  for (const m of samples()) {
    const v = Object.values(P.ToWorker).includes(m.type) ? P.validateToWorker : P.validateFromWorker;
    assert.equal(v(m), null, JSON.stringify(m));
    for (const k of Object.keys(m)) assert.ok(k === 'type' || P.MESSAGE_FIELDS[m.type].includes(k), `${m.type}.${k} is in the schema`);
  }
});

test('each required field left out is refused, naming the kind', () => {
  let refused = 0;
  for (const m of samples()) {
    const v = Object.values(P.ToWorker).includes(m.type) ? P.validateToWorker : P.validateFromWorker;
    for (const k of Object.keys(m)) {
      if (k === 'type') continue;
      const { [k]: _gone, ...rest } = m;
      const e = v(rest);
      // Optional fields (and the done/total pair checked together) may go; a required one may not.
      if (e === null) continue;
      assert.match(e, new RegExp(`^${m.type}: `), `${m.type} without ${k}: ${e}`);
      refused += 1;
    }
  }
  assert.ok(refused > 60, `${refused} omissions refused`);
  // The optional ones really are optional.
  const { weights: _w, ...noWeights } = P.loadUrl('u', 'f16');
  assert.equal(P.validateToWorker(noWeights), null);
  const { kvEstimateBytes: _k, ...noEst } = P.piece('x', [], metrics());
  assert.equal(P.validateFromWorker(noEst), null);
});

test('a type that is not a kind (or an Object.prototype name) is refused both ways', () => {
  for (const type of ['nope', 'constructor', '__proto__', 'toString', 'piece ', 5, undefined]) {
    assert.match(P.validateToWorker({ type }), /unknown message type/);
    assert.match(P.validateFromWorker({ type }), /unknown message type/);
  }
  assert.match(P.validateToWorker({ type: 'piece', text: 'x', tokenMs: [], metrics: metrics() }), /unknown message type "piece"/, 'a worker -> page kind is not a page -> worker one');
});
