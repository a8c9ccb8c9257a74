// edgefit estimator panel: pure helpers (no DOM, no wasm), unit-tested in
// tests/web/estimate-view.test.mjs. main.js renders what these return; worker.js runs the
// estimator itself.

/**
 * The estimator's weight formats (the estimate panel's knob), in the order of the wasm's
 * estimateWeightFormats() (tests/web/estimator-tables.test.mjs checks the two agree). Under
 * llama.cpp, q4_k and q5_k are sized as the Q4_K_M / Q5_K_M files its quantizer writes, q3_k
 * and q2_k as its Q3_K_M and Q2_K.
 */
export const WEIGHT_FORMATS = Object.freeze([
  'f32', 'f16', 'bf16', 'int8', 'w4g32', 'w4g64', 'w4g128',
  'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q8_0', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k',
]);
/**
 * The estimator's KV formats before the worker's catalog arrives; the panel then uses the
 * wasm's kvFormats() (tests/web/formats.test.mjs checks this list equals it).
 */
export const KV_FORMATS = Object.freeze(['f32', 'f16', 'k8v16', 'int8', 'int4g32', 'kivi4']);
export const UNITS = Object.freeze(['cpu', 'gpu', 'npu']);
/**
 * The activation precisions the estimator takes (`edgefit estimate --compute`), in the order of
 * the wasm's computeDtypes() (tests/web/estimator-tables.test.mjs checks the two agree). Empty
 * on the knob: the runtime's own for the weight format.
 */
export const COMPUTE_DTYPES = Object.freeze(['f32', 'f16', 'bf16', 'int8']);
export const POLICIES = Object.freeze(['flat-out', 'paced', 'capped']);
/**
 * The estimator's runtimes before the worker's catalog arrives (the catalog then sends the
 * wasm's runtimeIds() with the units each runs on; tests/web/formats.test.mjs checks the ids).
 */
export const RUNTIMES = Object.freeze(['llamacpp', 'executorch', 'litert', 'mlc', 'qnn', 'coreml', 'mlx', 'edgefit']);
/** Longest context the estimator takes (edgefit_estimate::deploy::MAX_CONTEXT), tokens. */
export const MAX_CONTEXT = 2_097_152;
/** Most CPU threads the estimator takes (edgefit_estimate::deploy::MAX_THREADS). */
export const MAX_THREADS = 256;

/** The picker value of the measured browser device and of the non-preset models. */
export const THIS_BROWSER = 'this-browser';
export const LOADED_MODEL = '@loaded';
export const CONFIG_MODEL = '@config';

/**
 * A device's name short enough for a picker at 390 px: the profile's name without its trailing
 * parenthesis, however nested ("Snapdragon 8 Gen 3 phone (Xiaomi 14 class, 16 GB LPDDR5X)" →
 * "Snapdragon 8 Gen 3 phone"); the full name stays in the option's title and the note under the
 * pickers.
 */
export function shortDeviceName(name) {
  const s = String(name ?? '').trim();
  if (!s.endsWith(')')) return s;
  // The parenthesis that the last ')' closes, nested ones included ("(… MatePad Pro 12.6 (2021) …)").
  let depth = 0;
  for (let i = s.length - 1; i >= 0; i -= 1) {
    if (s[i] === ')') depth += 1;
    else if (s[i] === '(' && --depth === 0) {
      const cut = s.slice(0, i).trim();
      return cut === '' ? s : cut;
    }
  }
  return s;
}

/**
 * A model's name cut for a picker's label (at most `max` characters, an ellipsis in the middle so
 * the end, often the format, stays): "my-own-finetune-of…-q4_1". The option's title keeps it whole.
 */
export function pickerName(name, max = 26) {
  const chars = [...String(name ?? '')];
  if (chars.length <= max) return chars.join('');
  const tail = Math.floor((max - 1) / 3);
  return `${chars.slice(0, max - 1 - tail).join('')}…${chars.slice(chars.length - tail).join('')}`;
}

