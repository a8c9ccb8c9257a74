// edgefit estimator panel: DOM only. The estimator runs in the worker (worker.js); this module
// builds requests, drops stale answers by request id, and renders reports. Pure helpers live in
// estimate-view.js (unit-tested).

import * as P from './protocol.js';
import * as V from './estimate-view.js';

const $ = (id) => document.getElementById(id);

export function option(value, text, disabled = false) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = text;
  o.disabled = disabled;
  return o;
}

function fillSelect(select, items, value) {
  select.replaceChildren(...items.map(([v, t]) => option(v, t)));
  if (value !== undefined) select.value = value;
}

/** Renders an explanation into `box` (a div inside a <details>); guide-panel.js uses it too. */
export function renderExplain(box, ex) {
  box.replaceChildren();
  if (!ex) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = 'No formula for this number.';
    box.append(p);
    return;
  }
  const dl = document.createElement('dl');
  for (const [k, v, cls] of [
    ['formula', ex.formula, 'f-formula'],
    ['with the values', ex.values, 'f-values'],
    ['result', ex.result, 'f-result'],
    ['note', ex.note, 'f-note'],
  ]) {
    if (!v) continue;
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = k;
    dd.textContent = v;
    dd.className = cls;
    dl.append(dt, dd);
  }
  box.append(dl);
}

