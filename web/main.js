// edgefit page: the wiring. The wasm engine lives in worker.js behind engine-client.js; the
// panels are factories with explicit dependencies (run-panel.js: generate, transcript, metrics;
// prune-panel.js; share-controller.js; estimate-, fit-, compare- and guide-panel.js); the phase
// machine is page-state.js. This file holds the model controls (load, weights, kernel, KV
// format, threads), the model info, and routes the worker's model messages.

import * as P from './protocol.js';
import { createEngineClient } from './engine-client.js';
import { createEstimatePanel } from './estimate-panel.js';
import { createFitPanel } from './fit-panel.js';
import { createComparePanel } from './compare-panel.js';
import { createGuidePanel } from './guide-panel.js';
import { createRunPanel, isInactive } from './run-panel.js';
import { createPrunePanel } from './prune-panel.js';
import { createShareController } from './share-controller.js';
import * as PS from './page-state.js';
import * as V from './estimate-view.js';

const DEFAULT_MODEL_URL = `models/${P.DEFAULT_MODEL_FILE}`;
const DEFAULT_MODEL_MANIFEST_URL = 'models/default.json';

const $ = (id) => document.getElementById(id);
const el = {
  status: $('status'),
  errorBox: $('error-box'),
  errorText: $('error-text'),
  loadDefault: $('load-default'),
  modelFile: $('model-file'),
  weightsFormat: $('weights-format'),
  kernelPicker: $('kernel-picker'),
  threadPicker: $('thread-picker'),
  kvFormat: $('kv-format'),
  keepContext: $('keep-context'),
  newConversation: $('new-conversation'),
  transcript: $('transcript'),
  transcriptEmpty: $('transcript-empty'),
  progress: $('load-progress'),
  prefillProgress: $('prefill-progress'),
  progressText: $('progress-text'),
  form: $('gen-form'),
  prompt: $('prompt'),
  chat: $('chat'),
  maxTokens: $('max-tokens'),
  temperature: $('temperature'),
  topP: $('top-p'),
  seed: $('seed'),
  generate: $('generate'),
  stop: $('stop'),
  finish: $('finish'),
  output: $('output'),
  chart: $('chart'),
  modelInfo: $('model-info'),
  version: $('engine-version'),
  prunePanel: $('prune-panel'),
  pruneMlp: $('prune-mlp'),
  pruneHeads: $('prune-heads'),
  pruneQk: $('prune-qk'),
  pruneV: $('prune-v'),
  pruneLayers: $('prune-layers'),
  pruneMethod: $('prune-method'),
  pruneAllocation: $('prune-allocation'),
  pruneApply: $('prune-apply'),
  pruneReset: $('prune-reset'),
  pruneDownload: $('prune-download'),
  perplexityRun: $('perplexity-run'),
  pruneProgress: $('prune-progress'),
  pruneProgressText: $('prune-progress-text'),
  pruneSummary: $('prune-summary'),
  pruneNote: $('prune-note'),
  pruneLimits: $('prune-limits'),
  pruneChart: $('prune-chart'),
  shareLink: $('share-link'),
  shareUrl: $('share-url'),
  shareStatus: $('share-status'),
  shareError: $('share-error'),
  shareNote: $('share-note'),
  forgetModel: $('forget-model'),
};

// ---- state -----------------------------------------------------------------------------------
// The phase and whether a model runs: page-state.js, changed only through `dispatch`.
let pageState = PS.initialState();
// The model record. source: what the last load read ({kind: 'url', url} | {kind: 'file', file}),
// so a change of weight format can read it again (pendingSource: the load under way); weights:
// the format the picker asks for; kvFormats: the wasm's KV formats (from catalog); kvFormat: the
// one the real run uses (or will, once loaded); info / name: the running model's info and its
// name for people; defaultModel: whether the site serves the default model (null: not asked yet).
const model = {
  defaultModel: null,
  info: null,
  name: null,
  source: null,
  pendingSource: null,
  weights: P.DEFAULT_WEIGHTS,
  kvFormats: [],
  kvFormat: null,
  loadStartedMs: null, // performance.now() when the running model load started, for the time left
};

/** Applies a page-state event; true when it changed the state (the request may go ahead). */
function dispatch(type) {
  const after = PS.next(pageState, { type });
  const changed = after !== pageState;
  pageState = after;
  return changed;
}

function setStatus(text) {
  el.status.textContent = text;
  el.status.dataset.state = text.startsWith('error:') ? 'error' : pageState.phase;
}

