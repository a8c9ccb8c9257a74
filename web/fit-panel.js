// edgefit "What fits on this device?": DOM only. The solver runs in the worker (wasm fit, the
// function `edgefit fit` runs); this module sends the request for the estimator panel's
// current device, drops stale answers by request id, and renders the summary, a scatter chart
// (uPlot) and the ranked table, whose "Open" buttons show a configuration in the estimator.
// Pure helpers live in fit-view.js (unit-tested); text is always set as text.

import * as P from './protocol.js';
import * as F from './fit-view.js';
import { option } from './estimate-panel.js';

const $ = (id) => document.getElementById(id);


/**
 * `send`: posts a message to the worker; `estimator`: the estimate panel (device(),
 * showConfiguration()); `onOpen`: called after a row was opened in the estimator.
 */
export function createFitPanel({ send, estimator, onOpen = () => {} }) {
  const el = {
    scope: $('fit-scope'),
    context: $('fit-context'),
    run: $('fit-run'),
    status: $('fit-status'),
    progress: $('fit-progress'),
    summary: $('fit-summary'),
    chart: $('fit-chart'),
    table: document.querySelector('[data-testid="fit-table"]'),
    head: $('fit-head'),
    body: $('fit-body'),
    device: $('fit-device'),
    stale: $('fit-stale'),
    estimatorDevice: $('device-picker'),
  };
  const st = { nextId: 1, latest: 0, presets: [], loadedName: null, ready: false, result: null, device: null, running: null };

  el.context.replaceChildren(...F.contextOptions().map((o) => option(o.value, o.label)));
  el.head.replaceChildren(...[...F.COLUMNS.map(([, h, tip]) => [h, tip]), ['estimator']].map(([h, tip]) => {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = h;
    if (tip) th.title = tip;
    return th;
  }));

  function fillScope() {
    const prev = el.scope.value;
    const opts = F.scopeOptions(st.presets, st.loadedName);
    el.scope.replaceChildren(...opts.map((o) => option(o.value, o.label, o.disabled)));
    el.scope.value = opts.some((o) => o.value === prev && !o.disabled) ? prev : 'all';
  }

  // The device picker inside the panel mirrors the estimator's (one device for both).
  function fillDevice() {
    el.device.replaceChildren(...[...el.estimatorDevice.options].map((o) => {
      const copy = option(o.value, o.textContent, o.disabled);
      copy.title = o.title;
      return copy;
    }));
    el.device.value = el.estimatorDevice.value;
    el.device.disabled = el.estimatorDevice.disabled;
  }

  /** Results of another device than the one picked are marked stale (dimmed, with a note). */
  function markStale() {
    const note = st.result ? F.staleNote(st.device, st.result.device_name, el.estimatorDevice.value) : '';
    el.stale.textContent = note;
    el.stale.hidden = note === '';
    if (note) {
      el.table.dataset.stale = 'true';
      el.chart.dataset.stale = 'true';
    } else {
      delete el.table.dataset.stale;
      delete el.chart.dataset.stale;
    }
  }

  el.device.addEventListener('change', () => {
    el.estimatorDevice.value = el.device.value;
    el.estimatorDevice.dispatchEvent(new Event('change', { bubbles: true }));
  });
  el.estimatorDevice.addEventListener('change', () => {
    el.device.value = el.estimatorDevice.value;
    markStale();
  });

  function setStatus(text, state = '') {
    el.status.textContent = text;
    el.status.dataset.state = state;
  }

  function run() {
    const device = estimator.device();
    if (!st.ready || !device) {
      setStatus('the estimator is not ready yet', 'error');
      return;
    }
    let msg;
    try {
      msg = P.fit(st.nextId++, device.request, el.scope.value, F.parseContext(el.context.value));
    } catch (e) {
      setStatus(P.errorMessage(e), 'error');
      return;
    }
    st.latest = msg.id;
    st.device = device.request.kind === 'bundled' ? device.request.id : 'this-browser'; // the picker's value
    el.run.disabled = true;
    st.running = { scope: el.scope.selectedOptions[0]?.textContent ?? el.scope.value, device: device.label, startedMs: performance.now() };
    setStatus(F.runningText(st.running.scope, st.running.device), 'running');
    el.progress.removeAttribute('value'); // indeterminate until the first progress message
    el.progress.hidden = false;
    send(msg);
  }

  el.run.addEventListener('click', run);

  // ---- chart (uPlot scatter) ----------------------------------------------------------------
  const chart = (() => {
    let plot = null;
    let rows = [];
    const width = () => Math.max(260, Math.floor(el.chart.clientWidth || 600));
    const dots = (color, size) => ({ stroke: color, fill: color, paths: () => null, points: { show: true, size, stroke: color, fill: color } });

    function draw(result) {
      el.chart.hidden = false;
      if (typeof window.uPlot !== 'function') {
        el.chart.textContent = `chart library not loaded; ${result.rows.length} configurations pass`;
        return;
      }
      const d = F.chartData(result.rows);
      rows = d.rows;
      const describe = (i) => {
        const r = rows[i];
        return r ? `#${r.rank} ${r.model}, ${F.formatPrune(r.prune)} pruned, ${r.weights}/${r.kv}, ${r.context}` : '';
      };
      if (!plot) {
        el.chart.replaceChildren();
        plot = new window.uPlot(
          {
            width: width(),
            height: 260,
            legend: { show: true, live: false }, // labels only: a live legend shows "–" until the pointer hovers
            cursor: { drag: { x: false, y: false }, points: { size: 10 } },
            scales: { x: { time: false } },
            axes: [
              { label: 'sustained tokens/s (after throttling)', stroke: '#555', grid: { stroke: '#eee' } },
              { label: 'parameters kept (M)', stroke: '#555', grid: { stroke: '#eee' }, size: 60 },
            ],
            series: [
              { label: 'sustained tok/s', value: (_u, v) => (v == null ? '–' : v.toFixed(2)) },
              { label: 'other passing', ...dots('rgba(47, 111, 181, 0.45)', 6), value: (_u, v, _s, i) => (v == null ? '–' : `${v.toFixed(1)} M · ${describe(i)}`) },
              { label: '★ frontier', ...dots('#b55a2f', 10), value: (_u, v, _s, i) => (v == null ? '–' : `${v.toFixed(1)} M · ${describe(i)}`) },
            ],
          },
          d.data,
          el.chart,
        );
        new ResizeObserver(() => plot && plot.setSize({ width: width(), height: 260 })).observe(el.chart);
      } else plot.setData(d.data);
    }

    return { draw };
  })();

  // ---- table --------------------------------------------------------------------------------
  function renderTable(result, device) {
    const sections = F.tableSections(result.rows);
    const rows = sections.flatMap((s) => s.rows);
    const sectionRow = (title) => {
      const tr = document.createElement('tr');
      tr.className = 'fit-section';
      tr.setAttribute('data-testid', 'fit-section');
      const th = document.createElement('th');
      th.scope = 'colgroup';
      th.colSpan = F.COLUMNS.length + 1;
      th.textContent = title;
      tr.append(th);
      return tr;
    };
    const rowOf = (r) => {
      const tr = document.createElement('tr');
      tr.setAttribute('data-testid', 'fit-row');
      tr.dataset.rank = String(r.rank);
      tr.dataset.frontier = String(r.frontier);
      tr.dataset.model = r.model;
      tr.dataset.weights = r.weights;
      tr.dataset.kv = r.kv;
      tr.dataset.prune = String(r.prune);
      tr.dataset.context = String(r.context);
      tr.dataset.sustained = String(r.sustained_tok_s);
      F.rowCells(r).forEach((t, i) => {
        const td = document.createElement(i === 0 ? 'th' : 'td');
        if (i === 0) td.scope = 'row';
        td.textContent = t;
        if (i === 1 && r.frontier) td.title = 'on the Pareto frontier (parameters, sustained tok/s, peak memory)';
        if (i === 2) td.title = r.model_name;
        tr.append(td);
      });
      const td = document.createElement('td');
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'Open';
      b.setAttribute('data-testid', 'fit-open');
      b.setAttribute('aria-label', `Open configuration ${r.rank} (${r.model}, ${r.weights}, ${r.kv}, ${r.context}) in the estimator`);
      b.addEventListener('click', () => {
        const err = estimator.showConfiguration(F.scenarioOf(r, device));
        if (err) setStatus(`cannot open row ${r.rank}: ${err}`, 'error');
        else onOpen(r);
      });
      td.append(b);
      tr.append(td);
      return tr;
    };
    el.body.replaceChildren(...sections.flatMap((s) => [sectionRow(s.title), ...s.rows.map(rowOf)]));
    el.table.hidden = rows.length === 0;
  }

  function render(result) {
    st.result = result;
    el.summary.textContent = F.summaryText(result);
    el.summary.dataset.tried = String(result.tried);
    el.summary.dataset.passing = String(result.rows.length);
    for (const k of P.FIT_FAIL_KEYS) el.summary.dataset[k] = String(result.failed[k]);
    const shown = Math.min(result.rows.length, F.TABLE_ROWS);
    setStatus(result.rows.length ? `done: ${result.models.length} models; the table shows the best ${shown}` : 'done: nothing passes; try a smaller model or another device', 'done');
    if (result.rows.length) chart.draw(result);
    else el.chart.hidden = true;
    renderTable(result, st.device);
    markStale();
  }

  return {
    onCatalog(msg) {
      st.presets = msg.presets;
      st.ready = true;
      fillScope();
      fillDevice();
      el.run.disabled = false;
      if (el.status.dataset.state !== 'done') setStatus('');
    },
    onProgress(msg) {
      if (msg.id !== st.latest || !st.running) return; // stale
      el.progress.max = msg.total;
      el.progress.value = msg.done;
      setStatus(F.progressText(st.running.scope, st.running.device, msg.done, msg.total, performance.now() - st.running.startedMs), 'running');
    },
    onResult(msg) {
      if (msg.id !== st.latest) return; // stale
      st.running = null;
      el.progress.hidden = true;
      el.run.disabled = false;
      render(msg.result);
    },
    onError(msg) {
      if (msg.id !== st.latest) return;
      st.running = null;
      el.progress.hidden = true;
      el.run.disabled = false;
      setStatus(`The solver cannot answer: ${msg.message}`, 'error');
    },
    modelLoaded(info) {
      st.loadedName = info?.name || 'model';
      fillScope();
    },
    modelUnloaded() {
      st.loadedName = null;
      fillScope();
    },
    /** The estimator's device may change without a change event (a link, an opened row). */
    syncDevice() {
      if (el.device.options.length !== el.estimatorDevice.options.length) fillDevice();
      el.device.value = el.estimatorDevice.value;
      markStale();
    },
    workerRestarted() {
      st.ready = false;
      st.latest = st.nextId++; // an answer in flight will never come
      el.run.disabled = true;
      st.running = null;
      el.progress.hidden = true;
      setStatus('waiting for the engine…');
    },
  };
}
