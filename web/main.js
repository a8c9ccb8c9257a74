// edgefit page: DOM only. The wasm engine lives in worker.js; this file sends it commands and
// renders what it reports. Message shapes and formatting live in protocol.js.

import * as P from './protocol.js';
import { createEstimatePanel } from './estimate-panel.js';
import { createFitPanel } from './fit-panel.js';
import { createComparePanel } from './compare-panel.js';
import { createGuidePanel } from './guide-panel.js';
import * as C from './conversation.js';
import * as V from './estimate-view.js';
import * as S from './share.js';

const DEFAULT_MODEL_URL = 'models/smollm2-135m-instruct-q4_1.gguf';
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
// phase: 'idle' (no model) | 'loading' | 'ready' | 'generating' | 'stopping' | 'switching'
// (kernel or KV format) | 'pruning' (prune, reset, perplexity or export in the worker)
// source: what the last load read ({kind: 'url', url} | {kind: 'file', file}), so a change of
// weight format can read it again; weights: the format the picker asks for. kvFormats: the
// wasm's KV formats (from catalog); kvFormat: the one the real run uses (or will, once loaded).
const state = {
  phase: 'idle',
  modelLoaded: false,
  defaultModel: null, // whether the site serves the default model (null: not asked yet)
  modelInfo: null,
  source: null,
  weights: P.DEFAULT_WEIGHTS,
  kvFormats: [],
  kvFormat: null,
  // Pruning: whether the site serves the calibration / evaluation texts (null = not asked yet),
  // whether a pruned model runs, and the perplexity of the model as loaded (for Reset).
  texts: { calibration: null, eval: null },
  pruned: false,
  basePerplexity: null,
  pruneStage: null, // {stage, startedMs} of the running pruning job, for the time left
  loadStartedMs: null, // performance.now() when the running model load started, for the time left
  generateStartedMs: null, // performance.now() when the running generation was asked for, for the prefill's time left
};
// The transcript of the conversation the engine holds (user turns and the model's answers).
const conv = C.createConversation();
let worker = null;
const bootedWorkers = new WeakSet(); // workers whose wasm initialised

function setStatus(text) {
  el.status.textContent = text;
  el.status.dataset.state = text.startsWith('error:') ? 'error' : state.phase;
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

/**
 * A button that is `busy` (a job runs: aria-disabled, still focusable) or `unusable` (disabled);
 * `isInactive` tells the click handlers.
 */
function busyButton(button, busy, unusable) {
  button.disabled = unusable && !busy;
  if (busy) button.setAttribute('aria-disabled', 'true');
  else button.removeAttribute('aria-disabled');
}
const isInactive = (button) => button.disabled || button.getAttribute('aria-disabled') === 'true';

const isBusy = () => ['loading', 'generating', 'stopping', 'switching', 'pruning'].includes(state.phase);

function render() {
  const busy = isBusy();
  // Load and Generate stay focusable while the engine is busy (aria-disabled, clicks ignored), so
  // a keyboard user's focus is not thrown to the page's start; unusable otherwise: disabled.
  busyButton(el.loadDefault, busy, state.defaultModel === false);
  el.modelFile.disabled = busy;
  el.weightsFormat.disabled = busy;
  el.kernelPicker.disabled = busy || !state.modelLoaded;
  el.threadPicker.disabled = busy || threads.build !== 'threads';
  el.kvFormat.disabled = busy || state.kvFormats.length === 0;
  el.newConversation.disabled = busy;
  busyButton(el.generate, busy && state.modelLoaded, !state.modelLoaded);
  el.stop.disabled = state.phase !== 'generating';
  // What this architecture cannot have pruned or exported (the engine's own checks, from the
  // model info): those controls are disabled, with the engine's reason shown above them.
  const limits = P.pruneLimits(state.modelInfo);
  el.pruneApply.disabled = busy || !state.modelLoaded || limits.prune !== '';
  el.pruneReset.disabled = busy || !state.modelLoaded || !state.pruned;
  el.pruneDownload.disabled = busy || !state.modelLoaded || limits.export !== '';
  for (const input of [el.pruneMlp, el.pruneHeads, el.pruneV, el.pruneQk]) {
    input.disabled = limits.prune !== '' || (input === el.pruneQk && limits.qkDims !== '');
  }
  if (el.pruneQk.disabled && el.pruneQk.value !== '0') {
    el.pruneQk.value = '0';
    el.pruneQk.dispatchEvent(new Event('change'));
  }
  el.pruneLimits.textContent = limits.text;
  el.pruneLimits.hidden = limits.text === '';
  el.perplexityRun.disabled = busy || !state.modelLoaded || state.texts.eval !== true;
  const hasTemplate = Boolean(state.modelInfo?.chat_template);
  el.chat.disabled = busy || (state.modelInfo !== null && !hasTemplate);
  if (state.modelInfo !== null && !hasTemplate) el.chat.checked = false;
  el.chat.parentElement.title = state.modelInfo !== null && !hasTemplate
    ? 'This model has no chat template'
    : "Wrap the prompt in the model's instruct (chat) template";
  document.body.dataset.phase = state.phase;
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
  if (e || threads.build !== 'threads' || isBusy()) {
    if (e) showError(`thread count refused: ${e}`);
    renderThreads();
    return;
  }
  if (n === threads.running) return;
  clearError();
  threads.wanted = n;
  state.phase = 'switching';
  setStatus(`switching to ${n} thread${n === 1 ? '' : 's'}…`);
  render();
  send(P.setThreads(n, threads.cores));
});

