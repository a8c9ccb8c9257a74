// edgefit page <-> worker protocol.
//
// Pure ES module: no DOM, no wasm. Both `main.js` (the page, DOM only) and `worker.js` (owns the
// wasm engine) import it, and `tests/web/protocol.test.mjs` unit-tests it under Node.
//
// Every message is a plain object with a `type` field. Constructors build valid messages and
// throw on bad input; `validateToWorker` / `validateFromWorker` return an error string (or null
// when the message is well formed) so each side can reject malformed messages instead of acting
// on them.
//
// Page -> worker
//   load-url  {url, weights?}                fetch the model, streaming progress, and build it with
//                                            the linear layers in `weights` (one of
//                                            WEIGHT_FORMATS; the page sends its default, auto).
//                                            The kernel chosen with set-kernel is kept across loads
//   load-file {file, weights?}               read a user-chosen File (a Blob) the same way
//   set-kernel {name}                        run the matrix products on kernel `name` (one of the
//                                            loaded model's info.kernels); refused while busy
//   set-kv-format {name}                     store the KV cache as `name` (one of the wasm's
//                                            kvFormats(), sent in catalog) from now on; clears the
//                                            cache (and so the conversation). Without a model the
//                                            choice is kept and applied to the next load. Kept
//                                            across loads; refused while busy
//   generate  {prompt, chat, maxTokens, temperature, topP, seed, keep?}
//                                            keep: true continues the conversation the engine
//                                            holds (its cached tokens are reused); absent or false
//                                            starts a fresh one (cache and history cleared)
//   stop      {}                             ask the running generation to end after this token
//   prune     {plan, calibration?}           prune the model as loaded (every prune starts from it)
//                                            with `plan` (PrunePlan: {ratios: {heads, kv_heads,
//                                            qk_dims, v_dims, mlp} in 0..PRUNE_MAX_RATIO, layers,
//                                            importance, allocation}) and run the result in the
//                                            loaded formats. With importance "activation",
//                                            calibration {url, maxTokens, window} names the text;
//                                            the worker calibrates once per (url, maxTokens,
//                                            window) and reuses the statistics for later prunes
//   restore   {}                             run the model as loaded again
//   perplexity {url, maxTokens}              perplexity of the running model on the first
//                                            maxTokens tokens of the text at url
//   export-gguf {dtype}                      the running model as a GGUF file (q8_0, f16, f32)
//   estimate  {id, purpose, model, device, deployment}
//                                            run the estimator (pure, fast; handled even while a
//                                            generation runs, between two tokens). model:
//                                            {kind:"preset", id} | {kind:"loaded"} |
//                                            {kind:"config", name, text}; device: {kind:"bundled",
//                                            id} | {kind:"this-browser"} (measured once per kernel
//                                            with the engine's kernel, cached);
//                                            purpose: "panel" | "compare"; id: increasing integer;
//                                            prune (optional, 0..FIT_MAX_PRUNE): the model is pruned
//                                            TransAct-style at that level first (wasm prunedSpec)
//   fit       {id, device, scope, context}   "what fits?": the sizing solver (wasm fit) on `device`
//                                            (as in estimate) over the models of `scope`: "all"
//                                            presets | "family:<f>" (f in FIT_FAMILIES) |
//                                            "preset:<id>" | "loaded" (the engine's model);
//                                            context: one of FIT_CONTEXTS, or null for all of them.
//                                            Other lists and the base deployment are the solver's
//                                            defaults, as `edgefit fit` uses them
//
// Worker -> page
//   booted    {version, build}               the wasm module is initialised; build = 'simd128' or
//                                            'baseline' (which module runs, see chooseWasmBuild)
//   progress  {loaded, total}                bytes read so far; total is null when unknown
//   parsing   {bytes}                        all bytes read, the engine is parsing the model
//   loaded    {info, metrics}                the model is ready (info() and metrics() parsed)
//   kernel-set {info}                        set-kernel done; info.kernel names the kernel now used
//   kv-format-set {format, metrics, kvEstimateBytes}
//                                            set-kv-format done: `format` is the KV format now used;
//                                            metrics: the engine's metrics (null without a model)
//   started   {}                             generation started
//   prefilling {done, total}                 the prompt is being fed in chunks (Engine
//                                            prefillChunk): `done` of its `total` tokens are in
//                                            the cache; sent after each chunk of a prompt longer
//                                            than one chunk; Stop is honoured between chunks
//   piece     {text, tokenMs, metrics, kvEstimateBytes}
//                                            one token's text, the new per-token decode latencies
//                                            (ms) since the last piece, and a metrics snapshot
//                                            without the token_ms array. kvEstimateBytes: the
//                                            estimator's bytes (wasm kvBytes) for metrics.kv_tokens
//                                            tokens of metrics.kv_format of the loaded model, or
//                                            null when it cannot be computed
//   done      {reason, metrics, kvEstimateBytes}
//                                            reason: "stop" | "length" | "stopped" (user Stop)
//   catalog   {presets, devices, kvFormats?, runtimes?}
//                                            [{id, name}] lists, the KV format ids (wasm
//                                            kvFormats(), in order) and the runtimes (wasm
//                                            runtimeIds(): [{id, name, units}]), sent once after
//                                            booted
//   cached    {present}                      the default model is in the Cache API (read from
//                                            there, or just stored)
//   measuring {done, total}                  the this-browser micro-benchmarks are running (~1 s):
//                                            `done` of `total` probes have run
//   estimate-result {id, purpose, report, device, measurements, comparison?}
//                                            device: {id, name, units, default_unit,
//                                            default_runtime?: {unit: runtime}};
//                                            measurements: BrowserMeasurements or null;
//                                            comparison (purpose "compare" only, always there):
//                                            {deployment, rows} of the engine's last run (wasm
//                                            comparisonDeployment / comparisonRows); the
//                                            request's deployment is ignored for "compare";
//                                            timing (the worker's first answer only):
//                                            {workerMs, tables} its time and where the
//                                            estimator's tables came from
//   estimate-error  {id, purpose, message}   the estimator refused the request (message says why)
//   fit-result {id, result}                  the solver's FitResult without its request: {device,
//                                            device_name, tried, failed: {memory, ttft, sustained,
//                                            temperature, invalid}, rows: [FitRow], models: [id]}
//   fit-error  {id, message}                 the solver (or the request) was refused; message says why
//   fit-progress {id, done, total}           `done` of the request's `total` models are searched
//   prune-progress {stage, done, total}      stage: "fetching" (the calibration text), "calibrating"
//                                            (done/total tokens), "pruning", "exporting",
//                                            "evaluating"; done/total null when unknown
//   pruned    {report, info, metrics}        the pruned model runs (PruneReport, info(), metrics())
//   restored  {info, metrics}                the model as loaded runs again
//   perplexity-result {report, params}       PerplexityReport of the running model (params: its
//                                            parameter count)
//   exported  {name, bytes}                  a file to download (bytes: Uint8Array)
//   error     {message, fatal}               fatal: the wasm instance is poisoned (a panic) or the
//                                            worker cannot go on; the page must respawn the worker

import { formatBinary } from './estimate-view.js';

export const ToWorker = Object.freeze({
  LOAD_URL: 'load-url',
  LOAD_FILE: 'load-file',
  GENERATE: 'generate',
  STOP: 'stop',
  ESTIMATE: 'estimate',
  SET_KERNEL: 'set-kernel',
  SET_KV_FORMAT: 'set-kv-format',
  SET_THREADS: 'set-threads',
  PRUNE: 'prune',
  RESTORE: 'restore',
  PERPLEXITY: 'perplexity',
  EXPORT_GGUF: 'export-gguf',
  FIT: 'fit',
  // Fault injection for the page's tests (see injectFault): inert unless the worker's URL carries
  // faults=1.
  INJECT_FAULT: 'inject-fault',
});

export const FromWorker = Object.freeze({
  BOOTED: 'booted',
  PROGRESS: 'progress',
  PARSING: 'parsing',
  LOADED: 'loaded',
  KERNEL_SET: 'kernel-set',
  KV_FORMAT_SET: 'kv-format-set',
  THREADS_SET: 'threads-set',
  STARTED: 'started',
  PREFILLING: 'prefilling',
  PIECE: 'piece',
  DONE: 'done',
  ERROR: 'error',
  CACHED: 'cached',
  CATALOG: 'catalog',
  MEASURING: 'measuring',
  ESTIMATE_RESULT: 'estimate-result',
  ESTIMATE_ERROR: 'estimate-error',
  PRUNE_PROGRESS: 'prune-progress',
  PRUNED: 'pruned',
  RESTORED: 'restored',
  PERPLEXITY_RESULT: 'perplexity-result',
  EXPORTED: 'exported',
  FIT_RESULT: 'fit-result',
  FIT_ERROR: 'fit-error',
  FIT_PROGRESS: 'fit-progress',
});

