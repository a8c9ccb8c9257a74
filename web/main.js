// edgefit page: DOM only. The wasm engine lives in worker.js; this file sends it commands and
// renders what it reports. Message shapes and formatting live in protocol.js.

import * as P from './protocol.js';
import { createEstimatePanel } from './estimate-panel.js';
import * as C from './conversation.js';
import * as V from './estimate-view.js';

const DEFAULT_MODEL_URL = 'models/smollm2-135m-instruct-q4_1.gguf';

const $ = (id) => document.getElementById(id);
const el = {
  status: $('status'),
  errorBox: $('error-box'),
  errorText: $('error-text'),
  loadDefault: $('load-default'),
  modelFile: $('model-file'),
  weightsFormat: $('weights-format'),
  kernelPicker: $('kernel-picker'),
  kvFormat: $('kv-format'),
  keepContext: $('keep-context'),
  newConversation: $('new-conversation'),
  transcript: $('transcript'),
  transcriptEmpty: $('transcript-empty'),
  progress: $('load-progress'),
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
};

// ---- state -----------------------------------------------------------------------------------
// phase: 'idle' (no model) | 'loading' | 'ready' | 'generating' | 'stopping' | 'switching'
// (kernel or KV format)
// source: what the last load read ({kind: 'url', url} | {kind: 'file', file}), so a change of
// weight format can read it again; weights: the format the picker asks for. kvFormats: the
// wasm's KV formats (from catalog); kvFormat: the one the real run uses (or will, once loaded).
const state = {
  phase: 'idle',
  modelLoaded: false,
  modelInfo: null,
  source: null,
  weights: P.DEFAULT_WEIGHTS,
  kvFormats: [],
  kvFormat: null,
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

const isBusy = () => ['loading', 'generating', 'stopping', 'switching'].includes(state.phase);

function render() {
  const busy = isBusy();
  el.loadDefault.disabled = busy;
  el.modelFile.disabled = busy;
  el.weightsFormat.disabled = busy;
  el.kernelPicker.disabled = busy || !state.modelLoaded;
  el.kvFormat.disabled = busy || state.kvFormats.length === 0;
  el.newConversation.disabled = busy;
  el.generate.disabled = busy || !state.modelLoaded;
  el.stop.disabled = state.phase !== 'generating';
  const hasTemplate = Boolean(state.modelInfo?.chat_template);
  el.chat.disabled = busy || (state.modelInfo !== null && !hasTemplate);
  if (state.modelInfo !== null && !hasTemplate) el.chat.checked = false;
  el.chat.parentElement.title = state.modelInfo !== null && !hasTemplate
    ? 'This model has no chat template'
    : "Wrap the prompt in the model's instruct (chat) template";
  document.body.dataset.phase = state.phase;
}

// ---- worker ----------------------------------------------------------------------------------
function spawnWorker() {
  const w = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'edgefit-engine' });
  w.onmessage = (ev) => onWorkerMessage(w, ev.data);
  w.onerror = (ev) => {
    ev.preventDefault();
    onFatal(w, `the engine worker failed: ${ev.message || 'could not start worker.js'}`);
  };
  w.onmessageerror = () => onFatal(w, 'the engine worker sent a message that could not be read');
  return w;
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
  state.modelLoaded = false;
  state.modelInfo = null;
  state.kvFormats = [];
  state.kvFormat = null;
  renderInfo(null);
  renderKernels(null);
  renderKvFormats();
  newConversation();
  panel.workerRestarted();
  panel.modelUnloaded();
  showError(hadBooted ? `${message}; the engine was restarted, load the model again` : message);
  render();
}

function send(msg) {
  ensureWorker().postMessage(msg);
}