// ---- worker ----------------------------------------------------------------------------------
function spawnWorker() {
  const workerUrl = new URL('./worker.js', import.meta.url);
  const forced = new URLSearchParams(location.search).get('wasm');
  if (forced !== null) workerUrl.searchParams.set('wasm', forced);
  if (FAULTS) workerUrl.searchParams.set('faults', '1');
  // ?tables=0: the estimator computes its tables on the first estimate (worker.js), to measure.
  if (new URLSearchParams(location.search).get('tables') === '0') workerUrl.searchParams.set('tables', '0');
  const w = new Worker(workerUrl, { type: 'module', name: 'edgefit-engine' });
  w.onmessage = (ev) => onWorkerMessage(w, ev.data);
  w.onerror = (ev) => {
    ev.preventDefault();
    onFatal(w, `the engine worker failed: ${ev.message || 'could not start worker.js'}`);
  };
  w.onmessageerror = () => onFatal(w, 'the engine worker sent a message that could not be read');
  return w;
}

/**
 * Fault injection for the page's tests (tests/e2e/faults.test.mjs), inert in normal use: only
 * with `?faults=1` in the address does the page pass the flag to the worker and offer
 * `window.edgefitInjectFault(step)`, which makes the wasm panic before that step of the running
 * or next generation (protocol.js injectFault).
 */
const FAULTS = new URLSearchParams(location.search).get('faults') === '1';
if (FAULTS) {
  window.edgefitInjectFault = (step) => send(P.injectFault(step));
}

function ensureWorker() {
  if (!worker) worker = spawnWorker();
  return worker;
}

/**
 * A poisoned or dead worker is replaced by a fresh one (a panicked wasm instance cannot be reused).
 * If the wasm never started in it, the next action retries instead, so a broken build does not
 * respawn in a loop.
 */
function onFatal(w, message) {
  if (w !== worker) return;
  const hadBooted = bootedWorkers.has(w);
  w.terminate();
  worker = hadBooted ? spawnWorker() : null;
  state.phase = 'idle';
  el.prefillProgress.hidden = true;
  state.modelLoaded = false;
  state.modelInfo = null;
  state.modelName = null;
  state.kvFormats = [];
  state.kvFormat = null;
  renderInfo(null);
  renderKernels(null);
  renderKvFormats();
  newConversation();
  resetPruneState();
  panel.workerRestarted();
  panel.modelUnloaded();
  fitPanel.workerRestarted();
  fitPanel.modelUnloaded();
  showError(hadBooted ? `${message}; the engine was restarted, load the model again` : message);
  render();
}

function send(msg) {
  ensureWorker().postMessage(msg);
}

const panel = createEstimatePanel({ send });
createComparePanel({ estimator: panel });
createGuidePanel({ estimator: panel });
const fitPanel = createFitPanel({
  send,
  estimator: panel,
  onOpen: () => $('estimate-h').scrollIntoView({ block: 'start' }),
});