/** The context lengths the fit panel offers (the solver's defaults, as `edgefit fit` uses them). */
export const FIT_CONTEXTS = Object.freeze([1024, 2048, 4096, 8192]);
/** The model families of the presets (the estimator's Family names). */
export const FIT_FAMILIES = Object.freeze(['llama', 'mistral', 'qwen2', 'gemma', 'gemma2', 'phi3']);
/** The highest TransAct pruning level the estimator takes (MLP, Q/K and V dims each lose it). */
export const FIT_MAX_PRUNE = 0.9;
/** The verdicts a configuration can fail, as FitResult.failed names them. */
export const FIT_FAIL_KEYS = Object.freeze(['memory', 'ttft', 'sustained', 'temperature', 'invalid']);

/** The largest fraction the page lets a pruning ratio remove. */
export const PRUNE_MAX_RATIO = 0.9;
/** The ratio knobs of a PrunePlan, in the order the page shows them. */
export const PRUNE_RATIO_KEYS = Object.freeze(['heads', 'kv_heads', 'qk_dims', 'v_dims', 'mlp']);
export const PRUNE_IMPORTANCE = Object.freeze(['activation', 'magnitude']);
export const PRUNE_ALLOCATION = Object.freeze(['uniform', 'global']);
export const PRUNE_STAGES = Object.freeze(['fetching', 'calibrating', 'pruning', 'exporting', 'evaluating']);
export const GGUF_DTYPES = Object.freeze(['q8_0', 'f16', 'f32']);
/** Where the site serves the texts (see README: `cargo xtask build` places them). */
export const CALIBRATION_URL = 'models/calibration.txt';
export const EVAL_URL = 'data/constitution.txt';
/** Calibration defaults: tokens of the text and tokens per window (a fresh cache each). */
export const CALIBRATION = Object.freeze({ maxTokens: 1024, window: 256 });
/** Perplexity on the first this many tokens of the evaluation text. */
export const EVAL_TOKENS = 256;

/**
 * The weight formats `Engine.loadGguf` takes, default first: the same list, in the same order, as
 * the wasm's `weightFormats()` (tests/web/formats.test.mjs checks the two agree). Kept here, not
 * asked of the worker, so the picker is filled and a load request validated before the wasm has
 * even compiled, by the same pure code on both sides.
 */
export const WEIGHT_FORMATS = Object.freeze(['auto', 'w4g32', 'w4g64', 'w4g128', 'q8_0', 'f16', 'f32']);
export const DEFAULT_WEIGHTS = WEIGHT_FORMATS[0];

/** What each format is, for the picker. */
export const WEIGHT_FORMAT_LABELS = Object.freeze({
  auto: 'auto · the file\'s own formats',
  w4g32: 'w4g32 · 4-bit, groups of 32',
  w4g64: 'w4g64 · 4-bit, groups of 64',
  w4g128: 'w4g128 · 4-bit, groups of 128',
  q8_0: 'q8_0 · 8-bit, groups of 32',
  f16: 'f16',
  f32: 'f32',
});

/** Kernel names are short identifiers (`simd128`, `scalar`, ...); the engine decides which exist. */
const KERNEL_NAME = /^[a-z][a-z0-9_]{0,31}$/;

/**
 * KV format ids are short identifiers too (`f32`, `k8v16`, `int4g32`, ...). The list itself is
 * the wasm's `kvFormats()`, which the worker sends in `catalog`: the page does not keep its own.
 */
const KV_FORMAT_NAME = /^[a-z][a-z0-9_]{0,31}$/;

/** What each KV format is, for the picker (a format missing here is shown by its id). */
export const KV_FORMAT_LABELS = Object.freeze({
  f32: 'f32',
  f16: 'f16',
  k8v16: 'k8v16 · 8-bit K, f16 V',
  int8: 'int8 · 8-bit K and V',
  int4g32: 'int4g32 · 4-bit, groups of 32',
  kivi4: 'kivi4 · 4-bit KIVI + f16 residual',
});

/** The engine's error when a turn does not fit the model's context starts with this. */
export const CONTEXT_FULL_PREFIX = 'context full';

/** True when `message` is the engine's "context full" error. */
export function isContextFull(message) {
  return typeof message === 'string' && message.startsWith(CONTEXT_FULL_PREFIX);
}

export const ESTIMATE_PURPOSES = Object.freeze(['panel', 'compare']);

export const FINISH_REASONS = Object.freeze(['stop', 'length', 'stopped']);

/** Bounds the page enforces before a generation is sent to the worker. */
export const LIMITS = Object.freeze({
  maxTokens: { min: 1, max: 4096 },
  temperature: { min: 0, max: 5 },
  topP: { min: 0, max: 1 }, // exclusive of 0: topP must be > 0
  seed: { min: 0, max: 2 ** 32 - 1 },
});

/** Metric keys from `Engine.metrics()` that are names: the weights, embedding and kernel used. */
export const METRIC_NAME_KEYS = Object.freeze(['weights', 'embedding', 'kernel']);

/**
 * Metric keys of the KV cache and the conversation: non-negative integers when present (an
 * older engine leaves them out, so they are optional).
 */
export const KV_METRIC_KEYS = Object.freeze(['kv_tokens', 'kv_reserved_bytes', 'reused_tokens', 'kv_limit']);

/**
 * Optional metric keys of memory: `heap_bytes`, the heap in use as the wasm build's allocator
 * counts it (it falls when memory is freed; `peak_bytes`, the linear memory's size, never does).
 * A non-negative integer when present; the CLI's engine leaves it out.
 */
export const MEMORY_METRIC_KEYS = Object.freeze(['heap_bytes']);

/** Metric keys from `Engine.metrics()` that are plain numbers (token_ms and finish_reason aside). */
export const METRIC_KEYS = Object.freeze([
  'load_ms',
  'prompt_tokens',
  'generated_tokens',
  'ttft_ms',
  'prefill_tok_s',
  'decode_tok_s',
  'weights_bytes',
  'kv_bytes',
  'peak_bytes',
]);

/** Keys of `Engine.info()` the page shows. */
export const INFO_KEYS = Object.freeze([
  'name',
  'arch',
  'n_layers',
  'hidden',
  'n_heads',
  'n_kv_heads',
  'head_dim',
  'ffn',
  'vocab',
  'context_length',
  'params',
  'weights_bytes',
  'weights',
  'kernel',
  'kernels',
  'chat_template',
]);

// ---------------------------------------------------------------------------------------------
// small checks

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isFiniteNumber = (v) => typeof v === 'number' && Number.isFinite(v);
const isNonNegInt = (v) => Number.isSafeInteger(v) && v >= 0;
const isBlobLike = (v) =>
  isObject(v) && typeof v.size === 'number' && (typeof v.stream === 'function' || typeof v.arrayBuffer === 'function');

function fail(msg) {
  throw new TypeError(msg);
}

function must(err) {
  if (err) fail(err);
}

// ---------------------------------------------------------------------------------------------
// generation parameters

/**
 * Checks generation knobs. Returns an error string naming the knob and its value, or null.
 * @param {{prompt:string, chat:boolean, maxTokens:number, temperature:number, topP:number, seed:number}} p
 */
export function checkGenerateParams(p) {
  if (!isObject(p)) return 'generate parameters must be an object';
  if (typeof p.prompt !== 'string') return 'prompt must be a string';
  if (p.prompt.trim() === '') return 'prompt is empty';
  if (typeof p.chat !== 'boolean') return `chat must be true or false, got ${JSON.stringify(p.chat)}`;
  const { maxTokens, temperature, topP, seed } = p;
  if (!Number.isSafeInteger(maxTokens) || maxTokens < LIMITS.maxTokens.min || maxTokens > LIMITS.maxTokens.max)
    return `max tokens must be a whole number from ${LIMITS.maxTokens.min} to ${LIMITS.maxTokens.max}, got ${fmtValue(maxTokens)}`;
  if (!isFiniteNumber(temperature) || temperature < LIMITS.temperature.min || temperature > LIMITS.temperature.max)
    return `temperature must be a number from ${LIMITS.temperature.min} to ${LIMITS.temperature.max} (0 is greedy), got ${fmtValue(temperature)}`;
  if (!isFiniteNumber(topP) || topP <= LIMITS.topP.min || topP > LIMITS.topP.max)
    return `top-p must be a number above 0 and at most 1, got ${fmtValue(topP)}`;
  if (!Number.isSafeInteger(seed) || seed < LIMITS.seed.min || seed > LIMITS.seed.max)
    return `seed must be a whole number from 0 to ${LIMITS.seed.max}, got ${fmtValue(seed)}`;
  if (p.keep !== undefined && typeof p.keep !== 'boolean') return `keep must be true or false, got ${fmtValue(p.keep)}`;
  return null;
}

