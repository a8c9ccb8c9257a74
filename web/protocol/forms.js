// The page's forms as requests: raw input strings (the generate form, the pruning panel) parsed
// into the parameters a message takes, or an error naming the bad field. Pure ES module.

import { PRUNE_RATIO_KEYS } from './catalog.js';
import { checkGenerateParams, checkPrunePlan } from './fields.js';

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