// ---- worker messages -------------------------------------------------------------------------
function onWorkerMessage(w, msg) {
  if (w !== worker) return; // a message from a worker we already dropped
  const bad = P.validateFromWorker(msg);
  if (bad) {
    onFatal(w, `the engine worker sent a malformed message: ${bad}`);
    return;
  }
  switch (msg.type) {
    case P.FromWorker.BOOTED:
      bootedWorkers.add(w);
      threads.version = msg.version;
      threads.build = msg.build;
      threads.running = 1;
      renderThreads();
      // The threaded build starts on one thread: ask for the chosen count (applied to every model
      // this worker loads).
      if (msg.build === 'threads' && threads.wanted !== 1) send(P.setThreads(threads.wanted, threads.cores));
      render();
      break;
    case P.FromWorker.THREADS_SET:
      threads.running = msg.threads;
      renderThreads();
      if (state.phase === 'switching') {
        state.phase = state.modelLoaded ? 'ready' : 'idle';
        setStatus(state.modelLoaded ? 'ready' : 'no model loaded');
      }
      render();
      break;
    case P.FromWorker.PROGRESS: {
      const max = msg.total ?? Math.max(msg.loaded, 1);
      el.progress.max = max;
      el.progress.value = Math.min(msg.loaded, max);
      el.progressText.textContent = P.formatProgress(msg.loaded, msg.total, state.loadStartedMs === null ? null : performance.now() - state.loadStartedMs);
      break;
    }
    case P.FromWorker.PARSING:
      el.progress.max = Math.max(msg.bytes, 1);
      el.progress.value = msg.bytes;
      el.progressText.textContent = `${P.formatProgress(msg.bytes, msg.bytes)} · building the model…`;
      break;
    case P.FromWorker.LOADED:
      state.phase = 'ready';
      state.modelLoaded = true;
      if (state.pendingSource) state.source = state.pendingSource;
      state.pendingSource = null;
      state.modelInfo = msg.info;
      state.weights = msg.info.weights.weights;
      el.weightsFormat.value = state.weights;
      state.modelName = P.displayName(state.source?.kind === 'file' ? state.source.file.name : state.source?.url, msg.info);
      el.progressText.textContent = `${P.formatProgress(Number(el.progress.value), Number(el.progress.max))} · ${state.modelName} loaded (${P.describeWeights(state.weights, msg.info.weights.stored, msg.info.weights.embedding)})`;
      if (typeof msg.metrics.kv_format === 'string') state.kvFormat = msg.metrics.kv_format;
      renderKvFormats();
      renderInfo(msg.info);
      renderKernels(msg.info);
      resetMetrics();
      renderMetrics(msg.metrics);
      newConversation(); // a new engine holds no conversation
      resetPruneState();
      renderPruneModel(msg.info);
      setStatus('ready');
      render();
      panel.modelLoaded({ ...msg.info, name: state.modelName });
      fitPanel.modelLoaded({ ...msg.info, name: state.modelName });
      measureBaseline();
      break;
    case P.FromWorker.PRUNE_PROGRESS:
      showPruneProgress(msg);
      break;
    case P.FromWorker.PRUNED:
      modelSwapped(msg.info, msg.metrics, true);
      el.pruneSummary.textContent = pruneSummary(msg.report);
      el.pruneNote.textContent = `${P.formatParams(msg.report.params_before)} → ${P.formatParams(msg.report.params_after)} parameters; KV cache ${msg.report.kv_f32_bytes_per_token_before} → ${msg.report.kv_f32_bytes_per_token_after} bytes per token in f32.`;
      if (state.texts.eval === true) {
        send(P.perplexity(new URL(P.EVAL_URL, document.baseURI).href, P.EVAL_TOKENS));
      } else {
        pruneDone(state.texts.eval === false ? 'evaluation text not served: perplexity not measured' : '');
      }
      break;
    case P.FromWorker.RESTORED:
      modelSwapped(msg.info, msg.metrics, false);
      el.pruneSummary.textContent = '';
      el.pruneNote.textContent = '';
      if (state.basePerplexity !== null) $('metric-perplexity').textContent = state.basePerplexity.toFixed(2);
      pruneDone('');
      break;
    case P.FromWorker.PERPLEXITY_RESULT: {
      const ppl = msg.report.perplexity;
      $('metric-perplexity').textContent = ppl.toFixed(2);
      if (!state.pruned) state.basePerplexity = ppl;
      else {
        const warn = P.perplexityWarning(state.basePerplexity, ppl);
        el.pruneSummary.dataset.warning = warn ? 'true' : 'false';
        if (warn) el.pruneNote.textContent = `${el.pruneNote.textContent} ${warn}`.trim();
      }
      qualityChart.add(msg.params, ppl, state.pruned);
      pruneDone(`perplexity ${ppl.toFixed(2)} on ${msg.report.tokens} tokens (${P.formatNumber(msg.report.ms ?? 0, 0)} ms)`);
      break;
    }
    case P.FromWorker.EXPORTED: {
      const url = URL.createObjectURL(new Blob([msg.bytes], { type: 'application/octet-stream' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = msg.name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      pruneDone(`${msg.name}: ${P.formatMB(msg.bytes.length)}${P.exportFormatNote(state.modelInfo?.weights?.weights, 'q8_0', state.modelInfo?.weights?.stored)}`);
      break;
    }
    case P.FromWorker.KERNEL_SET:
      state.phase = 'ready';
      state.modelInfo = msg.info;
      renderInfo(msg.info);
      renderKernels(msg.info);
      setStatus('ready');
      render();
      break;
    case P.FromWorker.KV_FORMAT_SET:
      state.phase = state.modelLoaded ? 'ready' : 'idle';
      state.kvFormat = msg.format;
      renderKvFormats();
      // The engine cleared the cache: the conversation starts over.
      newConversation();
      if (msg.metrics) renderMetrics(msg.metrics, msg.kvEstimateBytes);
      else $('metric-kv-format').textContent = msg.format;
      setStatus(state.modelLoaded ? 'ready' : 'no model loaded');
      render();
      // The estimate's KV knob follows the real run's format, so both sides compare the same
      // (not when a shared link set both: the link's estimator format stays).
      if (share.keepEstimateKv) share.keepEstimateKv = false;
      else panel.followKvFormat(msg.format);
      break;
    case P.FromWorker.STARTED:
      break;
    case P.FromWorker.PREFILLING:
      // A long prompt, fed in chunks: a bar and the time left (not once Stop was pressed).
      el.prefillProgress.max = msg.total;
      el.prefillProgress.value = msg.done;
      el.prefillProgress.hidden = false;
      if (state.phase === 'generating') setStatus(P.prefillStatus(msg.done, msg.total, performance.now() - state.generateStartedMs));
      break;
    case P.FromWorker.PIECE:
      if (!el.prefillProgress.hidden) {
        el.prefillProgress.hidden = true;
        if (state.phase === 'generating') setStatus('generating…');
      }
      el.output.textContent += msg.text;
      appendAnswer(msg.text);
      if (msg.tokenMs.length) chart.push(msg.tokenMs);
      renderMetrics(msg.metrics, msg.kvEstimateBytes);
      break;
    case P.FromWorker.DONE:
      state.phase = 'ready';
      el.prefillProgress.hidden = true;
      C.finishTurn(conv, msg.reason);
      renderTranscript();
      renderMetrics(msg.metrics, msg.kvEstimateBytes);
      chart.flush();
      el.finish.textContent = {
        stop: 'ended at a stop token',
        length: 'reached max tokens',
        stopped: 'stopped',
      }[msg.reason];
      el.finish.dataset.reason = msg.reason;
      setStatus('done');
      render();
      panel.generationDone(msg.metrics);
      break;
    case P.FromWorker.CACHED:
      el.forgetModel.hidden = !msg.present;
      break;
    case P.FromWorker.CATALOG:
      state.kvFormats = [...msg.kvFormats];
      // Until a load reports the engine's format, show its default (the wasm's
      // defaultKvFormat(), mirrored by estimate-view's DEFAULT_KNOBS.kv; a unit test keeps them equal).
      if (!state.kvFormats.includes(state.kvFormat)) {
        state.kvFormat = state.kvFormats.includes(V.DEFAULT_KNOBS.kv) ? V.DEFAULT_KNOBS.kv : state.kvFormats[0];
      }
      renderKvFormats();
      render();
      panel.onCatalog(msg);
      fitPanel.onCatalog(msg);
      applyPendingLink();
      break;
    case P.FromWorker.MEASURING:
      panel.onMeasuring(msg);
      break;
    case P.FromWorker.ESTIMATE_RESULT:
      panel.onResult(msg);
      fitPanel.syncDevice();
      break;
    case P.FromWorker.ESTIMATE_ERROR:
      panel.onError(msg);
      break;
    case P.FromWorker.FIT_RESULT:
      fitPanel.onResult(msg);
      break;
    case P.FromWorker.FIT_ERROR:
      fitPanel.onError(msg);
      break;
    case P.FromWorker.FIT_PROGRESS:
      fitPanel.onProgress(msg);
      break;
    case P.FromWorker.ERROR:
      if (msg.fatal) {
        onFatal(w, msg.message);
        return;
      }
      {
        share.keepEstimateKv = false;
        const wasGenerating = state.phase === 'generating' || state.phase === 'stopping';
        if (state.phase === 'loading') {
          // The worker kept the running model (if any): the picker and the line say so.
          state.pendingSource = null;
          if (state.modelInfo) state.weights = state.modelInfo.weights.weights;
          el.weightsFormat.value = state.weights;
          el.progress.value = 0;
          el.progressText.textContent = state.modelLoaded
            ? `not loaded; still running ${state.modelName || 'the model loaded before'} (${state.weights})`
            : 'not loaded';
        }
        el.prefillProgress.hidden = true;
        if (state.phase === 'pruning') endPruneProgress('');
        state.phase = state.modelLoaded ? 'ready' : 'idle';
        renderKernels(state.modelInfo); // a refused kernel switch shows the kernel still in use
        renderKvFormats(); // a refused KV format switch shows the format still in use
        let message = msg.message;
        if (wasGenerating) {
          C.failTurn(conv, message);
          renderTranscript();
          if (P.isContextFull(message)) message += ' — press “New conversation” to start over with an empty cache';
        }
        showError(message);
        render();
      }
      break;
  }
}

// ---- metrics, info ---------------------------------------------------------------------------
function resetMetrics() {
  for (const id of Object.keys(P.metricCells({}))) $(id).textContent = '';
  for (const id of ['metric-weights-mb', 'metric-kv-mb', 'metric-peak-mb', 'metric-weights-format', 'metric-kernel']) $(id).textContent = '';
  for (const id of Object.keys(P.kvCells({}))) $(id).textContent = '';
  delete $('metric-kv-match').dataset.match;
}

/** `kvEstimateBytes`: the estimator's bytes for the tokens the cache holds (null if unknown). */
function renderMetrics(m, kvEstimateBytes = null) {
  const cells = P.metricCells(m);
  for (const [id, text] of Object.entries(cells)) {
    // Keep the last good value (e.g. load time) rather than blanking it.
    if (text !== '' || id === 'metric-generated-tokens') $(id).textContent = text;
  }
  $('metric-weights-mb').textContent = m.weights_bytes > 0 ? `(${P.formatMB(m.weights_bytes)})` : '';
  $('metric-kv-mb').textContent = m.kv_bytes > 0 ? `(${P.formatMB(m.kv_bytes)})` : '';
  $('metric-peak-mb').textContent = m.peak_bytes > 0 ? `(${P.formatMB(m.peak_bytes)})` : '';
  $('metric-heap-mb').textContent = m.heap_bytes > 0 ? `(${P.formatMB(m.heap_bytes)})` : '';
  // One name everywhere: the requested format (auto, w4g32, ...) with what the file kept, as the
  // model info and the progress line say it (the metrics name the layers' most common format).
  $('metric-weights-format').textContent = P.formatWeightsUsed({ ...m, stored: state.modelInfo?.weights?.stored, weights: state.modelInfo?.weights?.weights ?? m.weights });
  $('metric-kernel').textContent = m.kernel ?? '';
  // The KV cache, live: format, tokens held of the limit, measured bytes beside the estimator's.
  const kv = P.kvCells(m, kvEstimateBytes);
  for (const [id, text] of Object.entries(kv)) $(id).textContent = text;
  if (kv['metric-kv-tokens'] !== '' && Number(kv['metric-kv-tokens']) === 0) {
    $('metric-kv-bytes').textContent = '0';
    $('metric-kv-mb').textContent = '';
  }
  const match = $('metric-kv-match');
  if (kv['metric-kv-match']) match.dataset.match = kv['metric-kv-match'];
  else delete match.dataset.match;
}

/** Fills the KV format picker from the wasm's list with the run's format selected. */
function renderKvFormats() {
  const opts = state.kvFormats.length ? state.kvFormats.map((f) => [f, P.KV_FORMAT_LABELS[f] ?? f]) : [['', 'starting…']];
  el.kvFormat.replaceChildren(
    ...opts.map(([value, text]) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      return o;
    }),
  );
  el.kvFormat.value = state.kvFormat ?? '';
}

// ---- pruning -----------------------------------------------------------------------------------
const pruneSliders = [
  [el.pruneMlp, 'prune-mlp-out'],
  [el.pruneHeads, 'prune-heads-out'],
  [el.pruneQk, 'prune-qk-out'],
  [el.pruneV, 'prune-v-out'],
];
for (const [input, out] of pruneSliders) {
  const show = () => {
    $(out).textContent = `${Math.round(Number(input.value) * 100)}%`;
  };
  input.addEventListener('input', show);
  input.addEventListener('change', show);
  show();
}

function resetPruneState() {
  state.pruned = false;
  state.basePerplexity = null;
  el.pruneSummary.textContent = '';
  el.pruneNote.textContent = '';
  $('metric-perplexity').textContent = '';
  endPruneProgress('');
  qualityChart.reset();
}

/** The running model's parameters, and the layer knob's range. */
function renderPruneModel(info) {
  $('metric-params').textContent = info ? String(info.params) : '';
  $('metric-params-human').textContent = info ? `(${P.formatParams(info.params)})` : '';
  if (info && !state.pruned) {
    el.pruneLayers.max = String(Math.max(0, info.n_layers - 1));
  }
}

/** A pruned model (or the one as loaded again) runs: the page shows it like a fresh load. */
function modelSwapped(info, metrics, pruned) {
  state.pruned = pruned;
  state.modelInfo = info;
  renderInfo(info);
  renderKernels(info);
  resetMetrics();
  renderMetrics(metrics);
  newConversation();
  el.output.textContent = '';
  el.finish.textContent = '';
  delete el.finish.dataset.reason;
  renderPruneModel(info);
  const base = state.modelName || P.displayName(null, info);
  const shown = { ...info, name: pruned ? `${base}, pruned to ${P.formatParams(info.params)}` : base };
  panel.modelLoaded(shown);
  fitPanel.modelLoaded(shown);
}

function pruneSummary(r) {
  const x = r.removed ?? {};
  const parts = [];
  if (x.layers) parts.push(`${x.layers} layers`);
  if (x.kv_heads) parts.push(`${x.kv_heads} KV heads`);
  if (x.query_heads) parts.push(`${x.query_heads} query heads`);
  if (x.qk_dims) parts.push(`${x.qk_dims} Q/K dims`);
  if (x.v_dims) parts.push(`${x.v_dims} V dims`);
  if (x.mlp_channels) parts.push(`${x.mlp_channels} MLP channels`);
  return parts.length ? parts.join(', ') : 'nothing';
}

function showPruneProgress(msg) {
  const now = performance.now();
  if (!state.pruneStage || state.pruneStage.stage !== msg.stage) state.pruneStage = { stage: msg.stage, startedMs: now };
  const known = Number.isFinite(msg.total) && msg.total > 0;
  if (known) {
    el.pruneProgress.max = msg.total;
    el.pruneProgress.value = Math.min(msg.done ?? 0, msg.total);
  } else {
    el.pruneProgress.removeAttribute('value'); // indeterminate
  }
  el.pruneProgressText.textContent = P.formatPruneProgress(msg.stage, msg.done, msg.total, now - state.pruneStage.startedMs);
  setStatus(`${msg.stage}…`);
}

function endPruneProgress(text) {
  state.pruneStage = null;
  el.pruneProgress.max = 1;
  el.pruneProgress.value = text ? 1 : 0;
  el.pruneProgressText.textContent = text;
}

function pruneDone(text) {
  endPruneProgress(text);
  state.phase = 'ready';
  setStatus('ready');
  render();
}

/** Starts a pruning-panel job in the worker. */
function startPruneJob(msg, label) {
  clearError();
  state.phase = 'pruning';
  state.pruneStage = null;
  el.pruneProgress.removeAttribute('value');
  el.pruneProgressText.textContent = `${label}…`;
  setStatus(`${label}…`);
  render();
  send(msg);
}

/**
 * Asks the site once whether it serves the calibration and evaluation texts (small GETs: the
 * browser cache then serves the worker's fetch),
 * when the panel is first opened: activation importance is the default only with the calibration
 * text, and perplexity needs the evaluation text.
 */
async function probeTexts() {
  if (state.texts.calibration !== null) return;
  state.texts.calibration = 'asking';
  const ask = async (u) => {
    try {
      const r = await fetch(new URL(u, document.baseURI));
      if (!r.ok) return false;
      return (await r.text()).length > 0;
    } catch {
      return false;
    }
  };
  const [cal, ev] = await Promise.all([ask(P.CALIBRATION_URL), ask(P.EVAL_URL)]);
  state.texts = { calibration: cal, eval: ev };
  const act = el.pruneMethod.querySelector('option[value="activation"]');
  act.disabled = !cal;
  act.textContent = cal ? 'activation (calibration text)' : 'activation (no calibration text served)';
  // Without the text, magnitude; with it, the choice stands (activation unless a link set another).
  if (!cal) el.pruneMethod.value = 'magnitude';
  el.prunePanel.dataset.texts = `${cal ? 'calibration' : 'no-calibration'} ${ev ? 'eval' : 'no-eval'}`;
  if (!ev) el.perplexityRun.title = `The site does not serve ${P.EVAL_URL}: perplexity is not available`;
  render();
  measureBaseline();
}

/** The perplexity of the model as loaded, once per load, when the panel is open. */
function measureBaseline() {
  if (!el.prunePanel.open || state.texts.eval !== true || !state.modelLoaded || state.pruned) return;
  if (state.basePerplexity !== null || isBusy()) return;
  startPruneJob(P.perplexity(new URL(P.EVAL_URL, document.baseURI).href, P.EVAL_TOKENS), 'measuring perplexity');
}

el.prunePanel.addEventListener('toggle', () => {
  if (!el.prunePanel.open) return;
  if (state.texts.calibration === null) probeTexts();
  else measureBaseline();
});

/** The pruning panel's inputs as strings (what parsePruneForm and share links take). */
function pruneFormValues() {
  return {
    mlp: el.pruneMlp.value,
    heads: el.pruneHeads.value,
    qk: el.pruneQk.value,
    v: el.pruneV.value,
    layers: el.pruneLayers.value,
    method: el.pruneMethod.value,
    allocation: el.pruneAllocation.value,
  };
}

el.pruneApply.addEventListener('click', () => {
  if (el.pruneApply.disabled) return;
  const { plan, error } = P.parsePruneForm(
    pruneFormValues(),
    state.modelInfo?.n_layers ?? null,
  );
  if (error) {
    showError(error);
    return;
  }
  const calibration = plan.importance === 'activation'
    ? { url: new URL(P.CALIBRATION_URL, document.baseURI).href, ...P.CALIBRATION }
    : undefined;
  startPruneJob(P.prune(plan, calibration), plan.importance === 'activation' ? 'calibrating' : 'pruning');
});

el.pruneReset.addEventListener('click', () => {
  if (el.pruneReset.disabled) return;
  startPruneJob(P.restore(), 'restoring the loaded model');
});

el.perplexityRun.addEventListener('click', () => {
  if (el.perplexityRun.disabled) return;
  startPruneJob(P.perplexity(new URL(P.EVAL_URL, document.baseURI).href, P.EVAL_TOKENS), 'measuring perplexity');
});

el.pruneDownload.addEventListener('click', () => {
  if (el.pruneDownload.disabled) return;
  startPruneJob(P.exportGguf('q8_0'), 'writing the GGUF file');
});

// ---- quality vs size chart (uPlot scatter: perplexity over parameters) -------------------------
const qualityChart = (() => {
  let plot = null;
  let points = []; // {params, ppl, pruned}

  function width() {
    return Math.max(240, Math.floor(el.pruneChart.clientWidth));
  }

  function data() {
    const sorted = [...points].sort((a, b) => a.params - b.params);
    const xs = sorted.map((p) => p.params / 1e6);
    return [xs, sorted.map((p) => (p.pruned ? p.ppl : null)), sorted.map((p) => (p.pruned ? null : p.ppl))];
  }

  function draw() {
    if (typeof window.uPlot !== 'function') {
      const empty = el.pruneChart.querySelector('.chart-empty');
      if (empty) empty.textContent = `chart library not loaded; ${points.length} models measured`;
      return;
    }
    if (!plot) {
      el.pruneChart.replaceChildren();
      const dots = (color) => ({ stroke: color, fill: color, paths: () => null, points: { show: true, size: 9, stroke: color, fill: color } });
      plot = new window.uPlot(
        {
          width: width(),
          height: 200,
          legend: { show: true },
          cursor: { drag: { x: false, y: false } },
          scales: { x: { time: false } },
          axes: [
            { label: 'parameters (M)', stroke: '#555', grid: { stroke: '#eee' } },
            { label: 'perplexity', stroke: '#555', grid: { stroke: '#eee' }, size: 56 },
          ],
          series: [
            { label: 'params (M)', value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
            { label: 'pruned', ...dots('#c0504d'), value: (_u, v) => (v == null ? '–' : v.toFixed(2)) },
            { label: 'as loaded', ...dots('#2f6fb5'), value: (_u, v) => (v == null ? '–' : v.toFixed(2)) },
          ],
        },
        data(),
        el.pruneChart,
      );
      new ResizeObserver(() => plot && plot.setSize({ width: width(), height: 200 })).observe(el.pruneChart);
    } else plot.setData(data());
  }

  return {
    reset() {
      points = [];
      if (plot) plot.setData(data());
    },
    add(params, ppl, pruned) {
      points.push({ params, ppl, pruned });
      draw();
    },
  };
})();

// ---- conversation ----------------------------------------------------------------------------
/** Forgets the transcript; the next generation starts with keep = false. */
function newConversation() {
  C.reset(conv);
  renderTranscript();
}

function turnNode(t) {
  const li = document.createElement('li');
  li.className = `turn turn-${t.role}`;
  li.dataset.role = t.role;
  li.dataset.state = t.state;
  li.setAttribute('data-testid', `turn-${t.role}`);
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = t.role === 'user' ? 'you' : t.role === 'note' ? 'note' : 'model';
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = t.text; // text, never HTML
  li.append(who, body);
  return li;
}

function renderTranscript() {
  el.transcript.replaceChildren(...conv.turns.map(turnNode));
  el.transcriptEmpty.hidden = conv.turns.length > 0;
  el.transcript.scrollTop = el.transcript.scrollHeight;
}

/** Adds a streamed piece to the answer being generated (no full re-render per token). */
function appendAnswer(text) {
  const t = C.appendAnswer(conv, text);
  const last = el.transcript.lastElementChild;
  if (!t || !last || last.dataset.role !== 'model') return;
  last.querySelector('.text').textContent = t.text;
  el.transcript.scrollTop = el.transcript.scrollHeight;
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
    ['Name', state.modelName || P.displayName(null, info)],
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

// ---- chart (uPlot, per-token decode latency) -------------------------------------------------
const chart = (() => {
  let plot = null;
  let xs = [];
  let ys = [];
  let pending = false;

  function width() {
    return Math.max(240, Math.floor(el.chart.clientWidth));
  }

  function create() {
    if (plot || typeof window.uPlot !== 'function') return plot;
    el.chart.replaceChildren();
    plot = new window.uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.15)] } },
        axes: [
          { label: 'token', stroke: '#555', grid: { stroke: '#eee' } },
          { label: 'ms', stroke: '#555', grid: { stroke: '#eee' }, size: 50 },
        ],
        series: [
          { label: 'token' },
          { label: 'decode ms', stroke: '#2f6fb5', width: 1.5, fill: 'rgba(47,111,181,0.08)', points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
        ],
      },
      [[], []],
      el.chart,
    );
    new ResizeObserver(() => plot && plot.setSize({ width: width(), height: 220 })).observe(el.chart);
    return plot;
  }

  function draw() {
    pending = false;
    const p = create();
    if (p) p.setData([xs, ys]);
    else if (typeof window.uPlot !== 'function') {
      el.chart.querySelector('.chart-empty').textContent = `chart library not loaded; ${ys.length} tokens measured`;
    }
  }

  return {
    reset() {
      xs = [];
      ys = [];
      if (plot) plot.setData([xs, ys]);
    },
    push(values) {
      for (const v of values) {
        xs.push(xs.length + 1);
        ys.push(v);
      }
      if (!pending) {
        pending = true;
        requestAnimationFrame(draw);
      }
    },
    flush() {
      if (xs.length) draw();
    },
  };
})();

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
  const msg = loadMessage(source, state.weights);
  state.pendingSource = source;
  clearError();
  state.phase = 'loading';
  el.progress.value = 0;
  el.progress.max = 1;
  el.progressText.textContent = `starting ${label}…`;
  state.loadStartedMs = performance.now();
  setStatus('loading…');
  render();
  send(msg);
}

