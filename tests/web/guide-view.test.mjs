// Unit tests of web/guide-view.js: the guided tour's steps, the numbers it takes from a report
// (a trimmed real report of `edgefit estimate --model llama-3.2-1b --json`, in fixtures/), its
// derived numbers (the bandwidth bound, the roofline), and the placeholder for missing fields.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as G from '../../web/guide-view.js';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/guide-report.json', import.meta.url), 'utf8'));
const report = (over = {}) => {
  const r = structuredClone(fixture);
  for (const [k, v] of Object.entries(over)) r[k] = { ...r[k], ...v };
  return r;
};
const snap = (r) => ({ report: r, deviceName: 'Snapdragon 8 Gen 3 phone', modelName: 'Llama 3.2 1B', scenario: {} });
const allText = (s) => [s.title, ...s.paragraphs, ...s.groups.flatMap((g) => [g.title, ...g.items.map((i) => `${i.label} ${i.text}`)])].join('\n');

test('eight steps with unique ids, each estimating at least one scenario over the base', () => {
  assert.equal(G.STEPS.length, 8);
  assert.equal(new Set(G.STEPS.map((s) => s.id)).size, 8);
  for (const s of G.STEPS) {
    const runs = G.stepScenarios(s);
    assert.ok(runs.length >= 1, s.id);
    for (const r of runs) assert.deepEqual(Object.keys(r.scenario).sort(), Object.keys(G.GUIDE_BASE).sort());
    assert.ok(s.highlight.length >= 1 && typeof s.scroll === 'string', s.id);
  }
  const fmt = G.stepScenarios(G.STEPS.find((s) => s.id === 'weight-formats')).map((r) => r.scenario.weights);
  assert.deepEqual(fmt, ['f16', 'w4g32']);
  const kv = G.stepScenarios(G.STEPS.find((s) => s.id === 'kv-cache')).map((r) => [r.scenario.kv, r.scenario.context]);
  assert.deepEqual(kv, [['f16', '8192'], ['int8', '8192'], ['kivi4', '8192']]);
  assert.deepEqual(G.stepScenarios(G.STEPS.find((s) => s.id === 'pruning')).map((r) => r.scenario.prune), ['0', '0.3']);
  assert.deepEqual(G.stepScenarios(G.STEPS.find((s) => s.id === 'heat')).map((r) => r.scenario.policy), ['flat-out', 'paced']);
  assert.equal(G.stepCount(2), '3 / 8');
});