function fmtValue(v) {
  if (typeof v === 'number') return String(v);
  if (v === undefined) return 'nothing';
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

/**
 * Parses the form's raw string values into generation parameters.
 * Returns {params} or {error} (a message naming the bad field).
 */
export function parseGenerateForm({ prompt, chat, maxTokens, temperature, topP, seed, keep }) {
  const num = (s) => (typeof s === 'string' && s.trim() !== '' ? Number(s) : typeof s === 'number' ? s : NaN);
  const params = {
    prompt: String(prompt ?? ''),
    chat: Boolean(chat),
    maxTokens: num(maxTokens),
    temperature: num(temperature),
    topP: num(topP),
    seed: num(seed),
  };
  if (keep !== undefined) params.keep = Boolean(keep);
  const error = checkGenerateParams(params);
  return error ? { error } : { params };
}

// ---------------------------------------------------------------------------------------------
// constructors: page -> worker

/** Checks an optional weight format name. Returns an error string or null. */
export function checkWeights(weights) {
  if (weights === undefined) return null;
  return WEIGHT_FORMATS.includes(weights)
    ? null
    : `weights must be one of ${WEIGHT_FORMATS.join(', ')}, got ${fmtValue(weights)}`;
}

/** Checks a kernel name. Returns an error string or null. */
export function checkKernelName(name) {
  return typeof name === 'string' && KERNEL_NAME.test(name)
    ? null
    : `kernel must be a kernel name such as simd128 or scalar, got ${fmtValue(name)}`;
}

// ---- threads ---------------------------------------------------------------------------------

/** The most threads any request may name (the wasm's maxThreads(), edgefit_kernels MAX_THREADS). */
export const MAX_THREADS = 256;

/**
 * Checks a thread count: a whole number from 1 to `max` (the page passes
 * navigator.hardwareConcurrency; the worker the wasm's limit). Returns null or the problem.
 */
export function checkThreads(threads, max = MAX_THREADS) {
  const top = Math.min(MAX_THREADS, Number.isSafeInteger(max) && max >= 1 ? max : 1);
  return Number.isSafeInteger(threads) && threads >= 1 && threads <= top
    ? null
    : `threads must be a whole number from 1 to ${top}${top < MAX_THREADS ? ' (the cores this browser reports)' : ''}, got ${fmtValue(threads)}`;
}

/**
 * The page's default thread count for `cores` (navigator.hardwareConcurrency): half of them,
 * as wllama does (the other half keeps the page and the system responsive), at least 1.
 */
export function defaultThreads(cores) {
  return Number.isSafeInteger(cores) && cores >= 2 ? Math.floor(cores / 2) : 1;
}

/** Checks a KV format id (syntax only; the worker checks it is one the wasm lists). */
export function checkKvFormatName(name) {
  return typeof name === 'string' && KV_FORMAT_NAME.test(name)
    ? null
    : `KV format must be a format id such as f32 or int4g32, got ${fmtValue(name)}`;
}

/** Checks the catalog's runtimes: [{id, name, units: [unit]}]. Returns an error string or null. */
export function checkRuntimeList(list) {
  if (!Array.isArray(list) || list.length === 0) return 'runtimes must be a non-empty array';
  for (const r of list) {
    if (!isObject(r) || typeof r.id !== 'string' || !/^[a-z0-9]{1,32}$/.test(r.id) || typeof r.name !== 'string')
      return `each runtime must be {id, name, units}, got ${fmtValue(r)}`;
    if (!Array.isArray(r.units) || !r.units.every((u) => typeof u === 'string' && /^[a-z]{1,8}$/.test(u)))
      return `runtime ${r.id}: units must be a list of unit names`;
  }
  return null;
}

/** Checks a list of KV format ids (the catalog's kvFormats). Returns an error string or null. */
export function checkKvFormatList(list) {
  if (!Array.isArray(list) || list.length === 0) return 'kvFormats must be a non-empty list of format ids';
  for (const f of list) {
    const e = checkKvFormatName(f);
    if (e) return `kvFormats: ${e}`;
  }
  if (new Set(list).size !== list.length) return 'kvFormats must not repeat an id';
  return null;
}

/** `weights` undefined leaves the field out: the engine then uses its default (auto). */
export function loadUrl(url, weights) {
  if (typeof url !== 'string' || url === '') fail('load-url needs a non-empty url string');
  must(checkWeights(weights));
  return weights === undefined ? { type: ToWorker.LOAD_URL, url } : { type: ToWorker.LOAD_URL, url, weights };
}

export function loadFile(file, weights) {
  if (!isBlobLike(file)) fail('load-file needs a File or Blob');
  must(checkWeights(weights));
  return weights === undefined ? { type: ToWorker.LOAD_FILE, file } : { type: ToWorker.LOAD_FILE, file, weights };
}

export function setKernel(name) {
  must(checkKernelName(name));
  return { type: ToWorker.SET_KERNEL, name };
}

export function setThreads(threads, max = MAX_THREADS) {
  must(checkThreads(threads, max));
  return { type: ToWorker.SET_THREADS, threads };
}

export function setKvFormat(name) {
  must(checkKvFormatName(name));
  return { type: ToWorker.SET_KV_FORMAT, name };
}

/** `params.keep` undefined leaves the field out (the worker then starts a fresh conversation). */
export function generate(params) {
  must(checkGenerateParams(params));
  const { prompt, chat, maxTokens, temperature, topP, seed, keep } = params;
  const m = { type: ToWorker.GENERATE, prompt, chat, maxTokens, temperature, topP, seed };
  if (keep !== undefined) m.keep = keep;
  return m;
}

export function stop() {
  return { type: ToWorker.STOP };
}

/**
 * Fault injection, for the page's tests only: the worker panics inside the wasm (a real trap,
 * as an engine bug would) before step `step` of the running or next generation (0: before the
 * prefill). The worker honours it only when its URL carries `faults=1` (the page passes that on
 * from its own `?faults=1`) and refuses it otherwise.
 */
export function injectFault(step) {
  if (!Number.isSafeInteger(step) || step < 0) fail(`inject-fault: step must be a whole number >= 0, got ${fmtValue(step)}`);
  return { type: ToWorker.INJECT_FAULT, fault: 'panic', step };
}

/** Checks a PrunePlan as the page sends it. Returns an error string or null. */
export function checkPrunePlan(plan, nLayers = null) {
  if (!isObject(plan)) return 'plan must be an object';
  const allowed = ['ratios', 'layers', 'importance', 'allocation'];
  const extra = Object.keys(plan).find((k) => !allowed.includes(k));
  if (extra) return `plan.${extra} is not a pruning setting (${allowed.join(', ')})`;
  if (!isObject(plan.ratios)) return 'plan.ratios must be an object';
  for (const k of Object.keys(plan.ratios)) {
    if (!PRUNE_RATIO_KEYS.includes(k)) return `plan.ratios.${k} is not a ratio (${PRUNE_RATIO_KEYS.join(', ')})`;
    const v = plan.ratios[k];
    if (!isFiniteNumber(v) || v < 0 || v > PRUNE_MAX_RATIO) return `${k} ratio must be in 0..${PRUNE_MAX_RATIO}, got ${fmtValue(v)}`;
  }
  if (!isNonNegInt(plan.layers)) return `layers must be a non-negative integer, got ${fmtValue(plan.layers)}`;
  if (nLayers !== null && plan.layers >= nLayers) return `layers must be below the model's ${nLayers} layers, got ${plan.layers}`;
  if (!PRUNE_IMPORTANCE.includes(plan.importance)) return `importance must be one of ${PRUNE_IMPORTANCE.join(', ')}, got ${fmtValue(plan.importance)}`;
  if (!PRUNE_ALLOCATION.includes(plan.allocation)) return `allocation must be one of ${PRUNE_ALLOCATION.join(', ')}, got ${fmtValue(plan.allocation)}`;
  return null;
}

function checkTextSource(c, what) {
  if (!isObject(c)) return `${what} must be an object`;
  if (typeof c.url !== 'string' || c.url === '') return `${what}.url must be a non-empty string`;
  if (!Number.isSafeInteger(c.maxTokens) || c.maxTokens < 2) return `${what}.maxTokens must be an integer of at least 2, got ${fmtValue(c.maxTokens)}`;
  return null;
}

/** Checks a prune request. Returns an error string or null. */
export function checkPruneRequest(m) {
  if (!isObject(m)) return 'prune request must be an object';
  const e = checkPrunePlan(m.plan);
  if (e) return e;
  if (m.calibration !== undefined) {
    const c = checkTextSource(m.calibration, 'calibration');
    if (c) return c;
    if (!Number.isSafeInteger(m.calibration.window) || m.calibration.window < 1)
      return `calibration.window must be a positive integer, got ${fmtValue(m.calibration.window)}`;
  }
  if (m.plan.importance === 'activation' && m.calibration === undefined) return 'activation importance needs a calibration text';
  return null;
}

/**
 * The PrunePlan for the panel's raw values (strings or numbers). Returns {plan} or {error}.
 * `nLayers`: the loaded model's layers (dropping must leave one).
 */
export function parsePruneForm({ mlp, heads, qk, v, layers, method, allocation = 'uniform' }, nLayers = null) {
  const num = (x) => (typeof x === 'string' && x.trim() !== '' ? Number(x) : typeof x === 'number' ? x : NaN);
  const plan = {
    ratios: { heads: num(heads), qk_dims: num(qk), v_dims: num(v), mlp: num(mlp) },
    layers: num(layers),
    importance: method,
    allocation,
  };
  const error = checkPrunePlan(plan, nLayers);
  return error ? { error } : { plan };
}

/** True when the plan removes nothing. */
export function planIsEmpty(plan) {
  return plan.layers === 0 && PRUNE_RATIO_KEYS.every((k) => !(plan.ratios[k] > 0));
}

export function prune(plan, calibration) {
  const m = { type: ToWorker.PRUNE, plan };
  if (calibration !== undefined) m.calibration = calibration;
  must(checkPruneRequest(m));
  return m;
}

export function restore() {
  return { type: ToWorker.RESTORE };
}

export function perplexity(url, maxTokens) {
  const m = { type: ToWorker.PERPLEXITY, url, maxTokens };
  must(checkTextSource(m, 'perplexity'));
  return m;
}

export function exportGguf(dtype) {
  if (!GGUF_DTYPES.includes(dtype)) fail(`dtype must be one of ${GGUF_DTYPES.join(', ')}, got ${fmtValue(dtype)}`);
  return { type: ToWorker.EXPORT_GGUF, dtype };
}

/** Checks an estimate request's fields. Returns an error string or null. */
export function checkEstimateRequest(m) {
  if (!isObject(m)) return 'estimate request must be an object';
  if (!isNonNegInt(m.id)) return `id must be a non-negative integer, got ${fmtValue(m.id)}`;
  if (!ESTIMATE_PURPOSES.includes(m.purpose)) return `purpose must be one of ${ESTIMATE_PURPOSES.join(', ')}, got ${fmtValue(m.purpose)}`;
  const md = m.model;
  if (!isObject(md)) return 'model must be an object';
  if (md.kind === 'preset') {
    if (typeof md.id !== 'string' || md.id === '') return 'model.id must be a non-empty string';
  } else if (md.kind === 'config') {
    if (typeof md.name !== 'string' || typeof md.text !== 'string') return 'a config model needs name and text strings';
  } else if (md.kind !== 'loaded') return `model.kind must be preset, loaded or config, got ${fmtValue(md.kind)}`;
  const dv = checkDeviceRef(m.device);
  if (dv) return dv;
  if (!isObject(m.deployment)) return 'deployment must be an object';
  if (m.prune !== undefined) {
    const e = checkPruneLevel(m.prune);
    if (e) return e;
  }
  return null;
}

/** Checks a TransAct pruning level (0..FIT_MAX_PRUNE). Returns an error string or null. */
export function checkPruneLevel(level) {
  return isFiniteNumber(level) && level >= 0 && level <= FIT_MAX_PRUNE
    ? null
    : `pruning level must be a fraction from 0 to ${FIT_MAX_PRUNE}, got ${fmtValue(level)}`;
}

/** `prune` undefined or 0 leaves the field out (the model is estimated as it is). */
export function estimate(id, purpose, model, device, deployment, prune) {
  const m = { type: ToWorker.ESTIMATE, id, purpose, model, device, deployment };
  if (prune !== undefined && prune !== 0) m.prune = prune;
  must(checkEstimateRequest(m));
  return m;
}

/** Checks a device as estimate and fit take it. Returns an error string or null. */
function checkDeviceRef(dv) {
  if (!isObject(dv)) return 'device must be an object';
  if (dv.kind === 'bundled') {
    if (typeof dv.id !== 'string' || dv.id === '') return 'device.id must be a non-empty string';
  } else if (dv.kind !== 'this-browser') return `device.kind must be bundled or this-browser, got ${fmtValue(dv.kind)}`;
  return null;
}

/**
 * Parses a fit scope: "all" | "family:<f>" | "preset:<id>" | "loaded". Returns {kind, value}
 * ({kind: "all"}, {kind: "family", value: "llama"}, ...) or {error}.
 */
export function parseFitScope(scope) {
  if (typeof scope !== 'string') return { error: `scope must be a string, got ${fmtValue(scope)}` };
  if (scope === 'all' || scope === 'loaded') return { kind: scope };
  const m = /^(family|preset):(.+)$/.exec(scope);
  if (!m) return { error: `scope must be all, loaded, family:<name> or preset:<id>, got ${fmtValue(scope)}` };
  if (m[1] === 'family' && !FIT_FAMILIES.includes(m[2]))
    return { error: `family must be one of ${FIT_FAMILIES.join(', ')}, got ${fmtValue(m[2])}` };
  return { kind: m[1], value: m[2] };
}

/** Checks a fit request's fields. Returns an error string or null. */
export function checkFitRequest(m) {
  if (!isObject(m)) return 'fit request must be an object';
  if (!isNonNegInt(m.id)) return `id must be a non-negative integer, got ${fmtValue(m.id)}`;
  const d = checkDeviceRef(m.device);
  if (d) return d;
  const s = parseFitScope(m.scope);
  if (s.error) return s.error;
  if (m.context !== null && !FIT_CONTEXTS.includes(m.context))
    return `context must be null (all of ${FIT_CONTEXTS.join(', ')}) or one of them, got ${fmtValue(m.context)}`;
  return null;
}

/** `context` null or undefined searches every context of FIT_CONTEXTS. */
export function fit(id, device, scope, context = null) {
  const m = { type: ToWorker.FIT, id, device, scope, context: context ?? null };
  must(checkFitRequest(m));
  return m;
}

/** Returns null if `msg` is a well-formed page -> worker message, else an error string. */
export function validateToWorker(msg) {
  if (!isObject(msg)) return 'message must be an object';
  switch (msg.type) {
    case ToWorker.LOAD_URL: {
      if (typeof msg.url !== 'string' || msg.url === '') return 'load-url: url must be a non-empty string';
      const e = checkWeights(msg.weights);
      return e ? `load-url: ${e}` : null;
    }
    case ToWorker.LOAD_FILE: {
      if (!isBlobLike(msg.file)) return 'load-file: file must be a File or Blob';
      const e = checkWeights(msg.weights);
      return e ? `load-file: ${e}` : null;
    }
    case ToWorker.SET_KERNEL: {
      const e = checkKernelName(msg.name);
      return e ? `set-kernel: ${e}` : null;
    }
    case ToWorker.SET_KV_FORMAT: {
      const e = checkKvFormatName(msg.name);
      return e ? `set-kv-format: ${e}` : null;
    }
    case ToWorker.SET_THREADS: {
      const e = checkThreads(msg.threads);
      return e ? `set-threads: ${e}` : null;
    }
    case ToWorker.GENERATE: {
      const e = checkGenerateParams(msg);
      return e ? `generate: ${e}` : null;
    }
    case ToWorker.STOP:
    case ToWorker.RESTORE:
      return null;
    case ToWorker.PRUNE: {
      const e = checkPruneRequest(msg);
      return e ? `prune: ${e}` : null;
    }
    case ToWorker.PERPLEXITY: {
      const e = checkTextSource(msg, 'perplexity');
      return e ? `perplexity: ${e}` : null;
    }
    case ToWorker.EXPORT_GGUF:
      return GGUF_DTYPES.includes(msg.dtype) ? null : `export-gguf: dtype must be one of ${GGUF_DTYPES.join(', ')}, got ${fmtValue(msg.dtype)}`;
    case ToWorker.ESTIMATE: {
      const e = checkEstimateRequest(msg);
      return e ? `estimate: ${e}` : null;
    }
    case ToWorker.FIT: {
      const e = checkFitRequest(msg);
      return e ? `fit: ${e}` : null;
    }
    case ToWorker.INJECT_FAULT:
      if (msg.fault !== 'panic') return `inject-fault: fault must be "panic", got ${fmtValue(msg.fault)}`;
      return Number.isSafeInteger(msg.step) && msg.step >= 0 ? null : `inject-fault: step must be a whole number >= 0, got ${fmtValue(msg.step)}`;
    default:
      return `unknown message type ${fmtValue(msg.type)}`;
  }
}

// ---------------------------------------------------------------------------------------------
// constructors: worker -> page

export function booted(version, build) {
  if (typeof version !== 'string') fail('booted needs a version string');
  if (!WASM_BUILDS.includes(build)) fail(`booted: build must be one of ${WASM_BUILDS.join(', ')}`);
  return { type: FromWorker.BOOTED, version, build };
}

// ---- which wasm module runs --------------------------------------------------------------------

/**
 * The three wasm builds a site can carry: `pkg/` (simd128), `pkg-baseline/` (no SIMD) and
 * `pkg-threads/` (simd128 with atomics and shared memory: runs the engine on several Web
 * Workers; needs a cross-origin isolated page, see coi-serviceworker.js).
 */
export const WASM_BUILDS = Object.freeze(['simd128', 'baseline', 'threads']);
export const WASM_BUILD_DIRS = Object.freeze({ simd128: './pkg/', baseline: './pkg-baseline/', threads: './pkg-threads/' });

/** A one-line description of a build, for the footer. */
export function describeBuild(build, threads) {
  if (build === 'threads') return `threaded build (simd128, shared memory) · ${threads} thread${threads === 1 ? '' : 's'}`;
  const what = build === 'simd128' ? 'WebAssembly SIMD (simd128) build' : 'baseline build (no SIMD)';
  return `${what} · 1 thread (the threaded build needs a cross-origin isolated page)`;
}

/**
 * The smallest module that uses a SIMD instruction: one function () -> v128 whose body is
 * `i32.const 0; i8x16.splat; i8x16.popcnt; end`. `WebAssembly.validate` accepts it exactly when
 * the engine supports fixed-width SIMD.
 */
export const SIMD_PROBE = Object.freeze([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type section: func [] -> [v128]
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x0a, 0x0a, 0x01, 0x08, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0xfd, 0x62, 0x0b, // code
]);

/**
 * Which build to load: `override` (the page's `?wasm=` parameter, `null` when absent) if it
 * names a build, else threads when `isolated` (the context is cross-origin isolated and has
 * SharedArrayBuffer) and `simdSupported`, else simd128 when `simdSupported`, else baseline.
 * Returns {build} or {error} (an unknown override, simd128 or threads forced on an engine
 * without SIMD, threads forced on a page that is not cross-origin isolated).
 */
export function chooseWasmBuild(simdSupported, override = null, isolated = false) {
  if (override !== null && override !== undefined) {
    if (!WASM_BUILDS.includes(override)) {
      return { error: `?wasm=${String(override).slice(0, 40)} is not a wasm build (${WASM_BUILDS.join(', ')})` };
    }
    if ((override === 'simd128' || override === 'threads') && !simdSupported) {
      return { error: `this browser has no WebAssembly SIMD, so the ${override} build cannot run` };
    }
    if (override === 'threads' && !isolated) {
      return { error: 'the threaded build needs a cross-origin isolated page (COOP/COEP headers, or the service worker coi-serviceworker.js) with SharedArrayBuffer; this page is not' };
    }
    return { build: override };
  }
  if (simdSupported && isolated) return { build: 'threads' };
  return { build: simdSupported ? 'simd128' : 'baseline' };
}

export function progress(loaded, total) {
  const m = { type: FromWorker.PROGRESS, loaded, total: total ?? null };
  must(validateFromWorker(m));
  return m;
}

export function parsing(bytes) {
  const m = { type: FromWorker.PARSING, bytes };
  must(validateFromWorker(m));
  return m;
}

export function loaded(info, metrics) {
  const m = { type: FromWorker.LOADED, info, metrics: stripTokenMs(metrics) };
  must(validateFromWorker(m));
  return m;
}

export function threadsSet(threads) {
  const m = { type: FromWorker.THREADS_SET, threads };
  must(validateFromWorker(m));
  return m;
}

export function kernelSet(info) {
  const m = { type: FromWorker.KERNEL_SET, info };
  must(validateFromWorker(m));
  return m;
}

export function kvFormatSet(format, metrics = null, kvEstimateBytes = null) {
  const m = { type: FromWorker.KV_FORMAT_SET, format, metrics: metrics === null ? null : stripTokenMs(metrics), kvEstimateBytes };
  must(validateFromWorker(m));
  return m;
}

export function started() {
  return { type: FromWorker.STARTED };
}

export function piece(text, tokenMs, metrics, kvEstimateBytes = null) {
  const m = { type: FromWorker.PIECE, text, tokenMs: tokenMs ?? [], metrics: stripTokenMs(metrics), kvEstimateBytes };
  must(validateFromWorker(m));
  return m;
}

export function done(reason, metrics, kvEstimateBytes = null) {
  const m = { type: FromWorker.DONE, reason, metrics: stripTokenMs(metrics), kvEstimateBytes };
  must(validateFromWorker(m));
  return m;
}

export function error(message, fatal = false) {
  const text = typeof message === 'string' && message.trim() !== '' ? message : 'unknown error';
  return { type: FromWorker.ERROR, message: text, fatal: Boolean(fatal) };
}

/** The default model's file name (the worker caches only it, the page offers to forget it). */
export const DEFAULT_MODEL_FILE = 'smollm2-135m-instruct-q4_1.gguf';

/** The default model is (now) in the browser's Cache API. */
export function cached(present) {
  const m = { type: FromWorker.CACHED, present: Boolean(present) };
  must(validateFromWorker(m));
  return m;
}

export function catalog(presets, devices, kvFormats, runtimes) {
  const m = { type: FromWorker.CATALOG, presets, devices };
  if (kvFormats !== undefined) m.kvFormats = kvFormats;
  if (runtimes !== undefined) m.runtimes = runtimes;
  must(validateFromWorker(m));
  return m;
}

export function prefilling(done, total) {
  const m = { type: FromWorker.PREFILLING, done, total };
  must(validateFromWorker(m));
  return m;
}

/** The status while a long prompt is fed: "generating… reading the prompt: 128 / 1501 tokens · about 12 s left". */
export function prefillStatus(done, total, elapsedMs) {
  return `generating… reading the prompt: ${done} / ${total} tokens${timeLeft(done, total, elapsedMs)}`;
}

export function measuring(done, total) {
  const m = { type: FromWorker.MEASURING, done, total };
  must(validateFromWorker(m));
  return m;
}

export function estimateResult(id, purpose, report, device, measurements = null, comparison = null, timing = null) {
  const m = { type: FromWorker.ESTIMATE_RESULT, id, purpose, report, device, measurements };
  if (comparison !== null) m.comparison = comparison;
  if (timing !== null) m.timing = timing;
  must(validateFromWorker(m));
  return m;
}

export function estimateError(id, purpose, message) {
  const text = typeof message === 'string' && message.trim() !== '' ? message : 'unknown error';
  const m = { type: FromWorker.ESTIMATE_ERROR, id, purpose, message: text };
  must(validateFromWorker(m));
  return m;
}

/**
 * The solver's FitResult as the page gets it: without `request` (it holds every model's shape),
 * with `models`, the ids searched.
 */
export function fitResult(id, result) {
  const r = isObject(result) ? result : {};
  const models = Array.isArray(r.request?.models) ? r.request.models.map((m) => m?.id) : r.models;
  const m = {
    type: FromWorker.FIT_RESULT,
    id,
    result: { device: r.device, device_name: r.device_name, tried: r.tried, failed: r.failed, rows: r.rows, models },
  };
  must(validateFromWorker(m));
  return m;
}

export function fitProgress(id, done, total) {
  const m = { type: FromWorker.FIT_PROGRESS, id, done, total };
  must(validateFromWorker(m));
  return m;
}

export function fitError(id, message) {
  const text = typeof message === 'string' && message.trim() !== '' ? message : 'unknown error';
  const m = { type: FromWorker.FIT_ERROR, id, message: text };
  must(validateFromWorker(m));
  return m;
}

export function pruneProgress(stage, done = null, total = null) {
  const m = { type: FromWorker.PRUNE_PROGRESS, stage, done, total };
  must(validateFromWorker(m));
  return m;
}

export function pruned(report, info, metrics) {
  const m = { type: FromWorker.PRUNED, report, info, metrics: stripTokenMs(metrics) };
  must(validateFromWorker(m));
  return m;
}

export function restored(info, metrics) {
  const m = { type: FromWorker.RESTORED, info, metrics: stripTokenMs(metrics) };
  must(validateFromWorker(m));
  return m;
}

export function perplexityResult(report, params) {
  const m = { type: FromWorker.PERPLEXITY_RESULT, report, params };
  must(validateFromWorker(m));
  return m;
}

export function exported(name, bytes) {
  const m = { type: FromWorker.EXPORTED, name, bytes };
  must(validateFromWorker(m));
  return m;
}

/** Checks a PruneReport has the parts the page reads. Returns an error string or null. */
export function checkPruneReport(r) {
  if (!isObject(r)) return 'report must be an object';
  for (const k of ['params_before', 'params_after', 'kv_f32_bytes_per_token_before', 'kv_f32_bytes_per_token_after']) {
    if (!isNonNegInt(r[k])) return `report.${k} must be a non-negative integer, got ${fmtValue(r[k])}`;
  }
  if (!isObject(r.removed)) return 'report.removed must be an object';
  if (!Array.isArray(r.dropped_layers)) return 'report.dropped_layers must be an array';
  return null;
}

const isIdList = (v) => Array.isArray(v) && v.every((x) => isObject(x) && typeof x.id === 'string' && typeof x.name === 'string');

/** Numeric fields of a FitRow: [name, integer?]. */
const FIT_ROW_NUMBERS = Object.freeze([
  ['rank', true], ['prune', false], ['context', true], ['params', true], ['params_fraction', false],
  ['weights_bytes', true], ['kv_bytes_per_token', true], ['peak_memory_bytes', true], ['ttft_ms', false],
  ['decode_tok_s', false], ['sustained_tok_s', false], ['temp_rise_c', false],
]);

/** Checks one FitRow (`i`: its index, so rank must be i + 1). Returns an error string or null. */
export function checkFitRow(r, i) {
  if (!isObject(r)) return `rows[${i}] must be an object`;
  for (const k of ['model', 'model_name', 'weights', 'kv']) {
    if (typeof r[k] !== 'string' || r[k] === '') return `rows[${i}].${k} must be a non-empty string, got ${fmtValue(r[k])}`;
  }
  for (const [k, int] of FIT_ROW_NUMBERS) {
    const v = r[k];
    if (!(int ? isNonNegInt(v) : isFiniteNumber(v))) return `rows[${i}].${k} must be a ${int ? 'non-negative integer' : 'finite number'}, got ${fmtValue(v)}`;
  }
  if (r.rank !== i + 1) return `rows[${i}].rank must be ${i + 1}, got ${r.rank}`;
  if (typeof r.frontier !== 'boolean') return `rows[${i}].frontier must be a boolean`;
  return null;
}

/** Checks a fit result as the page gets it (see fitResult). Returns an error string or null. */
export function checkFitResult(r) {
  if (!isObject(r)) return 'result must be an object';
  if (typeof r.device !== 'string' || r.device === '') return 'result.device must be a non-empty string';
  if (typeof r.device_name !== 'string') return 'result.device_name must be a string';
  if (!isNonNegInt(r.tried)) return `result.tried must be a non-negative integer, got ${fmtValue(r.tried)}`;
  if (!isObject(r.failed)) return 'result.failed must be an object';
  for (const k of FIT_FAIL_KEYS) {
    if (!isNonNegInt(r.failed[k])) return `result.failed.${k} must be a non-negative integer, got ${fmtValue(r.failed[k])}`;
  }
  if (!Array.isArray(r.models) || !r.models.every((m) => typeof m === 'string' && m !== '')) return 'result.models must be a list of model ids';
  if (!Array.isArray(r.rows)) return 'result.rows must be an array';
  if (r.rows.length + r.failed.invalid > r.tried) return `result has ${r.rows.length} passing and ${r.failed.invalid} impossible rows of only ${r.tried} tried`;
  for (let i = 0; i < r.rows.length; i++) {
    const e = checkFitRow(r.rows[i], i);
    if (e) return e;
  }
  return null;
}

/** Checks an estimator report has the parts the panel reads. Returns an error string or null. */
export function checkReport(r) {
  if (!isObject(r)) return 'report must be an object';
  for (const k of ['memory', 'latency', 'thermal', 'verdict', 'explain']) {
    if (!isObject(r[k])) return `report.${k} must be an object`;
  }
  if (!Array.isArray(r.layers)) return 'report.layers must be an array';
  if (!Array.isArray(r.warnings)) return 'report.warnings must be an array';
  return null;
}

/** The error message to show for anything thrown (Error, string, other). */
export function errorMessage(e) {
  if (e instanceof Error) return e.message || e.name || 'unknown error';
  if (typeof e === 'string' && e !== '') return e;
  if (isObject(e) && typeof e.message === 'string' && e.message !== '') return e.message;
  return e === undefined || e === null ? 'unknown error' : String(e);
}

function stripTokenMs(metrics) {
  if (!isObject(metrics)) return metrics;
  const { token_ms: _dropped, ...rest } = metrics;
  return rest;
}

/** Checks a metrics object (token_ms optional). Returns an error string or null. */
export function checkMetrics(m) {
  if (!isObject(m)) return 'metrics must be an object';
  for (const k of METRIC_KEYS) {
    if (!(k in m)) return `metrics.${k} is missing`;
    if (!isFiniteNumber(m[k]) || m[k] < 0) return `metrics.${k} must be a non-negative number, got ${fmtValue(m[k])}`;
  }
  for (const k of METRIC_NAME_KEYS) {
    if (typeof m[k] !== 'string' || m[k] === '') return `metrics.${k} must be a non-empty string, got ${fmtValue(m[k])}`;
  }
  if ('finish_reason' in m && m.finish_reason !== null && !['stop', 'length'].includes(m.finish_reason))
    return `metrics.finish_reason must be "stop", "length" or null, got ${fmtValue(m.finish_reason)}`;
  if ('token_ms' in m && !(Array.isArray(m.token_ms) && m.token_ms.every((x) => isFiniteNumber(x) && x >= 0)))
    return 'metrics.token_ms must be an array of non-negative numbers';
  for (const k of [...KV_METRIC_KEYS, ...MEMORY_METRIC_KEYS]) {
    if (k in m && !isNonNegInt(m[k])) return `metrics.${k} must be a non-negative integer, got ${fmtValue(m[k])}`;
  }
  if ('kv_format' in m) {
    const e = checkKvFormatName(m.kv_format);
    if (e) return `metrics.kv_format: ${e}`;
  }
  return null;
}

/** Checks an optional kvEstimateBytes field: null, or a non-negative finite number. */
function checkKvEstimate(v) {
  return v === null || (isFiniteNumber(v) && v >= 0) ? null : `kvEstimateBytes must be null or a non-negative number, got ${fmtValue(v)}`;
}

/** Checks a model info object. Returns an error string or null. */
export function checkInfo(info) {
  if (!isObject(info)) return 'info must be an object';
  for (const k of INFO_KEYS) {
    if (!(k in info)) return `info.${k} is missing`;
  }
  if (typeof info.name !== 'string') return 'info.name must be a string';
  if (typeof info.arch !== 'string') return 'info.arch must be a string';
  if (typeof info.chat_template !== 'boolean') return 'info.chat_template must be a boolean';
  const w = info.weights;
  if (!isObject(w) || typeof w.weights !== 'string' || typeof w.embedding !== 'string')
    return 'info.weights must be {weights, embedding, stored}';
  if (!Array.isArray(w.stored) || !w.stored.every((s) => isObject(s) && typeof s.format === 'string' && isNonNegInt(s.matrices) && isNonNegInt(s.bytes)))
    return 'info.weights.stored must be a list of {format, matrices, bytes}';
  if (!Array.isArray(info.kernels) || info.kernels.length === 0 || !info.kernels.every((k) => typeof k === 'string' && k !== ''))
    return 'info.kernels must be a non-empty list of names';
  if (!info.kernels.includes(info.kernel)) return `info.kernel must be one of info.kernels, got ${fmtValue(info.kernel)}`;
  for (const k of INFO_KEYS) {
    if (['name', 'arch', 'chat_template', 'weights', 'kernel', 'kernels'].includes(k)) continue;
    if (!isNonNegInt(info[k])) return `info.${k} must be a non-negative integer, got ${fmtValue(info[k])}`;
  }
  return null;
}

/** `done` of `total` (progress): non-negative integers, done ≤ total, total > 0. */
function checkCount(what, done, total) {
  if (!isNonNegInt(done) || !isNonNegInt(total) || total === 0 || done > total)
    return `${what}: done/total must be integers with 0 ≤ done ≤ total and total > 0, got ${fmtValue(done)}/${fmtValue(total)}`;
  return null;
}

/** Returns null if `msg` is a well-formed worker -> page message, else an error string. */
export function validateFromWorker(msg) {
  if (!isObject(msg)) return 'message must be an object';
  switch (msg.type) {
    case FromWorker.BOOTED:
      if (typeof msg.version !== 'string') return 'booted: version must be a string';
      return WASM_BUILDS.includes(msg.build) ? null : `booted: build must be one of ${WASM_BUILDS.join(', ')}`;
    case FromWorker.PROGRESS:
      if (!isNonNegInt(msg.loaded)) return `progress: loaded must be a non-negative integer, got ${fmtValue(msg.loaded)}`;
      if (msg.total !== null && !isNonNegInt(msg.total))
        return `progress: total must be a non-negative integer or null, got ${fmtValue(msg.total)}`;
      return null;
    case FromWorker.PARSING:
      return isNonNegInt(msg.bytes) ? null : `parsing: bytes must be a non-negative integer, got ${fmtValue(msg.bytes)}`;
    case FromWorker.LOADED: {
      const e = checkInfo(msg.info) || checkMetrics(msg.metrics);
      return e ? `loaded: ${e}` : null;
    }
    case FromWorker.KERNEL_SET: {
      const e = checkInfo(msg.info);
      return e ? `kernel-set: ${e}` : null;
    }
    case FromWorker.THREADS_SET: {
      const e = checkThreads(msg.threads);
      return e ? `threads-set: ${e}` : null;
    }
    case FromWorker.KV_FORMAT_SET: {
      const e =
        checkKvFormatName(msg.format) ||
        (msg.metrics === null ? null : checkMetrics(msg.metrics)) ||
        checkKvEstimate(msg.kvEstimateBytes);
      if (e) return `kv-format-set: ${e}`;
      if (msg.metrics !== null && 'kv_format' in msg.metrics && msg.metrics.kv_format !== msg.format)
        return `kv-format-set: metrics.kv_format ${fmtValue(msg.metrics.kv_format)} is not the format set, ${fmtValue(msg.format)}`;
      return null;
    }
    case FromWorker.STARTED:
      return null;
    case FromWorker.PIECE: {
      if (typeof msg.text !== 'string') return 'piece: text must be a string';
      if (!Array.isArray(msg.tokenMs) || !msg.tokenMs.every((x) => isFiniteNumber(x) && x >= 0))
        return 'piece: tokenMs must be an array of non-negative numbers';
      const e = checkMetrics(msg.metrics) || checkKvEstimate(msg.kvEstimateBytes ?? null);
      return e ? `piece: ${e}` : null;
    }
    case FromWorker.DONE: {
      if (!FINISH_REASONS.includes(msg.reason))
        return `done: reason must be one of ${FINISH_REASONS.join(', ')}, got ${fmtValue(msg.reason)}`;
      const e = checkMetrics(msg.metrics) || checkKvEstimate(msg.kvEstimateBytes ?? null);
      return e ? `done: ${e}` : null;
    }
    case FromWorker.CACHED:
      return typeof msg.present === 'boolean' ? null : 'cached: present must be true or false';
    case FromWorker.CATALOG: {
      if (!isIdList(msg.presets) || !isIdList(msg.devices)) return 'catalog: presets and devices must be [{id, name}] lists';
      // kvFormats is optional (an older worker did not send it); when sent it must be valid.
      const e = (msg.kvFormats === undefined ? null : checkKvFormatList(msg.kvFormats)) ||
        (msg.runtimes === undefined ? null : checkRuntimeList(msg.runtimes));
      return e ? `catalog: ${e}` : null;
    }
    case FromWorker.MEASURING:
      return checkCount('measuring', msg.done, msg.total);
    case FromWorker.PREFILLING:
      return checkCount('prefilling', msg.done, msg.total);
    case FromWorker.ESTIMATE_RESULT: {
      if (!isNonNegInt(msg.id)) return `estimate-result: id must be a non-negative integer, got ${fmtValue(msg.id)}`;
      if (!ESTIMATE_PURPOSES.includes(msg.purpose)) return `estimate-result: bad purpose ${fmtValue(msg.purpose)}`;
      const e = checkReport(msg.report);
      if (e) return `estimate-result: ${e}`;
      if (!isObject(msg.device) || typeof msg.device.id !== 'string' || !Array.isArray(msg.device.units))
        return 'estimate-result: device must be {id, name, units, default_unit}';
      if (msg.measurements !== null && !isObject(msg.measurements)) return 'estimate-result: measurements must be an object or null';
      if (msg.timing !== undefined && !(isObject(msg.timing) && Number.isFinite(msg.timing.workerMs) && typeof msg.timing.tables === 'string'))
        return 'estimate-result: timing must be {workerMs, tables}';
      if (msg.comparison !== undefined) {
        const c = msg.comparison;
        if (msg.purpose !== 'compare') return 'estimate-result: only a compare answer carries a comparison';
        if (!isObject(c) || !isObject(c.deployment) || !Array.isArray(c.rows))
          return 'estimate-result: comparison must be {deployment, rows}';
        for (const r of c.rows) {
          if (!isObject(r) || typeof r.key !== 'string' || typeof r.label !== 'string' || typeof r.unit !== 'string')
            return 'estimate-result: each comparison row needs key, label and unit strings';
          for (const k of ['estimate', 'measured', 'error_pct']) {
            if (r[k] !== null && !(typeof r[k] === 'number' && Number.isFinite(r[k])))
              return `estimate-result: comparison row ${r.key}: ${k} must be a finite number or null`;
          }
        }
      } else if (msg.purpose === 'compare') return 'estimate-result: a compare answer must carry its comparison';
      return null;
    }
    case FromWorker.ESTIMATE_ERROR:
      if (!isNonNegInt(msg.id)) return `estimate-error: id must be a non-negative integer, got ${fmtValue(msg.id)}`;
      if (!ESTIMATE_PURPOSES.includes(msg.purpose)) return `estimate-error: bad purpose ${fmtValue(msg.purpose)}`;
      return typeof msg.message === 'string' && msg.message !== '' ? null : 'estimate-error: message must be a non-empty string';
    case FromWorker.FIT_RESULT: {
      if (!isNonNegInt(msg.id)) return `fit-result: id must be a non-negative integer, got ${fmtValue(msg.id)}`;
      const e = checkFitResult(msg.result);
      return e ? `fit-result: ${e}` : null;
    }
    case FromWorker.FIT_PROGRESS:
      if (!isNonNegInt(msg.id)) return `fit-progress: id must be a non-negative integer, got ${fmtValue(msg.id)}`;
      return checkCount('fit-progress', msg.done, msg.total);
    case FromWorker.FIT_ERROR:
      if (!isNonNegInt(msg.id)) return `fit-error: id must be a non-negative integer, got ${fmtValue(msg.id)}`;
      return typeof msg.message === 'string' && msg.message !== '' ? null : 'fit-error: message must be a non-empty string';
    case FromWorker.PRUNE_PROGRESS: {
      if (!PRUNE_STAGES.includes(msg.stage)) return `prune-progress: stage must be one of ${PRUNE_STAGES.join(', ')}, got ${fmtValue(msg.stage)}`;
      for (const k of ['done', 'total']) {
        if (msg[k] !== null && !isNonNegInt(msg[k])) return `prune-progress: ${k} must be a non-negative integer or null, got ${fmtValue(msg[k])}`;
      }
      return null;
    }
    case FromWorker.PRUNED: {
      const e = checkPruneReport(msg.report) || checkInfo(msg.info) || checkMetrics(msg.metrics);
      if (e) return `pruned: ${e}`;
      if (msg.info.params !== msg.report.params_after) return `pruned: info.params ${msg.info.params} is not the report's params_after ${msg.report.params_after}`;
      return null;
    }
    case FromWorker.RESTORED: {
      const e = checkInfo(msg.info) || checkMetrics(msg.metrics);
      return e ? `restored: ${e}` : null;
    }
    case FromWorker.PERPLEXITY_RESULT: {
      const r = msg.report;
      if (!isObject(r) || !isFiniteNumber(r.perplexity) || r.perplexity <= 0 || !isNonNegInt(r.tokens))
        return 'perplexity-result: report must be {perplexity > 0, tokens, ...}';
      return isNonNegInt(msg.params) ? null : `perplexity-result: params must be a non-negative integer, got ${fmtValue(msg.params)}`;
    }
    case FromWorker.EXPORTED:
      if (typeof msg.name !== 'string' || msg.name === '') return 'exported: name must be a non-empty string';
      return msg.bytes instanceof Uint8Array ? null : 'exported: bytes must be a Uint8Array';
    case FromWorker.ERROR:
      if (typeof msg.message !== 'string' || msg.message === '') return 'error: message must be a non-empty string';
      if (typeof msg.fatal !== 'boolean') return 'error: fatal must be a boolean';
      return null;
    default:
      return `unknown message type ${fmtValue(msg.type)}`;
  }
}

// ---------------------------------------------------------------------------------------------
// formatting (the metric elements hold plain numbers; units live in separate labels)

/** A number for a metric element: fixed decimals, no units, no thousands separators. "" if absent. */
export function formatNumber(v, decimals = 1) {
  if (!isFiniteNumber(v)) return '';
  return v.toFixed(decimals);
}

/** A byte count as a plain integer string ("" if absent). */
export function formatBytes(v) {
  if (!isFiniteNumber(v)) return '';
  return String(Math.round(v));
}

/**
 * Bytes for humans, in binary units: "92.1 MiB", "1.07 GiB". One unit everywhere on the page,
 * the estimator's included (estimate-view's formatBinary is this function). "" if absent.
 */
export const formatMB = formatBinary;

/** Progress text "x / y MiB" (or "x MiB" when the total is unknown). */
export function formatProgress(loaded, total, elapsedMs = null) {
  const x = (loaded / 2 ** 20).toFixed(1);
  if (!isFiniteNumber(total) || total <= 0) return `${x} MiB`;
  return `${x} / ${(total / 2 ** 20).toFixed(1)} MiB${timeLeft(loaded, total, elapsedMs)}`;
}

/**
 * " · about N s left" when `done` of `total` took `elapsedMs` (linear extrapolation), else ''
 * (nothing done yet, finished, or no time given).
 */
export function timeLeft(done, total, elapsedMs) {
  if (!isFiniteNumber(done) || !isFiniteNumber(total) || !isFiniteNumber(elapsedMs)) return '';
  if (done <= 0 || done >= total || elapsedMs <= 0) return '';
  const left = (elapsedMs * (total - done)) / done / 1000;
  return ` · about ${left < 10 ? left.toFixed(1) : Math.round(left)} s left`;
}

/** Parameter count as "135 M" / "1.24 B". */
export function formatParams(n) {
  if (!isFiniteNumber(n)) return '';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e8 ? 0 : 1)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} K`;
  return String(n);
}

/**
 * The values for the metric elements, keyed by data-testid, as plain number strings ("" when
 * not yet measured). Decode rate needs at least one decode token, TTFT a first token.
 */
export function metricCells(m) {
  const has = (k) => isObject(m) && isFiniteNumber(m[k]);
  const gen = has('generated_tokens') ? m.generated_tokens : 0;
  return {
    'metric-load-ms': has('load_ms') && m.load_ms > 0 ? formatNumber(m.load_ms, 0) : '',
    'metric-ttft-ms': has('ttft_ms') && gen > 0 ? formatNumber(m.ttft_ms, 1) : '',
    'metric-prefill-tps': has('prefill_tok_s') && gen > 0 ? formatNumber(m.prefill_tok_s, 1) : '',
    'metric-decode-tps': has('decode_tok_s') && gen > 1 ? formatNumber(m.decode_tok_s, 1) : '',
    'metric-weights-bytes': has('weights_bytes') && m.weights_bytes > 0 ? formatBytes(m.weights_bytes) : '',
    'metric-kv-bytes': has('kv_bytes') && m.kv_bytes > 0 ? formatBytes(m.kv_bytes) : '',
    'metric-peak-bytes': has('peak_bytes') && m.peak_bytes > 0 ? formatBytes(m.peak_bytes) : '',
    'metric-heap-bytes': has('heap_bytes') && m.heap_bytes > 0 ? formatBytes(m.heap_bytes) : '',
    'metric-prompt-tokens': has('prompt_tokens') && m.prompt_tokens > 0 ? String(m.prompt_tokens) : '',
    'metric-generated-tokens': has('generated_tokens') ? String(m.generated_tokens) : '',
  };
}

/** "w4g32 · embedding q8_0" for the metrics area ("" when the metrics do not name them). */
export function formatWeightsUsed(m) {
  if (!isObject(m) || typeof m.weights !== 'string' || m.weights === '') return '';
  const w = describeWeights(m.weights, m.stored, m.embedding);
  return typeof m.embedding === 'string' && m.embedding !== '' ? `${w} · embedding ${m.embedding}` : w;
}

/**
 * Why a downloaded GGUF is not in the format the model runs in ("" when it is): the engine
 * writes GGUF in f32, f16 or q8_0 only, so a 4-bit model is saved as 8-bit (about 1.5× the bytes).
 * `running`: the requested weights; for `auto`, `stored` (info.weights.stored) names what the
 * layers really hold (the format most matrices are in).
 */
export function exportFormatNote(running, exported, stored = null) {
  if (running === 'auto' && Array.isArray(stored)) {
    const most = stored.filter((x) => isObject(x) && typeof x.format === 'string').sort((a, b) => b.matrices - a.matrices)[0];
    if (most) running = most.format;
  }
  if (typeof running !== 'string' || running === exported || !/^(w4g|q4|q5|q6|q3|q2)/.test(running)) return '';
  return ` (saved as ${exported}: the engine writes GGUF in f32, f16 or q8_0, not yet in the loaded ${/^(w4g|q4)/.test(running) ? '4-bit ' : ''}${running}, so the file is larger than the model in memory)`;
}

/**
 * The per-layer widths of a pruned model (info.layers: [{n_heads, n_kv_heads, qk_dim, v_dim,
 * ffn}]) in one line: "FFN 1075, 9 heads (3 KV), Q/K dim 45, V dim 45 in every layer", or each
 * width's range over the layers ("FFN 768–1536"). "" when the layers are not given (not pruned).
 */
export function describeLayers(layers) {
  if (!Array.isArray(layers) || layers.length === 0 || !layers.every(isObject)) return '';
  const span = (k) => {
    const v = layers.map((l) => l[k]).filter(isFiniteNumber);
    if (v.length === 0) return '?';
    const lo = Math.min(...v);
    const hi = Math.max(...v);
    return lo === hi ? String(lo) : `${lo}\u2013${hi}`;
  };
  const same = ['ffn', 'n_heads', 'n_kv_heads', 'qk_dim', 'v_dim'].every((k) => !span(k).includes('\u2013'));
  return `FFN ${span('ffn')}, ${span('n_heads')} heads (${span('n_kv_heads')} KV), Q/K dim ${span('qk_dim')}, V dim ${span('v_dim')} ${same ? 'in every layer' : `over the ${layers.length} layers`}`;
}

/**
 * The warning after a prune whose perplexity is more than twice the model's as loaded ("" when
 * it is not, or either is unknown): the pruned model is then much worse than it looks by size.
 */
export function perplexityWarning(base, pruned) {
  if (!isFiniteNumber(base) || !isFiniteNumber(pruned) || base <= 0 || pruned <= 2 * base) return '';
  return `Warning: perplexity rose ${(pruned / base).toFixed(1)}× (${base.toFixed(2)} → ${pruned.toFixed(2)}): the pruned model's text will be much worse; prune less, or use activation importance with the calibration text.`;
}