el.loadDefault.addEventListener('click', () => {
  if (isBusy() || isInactive(el.loadDefault)) return; // inactive while busy: a click is dropped
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
  state.defaultModel = ok;
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
  if (isBusy()) {
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
el.weightsFormat.value = state.weights;

// A new format applies to the next load; with a model loaded, the same source is read again
// (the browser's cache serves a URL; a File is re-read) and built in the new format.
el.weightsFormat.addEventListener('change', () => {
  if (isBusy()) {
    // The picker is disabled while busy; a change that slips through is refused, not queued.
    el.weightsFormat.value = state.weights;
    return;
  }
  state.weights = el.weightsFormat.value;
  if (state.modelLoaded && state.source) startLoad(state.source, `reload in ${state.weights}`);
});

el.kernelPicker.addEventListener('change', () => {
  const name = el.kernelPicker.value;
  if (isBusy() || !state.modelLoaded || !name || name === state.modelInfo?.kernel) {
    renderKernels(state.modelInfo);
    return;
  }
  clearError();
  state.phase = 'switching';
  setStatus('switching kernel…');
  render();
  send(P.setKernel(name));
});

el.kvFormat.addEventListener('change', () => {
  const name = el.kvFormat.value;
  if (isBusy() || !state.kvFormats.includes(name) || name === state.kvFormat) {
    // Disabled while busy; a change that slips through is refused, not queued.
    renderKvFormats();
    return;
  }
  clearError();
  state.phase = 'switching';
  setStatus('switching KV format…');
  render();
  send(P.setKvFormat(name));
});

// "Continue conversation" is on by default with the chat template (and off without it).
// The skip link focuses the prompt without touching location.hash (which carries share links).
$('skip-link')?.addEventListener('click', (ev) => {
  ev.preventDefault();
  el.prompt.focus();
  el.prompt.scrollIntoView({ block: 'center' });
});

// Ctrl+Enter (Cmd+Enter on a Mac) in the prompt generates, as the button does.
el.prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey) && !ev.isComposing) {
    ev.preventDefault();
    el.form.requestSubmit();
  }
});

