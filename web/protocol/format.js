// DOM-free formatting for the page: metric cells, byte and parameter counts, progress lines,
// model descriptions. The metric elements hold plain numbers; units live in separate labels.
// Pure ES module, unit-tested under Node (tests/web/protocol.test.mjs and others).

import { formatBinary } from '../estimate-view.js';
import { isObject, isFiniteNumber } from './checks.js';

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
  const w = describeWeights(m.weights, m.stored, m.embedding, m.pruned === true);
  return typeof m.embedding === 'string' && m.embedding !== '' ? `${w} · embedding ${m.embedding}` : w;
}

/** The format the layers of a loaded model really hold: `weights`, or for `auto` the most common stored one. */
function runningFormat(running, stored) {
  if (running === 'auto' && Array.isArray(stored)) {
    const most = stored.filter((x) => isObject(x) && typeof x.format === 'string').sort((a, b) => b.matrices - a.matrices)[0];
    if (most) return most.format;
  }
  return running;
}

/** Why the engine cannot write `running` as a GGUF ('' when it can, or `running` is not quantized). */
function exportReason(running, exported) {
  if (typeof running !== 'string' || running === exported || !/^(w4g|q4|q5|q6|q3|q2)/.test(running)) return '';
  return `the engine writes GGUF in f32, f16 or q8_0, not yet in the loaded ${/^(w4g|q4)/.test(running) ? '4-bit ' : ''}${running}, so the file is larger than the model in memory`;
}

/**
 * Why a downloaded GGUF is not in the format the model runs in ("" when it is): the engine
 * writes GGUF in f32, f16 or q8_0 only, so a 4-bit model is saved as 8-bit (about 1.5× the bytes).
 * `running`: the requested weights; for `auto`, `stored` (info.weights.stored) names what the
 * layers really hold (the format most matrices are in).
 */
export function exportFormatNote(running, exported, stored = null) {
  const why = exportReason(runningFormat(running, stored), exported);
  return why ? ` (saved as ${exported}: ${why})` : '';
}

/**
 * The GGUF format the pruning panel downloads the running model in, and why, shown beside the
 * button before it is pressed: the loaded format when the engine writes it (f32, f16, q8_0),
 * else q8_0 with the reason. {dtype, label, note}; `weights` = info.weights ({weights, stored}).
 */
export function exportChoice(weights) {
  const running = runningFormat(weights?.weights, weights?.stored);
  const dtype = ['f32', 'f16', 'q8_0'].includes(running) ? running : 'q8_0';
  const why = exportReason(running, dtype);
  return { dtype, label: `Download GGUF (${dtype})`, note: why ? `Downloads as ${dtype}: ${why}.` : '' };
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
 * `pruned`: the running model is a pruned one, whose layers were re-quantized from f32 after
 * pruning (nothing of the file's is kept): "w4g32 (re-quantized after pruning)".
 */
export function describeWeights(requested, stored, embedding, pruned = false) {
  if (typeof requested !== 'string' || requested === '') return '';
  if (!Array.isArray(stored)) return pruned ? `${requested} (re-quantized after pruning)` : requested;
  // The embedding (and an untied output head) are named apart: a format counts as the
  // layers' only with more matrices than those two.
  const layers = [...new Set(stored
    .filter((x) => isObject(x) && typeof x.format === 'string' && x.matrices > (x.format === embedding ? 2 : 1))
    .map((x) => x.format))];
  if (pruned) return `${layers.length ? layers.join(', ') : requested} (re-quantized after pruning)`;
  const kept = layers.filter((f) => f !== requested);
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

/** The status while a long prompt is fed: "generating… reading the prompt: 128 / 1501 tokens · about 12 s left". */
export function prefillStatus(done, total, elapsedMs) {
  return `generating… reading the prompt: ${done} / ${total} tokens${timeLeft(done, total, elapsedMs)}`;
}
