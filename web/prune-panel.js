// The pruning panel: the plan's knobs, calibration and evaluation texts, the prune / reset /
// perplexity / download jobs and the quality-vs-size chart. DOM only; the engine prunes in the
// worker (protocol.js prune, restore, perplexity, export-gguf).

import * as P from './protocol.js';
import { createFieldError } from './field-error.js';

const $ = (id) => document.getElementById(id);

/**
 * `el`: the page's elements; `page`: {state, dispatch, isBusy, setStatus, showError, clearError,
 * render}; `model`: the page's model record (info: the running model's info); `client`: the engine
 * client; `onModelSwapped(info, metrics, pruned)`: a pruned model (or the one as loaded again)
 * runs, and the page shows it like a fresh load.
 */
export function createPrunePanel({ el, page, model, client, onModelSwapped }) {
  // Whether the site serves the calibration / evaluation texts (null = not asked yet), whether a
  // pruned model runs, the perplexity of the model as loaded (for Reset), and the running job's
  // {stage, startedMs} (for the time left).
  let texts = { calibration: null, eval: null };
  let pruned = false;
  let basePerplexity = null;
  let stage = null;

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

  function showWarning(text) {
    const w = $('prune-warning');
    w.textContent = text;
    w.hidden = text === '';
  }

  function reset() {
    showWarning('');
    pruned = false;
    basePerplexity = null;
    el.pruneSummary.textContent = '';
    el.pruneNote.textContent = '';
    $('metric-perplexity').textContent = '';
    endPruneProgress('');
    qualityChart.reset();
  }

  /** The running model's parameters, and the layer knob's range. */
  function renderModel(info) {
    $('metric-params').textContent = info ? String(info.params) : '';
    $('metric-params-human').textContent = info ? `(${P.formatParams(info.params)})` : '';
    if (info && !pruned) {
      el.pruneLayers.max = String(Math.max(0, info.n_layers - 1));
    }
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
    if (!stage || stage.stage !== msg.stage) stage = { stage: msg.stage, startedMs: now };
    const known = Number.isFinite(msg.total) && msg.total > 0;
    if (known) {
      el.pruneProgress.max = msg.total;
      el.pruneProgress.value = Math.min(msg.done ?? 0, msg.total);
    } else {
      el.pruneProgress.removeAttribute('value'); // indeterminate
    }
    el.pruneProgressText.textContent = P.formatPruneProgress(msg.stage, msg.done, msg.total, now - stage.startedMs);
    page.setStatus(`${msg.stage}…`);
  }

  function endPruneProgress(text) {
    stage = null;
    el.pruneProgress.max = 1;
    el.pruneProgress.value = text ? 1 : 0;
    el.pruneProgressText.textContent = text;
  }

  function pruneDone(text) {
    endPruneProgress(text);
    page.dispatch('job-done');
    page.setStatus('ready');
    page.render();
  }

  /** Starts a pruning-panel job in the worker. */
  function startPruneJob(msg, label) {
    if (!page.dispatch('job')) return; // busy, or no model
    page.clearError();
    stage = null;
    el.pruneProgress.removeAttribute('value');
    el.pruneProgressText.textContent = `${label}…`;
    page.setStatus(`${label}…`);
    page.render();
    client.send(msg);
  }

  /**
   * Asks the site once whether it serves the calibration and evaluation texts (small GETs: the
   * browser cache then serves the worker's fetch),
   * when the panel is first opened: activation importance is the default only with the calibration
   * text, and perplexity needs the evaluation text.
   */
  async function probeTexts() {
    if (texts.calibration !== null) return;
    texts.calibration = 'asking';
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
    texts = { calibration: cal, eval: ev };
    const act = el.pruneMethod.querySelector('option[value="activation"]');
    act.disabled = !cal;
    act.textContent = cal ? 'activation (calibration text)' : 'activation (no calibration text served)';
    // Without the text, magnitude; with it, the choice stands (activation unless a link set another).
    if (!cal) el.pruneMethod.value = 'magnitude';
    el.prunePanel.dataset.texts = `${cal ? 'calibration' : 'no-calibration'} ${ev ? 'eval' : 'no-eval'}`;
    if (!ev) el.perplexityRun.title = `The site does not serve ${P.EVAL_URL}: perplexity is not available`;
    page.render();
    measureBaseline();
  }

  /** The perplexity of the model as loaded, once per load, when the panel is open. */
  function measureBaseline() {
    if (!el.prunePanel.open || texts.eval !== true || !page.state.modelLoaded || pruned) return;
    if (basePerplexity !== null || page.isBusy()) return;
    startPruneJob(P.perplexity(new URL(P.EVAL_URL, document.baseURI).href, P.EVAL_TOKENS), 'measuring perplexity');
  }

  el.prunePanel.addEventListener('toggle', () => {
    if (!el.prunePanel.open) return;
    if (texts.calibration === null) probeTexts();
    else measureBaseline();
  });

  /** The pruning panel's inputs as strings (what parsePruneForm and share links take). */
  function formValues() {
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

  // A bad knob is named beside Prune, the input marked and focused (not in the page's error box).
  const formError = createFieldError($('prune-error'), {
    mlp: el.pruneMlp, heads: el.pruneHeads, qk: el.pruneQk, v: el.pruneV, layers: el.pruneLayers,
    method: el.pruneMethod, allocation: el.pruneAllocation,
  });

  el.pruneApply.addEventListener('click', () => {
    if (el.pruneApply.disabled) return;
    const { plan, error, field } = P.parsePruneForm(
      formValues(),
      model.info?.n_layers ?? null,
    );
    if (error) {
      formError.show(error, field);
      return;
    }
    formError.clear();
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
    startPruneJob(P.exportGguf(P.exportChoice(model.info?.weights).dtype), 'writing the GGUF file');
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
            legend: { show: true, live: false }, // labels only: a live legend shows "–" until the pointer hovers
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

  // ---- the worker's answers -------------------------------------------------------------------------
  client.on(P.FromWorker.PRUNE_PROGRESS, showPruneProgress);
  client.on(P.FromWorker.PRUNED, (msg) => {
    pruned = true;
    showWarning('');
    onModelSwapped(msg.info, msg.metrics, true);
    renderModel(msg.info);
    el.pruneSummary.textContent = pruneSummary(msg.report);
    el.pruneNote.textContent = `${P.formatParams(msg.report.params_before)} → ${P.formatParams(msg.report.params_after)} parameters; KV cache ${msg.report.kv_f32_bytes_per_token_before} → ${msg.report.kv_f32_bytes_per_token_after} bytes per token in f32.`;
    if (texts.eval === true) {
      client.send(P.perplexity(new URL(P.EVAL_URL, document.baseURI).href, P.EVAL_TOKENS));
    } else {
      pruneDone(texts.eval === false ? 'evaluation text not served: perplexity not measured' : '');
    }
  });
  client.on(P.FromWorker.RESTORED, (msg) => {
    pruned = false;
    showWarning('');
    onModelSwapped(msg.info, msg.metrics, false);
    renderModel(msg.info);
    el.pruneSummary.textContent = '';
    el.pruneNote.textContent = '';
    if (basePerplexity !== null) $('metric-perplexity').textContent = basePerplexity.toFixed(2);
    pruneDone('');
  });
  client.on(P.FromWorker.PERPLEXITY_RESULT, (msg) => {
    const ppl = msg.report.perplexity;
    $('metric-perplexity').textContent = ppl.toFixed(2);
    if (!pruned) basePerplexity = ppl;
    else {
      // The warning on a line of its own, under the note (not run into it).
      const warn = P.perplexityWarning(basePerplexity, ppl);
      el.pruneSummary.dataset.warning = warn ? 'true' : 'false';
      showWarning(warn);
    }
    qualityChart.add(msg.params, ppl, pruned);
    pruneDone(`perplexity ${ppl.toFixed(2)} on ${msg.report.tokens} tokens (${P.formatNumber(msg.report.ms ?? 0, 0)} ms)`);
  });
  client.on(P.FromWorker.EXPORTED, (msg) => {
    const url = URL.createObjectURL(new Blob([msg.bytes], { type: 'application/octet-stream' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = msg.name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    const choice = P.exportChoice(model.info?.weights);
    pruneDone(`${msg.name}: ${P.formatMB(msg.bytes.length)}${P.exportFormatNote(model.info?.weights?.weights, choice.dtype, model.info?.weights?.stored)}`);
  });

  /**
   * The panel's controls for the page's state: what this architecture cannot have pruned or
   * exported (the engine's own checks, from the model info) is disabled, with the engine's reason
   * shown above the controls.
   */
  function renderControls(busy) {
    const loaded = page.state.modelLoaded;
    const limits = P.pruneLimits(model.info);
    el.pruneApply.disabled = busy || !loaded || limits.prune !== '';
    el.pruneReset.disabled = busy || !loaded || !pruned;
    el.pruneDownload.disabled = busy || !loaded || limits.export !== '';
    for (const input of [el.pruneMlp, el.pruneHeads, el.pruneV, el.pruneQk]) {
      input.disabled = limits.prune !== '' || (input === el.pruneQk && limits.qkDims !== '');
    }
    if (el.pruneQk.disabled && el.pruneQk.value !== '0') {
      el.pruneQk.value = '0';
      el.pruneQk.dispatchEvent(new Event('change'));
    }
    // The download's format is said on the button, and why it is not the loaded one beside it.
    const choice = P.exportChoice(loaded ? model.info?.weights : null);
    el.pruneDownload.textContent = loaded ? choice.label : 'Download GGUF';
    const downloadNote = $('prune-download-note');
    downloadNote.textContent = limits.export === '' ? choice.note : '';
    downloadNote.hidden = downloadNote.textContent === '';
    el.pruneLimits.textContent = limits.text;
    el.pruneLimits.hidden = limits.text === '';
    el.perplexityRun.disabled = busy || !loaded || texts.eval !== true;
  }

  /** A share link's pruning inputs (strings): only the inputs; pruning runs when the user presses Prune. */
  function applyValues(pr) {
    for (const [k, input] of [['mlp', el.pruneMlp], ['heads', el.pruneHeads], ['qk', el.pruneQk], ['v', el.pruneV]]) {
      if (pr[k] === undefined) continue;
      input.value = String(pr[k]);
      input.dispatchEvent(new Event('input')); // its percentage label
    }
    if (pr.layers !== undefined) el.pruneLayers.value = String(pr.layers);
    if (pr.method !== undefined) el.pruneMethod.value = pr.method;
    if (pr.allocation !== undefined) el.pruneAllocation.value = pr.allocation;
  }

  return {
    reset,
    renderModel,
    renderControls,
    measureBaseline,
    formValues,
    applyValues,
    /** The worker refused the running job: its progress line ends. */
    failed() {
      endPruneProgress('');
    },
  };
}
