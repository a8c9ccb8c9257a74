// The page's phase machine, pure (no DOM), unit-tested under Node (tests/web/page-state.test.mjs).
//
// phase: 'idle' (no model) | 'loading' | 'ready' | 'generating' | 'stopping' | 'switching'
// (kernel, KV format or threads) | 'pruning' (prune, reset, perplexity or export in the worker);
// modelLoaded: a model runs in the worker. `next(state, event)` is the only way either changes
// (main.js's dispatch), and every transition is in the table below: a request the current
// phase does not allow (a second load while one runs, Stop when nothing generates) returns the
// state unchanged, and the caller then sends nothing.

export const PHASES = Object.freeze(['idle', 'loading', 'ready', 'generating', 'stopping', 'switching', 'pruning']);
export const BUSY_PHASES = Object.freeze(['loading', 'generating', 'stopping', 'switching', 'pruning']);

export function initialState() {
  return Object.freeze({ phase: 'idle', modelLoaded: false });
}

/** A job is running in the worker: the controls that start another are inactive. */
export const isBusy = (state) => BUSY_PHASES.includes(state.phase);

/** Where the page rests without a job: ready with a model, idle without. */
const rest = (s) => (s.modelLoaded ? 'ready' : 'idle');

/**
 * Each event: the phases it may start from (`from`, null: any) and the state after it.
 * The user's requests (load, switch, generate, stop, job) have a `from`; the worker's answers
 * are taken in any phase (the worker has already acted).
 */
const TRANSITIONS = Object.freeze({
  // the user
  load: { from: ['idle', 'ready'], to: (s) => ({ ...s, phase: 'loading' }) },
  switch: { from: ['idle', 'ready'], to: (s) => ({ ...s, phase: 'switching' }) },
  generate: { from: ['ready'], to: (s) => ({ ...s, phase: 'generating' }) },
  stop: { from: ['generating'], to: (s) => ({ ...s, phase: 'stopping' }) },
  job: { from: ['ready'], to: (s) => ({ ...s, phase: 'pruning' }) },
  // the worker
  loaded: { from: null, to: (s) => ({ ...s, phase: 'ready', modelLoaded: true }) },
  switched: { from: null, to: (s) => ({ ...s, phase: rest(s) }) },
  'threads-set': { from: null, to: (s) => (s.phase === 'switching' ? { ...s, phase: rest(s) } : s) },
  done: { from: null, to: (s) => ({ ...s, phase: rest(s) }) },
  'job-done': { from: null, to: (s) => ({ ...s, phase: rest(s) }) },
  failed: { from: null, to: (s) => ({ ...s, phase: rest(s) }) },
  fatal: { from: null, to: (s) => ({ ...s, phase: 'idle', modelLoaded: false }) },
});

export const EVENTS = Object.freeze(Object.keys(TRANSITIONS));

/**
 * The state after `event` ({type}); the same object when the event does not apply in this phase.
 * Throws on an unknown event type (a typo in the page, not a user's doing).
 */
export function next(state, event) {
  const t = Object.hasOwn(TRANSITIONS, event?.type) ? TRANSITIONS[event.type] : null;
  if (!t) throw new TypeError(`page-state: unknown event ${JSON.stringify(event?.type)}`);
  if (t.from !== null && !t.from.includes(state.phase)) return state;
  const after = t.to(state);
  return after === state ? state : Object.freeze(after);
}
