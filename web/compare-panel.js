// edgefit: compare scenarios, the DOM part. "Add to comparison" takes what the estimator panel
// shows (its scenario and report, see estimate-panel.js's snapshot()) as a new column; up to
// four columns side by side, every cell that differs from the first column highlighted; each
// column can be removed or opened again in the estimator. The pure part is compare-view.js.

import * as CV from './compare-view.js';

const $ = (id) => document.getElementById(id);

export function createComparePanel({ estimator }) {
  const el = {
    add: $('compare-add'),
    clear: $('compare-clear'),
    status: $('compare-status'),
    table: $('compare-table'),
    head: $('compare-head'),
    body: $('compare-body'),
  };
  let entries = []; // {values, title, scenario}

  function say(text) {
    el.status.textContent = text;
  }

  function render() {
    el.clear.disabled = entries.length === 0;
    el.table.hidden = entries.length === 0;
    const headRow = document.createElement('tr');
    const corner = document.createElement('th');
    corner.scope = 'col';
    corner.textContent = 'Scenario';
    headRow.append(corner);
    // Titles from what differs between the columns (two columns never read the same).
    const titles = CV.columnTitles(entries);
    entries.forEach((e, i) => {
      const th = document.createElement('th');
      th.scope = 'col';
      const title = document.createElement('span');
      title.className = 'cmp-col-title';
      title.setAttribute('data-testid', 'compare-col-title');
      title.textContent = `${i + 1}. ${titles[i].short}`;
      title.title = `${titles[i].full} (${e.title})`;
      const open = document.createElement('button');
      open.type = 'button';
      open.textContent = 'Open';
      open.setAttribute('data-testid', 'compare-open');
      open.title = 'Show this scenario in the estimator above';
      open.addEventListener('click', () => {
        const err = estimator.applyScenario(e.scenario);
        say(err ? `Could not open scenario ${i + 1}: ${err}` : `Scenario ${i + 1} is shown above.`);
      });
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.textContent = 'Remove';
      remove.setAttribute('data-testid', 'compare-remove');
      remove.setAttribute('aria-label', `Remove scenario ${i + 1}`);
      remove.addEventListener('click', () => {
        entries = entries.filter((x) => x !== e);
        say(`Scenario ${i + 1} removed.`);
        render();
      });
      th.append(title, ' ', open, ' ', remove);
      headRow.append(th);
    });
    el.head.replaceChildren(headRow);
    el.body.replaceChildren(...CV.compareTable(entries).map((row) => {
      const tr = document.createElement('tr');
      tr.dataset.row = row.key;
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = row.label;
      tr.append(th);
      for (const c of row.cells) {
        const td = document.createElement('td');
        td.textContent = c.text;
        if (c.diff) {
          td.dataset.diff = 'true';
          td.title = 'differs from scenario 1';
        }
        // A failing verdict is red whether or not it differs (the "differs" yellow is for values).
        const verdict = CV.verdictOf(c.text);
        if (verdict) td.dataset.verdict = verdict;
        tr.append(td);
      }
      return tr;
    }));
  }

  el.add.addEventListener('click', () => {
    const shown = estimator.snapshot();
    if (!shown) {
      say('The estimator has no answer to add yet (or shows an error): wait for it, then add.');
      return;
    }
    const entry = { ...CV.compareEntry(shown), scenario: shown.scenario };
    const next = CV.addEntry(entries, entry);
    if (next.error) {
      say(next.error);
      return;
    }
    entries = next.entries;
    say(`Added scenario ${entries.length}: ${CV.columnTitles(entries).at(-1).full}.`);
    render();
  });

  el.clear.addEventListener('click', () => {
    entries = [];
    say('Comparison cleared.');
    render();
  });

  render();
  return { count: () => entries.length };
}
