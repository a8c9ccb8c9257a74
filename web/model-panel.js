// The model controls: load the default model or a chosen file, the weight format (a change
// rebuilds the running model from the same source), the kernel and KV format pickers, the model
// info list, the load progress line, and the cached default model (its "forget" button). DOM
// only; what they show is model-view.js's, the phase machine (page-state.js) decides whether a
// request may go, the worker (engine-client.js) runs it. main.js routes the messages that touch
// several panels (loaded, refused, fatal).

import * as P from './protocol.js';
import * as MV from './model-view.js';
import { isInactive } from './run-panel.js';

const DEFAULT_MODEL_URL = `models/${P.DEFAULT_MODEL_FILE}`;
const DEFAULT_MODEL_MANIFEST_URL = 'models/default.json';
// The worker keeps the default model in the Cache API (worker.js MODEL_CACHE); "forget" deletes it.
const MODEL_CACHE = 'edgefit-models-v1';

/** Fills `select` with `options` ([value, label]) and selects `value`. */
function fillSelect(select, options, value) {
  select.replaceChildren(
    ...options.map(([v, text]) => {
      const o = document.createElement('option');
      o.value = v;
      o.textContent = text;
      return o;
    }),
  );
  select.value = value;
}

/**
 * `el`: the page's elements; `page`: {state, dispatch, isBusy, setStatus, showError, clearError,
 * render}; `model`: the page's model record (see main.js), which this panel reads and keeps;
 * `client`: the engine client. Returns what the wiring calls.
 */
export function createModelPanel({ el, page, model, client }) {
  // ---- pickers and info -------------------------------------------------------------------------
  /** The KV format picker from the wasm's list with the run's format selected. */
  function renderKvFormats() {
    fillSelect(el.kvFormat, MV.kvFormatOptions(model.kvFormats), model.kvFormat ?? '');
  }

  /** The kernel picker from info.kernels with info.kernel selected (a placeholder without a model). */
  function renderKernels(info) {
    fillSelect(el.kernelPicker, MV.kernelOptions(info), info ? info.kernel : '');
  }

  function renderInfo(info) {
    el.modelInfo.replaceChildren();
    // A <dl> holds only dt/dd groups (screen readers announce it as a list of terms).
    const rows = info ? MV.infoRows(info, model.name) : [['Model', 'No model loaded.']];
    for (const [k, v] of rows) {
      const div = document.createElement('div');
      const dt = document.createElement('dt');
      const dd = document.createElement('dd');
      dt.textContent = k;
      dd.textContent = v;
      if (!info) dd.className = 'muted';
      div.append(dt, dd);
      el.modelInfo.append(div);
    }
  }

  // ---- loading ----------------------------------------------------------------------------------
  /**
   * Starts a load. The running model (if any) stays loaded and shown until the new one is built:
   * the worker builds beside it and swaps only on success, so a file it refuses leaves it
   * running (main.js's LOADED handler replaces everything; `refused` goes back to it).
   */
  function startLoad(source, label) {
    const msg = source.kind === 'url' ? P.loadUrl(source.url, model.weights) : P.loadFile(source.file, model.weights);
    if (!page.dispatch('load')) return;
    model.pendingSource = source;
    page.clearError();
    el.progress.value = 0;
    el.progress.max = 1;
    el.progressText.textContent = `starting ${label}…`;
    model.loadStartedMs = performance.now();
    page.setStatus('loading…');
    page.render();
    client.send(msg);
  }

  /** A load finished: the source is the running model's, the picker and the line say what runs. */
  function loaded(info) {
    if (model.pendingSource) model.source = model.pendingSource;
    model.pendingSource = null;
    model.info = info;
    model.weights = info.weights.weights;
    el.weightsFormat.value = model.weights;
    model.name = P.displayName(model.source?.kind === 'file' ? model.source.file.name : model.source?.url, info);
    el.progressText.textContent = `${P.formatProgress(Number(el.progress.value), Number(el.progress.max))} · ${model.name} loaded (${P.describeWeights(model.weights, info.weights.stored, info.weights.embedding)})`;
    renderInfo(info);
    renderKernels(info);
  }

  /** A load was refused: the worker kept the running model (if any); the picker and the line say so. */
  function refused() {
    model.pendingSource = null;
    if (model.info) model.weights = model.info.weights.weights;
    el.weightsFormat.value = model.weights;
    el.progress.value = 0;
    el.progressText.textContent = MV.refusedLoadLine(page.state.modelLoaded, model.name, model.weights);
  }

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
  client.on(P.FromWorker.CACHED, (msg) => {
    el.forgetModel.hidden = !msg.present;
  });

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
    let manifest = null;
    try {
      const r = await fetch(new URL(DEFAULT_MODEL_MANIFEST_URL, document.baseURI));
      manifest = r.ok ? await r.json() : null;
    } catch {
      manifest = null;
    }
    const b = MV.defaultModelButton(manifest, DEFAULT_MODEL_URL);
    model.defaultModel = b.present;
    el.loadDefault.textContent = b.text;
    if (!b.present) {
      el.loadDefault.title = b.title;
      el.loadDefault.dataset.missing = 'true';
    }
    page.render();
  }

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
      page.showError(`could not remove the cached model: ${P.errorMessage(e)}`);
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

  fillSelect(el.weightsFormat, P.WEIGHT_FORMATS.map((f) => [f, P.WEIGHT_FORMAT_LABELS[f] ?? f]), model.weights);

  // A new format applies to the next load; with a model loaded, the same source is built again
  // in the new format (the worker keeps the file's bytes: nothing is read again).
  el.weightsFormat.addEventListener('change', () => {
    if (page.isBusy()) {
      // The picker is disabled while busy; a change that slips through is refused, not queued.
      el.weightsFormat.value = model.weights;
      return;
    }
    model.weights = el.weightsFormat.value;
    if (page.state.modelLoaded && model.source) startLoad(model.source, `reload in ${model.weights}`);
  });

  el.kernelPicker.addEventListener('change', () => {
    const name = el.kernelPicker.value;
    if (page.isBusy() || !page.state.modelLoaded || !name || name === model.info?.kernel || !page.dispatch('switch')) {
      renderKernels(model.info);
      return;
    }
    page.clearError();
    page.setStatus('switching kernel…');
    page.render();
    client.send(P.setKernel(name));
  });

  el.kvFormat.addEventListener('change', () => {
    const name = el.kvFormat.value;
    if (page.isBusy() || !model.kvFormats.includes(name) || name === model.kvFormat || !page.dispatch('switch')) {
      // Disabled while busy; a change that slips through is refused, not queued.
      renderKvFormats();
      return;
    }
    page.clearError();
    page.setStatus('switching KV format…');
    page.render();
    client.send(P.setKvFormat(name));
  });

  return { startLoad, loaded, refused, probeDefaultModel, renderInfo, renderKernels, renderKvFormats };
}