const panel = createEstimatePanel({ send });

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
      el.version.textContent = `edgefit-wasm ${msg.version}`;
      break;
    case P.FromWorker.PROGRESS: {
      const max = msg.total ?? Math.max(msg.loaded, 1);
      el.progress.max = max;
      el.progress.value = Math.min(msg.loaded, max);
      el.progressText.textContent = P.formatProgress(msg.loaded, msg.total);
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
      state.modelInfo = msg.info;
      state.weights = msg.info.weights.weights;
      el.weightsFormat.value = state.weights;
      el.progressText.textContent = `${P.formatProgress(Number(el.progress.value), Number(el.progress.max))} · ${msg.info.name || 'model'} loaded (${state.weights})`;
      if (typeof msg.metrics.kv_format === 'string') state.kvFormat = msg.metrics.kv_format;
      renderKvFormats();
      renderInfo(msg.info);
      renderKernels(msg.info);
      resetMetrics();
      renderMetrics(msg.metrics);
      newConversation(); // a new engine holds no conversation
      setStatus('ready');
      render();
      panel.modelLoaded(msg.info);
      break;
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
      // The estimate's KV knob follows the real run's format, so both sides compare the same.
      panel.followKvFormat(msg.format);
      break;
    case P.FromWorker.STARTED:
      break;
    case P.FromWorker.PIECE:
      el.output.textContent += msg.text;
      appendAnswer(msg.text);
      if (msg.tokenMs.length) chart.push(msg.tokenMs);
      renderMetrics(msg.metrics, msg.kvEstimateBytes);
      break;
    case P.FromWorker.DONE:
      state.phase = 'ready';
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
      panel.generationDone(msg.metrics, msg.kvEstimateBytes);
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
      break;
    case P.FromWorker.MEASURING:
      panel.onMeasuring();
      break;
    case P.FromWorker.ESTIMATE_RESULT:
      panel.onResult(msg);
      break;
    case P.FromWorker.ESTIMATE_ERROR:
      panel.onError(msg);
      break;
    case P.FromWorker.ERROR:
      if (msg.fatal) {
        onFatal(w, msg.message);
        return;
      }
      {
        const wasGenerating = state.phase === 'generating' || state.phase === 'stopping';
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
  $('metric-weights-format').textContent = P.formatWeightsUsed(m);
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
  who.textContent = t.role === 'user' ? 'you' : 'model';
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
    const d = document.createElement('div');
    d.className = 'muted';
    d.textContent = 'No model loaded.';
    el.modelInfo.append(d);
    return;
  }
  const rows = [
    ['Name', info.name || '(unnamed)'],
    ['Architecture', info.arch],
    ['Parameters', `${P.formatParams(info.params)} (${info.params.toLocaleString('en-US')})`],
    ['Weights in memory', `${P.formatMB(info.weights_bytes)} (${P.formatWeightsUsed(info.weights)})`],
    ['Stored as', P.formatStored(info.weights.stored)],
    ['Kernel', `${info.kernel} (this build runs: ${info.kernels.join(', ')})`],
    ['Layers', info.n_layers],
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

function startLoad(source, label) {
  const msg = loadMessage(source, state.weights);
  state.source = source;
  clearError();
  panel.modelUnloaded();
  state.phase = 'loading';
  state.modelLoaded = false;
  state.modelInfo = null;
  renderInfo(null);
  renderKernels(null);
  resetMetrics();
  el.progress.value = 0;
  el.progress.max = 1;
  el.progressText.textContent = `starting ${label}…`;
  setStatus('loading…');
  render();
  send(msg);
}

el.loadDefault.addEventListener('click', () => {
  startLoad({ kind: 'url', url: new URL(DEFAULT_MODEL_URL, document.baseURI).href }, 'download');
});

el.modelFile.addEventListener('change', () => {
  const file = el.modelFile.files?.[0];
  if (!file) return;
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
  if (el.generate.disabled) return;
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
  C.beginTurn(conv, params.prompt, params.keep);
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

// Start the worker now so the wasm compiles while the user reads the page.
el.keepContext.checked = el.chat.checked;
renderTranscript();
ensureWorker();
render();