/**
 * The loaded model's label in a picker: "loaded: NAME", "pruned: NAME (119 M)" for a pruned one
 * (main.js names it "NAME, pruned to 119 M"), "loaded: none yet" without a model; the name cut
 * by pickerName so the label fits a phone's picker.
 */
export function loadedLabel(name) {
  if (!name) return 'loaded: none yet';
  const m = /^(.*), pruned to (.+)$/.exec(name);
  return m ? `pruned: ${pickerName(m[1], 18)} (${m[2]})` : `loaded: ${pickerName(name)}`;
}

export const DEFAULT_KNOBS = Object.freeze({
  weights: 'w4g32',
  compute: '',
  kv: 'int8',
  context: '2048',
  prompt_tokens: '128',
  gen_tokens: '128',
  unit: '',
  policy: 'flat-out',
  minutes: '15',
  runtime: '',
  threads: '',
});

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isFiniteNumber = (v) => typeof v === 'number' && Number.isFinite(v);

/**
 * Turns the knobs' raw strings into the deployment JSON object the estimator takes. Only the
 * syntax is checked here (a whole number, a known name); ranges (context 0, 10^9 tokens, ...)
 * are the estimator's to judge, so its message, naming the field and the limit, is what the
 * panel shows. Returns {deployment} or {error}.
 */
export function buildDeployment(knobs, lists = {}) {
  const kvFormats = Array.isArray(lists.kv) && lists.kv.length ? lists.kv : KV_FORMATS;
  const runtimes = Array.isArray(lists.runtimes) && lists.runtimes.length ? lists.runtimes : RUNTIMES;
  const k = { ...DEFAULT_KNOBS, ...knobs };
  const dep = {};
  const pick = (name, list, label) => {
    if (!list.includes(k[name])) return `${label} must be one of ${list.join(', ')}, got ${JSON.stringify(k[name])}`;
    dep[name] = k[name];
    return null;
  };
  // Each number with its own range, the estimator's (edgefit_estimate::deploy): the same words
  // and limits whichever check refuses it.
  const int = (name, label, min, max, what) => {
    const s = String(k[name]).trim();
    const range = `a whole number from ${min} to ${max}${what ? ` (${what})` : ''}`;
    if (!/^-?\d+$/.test(s)) return `${label} must be ${range}, got ${JSON.stringify(String(k[name]))}`;
    const v = Number(s);
    if (!Number.isSafeInteger(v) || v < min || v > max) return `${label} must be ${range}, got ${s}`;
    dep[name] = v;
    return null;
  };
  const ctx = () => dep.context;
  const err =
    pick('weights', WEIGHT_FORMATS, 'weights') ||
    (k.compute === '' || k.compute === undefined ? null : pick('compute', COMPUTE_DTYPES, 'activations')) ||
    pick('kv', kvFormats, 'KV format') ||
    int('context', 'context', 1, MAX_CONTEXT, 'tokens') ||
    int('prompt_tokens', 'prompt tokens', 1, ctx(), 'the context') ||
    int('gen_tokens', 'generated tokens', 1, ctx(), 'the context') ||
    (dep.prompt_tokens + dep.gen_tokens > dep.context
      ? `prompt tokens + generated tokens (${dep.prompt_tokens} + ${dep.gen_tokens}) must fit in the context of ${dep.context} tokens`
      : null) ||
    (k.unit === '' ? null : pick('unit', UNITS, 'unit')) ||
    pick('policy', POLICIES, 'policy') ||
    (k.runtime === '' || k.runtime === undefined ? null : pick('runtime', runtimes, 'runtime'));
  if (err) return { error: err };
  const threads = String(k.threads ?? '').trim();
  if (threads !== '') {
    const t = Number(threads);
    if (!/^\d+$/.test(threads) || !Number.isSafeInteger(t) || t < 1 || t > MAX_THREADS)
      return { error: `threads must be a whole number from 1 to ${MAX_THREADS} (or empty for the runtime's default), got ${JSON.stringify(threads)}` };
    dep.threads = t;
  }
  const minutes = Number(String(k.minutes).trim());
  if (String(k.minutes).trim() === '' || !Number.isFinite(minutes))
    return { error: `minutes must be a number, got ${JSON.stringify(String(k.minutes))}` };
  dep.minutes = minutes;
  return { deployment: dep };
}

