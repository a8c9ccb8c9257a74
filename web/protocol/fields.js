// The checks of the values messages carry: each `check*` returns an error string naming the field
// and its value, or null. messages.js builds its schema from them; forms.js and the panels use them
// on raw input. Pure ES module: no DOM, no wasm.

import {
  ESTIMATE_PURPOSES, FIT_CONTEXTS, FIT_FAMILIES, FIT_FAIL_KEYS, FIT_MAX_PRUNE, INFO_KEYS, KV_METRIC_KEYS, LIMITS,
  MAX_THREADS, MEMORY_METRIC_KEYS, METRIC_KEYS, METRIC_NAME_KEYS, PRUNE_ALLOCATION, PRUNE_IMPORTANCE, PRUNE_MAX_RATIO,
  PRUNE_RATIO_KEYS, START_OPTION_KEYS, WEIGHT_FORMATS,
} from './catalog.js';
import { fmtValue, isFiniteNumber, isNonNegInt, isObject } from './checks.js';

/** Kernel names are short identifiers (`simd128`, `scalar`, ...); the engine decides which exist. */
const KERNEL_NAME = /^[a-z][a-z0-9_]{0,31}$/;

/**
 * KV format ids are short identifiers too (`f32`, `k8v16`, `int4g32`, ...). The list itself is
 * the wasm's `kvFormats()`, which the worker sends in `catalog`: the page does not keep its own.
 */
const KV_FORMAT_NAME = /^[a-z][a-z0-9_]{0,31}$/;


// ---- generation parameters --------------------------------------------------------------------

/** One rule per generation knob, in the order they are checked (the generate message's fields). */
export const GENERATE_FIELDS = Object.freeze({
  prompt: (v) => (typeof v !== 'string' ? 'prompt must be a string' : v.trim() === '' ? 'prompt is empty' : null),
  chat: (v) => (typeof v === 'boolean' ? null : `chat must be true or false, got ${JSON.stringify(v)}`),
  maxTokens: (v) =>
    Number.isSafeInteger(v) && v >= LIMITS.maxTokens.min && v <= LIMITS.maxTokens.max
      ? null
      : `max tokens must be a whole number from ${LIMITS.maxTokens.min} to ${LIMITS.maxTokens.max}, got ${fmtValue(v)}`,
  temperature: (v) =>
    isFiniteNumber(v) && v >= LIMITS.temperature.min && v <= LIMITS.temperature.max
      ? null
      : `temperature must be a number from ${LIMITS.temperature.min} to ${LIMITS.temperature.max} (0 is greedy), got ${fmtValue(v)}`,
  topP: (v) =>
    isFiniteNumber(v) && v > LIMITS.topP.min && v <= LIMITS.topP.max ? null : `top-p must be a number above 0 and at most 1, got ${fmtValue(v)}`,
  seed: (v) =>
    Number.isSafeInteger(v) && v >= LIMITS.seed.min && v <= LIMITS.seed.max
      ? null
      : `seed must be a whole number from 0 to ${LIMITS.seed.max}, got ${fmtValue(v)}`,
  keep: optional((v) => (typeof v === 'boolean' ? null : `keep must be true or false, got ${fmtValue(v)}`)),
});

/**
 * Checks generation knobs. Returns an error string naming the knob and its value, or null.
 * @param {{prompt:string, chat:boolean, maxTokens:number, temperature:number, topP:number, seed:number, keep?:boolean}} p
 */
export function checkGenerateParams(p) {
  if (!isObject(p)) return 'generate parameters must be an object';
  for (const [k, rule] of Object.entries(GENERATE_FIELDS)) {
    const e = rule(p[k], p);
    if (e) return e;
  }
  return null;
}

/**
 * The options object the wasm's `Engine.start` takes, from a generate message (or the form's
 * parameters): its START_OPTION_KEYS fields; `type` and fields left undefined are left out (the
 * wasm refuses a field it does not know, naming it).
 */
export function startOptions(msg) {
  const o = {};
  for (const k of START_OPTION_KEYS) if (msg?.[k] !== undefined) o[k] = msg[k];
  return o;
}

/** A rule that also accepts undefined (the field left out); `.optional` marks it for the docs. */
export function optional(rule) {
  const r = (v, m) => (v === undefined ? null : rule(v, m));
  r.optional = true;
  return r;
}

// ---- requests and answers ---------------------------------------------------------------------

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




/** Checks a TransAct pruning level (0..FIT_MAX_PRUNE). Returns an error string or null. */
export function checkPruneLevel(level) {
  return isFiniteNumber(level) && level >= 0 && level <= FIT_MAX_PRUNE
    ? null
    : `pruning level must be a fraction from 0 to ${FIT_MAX_PRUNE}, got ${fmtValue(level)}`;
}

