// Unit tests for the KV format picker's and multi-turn chat's messages (web/protocol.js), the
// conversation transcript (web/conversation.js) and the KV rows of the estimate comparison
// (web/estimate-view.js). Pure: no DOM, no wasm. Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';
import * as C from '../../web/conversation.js';
import * as V from '../../web/estimate-view.js';

const goodParams = () => ({ prompt: 'Hello', chat: true, maxTokens: 8, temperature: 0, topP: 0.9, seed: 1 });

const metrics = (extra = {}) => ({
  load_ms: 800,
  prompt_tokens: 12,
  generated_tokens: 8,
  ttft_ms: 100,
  prefill_tok_s: 50,
  decode_tok_s: 20,
  weights_bytes: 1000,
  weights: 'w4g32',
  embedding: 'q8_0',
  kernel: 'simd128',
  kv_bytes: 19 * 23040,
  peak_bytes: 5000,
  kv_format: 'f32',
  kv_tokens: 19,
  kv_reserved_bytes: 4096 * 23040,
  reused_tokens: 0,
  kv_limit: 8192,
  ...extra,
});

test('set-kv-format: constructor and validator', () => {
  for (const f of ['f32', 'f16', 'k8v16', 'int8', 'int4g32', 'kivi4']) {
    const m = P.setKvFormat(f);
    assert.deepEqual(m, { type: 'set-kv-format', name: f });
    assert.equal(P.validateToWorker(m), null);
  }
  for (const bad of ['', 'F32', 'int 8', '<b>x</b>', 7, null, undefined, 'k'.repeat(64)]) {
    assert.throws(() => P.setKvFormat(bad), TypeError, JSON.stringify(bad));
    assert.equal(typeof P.validateToWorker({ type: 'set-kv-format', name: bad }), 'string');
  }
  assert.equal(typeof P.validateToWorker({ type: 'set-kv-format' }), 'string');
  assert.equal(P.ToWorker.SET_KV_FORMAT, 'set-kv-format');
  assert.equal(P.FromWorker.KV_FORMAT_SET, 'kv-format-set');
});

test('generate carries an optional boolean keep', () => {
  const kept = P.generate({ ...goodParams(), keep: true });
  assert.equal(kept.keep, true);
  assert.equal(P.validateToWorker(kept), null);
  assert.equal(P.generate({ ...goodParams(), keep: false }).keep, false);
  assert.equal('keep' in P.generate(goodParams()), false, 'absent keep stays absent (a fresh start)');
  assert.throws(() => P.generate({ ...goodParams(), keep: 'yes' }), /keep/);
  assert.equal(typeof P.validateToWorker({ type: 'generate', ...goodParams(), keep: 1 }), 'string');
  const form = P.parseGenerateForm({ prompt: 'hi', chat: true, maxTokens: '4', temperature: '0', topP: '1', seed: '1', keep: true });
  assert.equal(form.params.keep, true);
  assert.equal('keep' in P.parseGenerateForm({ prompt: 'hi', chat: true, maxTokens: '4', temperature: '0', topP: '1', seed: '1' }).params, false);
});

test('kv-format-set: with and without a model', () => {
  const m = P.kvFormatSet('int4g32', metrics({ kv_format: 'int4g32', kv_tokens: 0, kv_bytes: 0, token_ms: [1] }), 0);
  assert.equal(P.validateFromWorker(m), null);
  assert.equal('token_ms' in m.metrics, false);
  assert.deepEqual(P.kvFormatSet('f16'), { type: 'kv-format-set', format: 'f16', metrics: null, kvEstimateBytes: null });
  assert.equal(P.validateFromWorker(P.kvFormatSet('f16')), null);
  assert.throws(() => P.kvFormatSet(''), TypeError);
  assert.throws(() => P.kvFormatSet('f16', metrics({ kv_format: 'f32' })), /not the format set/);
  assert.throws(() => P.kvFormatSet('f32', metrics(), -1), /kvEstimateBytes/);
  for (const bad of [
    { type: 'kv-format-set' },
    { type: 'kv-format-set', format: 'f32' },
    { type: 'kv-format-set', format: 'f32', metrics: { kv_format: 'f32' }, kvEstimateBytes: null },
    { type: 'kv-format-set', format: 'f32', metrics: null, kvEstimateBytes: 'many' },
  ]) {
    assert.equal(typeof P.validateFromWorker(bad), 'string', JSON.stringify(bad));
  }
});

