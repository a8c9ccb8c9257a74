// edgefit shareable links: the whole scenario (device, model preset or the loaded file's name
// and shape, the estimator's knobs, the engine's formats, the generation form, the pruning
// settings) as a URL fragment. Pure: no DOM, no wasm; unit-tested in tests/web/share.test.mjs.
//
// The fragment is readable `key=value&…`, versioned, in a fixed key order:
//   #v=1&device=snapdragon-8-gen3&model=llama-3.2-1b&weights=w4g32&kv=int8&context=2048&…
// Values are percent-encoded (encodeURIComponent); keys are plain [a-z_]. A link never carries
// model data: a loaded model is named (file name) and described (its shape) for display only.
//
// Reading a link is strict: every key must be known, appear once and hold a value of its type
// and range; the first problem is returned as {error} naming the field and the value, and the
// page then keeps its defaults. Values are parsed by regular expressions and Number(), never
// eval/Function, and the result object is built only from the table's own names, so a key such
// as `__proto__` is refused as unknown and cannot reach an object's prototype.

import * as V from './estimate-view.js';
import * as P from './protocol.js';

export const VERSION = 1;

/** The longest prompt text a link carries (code points). */
export const MAX_PROMPT_CHARS = 4000;
/** The longest file name a link carries (code points). */
export const MAX_NAME_CHARS = 200;
/**
 * The longest fragment read (64 Ki characters). The longest valid link, a 4000-character prompt
 * of 4-byte characters (4000 × 12 percent-encoded characters) and two 200-character names of
 * them (2 × 2400), is about 53 500 characters: it fits (a unit test checks it).
 */
export const MAX_FRAGMENT_CHARS = 65_536;
/** The longest context (and prompt / generated tokens) a link may ask for: 2 Mi tokens. */
export const MAX_CONTEXT = 2_097_152;

// ---- value parsers: (raw string) -> {value} | {error: 'must be …'} ------------------------------

const ID = /^[a-z0-9][a-z0-9.-]{0,63}$/;
const INT = /^\d{1,16}$/;
const NUM = /^\d{1,16}(\.\d{1,20})?(e-?\d{1,3})?$/i;
// Controls other than tab / newline / carriage return never belong in a prompt; none in a name.
const PROMPT_BAD = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const NAME_BAD = /[\u0000-\u001f\u007f]/;

const id = () => ({
  hint: 'a short id of a-z, 0-9, "." and "-"',
  parse: (s) => (ID.test(s) ? { value: s } : null),
});

const oneOf = (list) => ({
  hint: `one of ${list.map((x) => (x === '' ? '(empty)' : x)).join(', ')}`,
  parse: (s) => (list.includes(s) ? { value: s } : null),
});

const int = (min, max) => ({
  hint: `a whole number from ${min} to ${max}`,
  parse: (s) => {
    if (!INT.test(s)) return null;
    const v = Number(s);
    return Number.isSafeInteger(v) && v >= min && v <= max ? { value: v } : null;
  },
});

/** A decimal number in [min, max] (or (min, max] with `openMin`). */
const num = (min, max, openMin = false) => ({
  hint: `a number from ${min}${openMin ? ' (exclusive)' : ''} to ${max}`,
  parse: (s) => {
    if (!NUM.test(s)) return null;
    const v = Number(s);
    if (!Number.isFinite(v) || v > max || v < min || (openMin && v === min)) return null;
    return { value: v };
  },
});

/** `p`, or empty (the estimator's default). */
const optional = (p) => ({
  hint: `${p.hint}, or empty for the default`,
  parse: (s) => (s === '' ? { value: '' } : p.parse(s)),
});

const bool = () => ({
  hint: '0 or 1',
  parse: (s) => (s === '1' ? { value: true } : s === '0' ? { value: false } : null),
});

// A UTF-16 surrogate without its pair: decodeURIComponent never makes one, but a raw one in the
// fragment would pass through it, and encodeURIComponent (writing the link again) throws on it.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const text = (maxChars, bad, what) => ({
  hint: `${what} of at most ${maxChars} characters`,
  parse: (s) => ([...s].length <= maxChars && !bad.test(s) && !LONE_SURROGATE.test(s) ? { value: s } : null),
});

