// edgefit page <-> worker messages, described once.
//
// Every message is a plain object with a `type` field. Each kind has one entry in a schema table
// (TO_WORKER for page -> worker, FROM_WORKER for worker -> page): its doc line, one rule per field
// (fields.js: (value, message) -> error string or null; `optional(...)` fields may be left out),
// an optional `check` across fields, and an optional `make` that turns a constructor's arguments
// into the fields (default: the arguments in field order). From the table come
//   - the constructors (`loadUrl(url, weights)`, `piece(text, tokenMs, metrics, ...)`, ...): build
//     the message, leave out undefined fields, and throw a TypeError if it is not valid;
//   - validateToWorker / validateFromWorker: an error string ("<type>: <what is wrong>"), or null
//     when the message is well formed, so each side rejects a malformed message instead of acting
//     on it;
//   - describeMessages(): the protocol's documentation, every kind with its fields
//     (`node -e "import('./web/protocol.js').then((P) => console.log(P.describeMessages()))"`).
//
// Pure ES module: no DOM, no wasm. Both main.js (the page) and worker.js (the wasm's owner) use it.

import {
  ESTIMATE_PURPOSES, FINISH_REASONS, GGUF_DTYPES, MAX_THREADS, PRUNE_STAGES,
} from './catalog.js';
import { fmtValue, isBlobLike, isFiniteNumber, isNonNegInt, isObject, must } from './checks.js';
import {
  ESTIMATE_FIELDS, FIT_FIELDS, GENERATE_FIELDS, PRUNE_FIELDS, TEXT_SOURCE_FIELDS,
  checkCount, checkFitResult, checkInfo, checkKernelName, checkKvEstimate, checkKvFormatList, checkKvFormatName,
  checkMetrics, checkPruneCalibration, checkPruneReport, checkReport, checkRuntimeList, checkThreads, checkWeights,
  isIdList, nonEmptyString, nonNegInt, nullOr, oneOf, optional,
} from './fields.js';
import { WASM_BUILDS } from './wasm-build.js';

const aString = (name) => (v) => (typeof v === 'string' ? null : `${name} must be a string`);
const aBoolean = (name) => (v) => (typeof v === 'boolean' ? null : `${name} must be true or false`);
const countFields = { done: () => null, total: () => null };
const countCheck = (m) => checkCount(m.done, m.total);
const nonNegNumbers = (name) => (v) =>
  Array.isArray(v) && v.every((x) => isFiniteNumber(x) && x >= 0) ? null : `${name} must be an array of non-negative numbers`;
/** A message text, never empty (a thrown value without one becomes "unknown error"). */
const text = (message) => (typeof message === 'string' && message.trim() !== '' ? message : 'unknown error');

function stripTokenMs(metrics) {
  if (!isObject(metrics)) return metrics;
  const { token_ms: _dropped, ...rest } = metrics;
  return rest;
}

// ---- page -> worker ----------------------------------------------------------------------------