el.chat.addEventListener('change', () => {
  el.keepContext.checked = el.chat.checked;
});

el.newConversation.addEventListener('click', () => {
  if (isBusy()) return;
  newConversation();
  el.output.textContent = '';
  el.finish.textContent = '';
  delete el.finish.dataset.reason;
  $('metric-reused-tokens').textContent = '';
});

el.form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (isInactive(el.generate)) return;
  const { params, error } = P.parseGenerateForm({
    prompt: el.prompt.value,
    chat: el.chat.checked,
    maxTokens: el.maxTokens.value,
    temperature: el.temperature.value,
    topP: el.topP.value,
    seed: el.seed.value,
    keep: C.keepFor(conv, el.keepContext.checked),
  });
  if (error) {
    showError(error);
    return;
  }
  clearError();
  C.beginTurn(conv, params.prompt, params.keep, params.chat);
  renderTranscript();
  el.output.textContent = '';
  el.finish.textContent = '';
  delete el.finish.dataset.reason;
  chart.reset();
  for (const id of ['metric-ttft-ms', 'metric-prefill-tps', 'metric-decode-tps', 'metric-prompt-tokens', 'metric-generated-tokens', 'metric-kv-bytes', 'metric-kv-mb', 'metric-weights-format', 'metric-kernel', 'metric-kv-estimate-bytes', 'metric-kv-match', 'metric-reused-tokens']) {
    $(id).textContent = '';
  }
  delete $('metric-kv-match').dataset.match;
  state.phase = 'generating';
  state.generateStartedMs = performance.now();
  setStatus('generating…');
  render();
  send(P.generate(params));
});