function showError(message) {
  el.errorText.textContent = message;
  el.errorBox.hidden = false;
  setStatus(`error: ${message}`);
}

function clearError() {
  el.errorBox.hidden = true;
  el.errorText.textContent = '';
}

/** What the panels get of the page: its state, the transitions, the status line, render. */
const page = {
  get state() {
    return pageState;
  },
  dispatch,
  isBusy: () => PS.isBusy(pageState),
  setStatus,
  showError,
  clearError,
  render: () => render(),
};

/**
 * A button that is `busy` (a job runs: aria-disabled, still focusable) or `unusable` (disabled);
 * `isInactive` tells the click handlers.
 */
function busyButton(button, busy, unusable) {
  button.disabled = unusable && !busy;
  if (busy) button.setAttribute('aria-disabled', 'true');
  else button.removeAttribute('aria-disabled');
}

function render() {
  const busy = page.isBusy();
  const loaded = pageState.modelLoaded;
  // Load and Generate stay focusable while the engine is busy (aria-disabled, clicks ignored), so
  // a keyboard user's focus is not thrown to the page's start; unusable otherwise: disabled.
  busyButton(el.loadDefault, busy, model.defaultModel === false);
  el.modelFile.disabled = busy;
  el.weightsFormat.disabled = busy;
  el.kernelPicker.disabled = busy || !loaded;
  el.threadPicker.disabled = busy || threads.build !== 'threads';
  el.kvFormat.disabled = busy || model.kvFormats.length === 0;
  el.newConversation.disabled = busy;
  busyButton(el.generate, busy && loaded, !loaded);
  el.stop.disabled = pageState.phase !== 'generating';
  prune.renderControls(busy);
  const hasTemplate = Boolean(model.info?.chat_template);
  el.chat.disabled = busy || (model.info !== null && !hasTemplate);
  if (model.info !== null && !hasTemplate) el.chat.checked = false;
  el.chat.parentElement.title = model.info !== null && !hasTemplate
    ? 'This model has no chat template'
    : "Wrap the prompt in the model's instruct (chat) template";
  document.body.dataset.phase = pageState.phase;
}

// ---- threads ---------------------------------------------------------------------------------
// The threaded build (cross-origin isolated pages only) runs the engine on 1 … cores threads
// (navigator.hardwareConcurrency), half the cores by default as wllama does; `?threads=N` in the
// address asks for N. A count outside 1 … cores, from the address or the picker, is refused with
// a message and the page keeps the count it runs.
const threads = {
  cores: Number.isSafeInteger(navigator.hardwareConcurrency) && navigator.hardwareConcurrency >= 1 ? Math.min(navigator.hardwareConcurrency, P.MAX_THREADS) : 1,
  wanted: 1, // what the page asks the threaded build for
  running: 1, // what the worker said it runs
  build: null,
  version: null,
};
threads.wanted = P.defaultThreads(threads.cores);
{
  const asked = new URLSearchParams(location.search).get('threads');
  if (asked !== null) {
    const n = /^\d{1,4}$/.test(asked) ? Number(asked) : NaN;
    const e = P.checkThreads(n, threads.cores);
    if (e) queueMicrotask(() => showError(`?threads=${asked.slice(0, 40)} is refused: ${e}; the page runs ${threads.wanted}`));
    else threads.wanted = n;
  }
}

function renderThreads() {
  const threaded = threads.build === 'threads';
  const shown = threaded ? threads.running : 1;
  el.threadPicker.replaceChildren(
    ...Array.from({ length: threaded ? threads.cores : 1 }, (_, i) => {
      const o = document.createElement('option');
      o.value = String(i + 1);
      o.textContent = String(i + 1);
      return o;
    }),
  );
  el.threadPicker.value = String(shown);
  el.threadPicker.title = threaded
    ? `Threads the engine runs on (this browser reports ${threads.cores} cores; the default is half of them)`
    : 'One thread: the threaded build needs a cross-origin isolated page';
  if (threads.build) {
    el.version.textContent = `edgefit-wasm ${threads.version} · ${P.describeBuild(threads.build, shown)}`;
    el.version.dataset.build = threads.build;
    el.version.dataset.threads = String(shown);
  }
}

el.threadPicker.addEventListener('change', () => {
  const raw = el.threadPicker.value;
  const n = /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  const e = P.checkThreads(n, threads.cores);
  if (e || threads.build !== 'threads' || page.isBusy()) {
    if (e) showError(`thread count refused: ${e}`);
    renderThreads();
    return;
  }
  if (n === threads.running) return;
  if (!page.dispatch('switch')) return;
  clearError();
  threads.wanted = n;
  setStatus(`switching to ${n} thread${n === 1 ? '' : 's'}…`);
  render();
  client.send(P.setThreads(n, threads.cores));
});

