// Unit tests for the fault-injection message (web/protocol.js injectFault, used only by
// tests/e2e/faults.test.mjs through ?faults=1). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as P from '../../web/protocol.js';

test('injectFault builds a message the worker accepts', () => {
  const m = P.injectFault(3);
  assert.deepEqual(m, { type: P.ToWorker.INJECT_FAULT, fault: 'panic', step: 3 });
  assert.equal(P.validateToWorker(m), null);
  assert.equal(P.validateToWorker(P.injectFault(0)), null, 'step 0: before the prefill');
});

test('injectFault refuses a step that is not a whole number >= 0', () => {
  for (const bad of [-1, 1.5, NaN, '3', null, undefined, 2 ** 60]) {
    assert.throws(() => P.injectFault(bad), /inject-fault: step must be a whole number >= 0/, String(bad));
  }
});

test('validateToWorker refuses malformed inject-fault messages', () => {
  assert.match(P.validateToWorker({ type: 'inject-fault', fault: 'oom', step: 1 }), /fault must be "panic"/);
  assert.match(P.validateToWorker({ type: 'inject-fault', fault: 'panic' }), /step must be a whole number/);
  assert.match(P.validateToWorker({ type: 'inject-fault', fault: 'panic', step: -2 }), /step must be a whole number/);
});