const modelId = () => ({
  hint: 'a preset id (a-z, 0-9, "." and "-"), @loaded or @config',
  parse: (s) => (s === V.LOADED_MODEL || s === V.CONFIG_MODEL || ID.test(s) ? { value: s } : null),
});

// ---- the table: link key, scenario section, property, parser ------------------------------------

/**
 * Every shareable setting, in link order. Sections of the scenario object:
 *   estimate   the estimator panel (createEstimatePanel's getScenario / applyScenario)
 *   engine     the engine's settings for the real run (weights of the next load, KV cache,
 *              threads of the threaded build: the page refuses more than its cores)
 *   generation the generation form
 *   pruning    the pruning panel's inputs (set, never applied: pruning needs a loaded model)
 *   loaded     the file the sender had loaded, its name and shape (for display only)
 *   config     the config.json the sender estimated (its name, for display only)
 */
export const FIELDS = Object.freeze([
  ['device', 'estimate', 'device', id()],
  ['model', 'estimate', 'model', modelId()],
  ['weights', 'estimate', 'weights', oneOf(V.WEIGHT_FORMATS)],
  ['compute', 'estimate', 'compute', oneOf(['', ...V.COMPUTE_DTYPES])],
  ['kv', 'estimate', 'kv', oneOf(V.KV_FORMATS)],
  ['context', 'estimate', 'context', int(1, MAX_CONTEXT)],
  ['prompt_tokens', 'estimate', 'prompt_tokens', int(0, MAX_CONTEXT)],
  ['gen_tokens', 'estimate', 'gen_tokens', int(0, MAX_CONTEXT)],
  ['unit', 'estimate', 'unit', oneOf(['', ...V.UNITS])],
  ['policy', 'estimate', 'policy', oneOf(V.POLICIES)],
  ['minutes', 'estimate', 'minutes', num(0.1, 1440)],
  ['prune', 'estimate', 'prune', num(0, P.PRUNE_MAX_RATIO)],
  ['runtime', 'estimate', 'runtime', oneOf(['', ...V.RUNTIMES])],
  ['threads', 'estimate', 'threads', optional(int(1, V.MAX_THREADS))],
  ['engine_weights', 'engine', 'weights', oneOf(P.WEIGHT_FORMATS)],
  ['engine_kv', 'engine', 'kv', oneOf(V.KV_FORMATS)],
  ['engine_threads', 'engine', 'threads', int(1, P.MAX_THREADS)],
  ['prompt', 'generation', 'prompt', text(MAX_PROMPT_CHARS, PROMPT_BAD, 'text without control characters')],
  ['chat', 'generation', 'chat', bool()],
  ['keep', 'generation', 'keep', bool()],
  ['max_tokens', 'generation', 'maxTokens', int(P.LIMITS.maxTokens.min, P.LIMITS.maxTokens.max)],
  ['temperature', 'generation', 'temperature', num(P.LIMITS.temperature.min, P.LIMITS.temperature.max)],
  ['top_p', 'generation', 'topP', num(P.LIMITS.topP.min, P.LIMITS.topP.max, true)],
  ['seed', 'generation', 'seed', int(P.LIMITS.seed.min, P.LIMITS.seed.max)],
  ['prune_mlp', 'pruning', 'mlp', num(0, P.PRUNE_MAX_RATIO)],
  ['prune_heads', 'pruning', 'heads', num(0, P.PRUNE_MAX_RATIO)],
  ['prune_qk', 'pruning', 'qk', num(0, P.PRUNE_MAX_RATIO)],
  ['prune_v', 'pruning', 'v', num(0, P.PRUNE_MAX_RATIO)],
  ['prune_layers', 'pruning', 'layers', int(0, 1024)],
  ['prune_method', 'pruning', 'method', oneOf(P.PRUNE_IMPORTANCE)],
  ['prune_allocation', 'pruning', 'allocation', oneOf(P.PRUNE_ALLOCATION)],
  ['loaded_file', 'loaded', 'name', text(MAX_NAME_CHARS, NAME_BAD, 'a file name')],
  ['loaded_arch', 'loaded', 'arch', id()],
  ['loaded_params', 'loaded', 'params', int(0, 1e13)],
  ['loaded_layers', 'loaded', 'layers', int(1, 4096)],
  ['loaded_hidden', 'loaded', 'hidden', int(1, 1 << 20)],
  ['loaded_heads', 'loaded', 'heads', int(1, 4096)],
  ['loaded_kv_heads', 'loaded', 'kv_heads', int(1, 4096)],
  ['loaded_head_dim', 'loaded', 'head_dim', int(1, 1 << 16)],
  ['loaded_ffn', 'loaded', 'ffn', int(1, 1 << 22)],
  ['loaded_vocab', 'loaded', 'vocab', int(1, 1 << 24)],
  ['loaded_context', 'loaded', 'context', int(1, 1 << 24)],
  ['config_file', 'config', 'name', text(MAX_NAME_CHARS, NAME_BAD, 'a file name')],
].map((f) => Object.freeze(f)));