const TO_WORKER = {
  'load-url': {
    doc: 'fetch the model, streaming progress, and build it with the linear layers in `weights` (one of WEIGHT_FORMATS; the page sends its default, auto). The kernel chosen with set-kernel is kept across loads',
    fields: { url: nonEmptyString('url'), weights: optional(checkWeights) },
  },
  'load-file': {
    doc: 'read a user-chosen File (a Blob) the same way',
    fields: { file: (v) => (isBlobLike(v) ? null : 'file must be a File or Blob'), weights: optional(checkWeights) },
  },
  'set-kernel': {
    doc: "run the matrix products on kernel `name` (one of the loaded model's info.kernels); refused while busy",
    fields: { name: checkKernelName },
  },
  'set-kv-format': {
    doc: "store the KV cache as `name` (one of the wasm's kvFormats(), sent in catalog) from now on; clears the cache (and so the conversation). Without a model the choice is kept and applied to the next load. Kept across loads; refused while busy",
    fields: { name: checkKvFormatName },
  },
  'set-threads': {
    doc: 'run the engine on `threads` threads (the threaded build only; 1..MAX_THREADS); applied to every later load. Sent while a job runs, it waits for that job: a load takes it as its own count, after any other job it runs next (the last one sent wins)',
    fields: { threads: (v) => checkThreads(v) },
  },
  generate: {
    doc: 'generate from `prompt`; keep: true continues the conversation the engine holds (its cached tokens are reused); absent or false starts a fresh one (cache and history cleared)',
    fields: GENERATE_FIELDS,
    make: (p) => (isObject(p) ? p : {}),
  },
  stop: { doc: 'ask the running generation to end after this token', fields: {} },
  prune: {
    doc: 'prune the model as loaded (every prune starts from it) with `plan` (PrunePlan: {ratios: {heads, kv_heads, qk_dims, v_dims, mlp} in 0..PRUNE_MAX_RATIO, layers, importance, allocation}) and run the result in the loaded formats. With importance "activation", calibration {url, maxTokens, window} names the text; the worker calibrates once per (url, maxTokens, window) and reuses the statistics for later prunes',
    fields: PRUNE_FIELDS,
    check: checkPruneCalibration,
  },
  restore: { doc: 'run the model as loaded again', fields: {} },
  perplexity: {
    doc: 'perplexity of the running model on the first maxTokens tokens of the text at url',
    fields: TEXT_SOURCE_FIELDS,
  },
  'export-gguf': { doc: 'the running model as a GGUF file (q8_0, f16, f32)', fields: { dtype: oneOf(GGUF_DTYPES, 'dtype') } },
  estimate: {
    doc: 'run the estimator (pure, fast; handled even while a generation runs, between two tokens). model: {kind:"preset", id} | {kind:"loaded"} | {kind:"config", name, text}; device: {kind:"bundled", id} | {kind:"this-browser"} (measured once per kernel with the engine\'s kernel, cached); purpose: "panel" | "compare"; id: increasing integer; prune (0..FIT_MAX_PRUNE): the model is pruned TransAct-style at that level first (wasm prunedSpec)',
    fields: ESTIMATE_FIELDS,
    make: (id, purpose, model, device, deployment, prune) => ({ id, purpose, model, device, deployment, prune: prune === 0 ? undefined : prune }),
  },
  fit: {
    doc: '"what fits?": the sizing solver (wasm fit) on `device` (as in estimate) over the models of `scope`: "all" presets | "family:<f>" (f in FIT_FAMILIES) | "preset:<id>" | "loaded" (the engine\'s model); context: one of FIT_CONTEXTS, or null for all of them. Other lists and the base deployment are the solver\'s defaults, as `edgefit fit` uses them',
    fields: FIT_FIELDS,
    make: (id, device, scope, context = null) => ({ id, device, scope, context: context ?? null }),
  },
  'inject-fault': {
    doc: "tests only (inert unless the worker's URL carries faults=1): the wasm panics before step `step` of the running or next generation (0: before the prefill)",
    fields: {
      fault: (v) => (v === 'panic' ? null : `fault must be "panic", got ${fmtValue(v)}`),
      step: (v) => (Number.isSafeInteger(v) && v >= 0 ? null : `step must be a whole number >= 0, got ${fmtValue(v)}`),
    },
    make: (step) => ({ fault: 'panic', step }),
  },
};

// ---- worker -> page ----------------------------------------------------------------------------

const metricsMsg = (fields) => (...a) => {
  const f = fields(...a);
  return { ...f, metrics: f.metrics === null ? null : stripTokenMs(f.metrics) };
};

