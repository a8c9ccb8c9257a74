// The page's thread settings (protocol.js): which build runs, the thread counts accepted, the
// default, the footer line. Pure: no browser (threads.test.mjs drives the real threaded build).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';

test('the threaded build runs exactly when the page is cross-origin isolated and has SIMD', () => {
  assert.deepEqual(P.chooseWasmBuild(true, null, true), { build: 'threads' });
  assert.deepEqual(P.chooseWasmBuild(true, null, false), { build: 'simd128' });
  assert.deepEqual(P.chooseWasmBuild(false, null, true), { build: 'baseline' }, 'no SIMD: baseline even when isolated');
  assert.deepEqual(P.chooseWasmBuild(true, 'simd128', true), { build: 'simd128' }, '?wasm= still forces a build');
  assert.deepEqual(P.chooseWasmBuild(true, 'threads', true), { build: 'threads' });
  assert.match(P.chooseWasmBuild(true, 'threads', false).error, /needs a cross-origin isolated page/);
  assert.match(P.chooseWasmBuild(false, 'threads', true).error, /no WebAssembly SIMD, so the threads build/);
  assert.equal(P.WASM_BUILD_DIRS.threads, './pkg-threads/');
});

test('thread counts: whole numbers from 1 to the cores, anything else refused by name', () => {
  for (const n of [1, 2, 8]) assert.equal(P.checkThreads(n, 8), null);
  for (const bad of [0, -1, 9, 1.5, NaN, Infinity, '2', null, undefined, 2 ** 53]) {
    assert.match(P.checkThreads(bad, 8), /^threads must be a whole number from 1 to 8 \(the cores this browser reports\), got /, String(bad));
  }
  assert.match(P.checkThreads(257), /from 1 to 256, got 257/);
  assert.equal(P.checkThreads(256), null);
  assert.match(P.checkThreads(2, 0), /from 1 to 1/, 'a nonsense core count means one thread');
  assert.deepEqual(P.setThreads(2, 4), { type: 'set-threads', threads: 2 });
  assert.throws(() => P.setThreads(5, 4), /threads must be a whole number from 1 to 4/);
  assert.match(P.validateToWorker({ type: 'set-threads', threads: 0 }), /^set-threads: threads must be/);
  assert.equal(P.validateToWorker({ type: 'set-threads', threads: 3 }), null);
  assert.deepEqual(P.threadsSet(2), { type: 'threads-set', threads: 2 });
  assert.match(P.validateFromWorker({ type: 'threads-set', threads: 'many' }), /^threads-set: /);
});

test('the default is half the cores, like wllama, and at least 1', () => {
  assert.deepEqual([1, 2, 3, 4, 8, 16].map(P.defaultThreads), [1, 1, 1, 2, 4, 8]);
  for (const odd of [0, -4, NaN, undefined, 2.5]) assert.equal(P.defaultThreads(odd), 1);
});

test('the footer names the build and its threads', () => {
  assert.equal(P.describeBuild('threads', 2), 'threaded build (simd128, shared memory) · 2 threads');
  assert.equal(P.describeBuild('threads', 1), 'threaded build (simd128, shared memory) · 1 thread');
  assert.match(P.describeBuild('simd128', 1), /^WebAssembly SIMD \(simd128\) build · 1 thread \(the threaded build needs a cross-origin isolated page\)$/);
  assert.match(P.describeBuild('baseline', 1), /^baseline build \(no SIMD\) · 1 thread/);
});
