// Unit tests of web/fit-view.js's table order and stale note.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as F from '../../web/fit-view.js';

test('each model shows its best configuration first, then the rest in rank order', () => {
  const rows = [
    { rank: 3, model: 'a' }, { rank: 1, model: 'gemma-2b' }, { rank: 2, model: 'gemma-2b' },
    { rank: 4, model: 'b' }, { rank: 5, model: 'gemma-2b' }, { rank: 6, model: 'a' },
  ];
  assert.deepEqual(F.bestPerModelFirst(rows).map((r) => r.rank), [1, 3, 4, 2, 5, 6]);
  assert.deepEqual(F.bestPerModelFirst([]), []);
  assert.equal(rows[0].rank, 3, 'the input is not reordered');
});

test('the table comes in two labelled sections: each model\'s best, then the rest by rank', () => {
  const rows = [
    { rank: 3, model: 'a' }, { rank: 1, model: 'gemma-2b' }, { rank: 2, model: 'gemma-2b' },
    { rank: 4, model: 'b' }, { rank: 5, model: 'gemma-2b' }, { rank: 6, model: 'a' },
  ];
  const s = F.tableSections(rows);
  assert.deepEqual(s.map((x) => x.rows.map((r) => r.rank)), [[1, 3, 4], [2, 5, 6]]);
  assert.match(s[0].title, /^Each model's best configuration \(3 models, by rank\)$/);
  assert.match(s[1].title, /^More passing configurations, by rank \(3 rows of 3\)$/);
  // A limit cuts the second section first; a single model has one best row.
  const cut = F.tableSections(rows, 4);
  assert.deepEqual(cut.map((x) => x.rows.length), [3, 1]);
  assert.match(cut[1].title, /\(1 row of 3\)/);
  assert.deepEqual(F.tableSections([{ rank: 1, model: 'x' }]).map((x) => x.title), ["Each model's best configuration (1 model, by rank)"]);
  assert.deepEqual(F.tableSections([]), []);
});

test('results for another device than the one picked are stale', () => {
  assert.equal(F.staleNote('snapdragon-8-gen3', 'Snapdragon 8 Gen 3', 'snapdragon-8-gen3'), '');
  assert.equal(F.staleNote(null, '', 'x'), '');
  assert.match(F.staleNote('snapdragon-8-gen3', 'Snapdragon 8 Gen 3', 'raspberry-pi-5'), /^These results are for Snapdragon 8 Gen 3; .*again/);
});
