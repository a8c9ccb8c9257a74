// Unit tests for web/page-state.js, the page's phase machine (pure: no DOM). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../../web/page-state.js';

const run = (events, from = S.initialState()) => events.reduce((s, type) => S.next(s, { type }), from);

test('a first visit: load, generate, stop, done', () => {
  let s = S.initialState();
  assert.deepEqual(s, { phase: 'idle', modelLoaded: false });
  assert.equal(S.isBusy(s), false);
  s = S.next(s, { type: 'load' });
  assert.equal(s.phase, 'loading');
  assert.ok(S.isBusy(s));
  s = S.next(s, { type: 'loaded' });
  assert.deepEqual(s, { phase: 'ready', modelLoaded: true });
  s = run(['generate', 'stop'], s);
  assert.equal(s.phase, 'stopping');
  s = S.next(s, { type: 'done' });
  assert.equal(s.phase, 'ready');
});

test('requests the phase does not allow leave the state as it is (the caller sends nothing)', () => {
  const loading = run(['load']);
  for (const type of ['load', 'switch', 'generate', 'stop', 'job']) assert.equal(S.next(loading, { type }), loading, `${type} while loading`);
  const idle = S.initialState();
  assert.equal(S.next(idle, { type: 'generate' }), idle, 'no generation without a model');
  assert.equal(S.next(idle, { type: 'job' }), idle, 'no pruning without a model');
  assert.equal(S.next(idle, { type: 'stop' }), idle);
  const generating = run(['load', 'loaded', 'generate']);
  for (const type of ['load', 'switch', 'generate', 'job']) assert.equal(S.next(generating, { type }), generating, `${type} while generating`);
  assert.equal(S.next(run(['load', 'loaded', 'job']), { type: 'stop' }).phase, 'pruning', 'Stop does not end a pruning job');
});

test('the worker\'s answers: a refused load keeps the model that ran, a crash unloads it', () => {
  assert.deepEqual(run(['load', 'failed']), { phase: 'idle', modelLoaded: false }, 'no model before: idle');
  assert.deepEqual(run(['load', 'loaded', 'load', 'failed']), { phase: 'ready', modelLoaded: true }, 'the old model still runs');
  assert.deepEqual(run(['load', 'loaded', 'generate', 'fatal']), { phase: 'idle', modelLoaded: false });
  assert.deepEqual(run(['load', 'loaded', 'job', 'job-done']), { phase: 'ready', modelLoaded: true });
});

test('switching (kernel, KV format, threads) rests where it started', () => {
  assert.equal(run(['switch', 'switched']).phase, 'idle', 'a KV format chosen before any model');
  assert.equal(run(['load', 'loaded', 'switch', 'switched']).phase, 'ready');
  assert.equal(run(['load', 'loaded', 'switch', 'threads-set']).phase, 'ready');
  // threads-set also answers the boot-time request: it does not end another job.
  const generating = run(['load', 'loaded', 'generate']);
  assert.equal(S.next(generating, { type: 'threads-set' }), generating);
});

test('every event is in the table, every state it yields is a known phase, and states are frozen', () => {
  assert.throws(() => S.next(S.initialState(), { type: 'teleport' }), /unknown event "teleport"/);
  assert.throws(() => S.next(S.initialState(), { type: 'constructor' }), /unknown event/);
  // From every reachable state, every event gives a frozen state in a known phase.
  const seen = new Map();
  const queue = [S.initialState()];
  while (queue.length) {
    const s = queue.shift();
    const key = JSON.stringify(s);
    if (seen.has(key)) continue;
    seen.set(key, s);
    assert.ok(Object.isFrozen(s));
    assert.ok(S.PHASES.includes(s.phase), key);
    for (const type of S.EVENTS) queue.push(S.next(s, { type }));
  }
  // Never ready without a model.
  for (const s of seen.values()) assert.ok(!(s.phase === 'ready' && !s.modelLoaded), JSON.stringify(s));
  assert.ok(seen.size >= 8, `${seen.size} reachable states`);
});