// ---- the engine worker -------------------------------------------------------------------------
/**
 * Fault injection for the page's tests (tests/e2e/faults.test.mjs), inert in normal use: only
 * with `?faults=1` in the address does the page pass the flag to the worker and offer
 * `window.edgefitInjectFault(step)`, which makes the wasm panic before that step of the running
 * or next generation (protocol.js injectFault).
 */
const FAULTS = new URLSearchParams(location.search).get('faults') === '1';

const client = createEngineClient({
  workerUrl: () => {
    const workerUrl = new URL('./worker.js', import.meta.url);
    const forced = new URLSearchParams(location.search).get('wasm');
    if (forced !== null) workerUrl.searchParams.set('wasm', forced);
    if (FAULTS) workerUrl.searchParams.set('faults', '1');
    // ?tables=0: the estimator computes its tables on the first estimate (worker.js), to measure.
    if (new URLSearchParams(location.search).get('tables') === '0') workerUrl.searchParams.set('tables', '0');
    return workerUrl;
  },
  onFatal,
});
const send = (msg) => client.send(msg);
if (FAULTS) {
  window.edgefitInjectFault = (step) => send(P.injectFault(step));
}

// ---- the panels --------------------------------------------------------------------------------
const panel = createEstimatePanel({ send });
createComparePanel({ estimator: panel });
createGuidePanel({ estimator: panel });
const fitPanel = createFitPanel({
  send,
  estimator: panel,
  onOpen: () => $('estimate-h').scrollIntoView({ block: 'start' }),
});
const run = createRunPanel({ el, page, model, client, estimator: panel });
const prune = createPrunePanel({ el, page, model, client, onModelSwapped: modelSwapped });
const share = createShareController({ el, page, model, threads, estimator: panel, prune });

/**
 * The worker died (a panic, a malformed message, a failed start): engine-client.js replaced it
 * (or will on the next send); everything the dead one held is gone.
 */
function onFatal(message, hadBooted) {
  dispatch('fatal');
  el.prefillProgress.hidden = true;
  model.info = null;
  model.name = null;
  model.kvFormats = [];
  model.kvFormat = null;
  renderInfo(null);
  renderKernels(null);
  renderKvFormats();
  run.newConversation();
  prune.reset();
  panel.workerRestarted();
  panel.modelUnloaded();
  fitPanel.workerRestarted();
  fitPanel.modelUnloaded();
  showError(hadBooted ? `${message}; the engine was restarted, load the model again` : message);
  render();
}

/** A pruned model (or the one as loaded again) runs: the page shows it like a fresh load. */
function modelSwapped(info, metrics, pruned) {
  model.info = info;
  renderInfo(info);
  renderKernels(info);
  run.resetMetrics();
  run.renderMetrics(metrics);
  run.newConversation();
  run.clearOutput();
  const base = model.name || P.displayName(null, info);
  const shown = { ...info, name: pruned ? `${base}, pruned to ${P.formatParams(info.params)}` : base };
  panel.modelLoaded(shown);
  fitPanel.modelLoaded(shown);
}

