// Unit tests for web/model-view.js, what the model controls show (pure: no DOM). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as MV from '../../web/model-view.js';
import { smolLmInfo } from './fixtures/model-info.mjs';

const info = () => smolLmInfo({
  name: 'SmolLM2 135M 8k Lc100K Mix1 Ep2',
  weights_bytes: 97087104,
  weights: {
    ...smolLmInfo().weights,
    weights: 'auto',
    converted: [{ from: 'q4_1', to: 'q8_0', tensors: ['token_embd.weight'] }],
  },
  tokenizer: { kind: 'bpe' },
  kernels: ['scalar', 'simd128'],
});

test('infoRows: every row a string, the given name first, the file name and the counts as people read them', () => {
  const rows = MV.infoRows(info(), 'SmolLM2-135M-Instruct');
  const by = Object.fromEntries(rows);
  assert.ok(rows.every(([k, v]) => typeof k === 'string' && typeof v === 'string'), JSON.stringify(rows));
  assert.deepEqual(rows[0], ['Name', 'SmolLM2-135M-Instruct']);
  assert.equal(by['Name in the file (general.name)'], 'SmolLM2 135M 8k Lc100K Mix1 Ep2');
  assert.equal(by.Parameters, '135 M (134,515,008)');
  assert.equal(by['Converted'], 'q4_1 → q8_0 × 1');
  assert.equal(by['Attention heads'], '9 (KV heads 3, head dim 64)');
  assert.equal(by.Vocabulary, '49,152');
  assert.equal(by.Kernel, 'simd128 (this build runs: scalar, simd128)');
  assert.equal(by['Chat template'], 'yes');
  assert.equal('Pruned widths' in by, false, 'an unpruned model has no pruned widths row');
  const none = Object.fromEntries(MV.infoRows({ ...info(), name: '', weights: { ...info().weights, converted: [] } }, null));
  assert.equal(none['Name in the file (general.name)'], '(none)');
  assert.match(none.Converted, /^none/);
});

test('infoRows of a pruned model: its layers named as re-quantized, the widths as loaded said so', () => {
  const layer = { n_heads: 9, n_kv_heads: 3, qk_dim: 64, v_dim: 64, ffn: 1229 };
  const stored = [{ format: 'q8_0', matrices: 1, bytes: 30108672 }, { format: 'w4g32', matrices: 210, bytes: 51065136 }];
  const by = Object.fromEntries(MV.infoRows({ ...info(), layers: Array(30).fill(layer), weights: { ...info().weights, stored, embedding: 'q8_0' } }, 'x'));
  assert.equal(by['Pruned widths'], 'FFN 1229, 9 heads (3 KV), Q/K dim 64, V dim 64 in every layer');
  assert.match(by['Weights in memory'], /\(w4g32 \(re-quantized after pruning\) · embedding q8_0\)$/, 'not "the file\'s w4g32 kept"');
  assert.equal(by['FFN size'], '1536 as loaded');
  assert.equal(by['Attention heads'], '9 (KV heads 3, head dim 64) as loaded');
  // Unpruned: as before.
  assert.equal(Object.fromEntries(MV.infoRows(info(), 'x'))['FFN size'], '1536');
});

test('picker options: the wasm lists with labels, a placeholder before them', () => {
  assert.deepEqual(MV.kvFormatOptions([]), [['', 'starting…']]);
  const kv = MV.kvFormatOptions(['f32', 'k8v16', 'newfmt']);
  assert.deepEqual(kv.map(([v]) => v), ['f32', 'k8v16', 'newfmt']);
  assert.equal(kv[2][1], 'newfmt', 'a format without a label shows its id');
  assert.deepEqual(MV.kernelOptions(null), [['', 'load a model first']]);
  assert.deepEqual(MV.kernelOptions(info()), [['scalar', 'scalar'], ['simd128', 'simd128']]);
  assert.deepEqual(MV.threadCounts('threads', 4), [1, 2, 3, 4]);
  assert.deepEqual(MV.threadCounts('simd128', 4), [1], 'one thread without the threaded build');
  assert.deepEqual(MV.threadCounts(null, 8), [1]);
});

test('thread counts from a picker or the address: in 1 … cores, else refused naming the range', () => {
  assert.deepEqual(MV.parseThreadCount('2', 4), { threads: 2 });
  for (const bad of ['0', '5', '1.5', '-1', '', 'two', '99999', null]) {
    const r = MV.parseThreadCount(bad, 4);
    assert.match(r.error ?? '', /threads must be a whole number from 1 to 4/, `${bad}: ${JSON.stringify(r)}`);
  }
  assert.deepEqual(MV.initialThreads(null, 8), { threads: 4 }, 'half the cores by default');
  assert.deepEqual(MV.initialThreads(null, 1), { threads: 1 });
  assert.deepEqual(MV.initialThreads('3', 8), { threads: 3 });
  const refused = MV.initialThreads('9'.repeat(60), 8);
  assert.equal(refused.threads, 4, 'a refused ?threads= keeps the default');
  assert.match(refused.error, /^\?threads=9{40} is refused: threads must be .*; the page runs 4$/);
});

test('the default model manifest: {path, bytes > 0} for this path, else the button says it is missing', () => {
  const url = 'models/smollm2-135m-instruct-q4_1.gguf';
  const ok = MV.defaultModelButton({ path: url, bytes: 100 * 1024 * 1024 }, url);
  assert.equal(ok.present, true);
  assert.match(ok.text, /^Load default model \(SmolLM2-135M-Instruct, 100\.0 MiB\)$/);
  for (const bad of [null, 'x', {}, { path: url }, { path: url, bytes: 0 }, { path: url, bytes: 1.5 }, { path: 'models/other.gguf', bytes: 5 }]) {
    const b = MV.defaultModelButton(bad, url);
    assert.equal(b.present, false, JSON.stringify(bad));
    assert.match(b.text, /not on this site/);
    assert.ok(b.title.includes(url));
  }
});

test('a refused load says what still runs', () => {
  assert.equal(MV.refusedLoadLine(true, 'SmolLM2-135M-Instruct', 'auto'), 'not loaded; still running SmolLM2-135M-Instruct (auto)');
  assert.equal(MV.refusedLoadLine(true, null, 'w4g32'), 'not loaded; still running the model loaded before (w4g32)');
  assert.equal(MV.refusedLoadLine(false, 'x', 'auto'), 'not loaded');
});