el.stop.addEventListener('click', () => {
  if (state.phase !== 'generating') return;
  state.phase = 'stopping';
  render();
  send(P.stop());
});

// ---- shareable links (share.js) ----------------------------------------------------------------
// A link's scenario waits in `pending` until the worker's catalog has filled the pickers, then is
// applied all or nothing. `keepEstimateKv`: the link set the engine's KV format, whose answer must
// not move the estimator's KV knob (which the link set too).
const share = { pending: null, keepEstimateKv: false };

/** The name of the file the loaded model came from (the URL's last segment for a download). */
function sourceName(source) {
  if (!source) return 'model';
  if (source.kind === 'file') return source.file?.name || 'model';
  try {
    return decodeURIComponent(new URL(source.url).pathname.split('/').pop()) || 'model';
  } catch {
    return 'model';
  }
}

/** The page's whole scenario, as share.js encodes it (raw input strings: it checks them). */
function currentScenario() {
  const estimate = panel.getScenario();
  const s = {
    estimate,
    engine: { weights: state.weights, kv: state.kvFormat ?? undefined, threads: threads.build === 'threads' ? String(threads.running) : undefined },
    generation: {
      prompt: el.prompt.value,
      chat: el.chat.checked,
      keep: el.keepContext.checked,
      maxTokens: el.maxTokens.value,
      temperature: el.temperature.value,
      topP: el.topP.value,
      seed: el.seed.value,
    },
    pruning: pruneFormValues(),
  };
  if (state.modelLoaded && state.modelInfo) s.loaded = S.loadedSection(sourceName(state.source), state.modelInfo);
  if (estimate.model === V.CONFIG_MODEL) {
    s.config = { name: $('preset-picker').selectedOptions[0]?.dataset.file || 'config.json' };
  }
  return s;
}