test('piece and done carry the estimator KV bytes (or null); KV metrics are checked when present', () => {
  assert.equal(P.validateFromWorker(P.piece('x', [1], metrics(), 437760)), null);
  assert.equal(P.piece('x', [1], metrics()).kvEstimateBytes, null);
  assert.equal(P.validateFromWorker(P.done('stop', metrics(), 437760)), null);
  assert.throws(() => P.piece('x', [], metrics(), NaN), /kvEstimateBytes/);
  assert.throws(() => P.done('stop', metrics(), -5), /kvEstimateBytes/);
  for (const k of P.KV_METRIC_KEYS) {
    assert.throws(() => P.piece('x', [], metrics({ [k]: -1 })), new RegExp(k));
    assert.throws(() => P.piece('x', [], metrics({ [k]: 1.5 })), new RegExp(k));
  }
  assert.throws(() => P.piece('x', [], metrics({ kv_format: '' })), /kv_format/);
  assert.throws(() => P.done('stop', metrics({ kv_format: 3 })), /kv_format/);
  // An engine that does not report them is still accepted.
  const { kv_format: _a, kv_tokens: _b, kv_reserved_bytes: _c, reused_tokens: _d, kv_limit: _e, ...old } = metrics();
  assert.equal(P.validateFromWorker(P.piece('x', [], old)), null);
});

test('catalog carries the wasm KV format list', () => {
  const list = ['f32', 'f16', 'k8v16', 'int8', 'int4g32', 'kivi4'];
  const m = P.catalog([{ id: 'a', name: 'A' }], [{ id: 'd', name: 'D' }], list);
  assert.deepEqual(m.kvFormats, list);
  assert.equal(P.validateFromWorker(m), null);
  for (const bad of [[], ['f32', 'f32'], ['F32'], 'f32', [1]]) {
    assert.throws(() => P.catalog([], [], bad), /kvFormats/, JSON.stringify(bad));
  }
});

test('every KV format the page knows of has a label starting with its id', () => {
  for (const f of V.KV_FORMATS) assert.match(P.KV_FORMAT_LABELS[f], new RegExp(`^${f}`));
});

test('kvCells: format, tokens, estimate beside measured with equal/differs, reused, limit', () => {
  const m = metrics({ reused_tokens: 14 });
  assert.deepEqual(P.kvCells(m, 19 * 23040), {
    'metric-kv-format': 'f32',
    'metric-kv-tokens': '19',
    'metric-kv-estimate-bytes': '437760',
    'metric-kv-match': 'equal',
    'metric-reused-tokens': '14',
    'metric-kv-limit': '8192',
  });
  assert.equal(P.kvCells(m, 19 * 23040 + 64)['metric-kv-match'], 'differs');
  assert.equal(P.kvCells(m, null)['metric-kv-match'], '');
  assert.equal(P.kvCells(m, null)['metric-kv-estimate-bytes'], '');
  // Nothing held yet: no bytes to compare.
  const empty = P.kvCells(metrics({ kv_tokens: 0, kv_bytes: 0 }), 0);
  assert.equal(empty['metric-kv-tokens'], '0');
  assert.equal(empty['metric-kv-estimate-bytes'], '');
  assert.equal(empty['metric-kv-match'], '');
  for (const v of Object.values(P.kvCells(undefined))) assert.equal(v, '');
});