/**
 * The requested weight format with what the engine really holds, one name everywhere:
 * "w4g32 (the file's q4_1 kept)" when the file's own 4-bit format was kept instead of
 * converting, "w4g32" when it was converted. `stored`: info.weights.stored ([{format, matrices,
 * bytes}], the embedding among them); the embedding's own format is left out (it is named apart).
 */
export function describeWeights(requested, stored, embedding) {
  if (typeof requested !== 'string' || requested === '') return '';
  if (!Array.isArray(stored)) return requested;
  // The embedding (and an untied output head) are named apart: a format counts as the
  // layers' only with more matrices than those two.
  const kept = [...new Set(stored
    .filter((x) => isObject(x) && typeof x.format === 'string' && x.format !== requested && x.matrices > (x.format === embedding ? 2 : 1))
    .map((x) => x.format))];
  return kept.length ? `${requested} (the file's ${kept.join(', ')} kept)` : requested;
}

/**
 * What the loaded model's architecture cannot have pruned or exported (info.limits, the
 * engine's `PruneLimits`: each a reason, or null), as {prune, qkDims, export} ('' where
 * allowed) and one line for the pruning panel ('' when everything is allowed, or no model).
 */
export function pruneLimits(info) {
  const l = isObject(info) && isObject(info.limits) ? info.limits : {};
  const why = (v) => (typeof v === 'string' ? v : '');
  const out = { prune: why(l.prune), qkDims: why(l.qk_dims), export: why(l.export) };
  const arch = isObject(info) && typeof info.arch === 'string' ? info.arch : 'this model';
  const lines = [];
  if (out.prune) lines.push(`${arch} cannot be pruned here: ${out.prune}.`);
  else if (out.qkDims) lines.push(`Q/K dims stay whole for ${arch}: ${out.qkDims}.`);
  if (out.export) lines.push(`No download for ${arch}: ${out.export}.`);
  return { ...out, text: lines.join(' ') };
}