function showShareError(message) {
  el.shareError.textContent = message;
  el.shareError.hidden = false;
}

function clearShareError() {
  el.shareError.hidden = true;
  el.shareError.textContent = '';
}

el.shareLink.addEventListener('click', async () => {
  clearShareError();
  let fragment;
  try {
    fragment = S.encodeScenario(currentScenario());
  } catch (e) {
    showShareError(`No link made: ${P.errorMessage(e)}.`);
    return;
  }
  const url = new URL(location.href);
  url.hash = fragment;
  history.replaceState(history.state, '', url.href); // no reload, no hashchange
  el.shareUrl.value = url.href;
  el.shareStatus.textContent = '';
  try {
    await navigator.clipboard.writeText(url.href);
    el.shareStatus.textContent = 'copied';
  } catch {
    el.shareStatus.textContent = 'select the link and copy it';
  }
  // A local file's name is the user's: say that the link carries it (never its bytes).
  if (state.modelLoaded && state.source?.kind === 'file') {
    el.shareStatus.textContent += ` · the link names your file “${sourceName(state.source)}” and its shape (no model data)`;
  }
  el.shareUrl.select();
});

/**
 * Reads location.hash: a link waits for the catalog, then its good fields are applied and every
 * bad one is listed; a link that cannot be read at all is reported and the settings kept.
 */