/**
 * Whether a run's metrics can be compared with an estimate: at least one prompt and one
 * generated token (the rule itself, the deployment that predicts the run and the rows of the
 * table are the wasm's: edgefit_estimate::compare, run by the worker).
 */
export function canCompare(metrics) {
  return (
    isObject(metrics) &&
    Number.isSafeInteger(metrics.prompt_tokens) &&
    Number.isSafeInteger(metrics.generated_tokens) &&
    metrics.prompt_tokens >= 1 &&
    metrics.generated_tokens >= 1
  );
}

/** "+12.3 %" / "−4.0 %" / "" */
export function formatPercent(p) {
  if (!isFiniteNumber(p)) return '';
  const sign = p > 0 ? '+' : p < 0 ? '\u2212' : '';
  return `${sign}${Math.abs(p).toFixed(1)} %`;
}

/**
 * The table cells of the comparison rows the worker sends (wasm comparisonRows:
 * {key, label, unit, estimate, measured, error_pct}, null where nothing was measured):
 * {key, label, estimate, measured, error, percent} strings, bytes as "N (human)".
 */
export function comparisonCells(rows) {
  if (!Array.isArray(rows)) return [];
  const num = (v, unit) =>
    !isFiniteNumber(v) ? '\u2013' : unit === 'bytes' ? `${Math.round(v)} (${formatBinary(v)})` : formatValue(v, 1);
  return rows.filter(isObject).map((r) => ({
    key: String(r.key),
    label: `${r.label} (${r.unit})`,
    estimate: num(r.estimate, r.unit),
    measured: num(r.measured, r.unit),
    error: isFiniteNumber(r.error_pct) ? formatPercent(r.error_pct) : '\u2013',
    percent: isFiniteNumber(r.error_pct) ? String(r.error_pct) : '',
  }));
}

/** "weights q4_1, embedding q8_0, KV cache int8, kernel simd128" from the compared deployment. */
export function describeComparison(deployment, metrics) {
  if (!isObject(deployment)) return '';
  const kernel = isObject(metrics) && typeof metrics.kernel === 'string' && metrics.kernel ? `, kernel ${metrics.kernel}` : '';
  return `weights ${deployment.weights}, embedding ${deployment.embedding_weights ?? deployment.weights}, KV cache ${deployment.kv}${kernel}`;
}

/**
 * The warm-up the engine ran before this run (metrics.warm_up, edgefit_engine::WarmUp), for the
 * comparison's note: "Measured after a warm-up of the loaded model: 4 passes (a 16-token prefill
 * and 3 decode steps each, in a cache of their own) in 1210 ms, 412 → 118 ms per pass. ..." or ''
 * when the metrics carry none.
 */
export function describeWarmUp(metrics) {
  const w = isObject(metrics) ? metrics.warm_up : null;
  if (!isObject(w) || !Number.isSafeInteger(w.passes) || w.passes < 1 || !Array.isArray(w.pass_ms)) return '';
  const ms = w.pass_ms.filter(isFiniteNumber);
  const total = isFiniteNumber(w.total_ms) ? `${Math.round(w.total_ms)} ms` : '?';
  const trend = ms.length >= 2 ? `, ${Math.round(ms[0])} \u2192 ${Math.round(ms[ms.length - 1])} ms per pass` : '';
  return (
    `Measured after a warm-up of the loaded model: ${w.passes} pass${w.passes === 1 ? '' : 'es'} ` +
    `(a ${w.prompt_tokens}-token prefill and ${w.decode_steps} decode steps each, in a cache of their own) in ${total}${trend}. ` +
    'The browser compiles wasm in tiers (baseline code first, optimized code for what runs hot, in the background); ' +
    'without it the first run after a load timed partly unoptimized code.'
  );
}

