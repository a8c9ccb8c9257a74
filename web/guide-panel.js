// edgefit guided tour, the DOM part: a non-modal panel that walks through the domain's ideas with
// the live numbers. Each step sets the estimator panel through its applyScenario (so the page
// really changes), waits for each answer (snapshot() non-null), keeps the snapshots of a step's
// runs, and renders guide-view.js's text and numbers; each number opens to its formula with the
// values put in. The user's own scenario is saved on start and restored on close. Text is set
// with textContent only. The pure part is guide-view.js.

import * as G from './guide-view.js';
import { renderExplain } from './estimate-panel.js';

const $ = (id) => document.getElementById(id);

/** How long one estimate may take before the tour says so (the worker may still be starting). */
const ANSWER_TIMEOUT_MS = 60_000;

export function createGuidePanel({ estimator }) {
  const el = {
    start: $('guide-start'),
    panel: $('guide-panel'),
    count: $('guide-step-count'),
    step: $('guide-step'),
    status: $('guide-status'),
    prev: $('guide-prev'),
    next: $('guide-next'),
    close: $('guide-close'),
    estError: $('est-error'),
    estBody: $('est-body'),
  };
  const st = {
    open: false,
    index: 0,
    saved: null, // the user's scenario (getScenario) when the tour started
    run: 0, // bumped on every step change and on close: older runs stop at their next await
    lit: [],
  };

  const say = (text) => {
    el.status.textContent = text;
  };

  function highlight(step) {
    for (const n of st.lit) n.classList.remove('guide-highlight');
    st.lit = [];
    if (!step) return;
    for (const id of step.highlight) {
      const node = $(id);
      if (!node) continue;
      // A knob is outlined with its label, so its name shows too.
      const target = node.matches('input, select') ? node.closest('label') ?? node : node;
      target.classList.add('guide-highlight');
      st.lit.push(target);
    }
    $(step.scroll)?.scrollIntoView({ block: 'start' });
  }

  /** Resolves with the panel's snapshot once its answer is in; null when run `token` is over. */
  function answer(token) {
    const t0 = performance.now();
    return new Promise((resolve, reject) => {
      const poll = () => {
        if (token !== st.run) return resolve(null);
        const snap = estimator.snapshot();
        if (snap) return resolve(snap);
        if (!el.estError.hidden && el.estBody.dataset.pending === undefined) {
          return reject(new Error(el.estError.textContent || 'the estimator could not answer'));
        }
        if (performance.now() - t0 > ANSWER_TIMEOUT_MS) return reject(new Error('no answer from the estimator within a minute'));
        setTimeout(poll, 40);
      };
      poll();
    });
  }

  function item(it) {
    const d = document.createElement('details');
    d.className = 'guide-num';
    d.dataset.key = it.key;
    d.setAttribute('data-testid', 'guide-formula');
    const s = document.createElement('summary');
    const label = document.createElement('span');
    label.className = 'num-label';
    label.textContent = it.label;
    const value = document.createElement('span');
    value.className = 'num-value';
    value.textContent = it.text;
    s.append(label, ' ', value);
    const box = document.createElement('div');
    box.className = 'explain';
    renderExplain(box, it.explain);
    d.append(s, box);
    return d;
  }

  function render(view) {
    const h = document.createElement('h3');
    h.id = 'guide-step-h';
    h.textContent = view.title;
    const parts = [h];
    for (const text of view.paragraphs) {
      const p = document.createElement('p');
      p.textContent = text;
      parts.push(p);
    }
    const groups = document.createElement('div');
    groups.className = 'guide-groups';
    for (const g of view.groups) {
      const box = document.createElement('div');
      box.className = 'guide-group';
      const t = document.createElement('h4');
      t.textContent = g.title;
      box.append(t, ...g.items.map(item));
      groups.append(box);
    }
    parts.push(groups);
    el.step.replaceChildren(...parts);
  }

  async function show(index) {
    const step = G.STEPS[index];
    const token = ++st.run;
    st.index = index;
    el.count.textContent = G.stepCount(index);
    el.prev.disabled = index === 0;
    el.next.disabled = index === G.STEPS.length - 1;
    if (document.activeElement?.disabled) el.panel.focus();
    el.step.dataset.step = step.id;
    el.step.dataset.pending = 'true';
    const h = document.createElement('h3');
    h.textContent = step.title;
    el.step.replaceChildren(h);
    highlight(step);

    const runs = G.stepScenarios(step);
    const snaps = [];
    try {
      for (const [i, r] of runs.entries()) {
        say(runs.length > 1 ? `Estimating ${r.label} (${i + 1} of ${runs.length})…` : 'Estimating…');
        const err = estimator.applyScenario(r.scenario);
        if (err) throw new Error(err);
        const snap = await answer(token);
        if (snap === null) return; // the user moved on
        snaps.push(snap);
      }
    } catch (e) {
      if (token !== st.run) return;
      delete el.step.dataset.pending;
      say(`This step could not be estimated: ${e.message}`);
      return;
    }
    if (token !== st.run) return;
    render(G.buildStep(step.id, snaps));
    delete el.step.dataset.pending;
    say(runs.length > 1 ? `The panel now shows the last setting, ${runs[runs.length - 1].label}.` : '');
  }

  function open() {
    if (st.open) {
      el.panel.focus();
      return;
    }
    st.saved = estimator.getScenario();
    st.open = true;
    el.panel.hidden = false;
    el.start.setAttribute('aria-expanded', 'true');
    document.body.classList.add('guide-open');
    el.panel.focus();
    show(0);
  }

  function close() {
    if (!st.open) return;
    st.run++;
    st.open = false;
    highlight(null);
    el.panel.hidden = true;
    el.start.setAttribute('aria-expanded', 'false');
    document.body.classList.remove('guide-open');
    delete el.step.dataset.pending;
    if (st.saved) {
      const err = estimator.applyScenario(st.saved);
      if (err) say(`Your settings could not all be restored: ${err}`);
    }
    st.saved = null;
    el.start.focus();
  }

  el.start.addEventListener('click', open);
  el.close.addEventListener('click', close);
  el.prev.addEventListener('click', () => st.index > 0 && show(st.index - 1));
  el.next.addEventListener('click', () => st.index < G.STEPS.length - 1 && show(st.index + 1));
  document.addEventListener('keydown', (e) => {
    if (st.open && e.key === 'Escape' && !e.defaultPrevented) {
      e.preventDefault();
      close();
    }
  });

  return { isOpen: () => st.open, close };
}