function readLink() {
  if (!S.hasScenario(location.hash)) return;
  const { scenario, errors, error } = S.decodeScenarioParts(location.hash);
  if (error) {
    share.pending = null;
    showShareError(`This link cannot be opened: ${error}. The page keeps its settings.`);
    return;
  }
  share.pending = { scenario, errors };
  applyPendingLink();
}

function applyPendingLink() {
  if (!share.pending || state.kvFormats.length === 0) return; // the catalog is not there yet
  const { scenario, errors } = share.pending;
  share.pending = null;
  const { fatal, skipped } = applyLink(scenario);
  const all = [...errors, ...skipped];
  if (fatal) showShareError(`This link cannot be opened: ${fatal}. The page keeps its settings.`);
  else if (all.length) showShareError(`Part of this link was not applied (the rest was): ${all.join('; ')}.`);
  else clearShareError();
}

/**
 * Applies a decoded scenario: the fields the page cannot use are left out and listed, the rest
 * applied. Returns {fatal} (nothing applied) or {skipped: [sentences]}.
 */
function applyLink(s) {
  if (isBusy()) return { fatal: 'the engine is busy; open the link again when it is done', skipped: [] };
  const skipped = [];
  const engine = { ...(s.engine ?? {}) };
  if (engine.kv !== undefined && !state.kvFormats.includes(engine.kv)) {
    skipped.push(`the link's engine KV format ${JSON.stringify(engine.kv)} is not one this build has`);
    delete engine.kv;
  }
  const panelError = panel.applyScenario(s.estimate ?? {});
  if (panelError) skipped.push(panelError);

  const g = s.generation ?? {};
  if (g.prompt !== undefined) el.prompt.value = g.prompt; // a value: text, never markup
  if (g.chat !== undefined) el.chat.checked = g.chat;
  if (g.keep !== undefined) el.keepContext.checked = g.keep;
  for (const [k, input] of [['maxTokens', el.maxTokens], ['temperature', el.temperature], ['topP', el.topP], ['seed', el.seed]]) {
    if (g[k] !== undefined) input.value = String(g[k]);
  }

  // The pruning panel's inputs only: pruning needs a model and runs when the user presses Prune.
  const pr = s.pruning ?? {};
  for (const [k, input] of [['mlp', el.pruneMlp], ['heads', el.pruneHeads], ['qk', el.pruneQk], ['v', el.pruneV]]) {
    if (pr[k] === undefined) continue;
    input.value = String(pr[k]);
    input.dispatchEvent(new Event('input')); // its percentage label
  }
  if (pr.layers !== undefined) el.pruneLayers.value = String(pr.layers);
  if (pr.method !== undefined) el.pruneMethod.value = pr.method;
  if (pr.allocation !== undefined) el.pruneAllocation.value = pr.allocation;

  const notes = [];
  if (engine.weights !== undefined && engine.weights !== state.weights) {
    if (state.modelLoaded) {
      notes.push(`The link's engine weights are ${engine.weights}; the loaded model keeps ${state.weights} (pick ${engine.weights} under Weights to reload it).`);
    } else {
      state.weights = engine.weights;
      el.weightsFormat.value = engine.weights;
    }
  }
  let switching = false;
  if (engine.kv !== undefined && engine.kv !== state.kvFormat) {
    share.keepEstimateKv = true;
    el.kvFormat.value = engine.kv;
    el.kvFormat.dispatchEvent(new Event('change')); // as if picked: the engine switches
    switching = true;
  }
  if (engine.threads !== undefined) {
    const e = P.checkThreads(engine.threads, threads.cores);
    if (e) {
      notes.push(`The link's engine thread count is refused (${e}); the page runs ${threads.running}.`);
    } else if (threads.build !== 'threads') {
      if (engine.threads !== 1) notes.push(`The link asks for ${engine.threads} engine threads; this page runs one (the threaded build needs a cross-origin isolated page).`);
    } else if (engine.threads !== threads.running) {
      threads.wanted = engine.threads;
      if (switching) {
        notes.push(`The link asks for ${engine.threads} engine threads: pick ${engine.threads} under Threads once the KV cache has switched.`);
      } else {
        el.threadPicker.value = String(engine.threads);
        el.threadPicker.dispatchEvent(new Event('change')); // as if picked
      }
    }
  }
  if (s.loaded) {
    notes.push(`The link was made with ${S.describeLoaded(s.loaded)} loaded. Links carry no model data: ` +
      'load that file by hand (Model, above) to run it here' +
      (s.estimate?.model === V.LOADED_MODEL ? ', then pick “the loaded model” for the estimate.' : '.'));
  }
  if (s.config) {
    notes.push(`The link's estimate used a config.json (${s.config.name}); drop it by hand on “or drop a config.json” to estimate that model.`);
  }
  el.shareNote.textContent = notes.join(' ');
  el.shareNote.hidden = notes.length === 0;
  // The default model needs no file: offer to load it from here.
  const defaultName = DEFAULT_MODEL_URL.split('/').pop();
  if (s.loaded?.name === defaultName && state.defaultModel !== false && !state.modelLoaded) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = 'Load default model';
    b.setAttribute('data-testid', 'share-load-default');
    b.addEventListener('click', () => {
      b.remove();
      el.loadDefault.click();
    });
    el.shareNote.append(' ', b);
  }
  render();
  return { fatal: null, skipped };
}

window.addEventListener('hashchange', readLink);
readLink();

// Start the worker now so the wasm compiles while the user reads the page.
el.keepContext.checked = el.chat.checked;
renderTranscript();
ensureWorker();
render();
