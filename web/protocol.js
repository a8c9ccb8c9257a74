// edgefit page <-> worker protocol: one import for the page, the worker and the tests.
//
// The parts live in web/protocol/ (pure ES modules: no DOM, no wasm, unit-tested under Node):
//   messages.js    every message kind described once (a schema table) -> constructors,
//                  validateToWorker / validateFromWorker, describeMessages() (the docs)
//   fields.js      the checks of the values messages carry (metrics, info, plans, requests, ...)
//   catalog.js     fixed lists and limits mirrored from Rust (weight / KV formats, fit families,
//                  pruning knobs, metric keys), each mirrored list with its drift test
//   format.js      DOM-free formatting (metric cells, bytes, parameters, progress lines)
//   forms.js       the page's forms as requests (parseGenerateForm, parsePruneForm)
//   wasm-build.js  which wasm build the worker loads (chooseWasmBuild, SIMD_PROBE)
//   checks.js      small value checks; errorMessage

export * from './protocol/catalog.js';
export * from './protocol/fields.js';
export * from './protocol/format.js';
export * from './protocol/forms.js';
export * from './protocol/messages.js';
export * from './protocol/wasm-build.js';
export { errorMessage } from './protocol/checks.js';