export const SECTIONS = Object.freeze(['estimate', 'engine', 'generation', 'pruning', 'loaded', 'config']);

const BY_KEY = new Map(FIELDS.map((f) => [f[0], f]));
const BY_PROP = new Map(FIELDS.map((f) => [`${f[1]}.${f[2]}`, f]));

/** A value for an error message: quoted, at most 60 characters. */
export function showValue(s) {
  const str = String(s);
  const cut = [...str].length > 60 ? `${[...str].slice(0, 60).join('')}…` : str;
  return JSON.stringify(cut);
}

const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A scenario value as its link text (numbers in plain decimal, booleans as 0/1). */
function format(v) {
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (typeof v === 'number' && Number.isFinite(v) && Math.abs(v) < 1e21) {
    const s = String(v);
    return /e/i.test(s) ? v.toFixed(20).replace(/0+$/, '').replace(/\.$/, '') : s;
  }
  return String(v);
}

/**
 * The fragment (with its '#') for a scenario {estimate?, engine?, generation?, pruning?,
 * loaded?, config?}; each section's properties are optional (absent, undefined or null are left
 * out). Values may be numbers or the raw strings of the page's inputs. Throws an Error naming the
 * field and the value when one would not be read back (an unknown section or property, a value
 * out of range), so a link the page writes always opens.
 */
export function encodeScenario(s) {
  if (!isObject(s)) throw new Error('a scenario must be an object');
  for (const sec of Object.keys(s)) {
    if (!SECTIONS.includes(sec)) throw new Error(`scenario.${sec} is not a shareable section (${SECTIONS.join(', ')})`);
    if (s[sec] !== undefined && s[sec] !== null && !isObject(s[sec])) throw new Error(`scenario.${sec} must be an object`);
    for (const prop of Object.keys(s[sec] ?? {})) {
      if (!BY_PROP.has(`${sec}.${prop}`)) throw new Error(`scenario.${sec}.${prop} is not a shareable setting`);
    }
  }
  const parts = [`v=${VERSION}`];
  for (const [key, sec, prop, parser] of FIELDS) {
    const section = s[sec];
    if (!section || !own(section, prop)) continue;
    const v = section[prop];
    if (v === undefined || v === null) continue;
    const raw = format(v);
    if (!parser.parse(raw)) throw new Error(`cannot share ${key} ${showValue(raw)}: it must be ${parser.hint}`);
    parts.push(`${key}=${encodeURIComponent(raw)}`);
  }
  const fragment = `#${parts.join('&')}`;
  if (fragment.length > MAX_FRAGMENT_CHARS) throw new Error(`the link would be ${fragment.length} characters, more than ${MAX_FRAGMENT_CHARS}`);
  return fragment;
}

/**
 * Reads a fragment (with or without its '#'). Returns {scenario} (sections present only when
 * the link has one of their fields; numbers as numbers, flags as booleans) or {error} (a
 * sentence naming the first bad field and its value). See decodeScenarioParts for a reading
 * that keeps the good fields.
 */
export function decodeScenario(fragment) {
  const r = decodeScenarioParts(fragment);
  if (r.error) return { error: r.error };
  if (r.errors.length) return { error: r.errors[0] };
  return { scenario: r.scenario };
}

/**
 * Reads a fragment keeping every field that is good: {scenario, errors} where `errors` lists a
 * sentence for each field left out (unknown, repeated, badly encoded or out of range, in link
 * order then table order), or {error} when the link as a whole cannot be read (too long, empty,
 * not key=value, no or another version).
 */