/** Bytes in binary units for humans: "663.2 MiB", "1.07 GiB". */
export function formatBinary(bytes) {
  if (!isFiniteNumber(bytes)) return '';
  const a = Math.abs(bytes);
  if (a >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  if (a >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  if (a >= 2 ** 10) return `${(bytes / 2 ** 10).toFixed(1)} KiB`;
  return `${Math.round(bytes)} B`;
}

/** A plain number with sensible precision for a metric cell ("" when absent). */
export function formatValue(v, decimals) {
  if (!isFiniteNumber(v)) return '';
  if (decimals !== undefined) return v.toFixed(decimals);
  const a = Math.abs(v);
  return v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

/**
 * The numbers the panel shows: data-testid (or id), label, value string, unit, human form,
 * and the report.explain key holding its formula.
 */
export function summaryCells(report) {
  const m = report?.memory ?? {};
  const l = report?.latency ?? {};
  const t = report?.thermal ?? {};
  const bytes = (v) => (isFiniteNumber(v) ? String(Math.round(v)) : '');
  const params = report?.model?.params ?? {};
  return [
    { id: 'est-params', label: 'Parameters', value: isFiniteNumber(params.total) ? String(params.total) : '', unit: '', human: formatCount(params.total), explain: 'model.params' },
    { id: 'est-weights-bytes', label: 'Weights', value: bytes(m.weights_bytes), unit: 'bytes', human: formatBinary(m.weights_bytes), explain: 'memory.weights_bytes' },
    { id: 'est-kv-per-token', label: 'KV per token', value: bytes(m.kv_bytes_per_token), unit: 'bytes', human: formatBinary(m.kv_bytes_per_token), explain: 'memory.kv_bytes_per_token' },
    { id: 'est-kv-bytes', label: 'KV cache (full context)', value: bytes(m.kv_bytes), unit: 'bytes', human: formatBinary(m.kv_bytes), explain: 'memory.kv_bytes' },
    { id: 'est-activations-bytes', label: 'Activations (peak)', value: bytes(m.activations_bytes), unit: 'bytes', human: formatBinary(m.activations_bytes), explain: 'memory.activations_bytes' },
    { id: 'est-total-bytes', label: 'Total memory', value: bytes(m.total_bytes), unit: 'bytes', human: formatBinary(m.total_bytes), explain: 'memory.total_bytes' },
    { id: 'est-usable-bytes', label: 'Usable on device', value: bytes(m.usable_bytes), unit: 'bytes', human: formatBinary(m.usable_bytes), explain: 'memory.usable_bytes' },
    { id: 'est-ttft-ms', label: 'Time to first token', value: formatValue(l.ttft_ms, 1), unit: 'ms', human: '', explain: 'latency.ttft_ms', range: formatRange(l.ttft_ms_range, 1) },
    { id: 'est-prefill-tps', label: 'Prefill', value: formatValue(l.prefill_tok_s, 1), unit: 'tok/s', human: '', explain: 'latency.prefill_tok_s', range: formatRange(l.prefill_tok_s_range, 1) },
    { id: 'est-decode-tps', label: 'Decode (average)', value: formatValue(l.decode_tok_s, 2), unit: 'tok/s', human: '', explain: 'latency.decode_tok_s', range: formatRange(l.decode_tok_s_range, 2) },
    { id: 'est-decode-overhead', label: 'Decode step: fixed overhead', value: isFiniteNumber(l.decode_overhead_share) ? (l.decode_overhead_share * 100).toFixed(0) : '', unit: '%', human: overheadHuman(l), explain: 'latency.decode_overhead_share' },
    { id: 'est-sustained-tps', label: `Sustained (after ${formatValue((t.duration_s ?? 0) / 60, 0)} min)`, value: formatValue(t.sustained_tok_s, 2), unit: 'tok/s', human: '', explain: 'thermal.sustained_tok_s', range: formatRange(scaledRange(t.sustained_tok_s, l.decode_tok_s, l.decode_tok_s_range), 2) },
    { id: 'est-temp-rise', label: 'Temperature rise (body)', value: formatValue(t.temp_rise_c, 2), unit: '°C', human: '', explain: 'thermal.temp_rise_c' },
    { id: 'est-throttle-s', label: 'Time to first throttle', value: t.time_to_throttle_s == null ? 'never' : formatValue(t.time_to_throttle_s, 0), unit: t.time_to_throttle_s == null ? '' : 's', human: '', explain: 'thermal.time_to_throttle_s' },
    { id: 'est-energy-j', label: 'Energy per token', value: formatValue(t.energy_per_token_j, 3), unit: 'J', human: '', explain: 'thermal.energy_per_token_j' },
  ];
}

/** "38.2–61.0" for a [low, high] range ("" when it is not one). */
export function formatRange(r, decimals) {
  if (!Array.isArray(r) || r.length !== 2 || !r.every(isFiniteNumber)) return '';
  return `${formatValue(r[0], decimals)}\u2013${formatValue(r[1], decimals)}`;
}

/**
 * `value` with the band of `base` (its range over it, multiplicatively): the sustained speed is
 * the decode speed at a throttled clock, so it carries the decode band. null when any is absent.
 */
export function scaledRange(value, base, baseRange) {
  if (!isFiniteNumber(value) || !isFiniteNumber(base) || base <= 0 || !Array.isArray(baseRange) || !baseRange.every(isFiniteNumber)) return null;
  return [value * (baseRange[0] / base), value * (baseRange[1] / base)];
}

/** "1.7 of 14.2 ms per step" for the decode step's fixed overhead ("" when absent). */
function overheadHuman(l) {
  if (!isFiniteNumber(l.decode_overhead_share) || !isFiniteNumber(l.decode_ms_first)) return '';
  return `${formatValue(l.decode_overhead_share * l.decode_ms_first, 2)} of ${formatValue(l.decode_ms_first, 2)} ms per step`;
}

/**
 * What sets the rest of the first decode step, from the report's `decode_ms_by_bound` (the
 * step's op time by the roof that holds each op): the largest first, with its milliseconds.
 */
function decodeBoundText(b) {
  const generic = 'the rest is the bytes moved (weights, KV cache, logits head) over the achieved bandwidth, the decode kernel\u2019s weight rate, or the compute roof';
  if (!isObject(b) || ![b.memory, b.kernel, b.compute].every(isFiniteNumber)) return generic;
  const parts = [
    ['the bytes moved (weights, KV cache, logits head) over the achieved bandwidth', b.memory],
    ['the decode kernel\u2019s weight rate (its unpacking instructions; on a CPU these add to the time of the bytes, which a GPU overlaps)', b.kernel],
    ['the compute roof', b.compute],
  ].filter(([, ms]) => ms > 0).sort((x, y) => y[1] - x[1]);
  if (parts.length === 0) return generic;
  const ms = (v) => `${formatValue(v, 2)} ms`;
  const others = parts.slice(1).map(([what, v]) => `${what.split(' (')[0]} ${ms(v)}`).join(', ');
  return `the rest is set mostly by ${parts[0][0]}: ops held by it take ${ms(parts[0][1])} of the step${others ? ` (${others})` : ''}`;
}

/**
 * The sentence under the numbers saying how the ranges were obtained and how much of a decode
 * step is fixed overhead (not bandwidth), from the report ("" before one).
 */
export function rangeNote(report) {
  const l = report?.latency;
  if (!isObject(l) || !Array.isArray(l.decode_tok_s_range)) return '';
  const share = isFiniteNumber(l.decode_overhead_share) ? (l.decode_overhead_share * 100).toFixed(0) : '?';
  const bound = isFiniteNumber(l.decode_overhead_share) && l.decode_overhead_share >= 0.5
    ? 'so this decode is bound by fixed per-op and per-token costs more than by memory bandwidth'
    : decodeBoundText(l.decode_ms_by_bound);
  return `Ranges (low\u2013high beside each time and speed, shaded on the thermal chart) are the 10th to 90th percentile of measured/estimated on the committed validation set of published measurements, taking each point both leave-one-source-out (refitted without its own source) and in-sample; see README \u201cValidation\u201d and \u201cedgefit validate\u201d. ` +
    `Runtime ${l.runtime ?? '?'} on the ${l.unit ?? '?'}${isFiniteNumber(l.threads) ? ` with ${l.threads} thread${l.threads === 1 ? '' : 's'}` : ''}: ${share}% of the first decode step is fixed overhead (${formatValue(l.op_overhead_us)} \u00b5s per op, ${formatValue(l.token_overhead_us)} \u00b5s per token), ${bound}.`;
}

/**
 * The runtime picker's options for a device ({units, default_unit, default_runtime?}) and the
 * unit knob ('' = the device's default unit): [{id, label, disabled}] with '' (the estimator's
 * default) first. A runtime whose profile does not run on that unit is offered disabled, saying
 * which units it runs on (the estimator refuses the pair). `runtimes`: the catalog's
 * [{id, name, units}]; `defaultLabel`: the runtime the last report resolved, if any.
 */
export function runtimeChoices(runtimes, device, unitKnob, defaultLabel) {
  const unit = unitKnob || device?.default_unit || '';
  const list = Array.isArray(runtimes) ? runtimes.filter(isObject) : [];
  const out = [{ id: '', label: defaultLabel ? `default (${defaultLabel})` : 'default', disabled: false }];
  for (const r of list) {
    const units = Array.isArray(r.units) ? r.units : [];
    const ok = unit === '' || units.includes(unit);
    // Short labels (the profile's name up to its parenthesis); the full name is the title.
    const short = String(r.name || r.id).split(' (')[0];
    out.push({ id: String(r.id), label: ok ? short : `${short} (not on the ${unit}: ${units.join(', ')} only)`, title: String(r.name || r.id), disabled: !ok });
  }
  return out;
}

/**
 * Checks a runtime against the unit it would run on, before asking the estimator: null when it
 * runs there (or no runtime is named), else the refusal in plain words.
 */
export function runtimePairError(runtimes, runtimeId, unit) {
  if (!runtimeId || !unit) return null;
  const r = (Array.isArray(runtimes) ? runtimes : []).find((x) => isObject(x) && x.id === runtimeId);
  if (!r || !Array.isArray(r.units)) return null;
  if (r.units.includes(unit)) return null;
  return `${String(r.name || r.id).split(' (')[0]} does not run on the ${unit} (it runs on the ${r.units.join(', ')}): pick another runtime, or the unit it runs on`;
}

export const VERDICTS = Object.freeze(['memory', 'ttft', 'sustained', 'temperature']);

/** The explanation of `key` as {formula, values, result, note} strings, or null. */
export function explanation(report, key) {
  if (key === 'model.params') return paramsExplanation(report);
  const e = report?.explain?.[key];
  if (!isObject(e)) return null;
  const s = (v) => (typeof v === 'string' ? v : v == null ? '' : String(v));
  return { formula: s(e.formula), values: s(e.values), result: s(e.result), note: s(e.note) };
}

const COMPONENT_LABELS = {
  embedding: 'embedding',
  attention: 'attention',
  mlp: 'MLP',
  norms: 'norms',
  lm_head: 'output head',
};

/**
 * Segments of the memory bar, in drawing order: {key, label, bytes, fraction} with fraction of
 * max(total, usable) so the usable-memory marker fits on the same scale. Zero segments are
 * dropped.
 */
export function memorySegments(memory) {
  if (!isObject(memory)) return { segments: [], scale: 0, usableAt: null };
  const seg = [];
  const byComp = isObject(memory.weights_by_component) ? memory.weights_by_component : {};
  for (const [k, label] of Object.entries(COMPONENT_LABELS)) {
    if (isFiniteNumber(byComp[k])) seg.push({ key: `w-${k}`, label: `weights: ${label}`, bytes: byComp[k] });
  }
  if (seg.length === 0 && isFiniteNumber(memory.weights_bytes)) seg.push({ key: 'w', label: 'weights', bytes: memory.weights_bytes });
  for (const [k, label] of [
    ['kv_bytes', 'KV cache'],
    ['activations_bytes', 'activations'],
    ['runtime_overhead_bytes', 'runtime'],
    ['loader_duplication_bytes', 'loader copy'],
    ['fragmentation_bytes', 'fragmentation'],
  ]) {
    if (isFiniteNumber(memory[k])) seg.push({ key: k, label, bytes: memory[k] });
  }
  const segments = seg.filter((s) => s.bytes > 0);
  const total = segments.reduce((a, s) => a + s.bytes, 0);
  const usable = isFiniteNumber(memory.usable_bytes) ? memory.usable_bytes : 0;
  const scale = Math.max(total, usable, 1);
  for (const s of segments) s.fraction = s.bytes / scale;
  return { segments, scale, usableAt: usable > 0 ? usable / scale : null };
}

/**
 * uPlot data for the roofline (log-log, aligned mode): x = the sorted union of the ops'
 * arithmetic intensities (FLOP/byte) plus the ends of the roof; series: the roof
 * min(compute, bandwidth × I), prefill op points, decode op points (null where a series has
 * no point). Ops with zero intensity or throughput cannot sit on a log scale and are left out.
 */
export function rooflineData(report) {
  const lat = report?.latency ?? {};
  const layer = Array.isArray(report?.layers) ? report.layers[0] : null;
  const ok = (o) => isObject(o) && isFiniteNumber(o.intensity) && o.intensity > 0 && isFiniteNumber(o.attainable_gflops) && o.attainable_gflops > 0;
  const prefill = (layer?.prefill ?? []).filter(ok);
  const decode = (layer?.decode ?? []).filter(ok);
  const compute = isFiniteNumber(lat.effective_gflops) && lat.effective_gflops > 0 ? lat.effective_gflops : lat.peak_gflops;
  const bw = lat.bandwidth_gbs;
  const ridge = isFiniteNumber(lat.ridge_intensity) && lat.ridge_intensity > 0 ? lat.ridge_intensity : null;
  const pts = [...prefill, ...decode].map((o) => o.intensity);
  if (ridge) pts.push(ridge);
  if (pts.length === 0 || !isFiniteNumber(compute) || !isFiniteNumber(bw)) return null;
  const lo = Math.min(...pts) / 4;
  const hi = Math.max(...pts) * 4;
  const xs = [...new Set([lo, hi, ...pts])].sort((a, b) => a - b);
  const roof = xs.map((x) => Math.min(compute, bw * x));
  const at = (ops) => {
    const m = new Map();
    for (const o of ops) m.set(o.intensity, Math.max(m.get(o.intensity) ?? 0, o.attainable_gflops));
    return xs.map((x) => (m.has(x) ? m.get(x) : null));
  };
  const labels = (ops) => {
    const m = new Map();
    for (const o of ops) m.set(o.intensity, [...(m.get(o.intensity) ?? []), o.op]);
    return xs.map((x) => (m.get(x) ?? []).join(', '));
  };
  return {
    data: [xs, roof, at(prefill), at(decode)],
    labels: { prefill: labels(prefill), decode: labels(decode) },
    ridge,
    compute,
    bandwidth: bw,
  };
}

/**
 * uPlot data for the thermal chart: [t (min), die °C, body °C, tok/s, tok/s low, tok/s high];
 * the last two are tok/s times the decode band (latency.decode_tok_s_range / decode_tok_s),
 * drawn as a shaded range (null where the report has no range).
 */
export function thermalData(report) {
  const s = report?.thermal?.series;
  if (!Array.isArray(s) || s.length === 0) return null;
  const col = (k) => s.map((p) => (isFiniteNumber(p[k]) ? p[k] : null));
  const l = report?.latency ?? {};
  const band = scaledRange(1, l.decode_tok_s, l.decode_tok_s_range);
  const tps = col('tok_s');
  const scaled = (i) => tps.map((v) => (v === null || band === null ? null : v * band[i]));
  return [s.map((p) => p.t_s / 60), col('die_c'), col('body_c'), tps, scaled(0), scaled(1)];
}

/** The warnings of a report as strings. */
export function warningTexts(report) {
  const w = report?.warnings;
  if (!Array.isArray(w)) return [];
  return w.map((x) => (typeof x === 'string' ? x : isObject(x) && typeof x.message === 'string' ? x.message : JSON.stringify(x)));
}

/**
 * Describes measurements for the panel: "simd128 kernel · streaming read 21.3 GB/s · f32 GEMM
 * 6.1 GFLOP/s · 2.10 µs per op · norms, attention, activation 4.50 GFLOP/s · GEMV G weights/s: f32 2.90, ... · GEMM (64 rows) G weights/s: ...".
 */
export function describeMeasurements(m) {
  if (!isObject(m)) return '';
  const f = (v, d = 1) => (isFiniteNumber(v) ? v.toFixed(d) : '?');
  const list = (o) => (isObject(o) ? Object.entries(o).map(([k, v]) => `${k} ${f(v, 2)}`).join(', ') : '');
  const parts = [];
  if (typeof m.kernel === 'string' && m.kernel) parts.push(`${m.kernel} kernel`);
  parts.push(`streaming read ${f(m.read_bandwidth_gbs)} GB/s`, `f32 GEMM ${f(m.f32_gflops)} GFLOP/s`);
  if (isFiniteNumber(m.op_overhead_us)) parts.push(`${f(m.op_overhead_us, 2)} \u00b5s per op`);
  if (isFiniteNumber(m.vector_gflops)) parts.push(`norms, attention, activation ${f(m.vector_gflops, 2)} GFLOP/s`);
  parts.push(`GEMV G weights/s: ${list(m.weight_rate_gws) || '?'}`);
  const gemm = list(m.prefill_weight_rate_gws);
  if (gemm) parts.push(`GEMM (64 rows) G weights/s: ${gemm}`);
  if (Number.isSafeInteger(m.threads) && m.threads > 1) {
    parts.unshift(`${m.threads} threads`);
    const scaling = describeScaling(m, m.one_thread);
    if (scaling) parts.push(scaling);
  }
  return parts.join(' \u00b7 ');
}

/**
 * "against 1 thread: read ×1.90, GEMV ×1.42–1.88, GEMM (64 rows) ×1.71–1.97": measurements on N
 * threads over the 1-thread set (rate ratios; the GEMV and GEMM ranges over the formats measured
 * in both). '' without a 1-thread set.
 */
export function describeScaling(m, one) {
  if (!isObject(m) || !isObject(one)) return '';
  const x = (v) => `\u00d7${v.toFixed(2)}`;
  const ratio = (a, b) => (isFiniteNumber(a) && isFiniteNumber(b) && b > 0 ? a / b : null);
  const range = (a, b) => {
    if (!isObject(a) || !isObject(b)) return null;
    const r = Object.keys(a).map((k) => ratio(a[k], b[k])).filter((v) => v !== null);
    if (!r.length) return null;
    const lo = Math.min(...r);
    const hi = Math.max(...r);
    return lo.toFixed(2) === hi.toFixed(2) ? x(lo) : `${x(lo)}\u2013${hi.toFixed(2)}`;
  };
  const parts = [];
  const read = ratio(m.read_bandwidth_gbs, one.read_bandwidth_gbs);
  if (read !== null) parts.push(`read ${x(read)}`);
  const gemv = range(m.weight_rate_gws, one.weight_rate_gws);
  if (gemv) parts.push(`GEMV ${gemv}`);
  const gemm = range(m.prefill_weight_rate_gws, one.prefill_weight_rate_gws);
  if (gemm) parts.push(`GEMM (64 rows) ${gemm}`);
  return parts.length ? `against 1 thread: ${parts.join(', ')}` : '';
}

/** "135 M" / "1.24 B" for a parameter count ("" if absent). */
export function formatCount(n) {
  if (!isFiniteNumber(n)) return '';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} K`;
  return String(n);
}

/** The parameter count's breakdown (the report's model.params) as an explanation, or null. */
export function paramsExplanation(report) {
  const p = report?.model?.params;
  if (!isObject(p) || !isFiniteNumber(p.total)) return null;
  const parts = ['embedding', 'attention', 'mlp', 'norms', 'lm_head'].filter((k) => isFiniteNumber(p[k]));
  return {
    formula: 'embedding + attention + MLP + norms + output head (0 when tied)',
    values: parts.map((k) => `${k} ${p[k]}`).join(' + '),
    result: String(p.total),
    note: 'Per layer from its own shape, so a pruned model counts exactly what it holds.',
  };
}