/**
 * The model's name for people: the file name without ".gguf" when there is one (what the user
 * picked; a GGUF's general.name is often the trainer's run id, e.g. "Smollm2 135M 8k Lc100K
 * Mix1 Ep2"), else general.name, else "model".
 */
export function displayName(fileName, info) {
  const stem = typeof fileName === 'string' ? fileName.replace(/^.*[\\/]/, '').replace(/\.gguf$/i, '').trim() : '';
  if (stem) return stem;
  return isObject(info) && typeof info.name === 'string' && info.name.trim() ? info.name.trim() : 'model';
}

/** The model info's "Stored as" row: "q4_1 × 210 (87.6 MB), q8_0 × 1 (30.1 MB)". */
export function formatStored(stored) {
  if (!Array.isArray(stored) || stored.length === 0) return '';
  return stored
    .filter((s) => isObject(s) && typeof s.format === 'string')
    .map((s) => `${s.format} × ${s.matrices} (${formatMB(s.bytes)})`)
    .join(', ');
}

/**
 * The KV cache's metric elements, keyed by data-testid: the run's KV format, the tokens it holds,
 * the estimator's bytes for those tokens (`kvEstimateBytes`, from the wasm's kvBytes) and whether
 * they equal the engine's measured `kv_bytes` ("equal" / "differs"), the tokens of earlier turns
 * the cache reused this turn, and the context limit. "" where not known (or no token is held).
 */