const FROM_WORKER = {
  booted: {
    doc: "the wasm module is initialised; build: which module runs (WASM_BUILDS, see chooseWasmBuild)",
    fields: { version: aString('version'), build: oneOf(WASM_BUILDS, 'build') },
  },
  progress: {
    doc: 'bytes read so far; total is null when unknown',
    fields: {
      loaded: nonNegInt('loaded'),
      total: (v) => (v === null || isNonNegInt(v) ? null : `total must be a non-negative integer or null, got ${fmtValue(v)}`),
    },
    make: (loaded, total) => ({ loaded, total: total ?? null }),
  },
  parsing: { doc: 'all bytes read, the engine is parsing the model', fields: { bytes: nonNegInt('bytes') } },
  loaded: {
    doc: 'the model is ready (info() and metrics(), without token_ms)',
    fields: { info: checkInfo, metrics: checkMetrics },
    make: metricsMsg((info, metrics) => ({ info, metrics })),
  },
  'kernel-set': { doc: 'set-kernel done; info.kernel names the kernel now used', fields: { info: checkInfo } },
  'threads-set': { doc: 'set-threads done: the engine now runs on `threads` threads', fields: { threads: (v) => checkThreads(v) } },
  'kv-format-set': {
    doc: "set-kv-format done: `format` is the KV format now used; metrics: the engine's metrics (null without a model)",
    fields: { format: checkKvFormatName, metrics: nullOr(checkMetrics), kvEstimateBytes: checkKvEstimate },
    check: (m) =>
      m.metrics !== null && 'kv_format' in m.metrics && m.metrics.kv_format !== m.format
        ? `metrics.kv_format ${fmtValue(m.metrics.kv_format)} is not the format set, ${fmtValue(m.format)}`
        : null,
    make: metricsMsg((format, metrics = null, kvEstimateBytes = null) => ({ format, metrics, kvEstimateBytes })),
  },
  started: { doc: 'generation started', fields: {} },
  prefilling: {
    doc: 'the prompt is being fed in chunks (Engine prefillChunk): `done` of its `total` tokens are in the cache; sent after each chunk of a prompt longer than one chunk; Stop is honoured between chunks',
    fields: countFields,
    check: countCheck,
  },
  piece: {
    doc: "the text of the tokens decoded since the last piece (the worker sends the first token at once, then a piece per 50 ms of decoding, and the rest with the end), their per-token decode latencies (ms) since the last piece, and a metrics snapshot without the token_ms array. kvEstimateBytes: the estimator's bytes (wasm kvBytes) for metrics.kv_tokens tokens of metrics.kv_format of the loaded model, or null when it cannot be computed",
    fields: { text: aString('text'), tokenMs: nonNegNumbers('tokenMs'), metrics: checkMetrics, kvEstimateBytes: optional(nullOr(checkKvEstimate)) },
    make: metricsMsg((text, tokenMs, metrics, kvEstimateBytes = null) => ({ text, tokenMs: tokenMs ?? [], metrics, kvEstimateBytes })),
  },
  done: {
    doc: 'reason: "stop" | "length" | "stopped" (user Stop)',
    fields: { reason: oneOf(FINISH_REASONS, 'reason'), metrics: checkMetrics, kvEstimateBytes: optional(nullOr(checkKvEstimate)) },
    make: metricsMsg((reason, metrics, kvEstimateBytes = null) => ({ reason, metrics, kvEstimateBytes })),
  },
  error: {
    doc: 'fatal: the wasm instance is poisoned (a panic) or the worker cannot go on; the page must respawn the worker',
    fields: { message: nonEmptyString('message'), fatal: (v) => (typeof v === 'boolean' ? null : 'fatal must be a boolean') },
    make: (message, fatal = false) => ({ message: text(message), fatal: Boolean(fatal) }),
  },
  cached: {
    doc: 'the default model is in the Cache API (read from there, or just stored)',
    fields: { present: aBoolean('present') },
    make: (present) => ({ present: Boolean(present) }),
  },
  catalog: {
    doc: "[{id, name}] lists, the KV format ids (wasm kvFormats(), in order) and the runtimes (wasm runtimeIds(): [{id, name, units}]), sent once after booted",
    fields: {
      presets: (v) => (isIdList(v) ? null : 'presets must be an [{id, name}] list'),
      devices: (v) => (isIdList(v) ? null : 'devices must be an [{id, name}] list'),
      kvFormats: optional(checkKvFormatList),
      runtimes: optional(checkRuntimeList),
    },
  },
  measuring: {
    doc: 'the this-browser micro-benchmarks are running (~1 s): `done` of `total` probes have run',
    fields: countFields,
    check: countCheck,
  },
  'estimate-result': {
    doc: "device: {id, name, units, default_unit, default_runtime?: {unit: runtime}}; measurements: BrowserMeasurements or null; comparison (purpose \"compare\" only, always there): {deployment, rows} of the engine's last run (wasm comparisonDeployment / comparisonRows); the request's deployment is ignored for \"compare\"; timing (the worker's first answer only): {workerMs, tables} its time and where the estimator's tables came from",
    fields: {
      id: nonNegInt('id'),
      purpose: (v) => (ESTIMATE_PURPOSES.includes(v) ? null : `bad purpose ${fmtValue(v)}`),
      report: checkReport,
      device: (v) => (isObject(v) && typeof v.id === 'string' && Array.isArray(v.units) ? null : 'device must be {id, name, units, default_unit}'),
      measurements: (v) => (v === null || isObject(v) ? null : 'measurements must be an object or null'),
      timing: optional((v) => (isObject(v) && Number.isFinite(v.workerMs) && typeof v.tables === 'string' ? null : 'timing must be {workerMs, tables}')),
      comparison: optional(checkComparison),
    },
    check: (m) => {
      if (m.comparison !== undefined && m.purpose !== 'compare') return 'only a compare answer carries a comparison';
      if (m.comparison === undefined && m.purpose === 'compare') return 'a compare answer must carry its comparison';
      return null;
    },
    make: (id, purpose, report, device, measurements = null, comparison = null, timing = null) =>
      ({ id, purpose, report, device, measurements, comparison: comparison ?? undefined, timing: timing ?? undefined }),
  },
  'estimate-error': {
    doc: 'the estimator refused the request (message says why)',
    fields: {
      id: nonNegInt('id'),
      purpose: (v) => (ESTIMATE_PURPOSES.includes(v) ? null : `bad purpose ${fmtValue(v)}`),
      message: nonEmptyString('message'),
    },
    make: (id, purpose, message) => ({ id, purpose, message: text(message) }),
  },
  'fit-result': {
    doc: "the solver's FitResult without its request: {device, device_name, tried, failed: {memory, ttft, sustained, temperature, invalid}, rows: [FitRow], models: [id]}",
    fields: { id: nonNegInt('id'), result: checkFitResult },
    // Without `request` (it holds every model's shape), with `models`, the ids searched.
    make: (id, result) => {
      const r = isObject(result) ? result : {};
      const models = Array.isArray(r.request?.models) ? r.request.models.map((m) => m?.id) : r.models;
      return { id, result: { device: r.device, device_name: r.device_name, tried: r.tried, failed: r.failed, rows: r.rows, models } };
    },
  },
  'fit-error': {
    doc: 'the solver (or the request) was refused; message says why',
    fields: { id: nonNegInt('id'), message: nonEmptyString('message') },
    make: (id, message) => ({ id, message: text(message) }),
  },
  'fit-progress': {
    doc: "`done` of the request's `total` models are searched",
    fields: { id: nonNegInt('id'), ...countFields },
    check: countCheck,
  },
  'prune-progress': {
    doc: 'stage: "fetching" (the calibration text), "calibrating" (done/total tokens), "pruning", "exporting", "evaluating"; done/total null when unknown',
    fields: {
      stage: oneOf(PRUNE_STAGES, 'stage'),
      done: nullOr(nonNegIntOrNull('done')),
      total: nullOr(nonNegIntOrNull('total')),
    },
    make: (stage, done = null, total = null) => ({ stage, done, total }),
  },
  pruned: {
    doc: 'the pruned model runs (PruneReport, info(), metrics())',
    fields: { report: checkPruneReport, info: checkInfo, metrics: checkMetrics },
    check: (m) => (m.info.params !== m.report.params_after ? `info.params ${m.info.params} is not the report's params_after ${m.report.params_after}` : null),
    make: metricsMsg((report, info, metrics) => ({ report, info, metrics })),
  },
  restored: {
    doc: 'the model as loaded runs again',
    fields: { info: checkInfo, metrics: checkMetrics },
    make: metricsMsg((info, metrics) => ({ info, metrics })),
  },
  'perplexity-result': {
    doc: 'PerplexityReport of the running model (params: its parameter count)',
    fields: {
      report: (r) => (isObject(r) && isFiniteNumber(r.perplexity) && r.perplexity > 0 && isNonNegInt(r.tokens) ? null : 'report must be {perplexity > 0, tokens, ...}'),
      params: nonNegInt('params'),
    },
  },
  exported: {
    doc: 'a file to download (bytes: Uint8Array)',
    fields: { name: nonEmptyString('name'), bytes: (v) => (v instanceof Uint8Array ? null : 'bytes must be a Uint8Array') },
  },
};