test('isContextFull recognises the engine error', () => {
  assert.equal(P.isContextFull('context full: 9000 tokens needed but the context holds 8192'), true);
  assert.equal(P.isContextFull('bad magic'), false);
  assert.equal(P.isContextFull(undefined), false);
});

test('conversation: keep only after a turn, transcript grows, new conversation clears', () => {
  const c = C.createConversation();
  assert.equal(C.keepFor(c, true), false, 'nothing to continue before the first turn');
  C.beginTurn(c, 'Hi <b>x</b>', C.keepFor(c, true));
  C.appendAnswer(c, 'Hello');
  C.appendAnswer(c, '!');
  C.finishTurn(c, 'stop');
  assert.deepEqual(c.turns, [
    { role: 'user', text: 'Hi <b>x</b>', state: 'done' },
    { role: 'model', text: 'Hello!', state: 'done' },
  ]);
  assert.equal(C.keepFor(c, true), true);
  assert.equal(C.keepFor(c, false), false);
  C.beginTurn(c, 'And?', true);
  C.appendAnswer(c, 'Part');
  C.finishTurn(c, 'stopped');
  assert.equal(c.turns.length, 4);
  assert.equal(c.turns[3].state, 'stopped', 'a stopped answer stays in the conversation');
  assert.equal(C.userTurns(c), 2);
  // Without keep the transcript restarts with the new turn.
  C.beginTurn(c, 'Fresh', false);
  assert.deepEqual(c.turns.map((t) => t.text), ['Fresh', '']);
  C.reset(c);
  assert.deepEqual(c.turns, []);
  assert.equal(C.keepFor(c, true), false, 'after New conversation the next start has keep = false');
  assert.equal(C.appendAnswer(c, 'late'), null, 'a piece with no turn in flight is ignored');
});

test('conversation: a refused turn (context full) is marked failed', () => {
  const c = C.createConversation();
  C.beginTurn(c, 'one', false);
  C.finishTurn(c, 'length');
  C.beginTurn(c, 'two', true);
  C.failTurn(c, 'context full: 9000 tokens needed but the context holds 8192');
  assert.deepEqual(c.turns.map((t) => t.state), ['done', 'done', 'failed', 'failed']);
  assert.match(c.turns[3].error, /^context full/);
  assert.equal(C.userTurns(c), 1);
  assert.equal(C.failTurn(c, 'again'), null, 'nothing in flight');
});

// The comparison's KV row and deployment rule live in Rust now (edgefit_estimate::compare):
// tests/web/compare-wasm.test.mjs checks them through the built wasm.

test('buildDeployment takes the wasm KV list when given', () => {
  assert.equal(V.buildDeployment({ kv: 'kivi4' }, { kv: ['f32', 'kivi4'] }).deployment.kv, 'kivi4');
  assert.match(V.buildDeployment({ kv: 'int8' }, { kv: ['f32', 'kivi4'] }).error, /KV format/);
  assert.equal(V.buildDeployment({ kv: 'int8' }).deployment.kv, 'int8');
});

test('switching the chat template mid-conversation leaves a note in the transcript', () => {
  const c = C.createConversation();
  C.beginTurn(c, 'one', false, false);
  C.finishTurn(c, 'stop');
  C.beginTurn(c, 'two', true, true);
  assert.deepEqual(c.turns.map((t) => t.role), ['user', 'model', 'note', 'user', 'model']);
  assert.match(c.turns[2].text, /Chat template on/);
  C.finishTurn(c, 'stop');
  C.beginTurn(c, 'three', true, true);
  assert.equal(c.turns.filter((t) => t.role === 'note').length, 1, 'no note while the mode stays');
  C.beginTurn(c, 'fresh', false, false);
  assert.deepEqual(c.turns.map((t) => t.role), ['user', 'model'], 'a new conversation starts without a note');
  assert.equal(C.userTurns(c), 1);
});