// ---- the worker's model messages (the run, prune and estimator panels take their own) ----------
client.on(P.FromWorker.BOOTED, (msg) => {
  threads.version = msg.version;
  threads.build = msg.build;
  threads.running = 1;
  renderThreads();
  // The threaded build starts on one thread: ask for the chosen count (applied to every model
  // this worker loads).
  if (msg.build === 'threads' && threads.wanted !== 1) send(P.setThreads(threads.wanted, threads.cores));
  render();
});
client.on(P.FromWorker.THREADS_SET, (msg) => {
  threads.running = msg.threads;
  renderThreads();
  if (pageState.phase === 'switching') {
    dispatch('threads-set');
    setStatus(pageState.modelLoaded ? 'ready' : 'no model loaded');
  }
  render();
});
client.on(P.FromWorker.PROGRESS, (msg) => {
  const max = msg.total ?? Math.max(msg.loaded, 1);
  el.progress.max = max;
  el.progress.value = Math.min(msg.loaded, max);
  el.progressText.textContent = P.formatProgress(msg.loaded, msg.total, model.loadStartedMs === null ? null : performance.now() - model.loadStartedMs);
});
client.on(P.FromWorker.PARSING, (msg) => {
  el.progress.max = Math.max(msg.bytes, 1);
  el.progress.value = msg.bytes;
  el.progressText.textContent = `${P.formatProgress(msg.bytes, msg.bytes)} · building the model…`;
});
client.on(P.FromWorker.LOADED, (msg) => {
  dispatch('loaded');
  if (model.pendingSource) model.source = model.pendingSource;
  model.pendingSource = null;
  model.info = msg.info;
  model.weights = msg.info.weights.weights;
  el.weightsFormat.value = model.weights;
  model.name = P.displayName(model.source?.kind === 'file' ? model.source.file.name : model.source?.url, msg.info);
  el.progressText.textContent = `${P.formatProgress(Number(el.progress.value), Number(el.progress.max))} · ${model.name} loaded (${P.describeWeights(model.weights, msg.info.weights.stored, msg.info.weights.embedding)})`;
  if (typeof msg.metrics.kv_format === 'string') model.kvFormat = msg.metrics.kv_format;
  renderKvFormats();
  renderInfo(msg.info);
  renderKernels(msg.info);
  run.resetMetrics();
  run.renderMetrics(msg.metrics);
  run.newConversation(); // a new engine holds no conversation
  prune.reset();
  prune.renderModel(msg.info);
  setStatus('ready');
  render();
  panel.modelLoaded({ ...msg.info, name: model.name });
  fitPanel.modelLoaded({ ...msg.info, name: model.name });
  prune.measureBaseline();
});
client.on(P.FromWorker.KERNEL_SET, (msg) => {
  dispatch('switched');
  model.info = msg.info;
  renderInfo(msg.info);
  renderKernels(msg.info);
  setStatus('ready');
  render();
});
client.on(P.FromWorker.KV_FORMAT_SET, (msg) => {
  dispatch('switched');
  model.kvFormat = msg.format;
  renderKvFormats();
  // The engine cleared the cache: the conversation starts over.
  run.newConversation();
  if (msg.metrics) run.renderMetrics(msg.metrics, msg.kvEstimateBytes);
  else $('metric-kv-format').textContent = msg.format;
  setStatus(pageState.modelLoaded ? 'ready' : 'no model loaded');
  render();
  // The estimate's KV knob follows the real run's format, so both sides compare the same
  // (not when a shared link set both: the link's estimator format stays).
  if (!share.takeKeepEstimateKv()) panel.followKvFormat(msg.format);
});
client.on(P.FromWorker.CACHED, (msg) => {
  el.forgetModel.hidden = !msg.present;
});
client.on(P.FromWorker.CATALOG, (msg) => {
  model.kvFormats = [...msg.kvFormats];
  // Until a load reports the engine's format, show its default (the wasm's
  // defaultKvFormat(), mirrored by estimate-view's DEFAULT_KNOBS.kv; a unit test keeps them equal).
  if (!model.kvFormats.includes(model.kvFormat)) {
    model.kvFormat = model.kvFormats.includes(V.DEFAULT_KNOBS.kv) ? V.DEFAULT_KNOBS.kv : model.kvFormats[0];
  }
  renderKvFormats();
  render();
  panel.onCatalog(msg);
  fitPanel.onCatalog(msg);
  share.catalogReady();
});
client.on(P.FromWorker.MEASURING, (msg) => panel.onMeasuring(msg));
client.on(P.FromWorker.ESTIMATE_RESULT, (msg) => {
  panel.onResult(msg);
  fitPanel.syncDevice();
});
client.on(P.FromWorker.ESTIMATE_ERROR, (msg) => panel.onError(msg));
client.on(P.FromWorker.FIT_RESULT, (msg) => fitPanel.onResult(msg));
client.on(P.FromWorker.FIT_ERROR, (msg) => fitPanel.onError(msg));
client.on(P.FromWorker.FIT_PROGRESS, (msg) => fitPanel.onProgress(msg));
// A refused request (a fatal error never reaches here: engine-client.js calls onFatal).
client.on(P.FromWorker.ERROR, (msg) => {
  share.clearKeepEstimateKv();
  const phase = pageState.phase;
  const wasGenerating = phase === 'generating' || phase === 'stopping';
  if (phase === 'loading') {
    // The worker kept the running model (if any): the picker and the line say so.
    model.pendingSource = null;
    if (model.info) model.weights = model.info.weights.weights;
    el.weightsFormat.value = model.weights;
    el.progress.value = 0;
    el.progressText.textContent = pageState.modelLoaded
      ? `not loaded; still running ${model.name || 'the model loaded before'} (${model.weights})`
      : 'not loaded';
  }
  el.prefillProgress.hidden = true;
  if (phase === 'pruning') prune.failed();
  dispatch('failed');
  renderKernels(model.info); // a refused kernel switch shows the kernel still in use
  renderKvFormats(); // a refused KV format switch shows the format still in use
  let message = msg.message;
  if (wasGenerating) {
    run.failTurn(message);
    if (P.isContextFull(message)) message += ' — press “New conversation” to start over with an empty cache';
  }
  showError(message);
  render();
});