function nonNegIntOrNull(name) {
  return (v) => (isNonNegInt(v) ? null : `${name} must be a non-negative integer or null, got ${fmtValue(v)}`);
}

/** The comparison of an estimate-result: {deployment, rows: [{key, label, unit, estimate, measured, error_pct}]}. */
function checkComparison(c) {
  if (!isObject(c) || !isObject(c.deployment) || !Array.isArray(c.rows)) return 'comparison must be {deployment, rows}';
  for (const r of c.rows) {
    if (!isObject(r) || typeof r.key !== 'string' || typeof r.label !== 'string' || typeof r.unit !== 'string')
      return 'each comparison row needs key, label and unit strings';
    for (const k of ['estimate', 'measured', 'error_pct']) {
      if (r[k] !== null && !(typeof r[k] === 'number' && Number.isFinite(r[k])))
        return `comparison row ${r.key}: ${k} must be a finite number or null`;
    }
  }
  return null;
}

// ---- what the tables yield ---------------------------------------------------------------------

/** `load-url` -> `LOAD_URL`. */
const constName = (type) => type.toUpperCase().replace(/-/g, '_');

export const ToWorker = Object.freeze(Object.fromEntries(Object.keys(TO_WORKER).map((t) => [constName(t), t])));
export const FromWorker = Object.freeze(Object.fromEntries(Object.keys(FROM_WORKER).map((t) => [constName(t), t])));

