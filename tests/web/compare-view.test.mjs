// Unit tests of web/compare-view.js: columns are snapshots of display strings, differences from
// the first column are flagged, the number of columns is capped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as CV from '../../web/compare-view.js';

const report = (over = {}) => ({
  deployment: { weights: 'w4g32', kv: 'int8', context: 2048, prompt_tokens: 128, gen_tokens: 128, policy: 'flat-out' },
  model: { params: { total: 1_235_814_400 } },
  memory: { weights_bytes: 700e6, kv_bytes: 23e6, total_bytes: 1.1e9 },
  latency: { ttft_ms: 210.4, decode_tok_s: 40.25 },
  thermal: { sustained_tok_s: 31.5, temp_rise_c: 9.8 },
  verdict: { memory: 'pass', ttft: 'pass', sustained: 'pass', temperature: 'pass' },
  ...over,
});
const shown = (deviceName, rep = report(), prune = '0') => ({
  scenario: { device: 'x', model: 'llama-3.2-1b', prune },
  report: rep,
  deviceName,
  modelName: 'Llama 3.2 1B',
});

test('an entry holds every row as text, and its title names model and device', () => {
  const e = CV.compareEntry(shown('Snapdragon 8 Gen 3'));
  assert.equal(Object.keys(e.values).length, CV.COMPARE_ROWS.length);
  assert.equal(e.title, 'Llama 3.2 1B · Snapdragon 8 Gen 3');
  assert.equal(e.values.params, '1235.8 M');
  assert.equal(e.values.sustained, '31.50');
  assert.equal(e.values.verdict_memory, 'pass');
  assert.equal(e.values.tokens, '128 + 128');
  assert.equal(e.values.prune, '0%');
  assert.throws(() => CV.compareEntry({ scenario: {} }), /needs a report/);
});

test('cells differing from the first column are flagged, equal ones are not', () => {
  const a = CV.compareEntry(shown('Snapdragon 8 Gen 3'));
  const slower = report({ thermal: { sustained_tok_s: 22.1, temp_rise_c: 9.8 }, verdict: { memory: 'pass', ttft: 'pass', sustained: 'fail', temperature: 'pass' } });
  const b = CV.compareEntry(shown('Apple A17 Pro', slower, '0.2'));
  const rows = CV.compareTable([a, b]);
  const row = (k) => rows.find((r) => r.key === k);
  assert.deepEqual(row('device').cells.map((c) => c.diff), [false, true]);
  assert.deepEqual(row('model').cells.map((c) => c.diff), [false, false]);
  assert.deepEqual(row('sustained').cells.map((c) => c.text), ['31.50', '22.10']);
  assert.equal(row('verdict_sustained').cells[1].diff, true);
  assert.equal(row('verdict_memory').cells[1].diff, false);
  assert.equal(row('prune').cells[1].text, '20%');
  assert.equal(row('temp').cells[1].diff, false);
  assert.deepEqual(CV.compareTable([]).map((r) => r.cells), CV.COMPARE_ROWS.map(() => []));
});

test('at most four columns', () => {
  let entries = [];
  for (let i = 0; i < CV.MAX_COMPARE; i++) entries = CV.addEntry(entries, CV.compareEntry(shown(`d${i}`))).entries;
  assert.equal(entries.length, 4);
  assert.match(CV.addEntry(entries, entries[0]).error, /at most 4 scenarios/);
});

test('column titles are short for a phone, verdicts are told apart from plain differences', () => {
  const e = CV.compareEntry(shown('Qualcomm Snapdragon 8 Gen 3 (Galaxy S24 Ultra)'));
  assert.equal(e.title, 'Llama 3.2 1B · Qualcomm Snapdragon 8 Gen 3 (Galaxy S24 Ultra)');
  assert.equal(e.short, 'Llama 3.2 1B · Qualcomm Sna…');
  assert.equal([...e.short].length, 28);
  assert.equal(CV.shortTitle('short'), 'short');
  assert.equal(CV.verdictOf('fail'), 'fail');
  assert.equal(CV.verdictOf('pass'), 'pass');
  assert.equal(CV.verdictOf('12.0'), null);
});

test('column titles name what differs between the scenarios, so no two read the same', () => {
  const sd = CV.compareEntry(shown('Snapdragon 8 Gen 3 phone (Xiaomi 14 class, 16 GB LPDDR5X)'));
  const a17 = CV.compareEntry(shown('Apple A17 Pro (iPhone 15 Pro, 8 GB LPDDR5)'));
  const a17pruned = CV.compareEntry(shown('Apple A17 Pro (iPhone 15 Pro, 8 GB LPDDR5)', report(), '0.3'));
  const short = (entries) => CV.columnTitles(entries).map((t) => t.short);
  assert.deepEqual(short([sd, a17, a17pruned]), ['Snapdragon 8 Gen 3, unpruned', 'Apple A17 Pro, unpruned', 'Apple A17 Pro, 30% pruned']);
  // One column, or nothing differing: model and device; a repeat says which column it repeats.
  assert.deepEqual(CV.columnTitles([sd]), [{ short: 'Llama 3.2 1B, Snapdragon 8 G…', full: 'Llama 3.2 1B, Snapdragon 8 Gen 3' }]);
  assert.deepEqual(short([a17, sd, a17]), ['Apple A17 Pro', 'Snapdragon 8 Gen 3', 'Apple A17 Pro (same as 1)']);
  const kv = CV.compareEntry(shown('Apple A17 Pro (iPhone 15 Pro, 8 GB LPDDR5)', report({ deployment: { ...report().deployment, kv: 'kivi4', context: 8192 } })));
  assert.deepEqual(short([a17, kv]), ['KV int8, context 2048', 'KV kivi4, context 8192']);
  for (const t of CV.columnTitles([sd, a17, a17pruned])) assert.ok([...t.short].length <= CV.TITLE_CHARS, t.short);
  const four = CV.columnTitles([sd, a17, a17pruned, kv]).map((t) => t.short);
  assert.equal(new Set(four).size, 4, `four distinct titles: ${four.join(' | ')}`);
  // Cut titles that would read the same are shown whole.
  const elite = CV.compareEntry(shown('Snapdragon 8 Elite phone (QRD)', report({ deployment: { ...report().deployment, kv: 'kivi4' } })));
  const elite5 = CV.compareEntry(shown('Snapdragon 8 Elite Gen 5 phone (QRD)', report({ deployment: { ...report().deployment, kv: 'kivi4' } })));
  const long = CV.columnTitles([{ ...elite, values: { ...elite.values, model: 'DeepSeek-R1-Distill-Qwen-1.5B' } }, { ...elite5, values: { ...elite5.values, model: 'DeepSeek-R1-Distill-Qwen-1.5B-x' } }]);
  assert.notEqual(long[0].short, long[1].short);
  assert.deepEqual(CV.columnTitles([]), []);
});