// ---- model info and pickers ------------------------------------------------------------------------
/** Fills the KV format picker from the wasm's list with the run's format selected. */
function renderKvFormats() {
  const opts = model.kvFormats.length ? model.kvFormats.map((f) => [f, P.KV_FORMAT_LABELS[f] ?? f]) : [['', 'starting…']];
  el.kvFormat.replaceChildren(
    ...opts.map(([value, text]) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      return o;
    }),
  );
  el.kvFormat.value = model.kvFormat ?? '';
}

/** Fills the kernel picker from info.kernels with info.kernel selected (a placeholder without a model). */
function renderKernels(info) {
  const opts = info
    ? info.kernels.map((k) => [k, k])
    : [['', 'load a model first']];
  el.kernelPicker.replaceChildren(
    ...opts.map(([value, text]) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      return o;
    }),
  );
  el.kernelPicker.value = info ? info.kernel : '';
}

function renderInfo(info) {
  el.modelInfo.replaceChildren();
  if (!info) {
    // A <dl> holds only dt/dd groups (screen readers announce it as a list of terms).
    const div = document.createElement('div');
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = 'Model';
    dd.className = 'muted';
    dd.textContent = 'No model loaded.';
    div.append(dt, dd);
    el.modelInfo.append(div);
    return;
  }
  const rows = [
    ['Name', model.name || P.displayName(null, info)],
    ['Name in the file (general.name)', info.name || '(none)'],
    ['Architecture', info.arch],
    ['Parameters', `${P.formatParams(info.params)} (${info.params.toLocaleString('en-US')})`],
    ['Weights in memory', `${P.formatMB(info.weights_bytes)} (${P.formatWeightsUsed(info.weights)})`],
    ['Stored as', P.formatStored(info.weights.stored)],
    ['Converted', (info.weights.converted ?? []).map((c) => `${c.from} → ${c.to} × ${c.tensors.length}`).join(', ') || 'none (every tensor as the file holds it, or float)'],
    ['Tokenizer', info.tokenizer?.kind ?? ''],
    ['Kernel', `${info.kernel} (this build runs: ${info.kernels.join(', ')})`],
    ['Layers', info.n_layers],
    ...(P.describeLayers(info.layers) ? [['Pruned widths', P.describeLayers(info.layers)]] : []),
    ['Hidden size', info.hidden],
    ['Attention heads', `${info.n_heads} (KV heads ${info.n_kv_heads}, head dim ${info.head_dim})`],
    ['FFN size', info.ffn],
    ['Vocabulary', info.vocab.toLocaleString('en-US')],
    ['Context length', info.context_length.toLocaleString('en-US')],
    ['Chat template', info.chat_template ? 'yes' : 'no'],
  ];
  for (const [k, v] of rows) {
    const div = document.createElement('div');
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = k;
    dd.textContent = String(v);
    div.append(dt, dd);
    el.modelInfo.append(div);
  }
}

// ---- actions ---------------------------------------------------------------------------------
/** The load message for `source` in `weights`, and a label for the progress line. */
function loadMessage(source, weights) {
  return source.kind === 'url' ? P.loadUrl(source.url, weights) : P.loadFile(source.file, weights);
}

/**
 * Starts a load. The running model (if any) stays loaded and shown until the new one is built:
 * the worker builds beside it and swaps only on success, so a file it refuses leaves it running
 * (the LOADED handler replaces everything; the ERROR handler goes back to it).
 */
function startLoad(source, label) {
  const msg = loadMessage(source, model.weights);
  if (!page.dispatch('load')) return;
  model.pendingSource = source;
  clearError();
  el.progress.value = 0;
  el.progress.max = 1;
  el.progressText.textContent = `starting ${label}…`;
  model.loadStartedMs = performance.now();
  setStatus('loading…');
  render();
  client.send(msg);
}