/** The field names of each kind (`?` marks an optional one), for the tests and the docs. */
export const MESSAGE_FIELDS = Object.freeze(Object.fromEntries(
  [...Object.entries(TO_WORKER), ...Object.entries(FROM_WORKER)].map(([t, s]) => [t, Object.freeze(Object.keys(s.fields))]),
));

function validateWith(schema, msg) {
  if (!isObject(msg)) return 'message must be an object';
  const s = typeof msg.type === 'string' && Object.hasOwn(schema, msg.type) ? schema[msg.type] : null;
  if (!s) return `unknown message type ${fmtValue(msg.type)}`;
  for (const [k, rule] of Object.entries(s.fields)) {
    const e = rule(msg[k], msg);
    if (e) return `${msg.type}: ${e}`;
  }
  const e = s.check ? s.check(msg) : null;
  return e ? `${msg.type}: ${e}` : null;
}

/** Returns null if `msg` is a well-formed page -> worker message, else an error string. */
export const validateToWorker = (msg) => validateWith(TO_WORKER, msg);

/** Returns null if `msg` is a well-formed worker -> page message, else an error string. */
export const validateFromWorker = (msg) => validateWith(FROM_WORKER, msg);

/** The constructor of `type`: its fields from `make` (or the arguments in field order), checked. */
function constructorOf(schema, type) {
  const s = schema[type];
  const names = Object.keys(s.fields);
  return (...args) => {
    const fields = s.make ? s.make(...args) : Object.fromEntries(names.map((k, i) => [k, args[i]]));
    const m = { type };
    for (const k of names) if (fields[k] !== undefined) m[k] = fields[k];
    must(validateWith(schema, m));
    return m;
  };
}