export function decodeScenarioParts(fragment) {
  if (typeof fragment !== 'string') return { error: 'the link has no scenario' };
  const body = fragment.startsWith('#') ? fragment.slice(1) : fragment;
  if (body.length > MAX_FRAGMENT_CHARS) {
    return { error: `the link is too long: ${body.length} characters after #, at most ${MAX_FRAGMENT_CHARS}` };
  }
  if (body === '') return { error: 'the link has no scenario (nothing after #)' };
  const raw = new Map();
  const errors = [];
  for (const part of body.split('&')) {
    const eq = part.indexOf('=');
    if (eq < 0) return { error: `the link is damaged: ${showValue(part)} is not key=value` };
    const key = part.slice(0, eq);
    if (key !== 'v' && !BY_KEY.has(key)) {
      errors.push(`the link has an unknown field ${showValue(key)}`);
      continue;
    }
    if (raw.has(key)) {
      errors.push(`the link repeats the field ${key}`);
      continue;
    }
    let value;
    try {
      value = decodeURIComponent(part.slice(eq + 1));
    } catch {
      errors.push(`the link is damaged: ${key} has a bad percent-encoding ${showValue(part.slice(eq + 1))}`);
      continue;
    }
    raw.set(key, value);
  }
  if (!raw.has('v')) return { error: 'the link has no version (v=1 expected first)' };
  if (raw.get('v') !== String(VERSION)) {
    return { error: `the link's version ${showValue(raw.get('v'))} is not one this page reads (it reads v=${VERSION})` };
  }
  const scenario = {};
  for (const [key, sec, prop, parser] of FIELDS) {
    if (!raw.has(key)) continue;
    const got = parser.parse(raw.get(key));
    if (!got) {
      errors.push(`the link's ${key} must be ${parser.hint}, got ${showValue(raw.get(key))}`);
      continue;
    }
    if (!scenario[sec]) scenario[sec] = {};
    scenario[sec][prop] = got.value;
  }
  for (const sec of ['loaded', 'config']) {
    if (scenario[sec] && scenario[sec].name === undefined) {
      errors.push(`the link describes a ${sec === 'loaded' ? 'loaded model' : 'config.json'} without its file name (${sec}_file)`);
      delete scenario[sec];
    }
  }
  return { scenario, errors };
}

/** True when the fragment is something for decodeScenario (any non-empty '#…'). */
export function hasScenario(fragment) {
  return typeof fragment === 'string' && fragment.replace(/^#/, '') !== '';
}

/** The loaded section for a model info (protocol INFO_KEYS) and its file name. */
export function loadedSection(fileName, info) {
  const out = { name: String(fileName ?? '').slice(0, MAX_NAME_CHARS) || 'model' };
  if (!info) return out;
  const map = [
    ['arch', 'arch'], ['params', 'params'], ['layers', 'n_layers'], ['hidden', 'hidden'], ['heads', 'n_heads'],
    ['kv_heads', 'n_kv_heads'], ['head_dim', 'head_dim'], ['ffn', 'ffn'], ['vocab', 'vocab'], ['context', 'context_length'],
  ];
  for (const [to, from] of map) {
    const v = info[from];
    const f = BY_PROP.get(`loaded.${to}`);
    if (v !== undefined && v !== null && f[3].parse(format(v))) out[to] = v;
  }
  return out;
}

/** One line describing a loaded section: "model.gguf (llama, 30 layers, hidden 576, …)". */
export function describeLoaded(l) {
  const bits = [];
  if (l.arch) bits.push(l.arch);
  if (l.params !== undefined) bits.push(`${P.formatParams(l.params)} parameters`);
  if (l.layers !== undefined) bits.push(`${l.layers} layers`);
  if (l.hidden !== undefined) bits.push(`hidden ${l.hidden}`);
  if (l.heads !== undefined) bits.push(`${l.heads} heads${l.kv_heads !== undefined ? ` (${l.kv_heads} KV)` : ''}`);
  if (l.head_dim !== undefined) bits.push(`head dim ${l.head_dim}`);
  if (l.ffn !== undefined) bits.push(`FFN ${l.ffn}`);
  if (l.vocab !== undefined) bits.push(`vocabulary ${l.vocab}`);
  if (l.context !== undefined) bits.push(`context ${l.context}`);
  return bits.length ? `${l.name} (${bits.join(', ')})` : l.name;
}
