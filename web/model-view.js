// What the model controls show, computed without the DOM (pure, unit-tested under Node:
// tests/web/model-view.test.mjs): the model info rows, the picker options (KV format, kernel,
// threads), the thread count a picker or `?threads=` asks for, the default model's manifest,
// and the load line after a refused load. model-panel.js and threads-control.js put them on the
// page.

import * as P from './protocol.js';

/** The model info's rows, [label, text], for `info` (the worker's `info()`) named `name`. */
export function infoRows(info, name) {
  const layers = P.describeLayers(info.layers);
  const pruned = layers !== '';
  return [
    ['Name', name || P.displayName(null, info)],
    ['Name in the file (general.name)', info.name || '(none)'],
    ['Architecture', info.arch],
    ['Parameters', `${P.formatParams(info.params)} (${info.params.toLocaleString('en-US')})`],
    ['Weights in memory', `${P.formatMB(info.weights_bytes)} (${P.formatWeightsUsed({ ...info.weights, pruned })})`],
    ['Stored as', P.formatStored(info.weights.stored)],
    ['Converted', (info.weights.converted ?? []).map((c) => `${c.from} → ${c.to} × ${c.tensors.length}`).join(', ') || 'none (every tensor as the file holds it, or float)'],
    ['Tokenizer', info.tokenizer?.kind ?? ''],
    ['Kernel', `${info.kernel} (this build runs: ${info.kernels.join(', ')})`],
    ['Layers', info.n_layers],
    ...(layers ? [['Pruned widths', layers]] : []),
    ['Hidden size', info.hidden],
    // A pruned model's config keeps the widths as loaded; its own are under "Pruned widths".
    ['Attention heads', `${info.n_heads} (KV heads ${info.n_kv_heads}, head dim ${info.head_dim})${pruned ? ' as loaded' : ''}`],
    ['FFN size', pruned ? `${info.ffn} as loaded` : info.ffn],
    ['Vocabulary', info.vocab.toLocaleString('en-US')],
    ['Context length', info.context_length.toLocaleString('en-US')],
    ['Chat template', info.chat_template ? 'yes' : 'no'],
  ].map(([k, v]) => [k, String(v)]);
}

/** The KV format picker's options, [value, label], from the wasm's list (a placeholder before it). */
export function kvFormatOptions(kvFormats) {
  return kvFormats.length ? kvFormats.map((f) => [f, P.KV_FORMAT_LABELS[f] ?? f]) : [['', 'starting…']];
}

/** The kernel picker's options, [value, label], from info.kernels (a placeholder without a model). */
export function kernelOptions(info) {
  return info ? info.kernels.map((k) => [k, k]) : [['', 'load a model first']];
}

/** The thread picker's counts: 1 … cores on the threaded build, else only 1. */
export function threadCounts(build, cores) {
  return Array.from({ length: build === 'threads' ? cores : 1 }, (_, i) => i + 1);
}

/**
 * The thread count a picker value or `?threads=` text asks for, checked against this browser's
 * `cores`: {threads} or {error} (the reason, naming the range).
 */
export function parseThreadCount(raw, cores) {
  const n = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  const error = P.checkThreads(n, cores);
  return error ? { error } : { threads: n };
}

/** The thread count a page starts with: half the cores (as wllama does), or `?threads=N`; {threads, error?}. */
export function initialThreads(asked, cores) {
  const fallback = P.defaultThreads(cores);
  if (asked === null || asked === undefined) return { threads: fallback };
  const r = parseThreadCount(asked, cores);
  if (r.error) return { threads: fallback, error: `?threads=${String(asked).slice(0, 40)} is refused: ${r.error}; the page runs ${fallback}` };
  return r;
}

/**
 * Whether `manifest` (models/default.json as parsed, or null) says the site serves the default
 * model at `url`: {path: url, bytes > 0}.
 */
export function isDefaultManifest(manifest, url) {
  return manifest !== null && typeof manifest === 'object' && manifest.path === url && Number.isSafeInteger(manifest.bytes) && manifest.bytes > 0;
}

/** The load button's text and title: the default model with its size, or that it is missing. */
export function defaultModelButton(manifest, url) {
  if (isDefaultManifest(manifest, url)) {
    return { present: true, text: `Load default model (SmolLM2-135M-Instruct, ${P.formatMB(manifest.bytes)})`, title: null };
  }
  return {
    present: false,
    text: 'Default model not on this site: load a .gguf file instead',
    title: `This site does not serve ${url}; choose a model file (it stays on this device)`,
  };
}

/** The load line after a refused load: what still runs (the worker kept it), or nothing. */
export function refusedLoadLine(modelLoaded, name, weights) {
  return modelLoaded ? `not loaded; still running ${name || 'the model loaded before'} (${weights})` : 'not loaded';
}