/**
 * The protocol's documentation from the tables: one line per kind, "type {field, optional?}" and
 * what it does, page -> worker first.
 */
export function describeMessages() {
  const lines = (title, schema) => [
    title,
    ...Object.entries(schema).map(([t, s]) => {
      const f = Object.entries(s.fields).map(([k, rule]) => (rule.optional ? `${k}?` : k));
      return `  ${t} {${f.join(', ')}}\n      ${s.doc}`;
    }),
  ];
  return [...lines('Page -> worker', TO_WORKER), ...lines('Worker -> page', FROM_WORKER)].join('\n');
}

/** The doc line of each kind (for the tests: every kind has one). */
export const MESSAGE_DOCS = Object.freeze(Object.fromEntries(
  [...Object.entries(TO_WORKER), ...Object.entries(FROM_WORKER)].map(([t, s]) => [t, s.doc]),
));

const to = (t) => constructorOf(TO_WORKER, t);
const from = (t) => constructorOf(FROM_WORKER, t);

// page -> worker
/** `weights` undefined leaves the field out: the engine then uses its default (auto). */
export const loadUrl = to('load-url');
export const loadFile = to('load-file');
export const setKernel = to('set-kernel');
export const setKvFormat = to('set-kv-format');
const setThreadsMsg = to('set-threads');
/** `max`: the cores the page may use (navigator.hardwareConcurrency), at most MAX_THREADS. */
export function setThreads(threads, max = MAX_THREADS) {
  must(checkThreads(threads, max));
  return setThreadsMsg(threads);
}
/** `params.keep` undefined leaves the field out (the worker then starts a fresh conversation). */
export const generate = to('generate');
export const stop = to('stop');
export const prune = to('prune');
export const restore = to('restore');
export const perplexity = to('perplexity');
export const exportGguf = to('export-gguf');
/** `prune` undefined or 0 leaves the field out (the model is estimated as it is). */
export const estimate = to('estimate');
/** `context` null or undefined searches every context of FIT_CONTEXTS. */
export const fit = to('fit');
/**
 * Fault injection, for the page's tests only: the worker panics inside the wasm (a real trap,
 * as an engine bug would) before step `step` of the running or next generation (0: before the
 * prefill). The worker honours it only when its URL carries `faults=1` (the page passes that on
 * from its own `?faults=1`) and refuses it otherwise.
 */
export const injectFault = to('inject-fault');

// worker -> page
export const booted = from('booted');
export const progress = from('progress');
export const parsing = from('parsing');
export const loaded = from('loaded');
export const kernelSet = from('kernel-set');
export const threadsSet = from('threads-set');
export const kvFormatSet = from('kv-format-set');
export const started = from('started');
export const prefilling = from('prefilling');
export const piece = from('piece');
export const done = from('done');
export const error = from('error');
export const cached = from('cached');
export const catalog = from('catalog');
export const measuring = from('measuring');
export const estimateResult = from('estimate-result');
export const estimateError = from('estimate-error');
export const fitResult = from('fit-result');
export const fitError = from('fit-error');
export const fitProgress = from('fit-progress');
export const pruneProgress = from('prune-progress');
export const pruned = from('pruned');
export const restored = from('restored');
export const perplexityResult = from('perplexity-result');
export const exported = from('exported');
