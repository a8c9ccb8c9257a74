// The run panel: the generate form, the transcript of the conversation the engine holds, the
// streamed output, the live metrics and the per-token latency chart. DOM only; the page state
// (page-state.js) decides whether a generation may start, the worker (engine-client.js) runs it.

import * as P from './protocol.js';
import * as C from './conversation.js';
import * as R from './run-view.js';
import { createFieldError } from './field-error.js';

const $ = (id) => document.getElementById(id);

/**
 * `el`: the page's elements; `page`: {dispatch, isBusy, setStatus, showError, clearError,
 * render}; `model`: the page's model record (info: the running model's info, for the metrics'
 * weight names); `client`: the engine client; `estimator`: the estimate panel (told when a run
 * is done). Returns what the rest of the page calls.
 */
export function createRunPanel({ el, page, model, client, estimator }) {
  // The transcript of the conversation the engine holds (user turns and the model's answers).
  const conv = C.createConversation();
  let generateStartedMs = null; // performance.now() when the running generation was asked for

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

  /** Shows the answer being generated as the conversation holds it (no full re-render). */
  function showAnswer() {
    const t = C.current(conv);
    const last = el.transcript.lastElementChild;
    if (!t || !last || last.dataset.role !== 'model') return;
    last.querySelector('.text').textContent = t.text;
    el.transcript.scrollTop = el.transcript.scrollHeight;
  }

  // ---- streaming: what the pieces change, drawn at most every STREAM_RENDER_MS ------------------
  // The worker sends the first token at once and then a piece per 50 ms of decoding (45–150
  // tokens a second on the default model). Drawing the page after each token cost ~15 ms of the
  // main thread per frame in headless Chromium (layout, paint, commit: ~70 % of a core over a
  // generation), which on a 2-core machine took a core from the engine's own threads. So a piece
  // updates the conversation, the output text and the latency log at once, and the page draws
  // them (transcript, output, metrics, chart) on the first piece and then at most every
  // STREAM_RENDER_MS, and at once when the run ends. A frame still cost ~10 ms of the main thread
  // (a trace of a 300-token run on the threaded build at 2 threads: style, layout, the hit test
  // of the moved content under the pointer, paint, commit; and raster and compositing beside it),
  // so at 100 ms the page's drawing still took about a third of one of the machine's two cores
  // from the engine's two threads; at 250 ms (and 50 ms pieces) the same build decoded 78.5
  // against 70.4 tok/s at 2 threads (tests/bench/run-ab.mjs, 4 rounds each, medians).
  const STREAM_RENDER_MS = 250;
  const stream = { text: '', metrics: null, timer: null, lastMs: -Infinity };

  function flushStream() {
    if (stream.timer !== null) clearTimeout(stream.timer);
    stream.timer = null;
    stream.lastMs = performance.now();
    if (stream.text) {
      el.output.append(stream.text);
      stream.text = '';
      showAnswer();
    }
    if (stream.metrics) renderMetrics(...stream.metrics);
    stream.metrics = null;
    chart.flush();
  }

  function scheduleStream() {
    if (stream.timer !== null) return;
    const wait = stream.lastMs + STREAM_RENDER_MS - performance.now();
    if (wait <= 0) flushStream();
    else stream.timer = setTimeout(flushStream, wait);
  }

  /** Drops what was not drawn yet (a new run, a new model, a new conversation). */
  function dropStream() {
    if (stream.timer !== null) clearTimeout(stream.timer);
    stream.timer = null;
    stream.text = '';
    stream.metrics = null;
    stream.lastMs = -Infinity;
  }

  // ---- metrics -----------------------------------------------------------------------------------
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
    $('metric-weights-format').textContent = P.formatWeightsUsed({ ...m, stored: model.info?.weights?.stored, weights: model.info?.weights?.weights ?? m.weights, pruned: P.describeLayers(model.info?.layers) !== '' });
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

  // ---- chart (uPlot, per-token decode latency) -------------------------------------------------
  const chart = (() => {
    let plot = null;
    // The latencies as the pieces bring them (each only its new entries): run-view.js.
    let log = R.createTokenLog();

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
      const p = create();
      if (p) p.setData(R.latencySeries(log));
      else if (typeof window.uPlot !== 'function') {
        el.chart.querySelector('.chart-empty').textContent = `chart library not loaded; ${log.ms.length} tokens measured`;
      }
    }

    return {
      reset() {
        log = R.createTokenLog();
        if (plot) plot.setData(R.latencySeries(log));
      },
      /** Appends latencies; drawn by the next flush (the stream's). */
      push(values) {
        R.appendTokenMs(log, values);
      },
      flush() {
        if (log.ms.length) draw();
      },
    };
  })();


  /** Empties the output and the finish line (a new run, a new model, a new conversation). */
  function clearOutput() {
    dropStream();
    el.output.textContent = '';
    el.finish.textContent = '';
    delete el.finish.dataset.reason;
  }

  // ---- the worker's answers ---------------------------------------------------------------------
  client.on(P.FromWorker.PREFILLING, (msg) => {
    // A long prompt, fed in chunks: a bar and the time left (not once Stop was pressed).
    el.prefillProgress.max = msg.total;
    el.prefillProgress.value = msg.done;
    el.prefillProgress.hidden = false;
    if (page.state.phase === 'generating') page.setStatus(P.prefillStatus(msg.done, msg.total, performance.now() - generateStartedMs));
  });
  client.on(P.FromWorker.PIECE, (msg) => {
    if (!el.prefillProgress.hidden) {
      el.prefillProgress.hidden = true;
      if (page.state.phase === 'generating') page.setStatus('generating…');
    }
    C.appendAnswer(conv, msg.text);
    stream.text += msg.text;
    if (msg.tokenMs.length) chart.push(msg.tokenMs);
    stream.metrics = [msg.metrics, msg.kvEstimateBytes];
    scheduleStream();
  });
  client.on(P.FromWorker.DONE, (msg) => {
    flushStream();
    page.dispatch('done');
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
    page.setStatus('done');
    page.render();
    estimator.generationDone(msg.metrics);
  });

  // ---- the controls ------------------------------------------------------------------------------
  // A bad knob is named beside Generate, the input marked and focused (not in the page's error box).
  const formError = createFieldError($('gen-error'), {
    prompt: el.prompt, maxTokens: el.maxTokens, temperature: el.temperature, topP: el.topP, seed: el.seed,
  });

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

  // "Continue conversation" is on by default with the chat template (and off without it).
  el.chat.addEventListener('change', () => {
    el.keepContext.checked = el.chat.checked;
  });

  el.newConversation.addEventListener('click', () => {
    if (page.isBusy()) return;
    newConversation();
    clearOutput();
    $('metric-reused-tokens').textContent = '';
  });

  el.form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (isInactive(el.generate)) return;
    const { params, error, field } = P.parseGenerateForm({
      prompt: el.prompt.value,
      chat: el.chat.checked,
      maxTokens: el.maxTokens.value,
      temperature: el.temperature.value,
      topP: el.topP.value,
      seed: el.seed.value,
      keep: C.keepFor(conv, el.keepContext.checked),
    });
    if (error) {
      formError.show(error, field);
      return;
    }
    formError.clear();
    if (!page.dispatch('generate')) return; // the engine is busy (or has no model)
    page.clearError();
    C.beginTurn(conv, params.prompt, params.keep, params.chat);
    renderTranscript();
    clearOutput();
    chart.reset();
    for (const id of ['metric-ttft-ms', 'metric-prefill-tps', 'metric-decode-tps', 'metric-prompt-tokens', 'metric-generated-tokens', 'metric-kv-bytes', 'metric-kv-mb', 'metric-weights-format', 'metric-kernel', 'metric-kv-estimate-bytes', 'metric-kv-match', 'metric-reused-tokens']) {
      $(id).textContent = '';
    }
    delete $('metric-kv-match').dataset.match;
    generateStartedMs = performance.now();
    page.setStatus('generating…');
    page.render();
    client.send(P.generate(params));
  });

  el.stop.addEventListener('click', () => {
    if (!page.dispatch('stop')) return;
    page.render();
    client.send(P.stop());
  });

  el.keepContext.checked = el.chat.checked;
  renderTranscript();

  return {
    newConversation,
    clearOutput,
    /** Draws the pieces not drawn yet (the worker died: show what it sent before). */
    flushStream,
    resetMetrics,
    renderMetrics,
    /** A generation failed (not a crash): its turn shows the error. */
    failTurn(message) {
      flushStream();
      C.failTurn(conv, message);
      renderTranscript();
    },
  };
}

/** A button that is busy (aria-disabled, still focusable) or disabled: clicks are dropped. */
export const isInactive = (button) => button.disabled || button.getAttribute('aria-disabled') === 'true';
