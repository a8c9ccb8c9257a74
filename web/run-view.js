// The run's per-token decode latencies as the page holds them (pure, unit-tested under Node).
//
// Each `piece` from the worker carries only the latencies new since the last one (the worker asks
// the wasm for `metricsSince(n)`), so the page rebuilds the list by appending: after the run's
// last piece the list equals the engine's whole `metrics().token_ms`
// (tests/web/token-ms.test.mjs).

/** A fresh latency log: `ms` in decode order, `tokens` their numbers from 1 (the chart's x). */
export function createTokenLog() {
  return { tokens: [], ms: [] };
}

/** Appends one piece's `tokenMs` (the new entries) to the log; returns how many were added. */
export function appendTokenMs(log, tokenMs) {
  for (const v of tokenMs) {
    log.tokens.push(log.tokens.length + 1);
    log.ms.push(v);
  }
  return tokenMs.length;
}

/** The chart's series for uPlot, [x, y]: the log's own arrays (nothing copied per frame). */
export function latencySeries(log) {
  return [log.tokens, log.ms];
}
