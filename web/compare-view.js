// edgefit: compare scenarios, the pure part (unit-tested in tests/web/compare-view.test.mjs).
// An entry is what the estimator panel showed when it was added: its scenario (device, model,
// knobs) and the report's numbers, as display strings, so a column never changes after it was
// added. The table highlights every cell whose text differs from the first column's.

import { formatValue, formatBinary, shortDeviceName } from './estimate-view.js';

/** At most this many scenarios side by side. */
export const MAX_COMPARE = 4;

const bytes = (v) => (Number.isFinite(v) ? formatBinary(v) : '');
const num = (v, d) => (Number.isFinite(v) ? formatValue(v, d) : '');
const params = (v) => (Number.isFinite(v) ? `${(v / 1e6).toFixed(1)} M` : '');

/** The rows: key, label, and how to read the value from {scenario, report, deviceName, modelName}. */
export const COMPARE_ROWS = Object.freeze([
  ['device', 'Device', (e) => e.deviceName || e.scenario.device || ''],
  ['model', 'Model', (e) => e.modelName || e.scenario.model || ''],
  ['weights', 'Weights', (e) => e.report.deployment?.weights ?? ''],
  ['kv', 'KV cache', (e) => e.report.deployment?.kv ?? ''],
  ['context', 'Context', (e) => String(e.report.deployment?.context ?? '')],
  ['prune', 'Pruning', (e) => `${Math.round(Number(e.scenario.prune ?? 0) * 100)}%`],
  ['tokens', 'Prompt + generated', (e) => `${e.report.deployment?.prompt_tokens ?? ''} + ${e.report.deployment?.gen_tokens ?? ''}`],
  ['policy', 'Policy', (e) => e.report.deployment?.policy ?? ''],
  ['params', 'Parameters', (e) => params(e.report.model?.params?.total)],
  ['weights_bytes', 'Weights memory', (e) => bytes(e.report.memory?.weights_bytes)],
  ['kv_bytes', 'KV cache memory', (e) => bytes(e.report.memory?.kv_bytes)],
  ['total_bytes', 'Total memory', (e) => bytes(e.report.memory?.total_bytes)],
  ['ttft', 'TTFT (ms)', (e) => num(e.report.latency?.ttft_ms, 1)],
  ['decode', 'Decode (tok/s)', (e) => num(e.report.latency?.decode_tok_s, 2)],
  ['sustained', 'Sustained (tok/s)', (e) => num(e.report.thermal?.sustained_tok_s, 2)],
  ['temp', 'Temperature rise (°C)', (e) => num(e.report.thermal?.temp_rise_c, 2)],
  ['verdict_memory', 'Memory verdict', (e) => e.report.verdict?.memory ?? ''],
  ['verdict_ttft', 'TTFT verdict', (e) => e.report.verdict?.ttft ?? ''],
  ['verdict_sustained', 'Sustained verdict', (e) => e.report.verdict?.sustained ?? ''],
  ['verdict_temperature', 'Temperature verdict', (e) => e.report.verdict?.temperature ?? ''],
]);

/**
 * One column: the display strings of every row, taken now. `shown` = {scenario, report,
 * deviceName, modelName} from the estimator panel. Throws on a missing report (a caller bug).
 */
export function compareEntry(shown) {
  if (!shown || typeof shown.report !== 'object' || shown.report === null) throw new TypeError('compareEntry needs a report');
  const e = { scenario: shown.scenario ?? {}, report: shown.report, deviceName: shown.deviceName, modelName: shown.modelName };
  const values = {};
  for (const [key, , read] of COMPARE_ROWS) values[key] = String(read(e));
  const title = `${values.model} · ${values.device}`;
  return { values, title, short: shortTitle(title) };
}

/** A column title short enough for a 390 px screen: at most `max` characters, "…" when cut. */
export function shortTitle(title, max = 28) {
  const chars = [...String(title)];
  return chars.length <= max ? chars.join('') : `${chars.slice(0, max - 1).join('').trimEnd()}…`;
}

/** The rows that define a scenario (the rest are its results), in the order a title names them. */
const SCENARIO_KEYS = Object.freeze(['model', 'device', 'weights', 'kv', 'context', 'prune', 'tokens', 'policy']);

/** One scenario value as a column title says it (the device without its kind: "phone", "board"). */
function titlePart(key, v) {
  switch (key) {
    case 'device': return shortDeviceName(v).replace(/\s+(mid-range\s+)?(phone|board|laptop)$/i, '');
    case 'kv': return `KV ${v}`;
    case 'context': return `context ${v}`;
    case 'prune': return v === '0%' ? 'unpruned' : `${v} pruned`;
    case 'tokens': return `${v} tokens`;
    default: return v;
  }
}

/** Longest column title shown (its number and ". " make it at most 32 characters). */
export const TITLE_CHARS = 29;

/**
 * The columns' titles, each told apart from the others: what differs between the scenarios
 * (model, device, formats, context, pruning, tokens, policy), joined by ", "; model and device
 * when nothing differs (or one column), and "same as N" for a repeat. Each is cut to
 * TITLE_CHARS unless cutting would make it read as another's. [{short, full}].
 */
export function columnTitles(entries) {
  const differing = SCENARIO_KEYS.filter((k) => new Set(entries.map((e) => e.values[k])).size > 1);
  const keys = differing.length ? differing : ['model', 'device'];
  const full = entries.map((e) => keys.map((k) => titlePart(k, e.values[k])).join(', '));
  const named = full.map((t, i) => {
    const first = full.indexOf(t);
    return first < i ? `${t} (same as ${first + 1})` : t;
  });
  const cut = named.map((t) => shortTitle(t, TITLE_CHARS));
  const clash = (i) => cut.some((c, j) => j !== i && c === cut[i]);
  return named.map((t, i) => ({ short: clash(i) ? t : cut[i], full: t }));
}

/** The cell's verdict ("pass" / "fail") for colouring, or null for other values. */
export function verdictOf(text) {
  return text === 'pass' || text === 'fail' ? text : null;
}

/** Rows of the table: {key, label, cells: [{text, diff}]}, diff = differs from column 1. */
export function compareTable(entries) {
  return COMPARE_ROWS.map(([key, label]) => {
    const first = entries[0]?.values[key];
    return { key, label, cells: entries.map((e) => ({ text: e.values[key], diff: e.values[key] !== first })) };
  });
}

/** `entries` with `entry` added at the end, or {error} when full. */
export function addEntry(entries, entry) {
  if (entries.length >= MAX_COMPARE) return { error: `at most ${MAX_COMPARE} scenarios side by side: remove one first` };
  return { entries: [...entries, entry] };
}