export function kvCells(m, kvEstimateBytes = null) {
  const has = (k) => isObject(m) && isFiniteNumber(m[k]);
  const held = has('kv_tokens') ? m.kv_tokens : 0;
  const est = isFiniteNumber(kvEstimateBytes) && held > 0 ? kvEstimateBytes : null;
  const measured = has('kv_bytes') && held > 0 ? m.kv_bytes : null;
  let match = '';
  if (est !== null && measured !== null) match = Math.round(est) === Math.round(measured) ? 'equal' : 'differs';
  return {
    'metric-kv-format': isObject(m) && typeof m.kv_format === 'string' ? m.kv_format : '',
    'metric-kv-tokens': has('kv_tokens') ? String(m.kv_tokens) : '',
    'metric-kv-estimate-bytes': est === null ? '' : formatBytes(est),
    'metric-kv-match': match,
    'metric-reused-tokens': has('reused_tokens') ? String(m.reused_tokens) : '',
    'metric-kv-limit': has('kv_limit') && m.kv_limit > 0 ? String(m.kv_limit) : '',
  };
}

/**
 * The pruning progress line: "calibrating · 512 / 1024 tokens · about 3 s left". `elapsedMs`:
 * time since the stage began; the time left is extrapolated from done/total (none before any
 * progress).
 */
export function formatPruneProgress(stage, done, total, elapsedMs) {
  const label = {
    fetching: 'fetching the calibration text',
    calibrating: 'calibrating',
    pruning: 'pruning and re-quantizing',
    exporting: 'writing the GGUF file',
    evaluating: 'measuring perplexity',
  }[stage] ?? stage;
  if (!isFiniteNumber(done) || !isFiniteNumber(total) || total <= 0) return `${label}…`;
  return `${label} · ${done} / ${total} tokens${timeLeft(done, total, elapsedMs)}`;
}

/** File name for a download of the running model, e.g. "smollm2-135m-pruned-120M-q8_0.gguf". */
export function exportFileName(name, params, pruned, dtype) {
  const base = String(name || 'model').toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '') || 'model';
  const size = formatParams(params).replace(/\s+/g, '');
  return `${base}${pruned ? `-pruned-${size}` : ''}-${dtype}.gguf`;
}