test('bandwidthBound: weight bytes / bandwidth, with its formula and values', () => {
  const b = G.bandwidthBound(fixture);
  // 695377920 B / 42 GB/s = 16.557 ms, 60.40 tok/s
  assert.ok(Math.abs(b.ms - 16.5566) < 1e-3, b.ms);
  assert.ok(Math.abs(b.tok_s - 60.3989) < 1e-3, b.tok_s);
  assert.match(b.explain.formula, /weight bytes \/ bandwidth/);
  assert.match(b.explain.values, /695377920 B \/ \(42\.00/);
  assert.match(b.explain.result, /16\.56 ms per token, at most 60\.40 tok\/s/);
  assert.equal(G.bandwidthBound(report({ memory: { weights_bytes: undefined } })), null);
  assert.equal(G.bandwidthBound(null), null);
  assert.ok(Math.abs(G.ceilingShare(fixture) - (43.0505 / 60.3989) * 100) < 0.01);
});

test('rooflineSummary: ridge, decode left of it, prefill right of it', () => {
  const s = G.rooflineSummary(fixture);
  assert.ok(Math.abs(s.ridge - 104.7619) < 1e-3);
  assert.equal(s.decode.heaviest.op, 'gate_proj');
  assert.ok(s.decode.max < s.ridge && s.prefill.min > s.ridge);
  assert.equal(s.decode.memory, 1);
  assert.equal(s.prefill.compute, 1);
  assert.match(s.ridgeExplain.values, /4400\.0 GFLOP\/s \/ 42\.00 GB\/s/);
  const empty = G.rooflineSummary({});
  assert.equal(empty.ridge, null);
  assert.equal(empty.decode.min, null);
});

test('cell: the panel’s own strings, its formula, and a placeholder when missing', () => {
  const c = G.cell(fixture, 'est-decode-tps');
  assert.equal(c.value, '43.05');
  assert.equal(c.text, '43.05 tok/s');
  assert.equal(c.explain.result, '43.05 tok/s');
  const w = G.cell(fixture, 'est-weights-bytes');
  assert.equal(w.text, '695377920 bytes (663.2 MiB)');
  assert.match(w.explain.formula, /Σ matrices/);
  const gone = G.cell(report({ latency: { decode_tok_s: undefined } }), 'est-decode-tps');
  assert.equal(gone.value, G.PLACEHOLDER);
  assert.equal(gone.text, G.PLACEHOLDER);
  assert.equal(G.cell(fixture, 'no-such-id').value, G.PLACEHOLDER);
  assert.equal(G.ratio(1, 0), G.PLACEHOLDER);
  assert.equal(G.change(100, 75), '\u221225.0%');
  assert.equal(G.fmt(NaN), G.PLACEHOLDER);
});

test('golden-four step quotes the thresholds, the numbers and the verdicts', () => {
  const four = G.buildStep('golden-four', [snap(fixture)]).paragraphs.join('\n');
  assert.match(four, /peak memory ≤ 4\.84 GiB \(here 1120363110 bytes \(1\.04 GiB\): pass\)/);
  assert.match(four, /sustained decode ≥ 25 tok\/s \(here 41\.68 tok\/s: pass\)/);
  assert.match(four, /11000 GFLOP\/s peak on the NPU/);
});

test('bytes-per-token step quotes the weights, the bound and the estimator’s decode', () => {
  const s = G.buildStep('bytes-per-token', [snap(fixture)]);
  const t = allText(s);
  assert.match(t, /695377920 bytes/);
  assert.match(t, /16\.56 ms per token/);
  assert.match(t, /60\.40 tok\/s/);
  assert.match(t, /43\.05 tok\/s, 71% of that ceiling/);
  assert.match(t, /700693632 bytes/);
  for (const item of s.groups[0].items) assert.ok(item.explain && item.explain.formula, `${item.label} has a formula`);
});

test('comparison steps put the runs side by side (before → after)', () => {
  const f16 = report({ deployment: { weights: 'f16' }, memory: { weights_bytes: 2471763968, weights_bits_per_param: 16 }, latency: { decode_tok_s: 15.2617 } });
  const s = G.buildStep('weight-formats', [snap(f16), snap(fixture)]);
  const t = s.paragraphs.join('\n');
  assert.match(t, /2471763968 bytes \(2\.30 GiB\) → 695377920 bytes \(663\.2 MiB\), 3\.55× fewer/);
  assert.match(t, /15\.26 tok\/s → 43\.05 tok\/s \(2\.82×\)/);
  assert.deepEqual(s.groups.map((g) => g.title), ['f16', 'w4g32']);

  const paced = report({ thermal: { policy: 'paced', time_to_throttle_s: null, sustained_tok_s: 32.93, initial_tok_s: 32.93, temp_rise_c: 9.72 } });
  const h = G.buildStep('heat', [snap(fixture), snap(paced)]).paragraphs.join('\n');
  assert.match(h, /throttles after 329 s, sustains 41\.68 tok\/s/);
  assert.match(h, /never throttles within the run, sustains 32\.93 tok\/s/);
  assert.match(h, /180 ms with 50 ms idle/);
  assert.match(h, /lower sustained speed here \(\u221221\.0%\)/);
});

test('every step builds from the fixture without NaN or undefined', () => {
  for (const step of G.STEPS) {
    const s = G.buildStep(step.id, step.runs.map(() => snap(fixture)));
    const t = allText(s);
    assert.doesNotMatch(t, /NaN|undefined|null|\[object/, step.id);
    assert.ok(s.paragraphs.length >= 2, step.id);
  }
});

test('a missing report or missing fields give the placeholder, not NaN', () => {
  for (const step of G.STEPS) {
    for (const snaps of [[], [snap({})], step.runs.map(() => snap({ memory: {}, latency: {} }))]) {
      const t = allText(G.buildStep(step.id, snaps));
      assert.doesNotMatch(t, /NaN|undefined|\[object/, step.id);
    }
  }
  const t = allText(G.buildStep('bytes-per-token', [snap({})]));
  assert.match(t, new RegExp(`at least ${G.PLACEHOLDER} ms`));
  assert.throws(() => G.buildStep('nope', []), /no guide step "nope"/);
});