/** Checks a device as estimate and fit take it. Returns an error string or null. */
export function checkDeviceRef(dv) {
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

export const isIdList = (v) => Array.isArray(v) && v.every((x) => isObject(x) && typeof x.id === 'string' && typeof x.name === 'string');

/** Numeric fields of a FitRow: [name, integer?]. */
export const FIT_ROW_NUMBERS = Object.freeze([
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
export function checkKvEstimate(v) {
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
export function checkCount(done, total) {
  if (!isNonNegInt(done) || !isNonNegInt(total) || total === 0 || done > total)
    return `done/total must be integers with 0 ≤ done ≤ total and total > 0, got ${fmtValue(done)}/${fmtValue(total)}`;
  return null;
}

// ---- field rules: one rule per field of a request, in the order they are checked ---------------
// Each rule is (value, wholeMessage) -> error string or null. messages.js puts them in its
// schema; the check* functions below run them on a bare request.

/** Runs `rules` over the fields of `m`: the first error, or null. */
export function checkFields(rules, m) {
  for (const [k, rule] of Object.entries(rules)) {
    const e = rule(m[k], m);
    if (e) return e;
  }
  return null;
}

export const nonEmptyString = (name) => (v) => (typeof v === 'string' && v !== '' ? null : `${name} must be a non-empty string`);
export const nonNegInt = (name) => (v) => (isNonNegInt(v) ? null : `${name} must be a non-negative integer, got ${fmtValue(v)}`);
export const oneOf = (list, name) => (v) => (list.includes(v) ? null : `${name} must be one of ${list.join(', ')}, got ${fmtValue(v)}`);
export const anObject = (name) => (v) => (isObject(v) ? null : `${name} must be an object`);
/** A rule that also accepts null. */
export const nullOr = (rule) => (v, m) => (v === null ? null : rule(v, m));

/** A text the worker fetches and tokenizes: {url, maxTokens} (calibration, perplexity). */
export const TEXT_SOURCE_FIELDS = Object.freeze({
  url: nonEmptyString('url'),
  maxTokens: (v) => (Number.isSafeInteger(v) && v >= 2 ? null : `maxTokens must be an integer of at least 2, got ${fmtValue(v)}`),
});

/** Checks prune's calibration: {url, maxTokens, window}. Returns an error string or null. */
export function checkCalibration(c) {
  if (!isObject(c)) return 'calibration must be an object';
  const e = checkFields(TEXT_SOURCE_FIELDS, c);
  if (e) return `calibration.${e}`;
  if (!Number.isSafeInteger(c.window) || c.window < 1) return `calibration.window must be a positive integer, got ${fmtValue(c.window)}`;
  return null;
}

export const PRUNE_FIELDS = Object.freeze({
  plan: (v) => checkPrunePlan(v),
  calibration: optional(checkCalibration),
});

/** What a prune request needs beyond its fields: activation importance needs the calibration text. */
export function checkPruneCalibration(m) {
  return m.plan.importance === 'activation' && m.calibration === undefined ? 'activation importance needs a calibration text' : null;
}

/** Checks a prune request ({plan, calibration?}). Returns an error string or null. */
export function checkPruneRequest(m) {
  if (!isObject(m)) return 'prune request must be an object';
  return checkFields(PRUNE_FIELDS, m) || checkPruneCalibration(m);
}

/** Checks a model as estimate takes it: preset, loaded or config. Returns an error string or null. */
export function checkModelRef(md) {
  if (!isObject(md)) return 'model must be an object';
  if (md.kind === 'preset') {
    if (typeof md.id !== 'string' || md.id === '') return 'model.id must be a non-empty string';
  } else if (md.kind === 'config') {
    if (typeof md.name !== 'string' || typeof md.text !== 'string') return 'a config model needs name and text strings';
  } else if (md.kind !== 'loaded') return `model.kind must be preset, loaded or config, got ${fmtValue(md.kind)}`;
  return null;
}

export const ESTIMATE_FIELDS = Object.freeze({
  id: nonNegInt('id'),
  purpose: oneOf(ESTIMATE_PURPOSES, 'purpose'),
  model: checkModelRef,
  device: checkDeviceRef,
  deployment: anObject('deployment'),
  prune: optional(checkPruneLevel),
});

/** Checks an estimate request's fields. Returns an error string or null. */
export function checkEstimateRequest(m) {
  if (!isObject(m)) return 'estimate request must be an object';
  return checkFields(ESTIMATE_FIELDS, m);
}

export const FIT_FIELDS = Object.freeze({
  id: nonNegInt('id'),
  device: checkDeviceRef,
  scope: (v) => parseFitScope(v).error ?? null,
  context: (v) =>
    v === null || FIT_CONTEXTS.includes(v) ? null : `context must be null (all of ${FIT_CONTEXTS.join(', ')}) or one of them, got ${fmtValue(v)}`,
});

/** Checks a fit request's fields. Returns an error string or null. */
export function checkFitRequest(m) {
  if (!isObject(m)) return 'fit request must be an object';
  return checkFields(FIT_FIELDS, m);
}
