// The page's forms as requests: raw input strings (the generate form, the pruning panel) parsed
// into the parameters a message takes, or an error in plain words naming the input as the page
// labels it, with that input's own range, and which input it is (`field`: the form key, so the
// panel can show the message beside it). Pure ES module.

import { LIMITS, PRUNE_MAX_RATIO, PRUNE_RATIO_KEYS } from './catalog.js';
import { checkGenerateParams, checkPrunePlan } from './fields.js';

/** A number from a form's raw value ('' and non-strings other than numbers: NaN). */
const num = (s) => (typeof s === 'string' && s.trim() !== '' ? Number(s) : typeof s === 'number' ? s : NaN);

/**
 * What the user gave, for the end of a message: "got 5000", or "the box is empty" (a number
 * input whose text is not a number reads as empty too).
 */
export function gotWords(raw) {
  if (typeof raw === 'number') return `got ${raw}`;
  const s = typeof raw === 'string' ? raw.trim() : '';
  return s === '' ? 'the box is empty (or not a number)' : `got ${s}`;
}

/** The generate form's inputs: each label as the page shows it, the rule, and its range in words. */
const GENERATE_INPUTS = Object.freeze([
  ['maxTokens', (v) => Number.isSafeInteger(v) && v >= LIMITS.maxTokens.min && v <= LIMITS.maxTokens.max,
    `Max tokens must be a whole number from ${LIMITS.maxTokens.min} to ${LIMITS.maxTokens.max}`],
  ['temperature', (v) => Number.isFinite(v) && v >= LIMITS.temperature.min && v <= LIMITS.temperature.max,
    `Temperature must be a number from ${LIMITS.temperature.min} to ${LIMITS.temperature.max} (0 is greedy)`],
  ['topP', (v) => Number.isFinite(v) && v > LIMITS.topP.min && v <= LIMITS.topP.max,
    `Top-p must be a number above ${LIMITS.topP.min} and at most ${LIMITS.topP.max}`],
  ['seed', (v) => Number.isSafeInteger(v) && v >= LIMITS.seed.min && v <= LIMITS.seed.max,
    `Seed must be a whole number from ${LIMITS.seed.min} to ${LIMITS.seed.max}`],
]);

/**
 * Parses the form's raw string values into generation parameters.
 * Returns {params} or {error, field} (the message names the input as labelled, its range and
 * what it holds; `field` is the key of the bad input: prompt, maxTokens, temperature, topP, seed).
 */
export function parseGenerateForm(form) {
  const { prompt, chat, keep } = form;
  const params = {
    prompt: String(prompt ?? ''),
    chat: Boolean(chat),
    maxTokens: num(form.maxTokens),
    temperature: num(form.temperature),
    topP: num(form.topP),
    seed: num(form.seed),
  };
  if (keep !== undefined) params.keep = Boolean(keep);
  if (params.prompt.trim() === '') return { error: 'Write a prompt first: the prompt is empty.', field: 'prompt' };
  for (const [key, ok, rule] of GENERATE_INPUTS) {
    if (!ok(params[key])) return { error: `${rule}; ${gotWords(form[key])}.`, field: key };
  }
  // The message's own check (the same limits), for anything the rules above do not cover.
  const error = checkGenerateParams(params);
  return error ? { error, field: null } : { params };
}

/** The pruning panel's ratio sliders, as labelled. */
const PRUNE_RATIO_INPUTS = Object.freeze([
  ['mlp', 'mlp', 'MLP channels'],
  ['heads', 'heads', 'Query heads'],
  ['qk', 'qk_dims', 'Q/K dims'],
  ['v', 'v_dims', 'V dims'],
]);

const percent = (x) => `${Math.round(x * 100)}%`;

/**
 * The PrunePlan for the panel's raw values (strings or numbers). Returns {plan} or {error,
 * field} (field: mlp, heads, qk, v, layers, method or allocation). `nLayers`: the loaded model's
 * layers (dropping must leave one).
 */
export function parsePruneForm({ mlp, heads, qk, v, layers, method, allocation = 'uniform' }, nLayers = null) {
  const raw = { mlp, heads, qk, v };
  const plan = {
    ratios: { heads: num(heads), qk_dims: num(qk), v_dims: num(v), mlp: num(mlp) },
    layers: num(layers),
    importance: method,
    allocation,
  };
  for (const [field, key, label] of PRUNE_RATIO_INPUTS) {
    const x = plan.ratios[key];
    if (!(Number.isFinite(x) && x >= 0 && x <= PRUNE_MAX_RATIO)) {
      const got = Number.isFinite(x) ? `got ${percent(x)}` : gotWords(raw[field]);
      return { error: `${label} must be from 0% to ${percent(PRUNE_MAX_RATIO)}; ${got}.`, field };
    }
  }
  const maxDrop = Number.isSafeInteger(nLayers) && nLayers >= 1 ? nLayers - 1 : null;
  if (!(Number.isSafeInteger(plan.layers) && plan.layers >= 0 && (maxDrop === null || plan.layers <= maxDrop))) {
    const range = maxDrop === null
      ? 'a whole number, 0 or more'
      : `a whole number from 0 to ${maxDrop} (the model has ${nLayers} layers and keeps at least one)`;
    return { error: `Layers dropped must be ${range}; ${gotWords(layers)}.`, field: 'layers' };
  }
  const error = checkPrunePlan(plan, nLayers);
  if (error) return { error, field: /^importance/.test(error) ? 'method' : /^allocation/.test(error) ? 'allocation' : null };
  return { plan };
}

/** True when the plan removes nothing. */
export function planIsEmpty(plan) {
  return plan.layers === 0 && PRUNE_RATIO_KEYS.every((k) => !(plan.ratios[k] > 0));
}
