// edgefit page: the wiring. The wasm engine lives in worker.js behind engine-client.js; the
// panels are factories with explicit dependencies (model-panel.js: load, weights, kernel and KV
// format, model info; threads-control.js; run-panel.js: generate, transcript, metrics;
// prune-panel.js; share-controller.js; estimate-, fit-, compare- and guide-panel.js); the phase
// machine is page-state.js. This file holds the page's element table, its state and the
// enabled/disabled render, and routes the worker's messages that touch several panels.

import * as P from './protocol.js';
import { createEngineClient } from './engine-client.js';
import { createModelPanel } from './model-panel.js';
import { createThreadsControl } from './threads-control.js';
import { createEstimatePanel } from './estimate-panel.js';
import { createFitPanel } from './fit-panel.js';
import { createComparePanel } from './compare-panel.js';
import { createGuidePanel } from './guide-panel.js';
import { createRunPanel } from './run-panel.js';
import { createPrunePanel } from './prune-panel.js';
import { createShareController } from './share-controller.js';
import * as PS from './page-state.js';
import * as V from './estimate-view.js';

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
const { threads } = createThreadsControl({ el, page, client });
const models = createModelPanel({ el, page, model, client });
const { renderInfo, renderKernels, renderKvFormats } = models;
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
  run.flushStream();
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
  // The engine's load_ms is the time the change took: say which change it was.
  $('metric-load-label').textContent = pruned ? 'Prune' : 'Restore';
  run.newConversation();
  run.clearOutput();
  const base = model.name || P.displayName(null, info);
  const shown = { ...info, name: pruned ? `${base}, pruned to ${P.formatParams(info.params)}` : base };
  panel.modelLoaded(shown);
  fitPanel.modelLoaded(shown);
}

// ---- the worker's messages that touch several panels (each panel takes its own) ----------------
client.on(P.FromWorker.LOADED, (msg) => {
  dispatch('loaded');
  models.loaded(msg.info);
  if (typeof msg.metrics.kv_format === 'string') model.kvFormat = msg.metrics.kv_format;
  renderKvFormats();
  run.resetMetrics();
  run.renderMetrics(msg.metrics);
  $('metric-load-label').textContent = 'Load';
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
  if (phase === 'loading') models.refused(); // the worker kept the running model (if any)
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

models.probeDefaultModel();

// Start the worker now so the wasm compiles while the user reads the page.
client.ensure();
render();
