// edgefit "What fits on this device?": pure helpers (no DOM, no wasm), unit-tested in
// tests/web/fit-view.test.mjs. fit-panel.js renders what these return; worker.js runs the
// solver (wasm fit, the same function as `edgefit fit`).

import * as P from './protocol.js';
import { FIT_CONTEXTS, FIT_FAMILIES } from './protocol.js';
import * as V from './estimate-view.js';

/** Rows the table shows (the chart shows every passing configuration). */
export const TABLE_ROWS = 50;

/**
 * The table's order: the best (lowest-ranked) configuration of each model first, in rank order,
 * then every other row in rank order, so one model's six KV formats do not fill the first screen.
 * Ranks are kept (they are the solver's).
 */
export function bestPerModelFirst(rows) {
  const sorted = [...rows].sort((a, b) => a.rank - b.rank);
  const seen = new Set();
  const best = [];
  const rest = [];
  for (const r of sorted) {
    if (seen.has(r.model)) rest.push(r);
    else {
      seen.add(r.model);
      best.push(r);
    }
  }
  return [...best, ...rest];
}

/**
 * The table in its two labelled parts: each model's best configuration, then the other
 * passing configurations by rank, together at most `limit` rows ([{title, rows}], an empty
 * part left out), so the jump from the last model's best rank back to rank 2 reads as a new
 * section rather than a misordered table.
 */
export function tableSections(rows, limit = TABLE_ROWS) {
  const ordered = bestPerModelFirst(rows).slice(0, limit);
  const models = new Set(rows.map((r) => r.model)).size;
  const best = ordered.slice(0, Math.min(models, ordered.length));
  const rest = ordered.slice(best.length);
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  return [
    { title: `Each model's best configuration (${plural(best.length, 'model', 'models')}, by rank)`, rows: best },
    { title: `More passing configurations, by rank (${plural(rest.length, 'row', 'rows')} of ${rows.length - best.length})`, rows: rest },
  ].filter((s) => s.rows.length > 0);
}

/** The note over results computed for another device than the one now picked ("" when current). */
export function staleNote(resultDevice, resultDeviceName, pickedDevice) {
  if (!resultDevice || resultDevice === pickedDevice) return '';
  return `These results are for ${resultDeviceName || resultDevice}; the device is now another: press “Find what fits” again.`;
}

/** The fit's model id of the loaded model (the estimator panel's picker value for it). */
export const LOADED_ID = '@loaded';

const isFiniteNumber = (v) => typeof v === 'number' && Number.isFinite(v);

/**
 * The scope select's options: [{value, label, disabled}]. `presets`: the catalog's [{id, name}];
 * `loadedName`: the loaded model's name, or null (its option is then disabled).
 */
export function scopeOptions(presets, loadedName = null) {
  const out = [{ value: 'all', label: 'all presets', disabled: false }];
  for (const f of FIT_FAMILIES) out.push({ value: `family:${f}`, label: `family: ${f}`, disabled: false });
  for (const p of presets ?? []) out.push({ value: `preset:${p.id}`, label: `preset: ${p.name || p.id}`, disabled: false });
  out.push({
    value: 'loaded',
    label: V.loadedLabel(loadedName),
    disabled: !loadedName,
  });
  return out;
}

/** The context select's options: "any" (value "") then each of FIT_CONTEXTS. */
export function contextOptions() {
  return [{ value: '', label: `any (${FIT_CONTEXTS.join(', ')})` }, ...FIT_CONTEXTS.map((c) => ({ value: String(c), label: `${c} tokens` }))];
}

/** The context select's value as the fit request takes it: null for any, else the number. */
export function parseContext(value) {
  if (value === '' || value === null || value === undefined) return null;
  const n = Number(value);
  return FIT_CONTEXTS.includes(n) ? n : null;
}

/**
 * "N of M configurations pass the golden four on D (failed: memory a, TTFT b, sustained c,
 * temperature d; e impossible)". A configuration can fail several verdicts.
 */
export function summaryText(result) {
  const f = result.failed;
  let s = `${result.rows.length} of ${result.tried} configurations pass the golden four on ${result.device_name || result.device} ` +
    `(failed: memory ${f.memory}, TTFT ${f.ttft}, sustained ${f.sustained}, temperature ${f.temperature}`;
  if (f.invalid > 0) s += `; ${f.invalid} impossible`;
  return `${s})`;
}

/** Pruning level as a whole percent, "20%". */
export function formatPrune(level) {
  return isFiniteNumber(level) ? `${Math.round(level * 100)}%` : '';
}

/** The table's columns: [key, header, tooltip?] (short headers, so the table fits 1280 px). */
export const COLUMNS = Object.freeze([
  ['rank', '#'],
  ['frontier', '★', 'on the Pareto frontier of parameters, sustained speed and peak memory'],
  ['model', 'model'],
  ['prune', 'prune'],
  ['weights', 'weights'],
  ['kv', 'KV'],
  ['context', 'context'],
  ['params', 'params (M)'],
  ['peak', 'peak (MiB)', 'peak memory'],
  ['ttft', 'TTFT (ms)'],
  ['sustained', 'sustained (tok/s)', 'tokens/s after 15 minutes of throttling'],
  ['temp', 'ΔT (°C)'],
]);

/** One row's cell texts, in COLUMNS order (plain text; the panel sets them with textContent). */
export function rowCells(r) {
  return [
    String(r.rank),
    r.frontier ? '★' : '',
    r.model,
    formatPrune(r.prune),
    r.weights,
    r.kv,
    String(r.context),
    (r.params / 1e6).toFixed(1),
    (r.peak_memory_bytes / 2 ** 20).toFixed(1), // binary units, as everywhere on the page
    r.ttft_ms.toFixed(0),
    r.sustained_tok_s.toFixed(2),
    r.temp_rise_c.toFixed(1),
  ];
}

/** The estimator scenario a row is: what the panel's showConfiguration takes. */
export function scenarioOf(row, device) {
  return { device, model: row.model, weights: row.weights, kv: row.kv, context: row.context, prune: row.prune };
}

/**
 * uPlot data for the scatter: x = sustained tok/s (ascending, as uPlot needs), y series: the
 * other passing rows' parameters (M), then the frontier rows' (drawn last, on top); null where
 * the point is in the other series. Returns {data: [xs, others, frontier], rows} (rows in x
 * order, for the legend).
 */
export function chartData(rows) {
  const sorted = [...rows].sort((a, b) => a.sustained_tok_s - b.sustained_tok_s || a.rank - b.rank);
  const xs = sorted.map((r) => r.sustained_tok_s);
  const rest = sorted.map((r) => (r.frontier ? null : r.params / 1e6));
  const front = sorted.map((r) => (r.frontier ? r.params / 1e6 : null));
  return { data: [xs, rest, front], rows: sorted };
}

/** Status text while the solver runs. */
export function runningText(scopeLabel, deviceLabel) {
  return `estimating every configuration of ${scopeLabel} on ${deviceLabel}…`;
}

/** The running status with progress: "… 3 / 12 models · about 1.2 s left". */
export function progressText(scopeLabel, deviceLabel, done, total, elapsedMs) {
  return `${runningText(scopeLabel, deviceLabel)} ${done} / ${total} model${total === 1 ? '' : 's'}${P.timeLeft(done, total, elapsedMs)}`;
}