export function createEstimatePanel({ send }) {
  const el = {
    device: $('device-picker'),
    model: $('preset-picker'),
    configFile: $('config-file'),
    deviceNote: $('est-device-note'),
    measureProgress: $('est-measure-progress'),
    weights: $('k-weights'),
    compute: $('k-compute'),
    kv: $('k-kv'),
    context: $('k-context'),
    prompt: $('k-prompt'),
    gen: $('k-gen'),
    unit: $('k-unit'),
    runtime: $('k-runtime'),
    threads: $('k-threads'),
    rangeNote: $('est-range-note'),
    policy: $('k-policy'),
    minutes: $('k-minutes'),
    prune: $('k-prune'),
    pruneOut: $('k-prune-out'),
    error: $('est-error'),
    body: $('est-body'),
    numbers: $('est-numbers'),
    experience: $('est-experience'),
    warnings: $('est-warnings'),
    mem: $('mem-chart'),
    roof: $('roofline-chart'),
    thermal: $('thermal-chart'),
    compare: $('est-compare'),
    compareBody: $('cmp-body'),
    compareHint: $('est-compare-hint'),
    compareFormats: $('cmp-formats'),
    compareWarmUp: $('cmp-warmup'),
  };

  const st = {
    nextId: 1,
    latest: { panel: 0, compare: 0 },
    catalog: false,
    loadedName: null,
    config: null, // {name, text}
    metrics: null, // the last finished generation's metrics
    kvFormats: [...V.KV_FORMATS], // the wasm's kvFormats() once the catalog arrives
    runtimes: V.RUNTIMES.map((id) => ({ id, name: id, units: [...V.UNITS] })), // the wasm's runtimeIds()
    device: null, // {units, default_unit, default_runtime} of the last answer's device
    resolvedRuntime: null, // the runtime the last report ran (the default's label)
    firstShown: false,
    measuring: false,
    shown: null, // {report, deviceName} of the last answer rendered
  };

  fillSelect(el.weights, V.WEIGHT_FORMATS.map((f) => [f, f]), V.DEFAULT_KNOBS.weights);
  fillSelect(el.compute, [['', 'default'], ...V.COMPUTE_DTYPES.map((c) => [c, c])], V.DEFAULT_KNOBS.compute);
  fillSelect(el.kv, V.KV_FORMATS.map((f) => [f, f]), V.DEFAULT_KNOBS.kv);
  fillSelect(el.unit, [['', 'default'], ...V.UNITS.map((u) => [u, u])], '');
  fillSelect(el.policy, V.POLICIES.map((p) => [p, p]), V.DEFAULT_KNOBS.policy);
  fillRuntimes();

  /** The runtime picker for the current device and unit (runtimes that cannot run there disabled). */
  function fillRuntimes() {
    const prev = el.runtime.value;
    const choices = V.runtimeChoices(st.runtimes, st.device, el.unit.value, st.resolvedRuntime);
    el.runtime.replaceChildren(...choices.map((c) => {
      const o = option(c.id, c.label, c.disabled);
      if (c.title) o.title = c.title;
      return o;
    }));
    // A value the picker lists stays chosen even when disabled, so the estimator says why.
    el.runtime.value = choices.some((c) => c.id === prev) ? prev : '';
  }

  /** The unit the estimate runs on: the knob, else the device's default. */
  function resolvedUnit() {
    return el.unit.value || st.device?.default_unit || '';
  }
  el.device.append(option('', 'loading…'));
  el.model.append(option('', 'loading…'));
  el.device.disabled = true;
  el.model.disabled = true;

  // ---- numbers (built once; each is a <details> with its formula) -------------------------
  const cells = new Map();
  for (const c of V.summaryCells(null)) {
    const d = document.createElement('details');
    d.className = 'num';
    d.dataset.explainKey = c.explain;
    const s = document.createElement('summary');
    const label = document.createElement('span');
    label.className = 'num-label';
    // Named from the start: the first report can take a while (the estimator derives its
    // ranges from the validation set once), and a summary must never be empty.
    label.textContent = c.label;
    const value = document.createElement('span');
    value.className = 'num-value';
    value.id = c.id;
    value.dataset.testid = c.id;
    value.setAttribute('data-testid', c.id);
    const unit = document.createElement('span');
    unit.className = 'unit';
    const human = document.createElement('span');
    human.className = 'human';
    const range = document.createElement('span');
    range.className = 'num-range';
    range.setAttribute('data-testid', `${c.id}-range`);
    s.append(label, ' ', value, ' ', unit, ' ', range, ' ', human);
    const box = document.createElement('div');
    box.className = 'explain';
    box.setAttribute('data-testid', `explain-${c.id}`);
    d.append(s, box);
    el.numbers.append(d);
    cells.set(c.id, { label, value, unit, human, range, box, details: d });
  }

  // ---- requests -------------------------------------------------------------------------
  function modelRequest() {
    const v = el.model.value;
    if (v === V.LOADED_MODEL) return { kind: 'loaded' };
    if (v === V.CONFIG_MODEL) return st.config ? { kind: 'config', name: st.config.name, text: st.config.text } : null;
    return v ? { kind: 'preset', id: v } : null;
  }

  function deviceRequest() {
    const v = el.device.value;
    if (v === V.THIS_BROWSER) return { kind: 'this-browser' };
    return v ? { kind: 'bundled', id: v } : null;
  }

  function knobs() {
    return {
      weights: el.weights.value,
      compute: el.compute.value,
      kv: el.kv.value,
      context: el.context.value,
      prompt_tokens: el.prompt.value,
      gen_tokens: el.gen.value,
      unit: el.unit.value,
      policy: el.policy.value,
      minutes: el.minutes.value,
      runtime: el.runtime.value,
      threads: el.threads.value,
    };
  }

  /** The pruning knob's level (0..0.9, TransAct-style), or null when it is not one. */
  function pruneLevel() {
    const v = Number(el.prune.value);
    return P.checkPruneLevel(v) ? null : v;
  }

  function showPrune() {
    const v = pruneLevel();
    el.pruneOut.textContent = v === null ? '' : `${Math.round(v * 100)}%`;
  }

  /** `prune`: the panel's pruning level (the comparison estimates the loaded model as it runs). */
  function request(purpose, deployment, prune) {
    const model = modelRequest();
    const device = deviceRequest();
    if (!model || !device) return;
    const id = st.nextId++;
    st.latest[purpose] = id;
    // Until its answer arrives the panel shows the previous report (tests wait on this).
    if (purpose === 'panel') el.body.dataset.pending = 'true';
    send(P.estimate(id, purpose, model, device, deployment, prune));
  }

  function recompute() {
    if (!st.catalog) return;
    const { deployment, error: bad } = V.buildDeployment(knobs(), { kv: st.kvFormats, runtimes: st.runtimes.map((r) => r.id) });
    const error = bad || V.runtimePairError(st.runtimes, el.runtime.value, resolvedUnit());
    if (error) {
      st.latest.panel = st.nextId++; // any answer in flight is now stale
      showError(error);
      return;
    }
    if (el.device.value === V.THIS_BROWSER && !st.measuring && !st.measuredOnce) {
      el.deviceNote.textContent = 'measuring this tab (about a second)…';
    }
    const prune = pruneLevel();
    if (prune === null) {
      st.latest.panel = st.nextId++;
      showError(P.checkPruneLevel(Number(el.prune.value)));
      return;
    }
    request('panel', deployment, prune);
    recompare();
  }

  function comparable() {
    return el.device.value === V.THIS_BROWSER && el.model.value === V.LOADED_MODEL;
  }

  function recompare() {
    // The worker maps the engine's own last run to the deployment that predicts it and
    // computes the rows (wasm comparisonDeployment / comparisonRows, edgefit_estimate::compare):
    // the deployment sent here is a placeholder it replaces.
    if (comparable() && V.canCompare(st.metrics)) {
      request('compare', {});
      el.compareHint.textContent = '';
    } else {
      st.latest.compare = st.nextId++;
      el.compare.hidden = true;
      el.compareHint.textContent = comparable()
        ? 'Generate some text to compare this estimate with the engine’s measurement.'
        : 'Pick “this browser tab (measured)” and your model (“loaded: …”), then generate, to compare the estimate with the engine’s own measurement.';
    }
  }

  function showError(message) {
    delete el.body.dataset.pending; // nothing is coming: this error is the answer
    el.error.textContent = `The estimator cannot answer: ${message}`;
    el.error.hidden = false;
    el.body.dataset.stale = 'true';
  }

  function clearError() {
    el.error.hidden = true;
    el.error.textContent = '';
    delete el.body.dataset.stale;
  }

  for (const input of [el.weights, el.compute, el.kv, el.policy, el.device, el.model, el.runtime]) {
    input.addEventListener('change', recompute);
  }
  el.unit.addEventListener('change', () => {
    fillRuntimes();
    recompute();
  });
  for (const input of [el.context, el.prompt, el.gen, el.minutes, el.threads]) {
    input.addEventListener('input', recompute);
  }
  el.prune.addEventListener('input', () => {
    showPrune();
    recompute();
  });
  showPrune();
  el.configFile.addEventListener('change', async () => {
    const file = el.configFile.files?.[0];
    if (!file) return;
    el.configFile.value = '';
    let text;
    try {
      text = await file.text();
    } catch (e) {
      showError(`could not read ${file.name}: ${P.errorMessage(e)}`);
      return;
    }
    st.config = { name: file.name.replace(/\.json$/i, '') || 'config', text };
    let o = el.model.querySelector(`option[value="${V.CONFIG_MODEL}"]`);
    if (!o) {
      o = option(V.CONFIG_MODEL, '');
      el.model.prepend(o);
    }
    o.textContent = `config.json: ${file.name}`;
    o.dataset.file = file.name; // for a shared link's note (main.js)
    el.model.value = V.CONFIG_MODEL;
    recompute();
  });

  // ---- rendering --------------------------------------------------------------------------
  function renderReport(msg) {
    const r = msg.report;
    clearError();
    st.shown = { report: r, deviceName: msg.device?.name ?? '' };
    for (const c of V.summaryCells(r)) {
      const cell = cells.get(c.id);
      cell.label.textContent = c.label;
      cell.value.textContent = c.value;
      cell.unit.textContent = c.unit;
      cell.human.textContent = c.human ? `(${c.human})` : '';
      cell.range.textContent = c.range ? `range ${c.range}` : '';
      cell.range.title = c.range ? 'low–high: the 10th–90th percentile of measured/estimated on the validation set (open the number for how)' : '';
      renderExplain(cell.box, V.explanation(r, c.explain));
    }
    for (const v of V.VERDICTS) {
      const b = $(`verdict-${v}`);
      const val = r.verdict?.[v];
      b.textContent = val === 'pass' || val === 'fail' ? val : '';
      b.dataset.verdict = b.textContent;
      renderExplain(b.closest('details').querySelector('.explain'), V.explanation(r, `verdict.${v}`));
    }
    const exp = r.verdict?.experience;
    el.experience.textContent = exp ? `Experience: ${String(exp).replace(/-/g, ' ')} (reading speed is about 4–8 tokens/s).` : '';

    const warnings = V.warningTexts(r);
    el.warnings.replaceChildren(...warnings.map((w) => {
      const li = document.createElement('li');
      li.textContent = w;
      return li;
    }));
    el.warnings.hidden = warnings.length === 0;

    // Units the device has; the knob keeps "device's default" working everywhere.
    for (const o of el.unit.options) {
      if (o.value) o.disabled = !msg.device.units.includes(o.value);
    }
    el.unit.options[0].textContent = `default (${msg.device.default_unit})`; // short: the picker fits a phone
    el.unit.options[0].title = `the device's default unit (${msg.device.default_unit})`;
    st.device = msg.device;
    st.resolvedRuntime = el.runtime.value === '' ? r.latency?.runtime ?? null : st.resolvedRuntime;
    fillRuntimes();
    // Threads: the CPU's only; the placeholder shows what the runtime uses by default.
    const onCpu = r.latency?.unit === 'cpu';
    el.threads.disabled = !onCpu && el.threads.value === '';
    el.threads.placeholder = onCpu && Number.isFinite(r.latency?.threads) && el.threads.value === '' ? `default (${r.latency.threads})` : onCpu ? 'default' : 'CPU only';
    el.rangeNote.textContent = V.rangeNote(r);
    if (!st.firstShown) {
      st.firstShown = true;
      // How long the first estimate took from the page's start (README "The page": measured).
      try {
        performance.mark('edgefit:first-estimate');
        el.rangeNote.dataset.firstEstimateMs = String(Math.round(performance.now()));
        if (msg.timing) {
          el.rangeNote.dataset.workerMs = String(Math.round(msg.timing.workerMs));
          el.rangeNote.dataset.tables = msg.timing.tables;
        }
      } catch {
        // performance.mark is missing in very old browsers: only the figure is lost.
      }
    }

    const lat = r.latency ?? {};
    let note = `${msg.device.name}. Runs on the ${lat.unit} at ${V.formatValue(lat.freq_mhz, 0)} MHz: ` +
      `${V.formatValue(lat.peak_gflops)} GFLOP/s peak ${lat.compute ?? ''}, ${V.formatValue(lat.bandwidth_gbs)} GB/s.`;
    if (msg.measurements) {
      st.measuredOnce = true;
      note += ` Measured in this tab: ${V.describeMeasurements(msg.measurements)} (formats not listed keep the bundled rates).`;
    }
    el.deviceNote.textContent = note;

    drawMemory(r.memory);
    charts.roofline(r);
    charts.thermal(r);
  }

  function drawMemory(memory) {
    const { segments, usableAt } = V.memorySegments(memory);
    el.mem.replaceChildren();
    const bar = document.createElement('div');
    bar.className = 'mem-bar';
    const legend = document.createElement('ul');
    legend.className = 'mem-legend';
    segments.forEach((s, i) => {
      const d = document.createElement('div');
      d.className = `mem-seg c${i % 10}`;
      d.style.width = `${(s.fraction * 100).toFixed(3)}%`;
      d.title = `${s.label}: ${V.formatBinary(s.bytes)} (${Math.round(s.bytes)} bytes)`;
      bar.append(d);
      const li = document.createElement('li');
      const sw = document.createElement('span');
      sw.className = `swatch c${i % 10}`;
      li.append(sw, `${s.label} ${V.formatBinary(s.bytes)}`);
      legend.append(li);
    });
    if (usableAt !== null) {
      const mark = document.createElement('div');
      // Past the middle the label sits left of the mark, so it never widens a narrow page.
      mark.className = usableAt > 0.5 ? 'mem-usable label-left' : 'mem-usable';
      mark.style.left = `${(usableAt * 100).toFixed(3)}%`;
      mark.title = `usable: ${V.formatBinary(memory.usable_bytes)}`;
      const lab = document.createElement('span');
      lab.textContent = `usable ${V.formatBinary(memory.usable_bytes)}`;
      mark.append(lab);
      bar.append(mark);
    }
    el.mem.append(bar, legend);
  }

  function renderCompare(msg) {
    const cmp = msg.comparison;
    el.compareBody.replaceChildren();
    for (const c of V.comparisonCells(cmp?.rows)) {
      const tr = document.createElement('tr');
      tr.dataset.key = c.key;
      [c.label, c.estimate, c.measured, c.error].forEach((t, i) => {
        const td = document.createElement(i === 0 ? 'th' : 'td');
        td.textContent = t;
        if (i === 1) td.className = 'cmp-est';
        if (i === 3) {
          td.setAttribute('data-testid', `cmp-error-${c.key}`);
          td.dataset.percent = c.percent;
        }
        tr.append(td);
      });
      el.compareBody.append(tr);
    }
    el.compareFormats.textContent = V.describeComparison(cmp?.deployment, st.metrics);
    el.compareWarmUp.textContent = V.describeWarmUp(st.metrics);
    el.compare.hidden = false;
  }

  // ---- charts (uPlot) ---------------------------------------------------------------------
  const charts = (() => {
    let roof = null;
    let therm = null;
    let roofMeta = null;
    let thermTrip = null;
    const width = (node) => Math.max(260, Math.floor(node.clientWidth || 400));
    const ok = () => typeof window.uPlot === 'function';
    const fmtNum = (v) => (v == null ? '' : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(2));

    function ridgeHook(u) {
      if (!roofMeta?.ridge) return;
      const x = u.valToPos(roofMeta.ridge, 'x', true);
      const { ctx } = u;
      ctx.save();
      ctx.strokeStyle = '#b55a2f';
      ctx.setLineDash([5, 4]);
      ctx.lineWidth = 1.2 * devicePixelRatio;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = '#b55a2f';
      ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
      ctx.fillText(`ridge ${fmtNum(roofMeta.ridge)} FLOP/B`, x + 4 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
      ctx.restore();
    }

    function tripHook(u) {
      if (thermTrip == null) return;
      const y = u.valToPos(thermTrip, 'c', true);
      if (!Number.isFinite(y) || y < u.bbox.top) return;
      const { ctx } = u;
      ctx.save();
      ctx.strokeStyle = '#b52f4a';
      ctx.setLineDash([3, 4]);
      ctx.lineWidth = devicePixelRatio;
      ctx.beginPath();
      ctx.moveTo(u.bbox.left, y);
      ctx.lineTo(u.bbox.left + u.bbox.width, y);
      ctx.stroke();
      ctx.restore();
    }

    function roofline(report) {
      const d = V.rooflineData(report);
      if (!ok()) {
        el.roof.textContent = 'chart library not loaded';
        return;
      }
      if (!d) {
        el.roof.textContent = 'no op to plot';
        roof?.destroy();
        roof = null;
        return;
      }
      roofMeta = d;
      if (!roof) {
        el.roof.replaceChildren();
        roof = new window.uPlot(
          {
            width: width(el.roof),
            height: 240,
            cursor: { drag: { x: false, y: false }, points: { size: 8 } },
            // Labels only: a live legend shows "–" for every value until the pointer hovers.
            legend: { live: false },
            scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
            axes: [
              { label: 'arithmetic intensity (FLOP/byte)', stroke: '#555', grid: { stroke: '#eee' }, values: (_u, vals) => vals.map(fmtNum) },
              { label: 'GFLOP/s', stroke: '#555', grid: { stroke: '#eee' }, size: 56, values: (_u, vals) => vals.map(fmtNum) },
            ],
            series: [
              { label: 'FLOP/B', value: (_u, v) => (v == null ? '–' : fmtNum(v)) },
              { label: 'roof', stroke: '#333', width: 1.5, points: { show: false }, value: (_u, v) => (v == null ? '–' : fmtNum(v)) },
              {
                label: 'prefill ops', stroke: '#2f6fb5', paths: () => null, points: { show: true, size: 9, fill: '#2f6fb5' },
                value: (_u, v, _s, i) => (v == null ? '–' : `${fmtNum(v)} (${roofMeta.labels.prefill[i]})`),
              },
              {
                label: 'decode ops', stroke: '#d08a1c', paths: () => null, points: { show: true, size: 9, fill: '#d08a1c' },
                value: (_u, v, _s, i) => (v == null ? '–' : `${fmtNum(v)} (${roofMeta.labels.decode[i]})`),
              },
            ],
            hooks: { draw: [ridgeHook] },
          },
          d.data,
          el.roof,
        );
        new ResizeObserver(() => roof && roof.setSize({ width: width(el.roof), height: 240 })).observe(el.roof);
      } else {
        roof.setData(d.data);
      }
    }

    function thermal(report) {
      const d = V.thermalData(report);
      if (!ok()) {
        el.thermal.textContent = 'chart library not loaded';
        return;
      }
      if (!d) return;
      thermTrip = null; // the trip point is in the device profile, not the report
      if (!therm) {
        el.thermal.replaceChildren();
        therm = new window.uPlot(
          {
            width: width(el.thermal),
            height: 240,
            cursor: { drag: { x: false, y: false } },
            legend: { live: false },
            scales: { x: { time: false }, c: {}, tps: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
            axes: [
              { label: 'minutes', stroke: '#555', grid: { stroke: '#eee' } },
              { scale: 'c', label: '°C', stroke: '#555', grid: { stroke: '#eee' }, size: 46 },
              { scale: 'tps', side: 1, label: 'tok/s', stroke: '#2b7a3d', grid: { show: false }, size: 50 },
            ],
            series: [
              { label: 'min', value: (_u, v) => (v == null ? '–' : v.toFixed(2)) },
              { label: 'die °C', scale: 'c', stroke: '#c0392b', width: 1.5, points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
              { label: 'body °C', scale: 'c', stroke: '#e67e22', width: 1.5, points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
              { label: 'tok/s', scale: 'tps', stroke: '#2b7a3d', width: 1.5, points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
              // The decode range (the validation set's 10th-90th percentile band), shaded.
              { label: 'tok/s low', scale: 'tps', stroke: 'rgba(43,122,61,0.45)', width: 1, dash: [4, 3], points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
              { label: 'tok/s high', scale: 'tps', stroke: 'rgba(43,122,61,0.45)', width: 1, dash: [4, 3], points: { show: false }, value: (_u, v) => (v == null ? '–' : v.toFixed(1)) },
            ],
            bands: [{ series: [5, 4], fill: 'rgba(43,122,61,0.14)' }],
            hooks: { draw: [tripHook] },
          },
          d,
          el.thermal,
        );
        new ResizeObserver(() => therm && therm.setSize({ width: width(el.thermal), height: 240 })).observe(el.thermal);
      } else {
        therm.setData(d);
      }
    }

    return { roofline, thermal };
  })();

  const hasOption = (select, value) => [...select.options].some((o) => o.value === value && !o.disabled);

  // ---- worker messages --------------------------------------------------------------------
  return {
    /**
     * Shows one configuration of the fit panel: device, model (a preset id or "@loaded"),
     * weights, KV format, context and pruning level; the other knobs go back to the estimator's defaults (what
     * `edgefit fit` and the fit panel estimate with). Returns null, or an error string naming
     * the value the pickers do not offer (nothing is changed then).
     */
    showConfiguration({ device, model, weights, kv, context, prune = 0 }) {
      if (!st.catalog) return 'the estimator is not ready yet';
      if (!hasOption(el.device, device)) return `device ${JSON.stringify(device)} is not in the device picker`;
      if (!hasOption(el.model, model)) return `model ${JSON.stringify(model)} is not in the model picker`;
      if (!hasOption(el.weights, weights)) return `weights ${JSON.stringify(weights)} is not a weight format`;
      if (!hasOption(el.kv, kv)) return `KV format ${JSON.stringify(kv)} is not offered`;
      if (!Number.isSafeInteger(context) || context < 1) return `context must be a positive whole number, got ${JSON.stringify(context)}`;
      const bad = P.checkPruneLevel(prune);
      if (bad) return bad;
      el.device.value = device;
      el.model.value = model;
      el.weights.value = weights;
      el.compute.value = V.DEFAULT_KNOBS.compute;
      el.kv.value = kv;
      el.context.value = String(context);
      el.prune.value = String(prune);
      el.prompt.value = V.DEFAULT_KNOBS.prompt_tokens;
      el.gen.value = V.DEFAULT_KNOBS.gen_tokens;
      el.unit.value = V.DEFAULT_KNOBS.unit;
      el.policy.value = V.DEFAULT_KNOBS.policy;
      el.minutes.value = V.DEFAULT_KNOBS.minutes;
      el.runtime.value = V.DEFAULT_KNOBS.runtime;
      el.threads.value = V.DEFAULT_KNOBS.threads;
      showPrune();
      recompute();
      return null;
    },
    /**
     * What the panel shows, for the comparison: {scenario (getScenario's), report, deviceName,
     * modelName}, or null while an answer is due or after an error.
     */
    snapshot() {
      if (!st.shown || el.body.dataset.pending !== undefined || el.body.dataset.stale !== undefined) return null;
      return {
        scenario: this.getScenario(),
        report: st.shown.report,
        deviceName: st.shown.deviceName,
        modelName: el.model.selectedOptions[0]?.textContent ?? el.model.value,
      };
    },
    /** The device as estimate and fit requests name it (null before the catalog), and its label. */
    device() {
      const request = deviceRequest();
      return request ? { request, label: el.device.selectedOptions[0]?.textContent ?? el.device.value } : null;
    },
    onCatalog(msg) {
      if (Array.isArray(msg.runtimes) && msg.runtimes.length) {
        st.runtimes = msg.runtimes.map((r) => ({ id: r.id, name: r.name, units: [...r.units] }));
        fillRuntimes();
      }
      if (Array.isArray(msg.kvFormats) && msg.kvFormats.length) {
        st.kvFormats = [...msg.kvFormats];
        const prevKv = el.kv.value;
        fillSelect(el.kv, st.kvFormats.map((f) => [f, f]));
        el.kv.value = st.kvFormats.includes(prevKv) ? prevKv : st.kvFormats.includes(V.DEFAULT_KNOBS.kv) ? V.DEFAULT_KNOBS.kv : st.kvFormats[0];
      }
      const prevDevice = el.device.value;
      const prevModel = el.model.value;
      // Short labels (the picker fits a phone's width); the full name is the option's title.
      const devices = msg.devices.filter((d) => d.id !== V.THIS_BROWSER);
      fillSelect(el.device, [...devices.map((d) => [d.id, V.shortDeviceName(d.name)]), [V.THIS_BROWSER, 'this browser tab (measured)']]);
      devices.forEach((d, i) => {
        el.device.options[i].title = d.name;
      });
      el.device.value = prevDevice && [...el.device.options].some((o) => o.value === prevDevice) ? prevDevice : 'snapdragon-8-gen3';
      if (!el.device.value) el.device.selectedIndex = 0;
      const models = msg.presets.map((p) => [p.id, p.name || p.id]);
      fillSelect(el.model, models);
      el.model.prepend(option(V.LOADED_MODEL, V.loadedLabel(st.loadedName), !st.loadedName));
      el.model.options[0].title = st.loadedName ?? '';
      if (st.config) el.model.prepend(option(V.CONFIG_MODEL, `config.json: ${st.config.name}`));
      const want = prevModel && [...el.model.options].some((o) => o.value === prevModel && !o.disabled) ? prevModel : 'smollm2-135m';
      el.model.value = want;
      if (!el.model.value) el.model.selectedIndex = 1;
      el.device.disabled = false;
      el.model.disabled = false;
      st.catalog = true;
      recompute();
    },
    onMeasuring(msg) {
      st.measuring = msg.done < msg.total;
      if (msg.done === 0) st.measureStartedMs = performance.now();
      el.measureProgress.max = msg.total;
      el.measureProgress.value = msg.done;
      el.measureProgress.hidden = !st.measuring;
      const elapsed = st.measureStartedMs === undefined ? null : performance.now() - st.measureStartedMs;
      el.deviceNote.textContent = `measuring this tab with the engine's kernel: streaming read, f32 GEMM, cost per op, norms + attention + activation, GEMV and GEMM per weight format, in two rounds (each figure keeps its better round): ${msg.done} / ${msg.total} probes${P.timeLeft(msg.done, msg.total, elapsed)}`;
    },
    onResult(msg) {
      if (msg.measurements) st.measuring = false;
      if (msg.id !== st.latest[msg.purpose]) return; // stale
      if (msg.purpose === 'panel') delete el.body.dataset.pending;
      if (msg.purpose === 'panel') renderReport(msg);
      else renderCompare(msg);
    },
    onError(msg) {
      st.measuring = false;
      el.measureProgress.hidden = true;
      if (msg.id !== st.latest[msg.purpose]) return;
      if (msg.purpose === 'panel') delete el.body.dataset.pending;
      if (msg.purpose === 'panel') showError(msg.message);
      else {
        el.compare.hidden = true;
        el.compareHint.textContent = `The comparison could not be estimated: ${msg.message}`;
      }
    },
    /** The user picked `format` for the real run: the KV knob follows so both sides compare it. */
    followKvFormat(format) {
      if (!st.kvFormats.includes(format) || el.kv.value === format) return;
      el.kv.value = format;
      recompute();
    },
    modelLoaded(info) {
      st.loadedName = info?.name || 'model';
      st.metrics = null;
      const o = el.model.querySelector(`option[value="${V.LOADED_MODEL}"]`);
      if (o) {
        o.disabled = false;
        o.textContent = V.loadedLabel(st.loadedName);
        o.title = st.loadedName;
      }
      if (el.model.value === V.LOADED_MODEL) recompute();
      else recompare();
    },
    modelUnloaded() {
      st.loadedName = null;
      st.metrics = null;
      const o = el.model.querySelector(`option[value="${V.LOADED_MODEL}"]`);
      if (o) {
        o.disabled = true;
        o.textContent = V.loadedLabel(null);
      }
      if (el.model.value === V.LOADED_MODEL) {
        el.model.value = 'smollm2-135m';
        recompute();
      } else recompare();
    },
    generationDone(metrics) {
      st.metrics = metrics;
      recompare();
    },
    workerRestarted() {
      st.catalog = false;
      st.measuredOnce = false;
      st.measuring = false;
      el.measureProgress.hidden = true;
      // The page's own "Starting the estimator…" note must not outlive a worker that died.
      if (!st.shown) el.deviceNote.textContent = '';
    },
    ...scenarioMethods(),
  };

  // ---- shareable links (share.js, the scenario's `estimate` section) -----------------------
  function scenarioMethods() {
    const pruneKnob = () => document.querySelector('[data-testid="knob-prune"]');
    const usable = (select, v) => [...select.options].some((o) => o.value === v && !o.disabled);
    return {
      /**
       * The pickers and knobs as they stand, as raw strings (share.js checks them when it
       * encodes): {device, model, weights, compute, kv, context, prompt_tokens, gen_tokens, unit, policy,
       * minutes, runtime, threads, prune?}; `prune` only where the pruning knob (knob-prune)
       * exists; runtime and threads '' are the estimator's defaults.
       */
      getScenario() {
        const s = { device: el.device.value, model: el.model.value, ...knobs() };
        const prune = pruneKnob();
        if (prune) s.prune = prune.value;
        return s;
      },
      /**
       * Sets the panel from a decoded `estimate` section: every value is checked against the
       * catalog (call after onCatalog); the misfits are left out and returned as one string
       * naming each field and value ('; ' between them), the rest is applied; null when all
       * were. Absent fields keep their value. '@loaded' picks the loaded model only if one is loaded and '@config'
       * never (a link carries no model data): the model picker then stays as it is.
       */
      applyScenario(s) {
        if (!st.catalog) return 'the estimator has not started yet';
        const want = { ...(s ?? {}) };
        // Fields the pickers do not offer are left out (and named); the others are applied.
        const errors = [];
        const drop = (k, message) => {
          errors.push(message);
          delete want[k];
        };
        if (want.device !== undefined && !usable(el.device, want.device)) {
          drop('device', `the link's device ${JSON.stringify(want.device)} is not one this page knows`);
        }
        if (want.model !== undefined && want.model !== V.LOADED_MODEL && want.model !== V.CONFIG_MODEL && !usable(el.model, want.model)) {
          drop('model', `the link's model ${JSON.stringify(want.model)} is not a preset this page knows`);
        }
        const named = want.model !== undefined && want.model !== V.LOADED_MODEL && want.model !== V.CONFIG_MODEL;
        if (want.kv !== undefined && !st.kvFormats.includes(want.kv)) drop('kv', `the link's KV format ${JSON.stringify(want.kv)} is not one this build has`);
        if (want.weights !== undefined && !usable(el.weights, want.weights)) drop('weights', `the link's weights ${JSON.stringify(want.weights)} is not a format this page has`);
        if (want.compute !== undefined && !usable(el.compute, want.compute)) drop('compute', `the link's activations ${JSON.stringify(want.compute)} is not a precision this page has`);
        if (want.unit !== undefined && want.unit !== '' && !V.UNITS.includes(want.unit)) drop('unit', `the link's unit ${JSON.stringify(want.unit)} is not a unit`);
        if (want.runtime !== undefined && want.runtime !== '' && !st.runtimes.some((r) => r.id === want.runtime)) drop('runtime', `the link's runtime ${JSON.stringify(want.runtime)} is not one this page knows`);
        if (want.device !== undefined) el.device.value = want.device;
        if (named || (want.model === V.LOADED_MODEL && usable(el.model, V.LOADED_MODEL))) el.model.value = want.model;
        const set = { weights: el.weights, compute: el.compute, kv: el.kv, context: el.context, prompt_tokens: el.prompt, gen_tokens: el.gen, unit: el.unit, policy: el.policy, minutes: el.minutes, threads: el.threads };
        for (const [k, input] of Object.entries(set)) if (want[k] !== undefined) input.value = String(want[k]);
        if (want.threads !== undefined) el.threads.disabled = false;
        if (want.runtime !== undefined) {
          // Listed even where it cannot run (disabled): the estimator's refusal then says why.
          fillRuntimes();
          el.runtime.value = want.runtime;
        }
        const prune = pruneKnob();
        if (prune && want.prune !== undefined) {
          prune.value = String(want.prune);
          prune.dispatchEvent(new Event('input', { bubbles: true }));
        }
        recompute();
        return errors.length ? errors.join('; ') : null;
      },
    };
  }
}