el.loadDefault.addEventListener('click', () => {
  if (page.isBusy() || isInactive(el.loadDefault)) return; // inactive while busy: a click is dropped
  startLoad({ kind: 'url', url: new URL(DEFAULT_MODEL_URL, document.baseURI).href }, 'download');
});

/**
 * Whether this site serves the default model (a static host may publish the page without it):
 * the build writes models/default.json beside the model, {path, bytes}. Without it the button
 * says so and the page asks for a file, while the estimator and everything else keep working.
 */
async function probeDefaultModel() {
  let ok = false;
  let manifestBytes = 0;
  try {
    const r = await fetch(new URL(DEFAULT_MODEL_MANIFEST_URL, document.baseURI));
    const m = r.ok ? await r.json() : null;
    ok = m !== null && typeof m === 'object' && m.path === DEFAULT_MODEL_URL && Number.isSafeInteger(m.bytes) && m.bytes > 0;
    if (ok) manifestBytes = m.bytes;
  } catch {
    ok = false;
  }
  model.defaultModel = ok;
  if (ok) el.loadDefault.textContent = `Load default model (SmolLM2-135M-Instruct, ${P.formatMB(manifestBytes)})`;
  if (!ok) {
    el.loadDefault.textContent = 'Default model not on this site: load a .gguf file instead';
    el.loadDefault.title = `This site does not serve ${DEFAULT_MODEL_URL}; choose a model file (it stays on this device)`;
    el.loadDefault.dataset.missing = 'true';
  }
  render();
}
probeDefaultModel();

// The worker keeps the default model in the Cache API (worker.js MODEL_CACHE); this forgets it.
const MODEL_CACHE = 'edgefit-models-v1';
(async () => {
  try {
    const c = typeof caches === 'undefined' ? null : await caches.open(MODEL_CACHE);
    const keys = c ? await c.keys() : [];
    el.forgetModel.hidden = !keys.some((r) => r.url.endsWith(P.DEFAULT_MODEL_FILE));
  } catch {
    el.forgetModel.hidden = true;
  }
})();
el.forgetModel.addEventListener('click', async () => {
  try {
    await caches.delete(MODEL_CACHE);
    el.forgetModel.hidden = true;
    el.progressText.textContent = 'the cached default model was removed; the next load downloads it';
  } catch (e) {
    showError(`could not remove the cached model: ${P.errorMessage(e)}`);
  }
});

el.modelFile.addEventListener('change', () => {
  const file = el.modelFile.files?.[0];
  if (!file) return;
  if (page.isBusy()) {
    // The input is disabled while busy; a file that slips through (e.g. a change event fired
    // by script) is refused with a note, never queued or mixed into the running job.
    el.modelFile.value = '';
    el.progressText.textContent = `${file.name} not loaded: the engine is busy; load it when it is done`;
    return;
  }
  startLoad({ kind: 'file', file }, file.name);
  el.modelFile.value = ''; // choosing the same file again fires change again
});

for (const f of P.WEIGHT_FORMATS) {
  const o = document.createElement('option');
  o.value = f;
  o.textContent = P.WEIGHT_FORMAT_LABELS[f] ?? f;
  el.weightsFormat.append(o);
}
el.weightsFormat.value = model.weights;

// A new format applies to the next load; with a model loaded, the same source is read again
// (the browser's cache serves a URL; a File is re-read) and built in the new format.
el.weightsFormat.addEventListener('change', () => {
  if (page.isBusy()) {
    // The picker is disabled while busy; a change that slips through is refused, not queued.
    el.weightsFormat.value = model.weights;
    return;
  }
  model.weights = el.weightsFormat.value;
  if (pageState.modelLoaded && model.source) startLoad(model.source, `reload in ${model.weights}`);
});

el.kernelPicker.addEventListener('change', () => {
  const name = el.kernelPicker.value;
  if (page.isBusy() || !pageState.modelLoaded || !name || name === model.info?.kernel || !page.dispatch('switch')) {
    renderKernels(model.info);
    return;
  }
  clearError();
  setStatus('switching kernel…');
  render();
  client.send(P.setKernel(name));
});

el.kvFormat.addEventListener('change', () => {
  const name = el.kvFormat.value;
  if (page.isBusy() || !model.kvFormats.includes(name) || name === model.kvFormat || !page.dispatch('switch')) {
    // Disabled while busy; a change that slips through is refused, not queued.
    renderKvFormats();
    return;
  }
  clearError();
  setStatus('switching KV format…');
  render();
  client.send(P.setKvFormat(name));
});

// Start the worker now so the wasm compiles while the user reads the page.
client.ensure();
render();
