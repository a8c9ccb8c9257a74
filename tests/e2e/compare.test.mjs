// End-to-end test of "Compare scenarios" in headless Chromium: two devices and a pruned
// variant side by side, differences highlighted, columns removable and re-openable. Same
// environment as the other e2e files: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text } from './helpers.mjs';

const browser = useBrowser(); // one Chromium for this file's tests

/** Waits until the estimator has answered for the current knobs (no request pending, no error). */
async function settled(page) {
  await page.waitForFunction(() => {
    const body = document.querySelector('[data-testid="est-body"]');
    return body.dataset.pending !== 'true' && /^\d/.test(document.querySelector('[data-testid="est-sustained-tps"]')?.textContent.trim() ?? '');
  }, null, { timeout: 30_000, polling: 20 });
}

const cell = (page, row, col) => page.locator(`[data-testid="compare-table"] tr[data-row="${row}"] td`).nth(col);

test('compare: Snapdragon 8 Gen 3 vs A17 Pro vs pruned, differences highlighted', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await settled(page);
  assert.equal(await page.getByTestId('compare-table').isHidden(), true, 'no table before anything is added');

  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await page.getByTestId('preset-picker').selectOption('llama-3.2-1b');
  await settled(page);
  const sd = await text(page, 'est-sustained-tps');
  await page.getByTestId('compare-add').click();

  await page.getByTestId('device-picker').selectOption('apple-a17-pro');
  await settled(page);
  await page.waitForFunction((v) => document.querySelector('[data-testid="est-sustained-tps"]').textContent.trim() !== v, sd, { timeout: 15_000 });
  await settled(page);
  const a17 = await text(page, 'est-sustained-tps');
  await page.getByTestId('compare-add').click();

  await page.getByTestId('knob-prune').fill('0.3');
  await page.getByTestId('knob-prune').dispatchEvent('input');
  await page.waitForFunction((v) => document.querySelector('[data-testid="est-sustained-tps"]').textContent.trim() !== v, a17, { timeout: 15_000 });
  await settled(page);
  const pruned = await text(page, 'est-sustained-tps');
  await page.getByTestId('compare-add').click();

  assert.equal(await page.getByTestId('compare-table').isVisible(), true);
  assert.equal(await page.locator('[data-testid="compare-table"] thead th').count(), 4, 'a label column and three scenarios');
  assert.deepEqual(await page.locator('[data-testid="compare-table"] tr[data-row="sustained"] td').allTextContents(), [sd, a17, pruned]);
  // Device differs from column 1 in columns 2 and 3; the model is the same everywhere; only the
  // pruned column differs in pruning and parameters.
  const diff = async (row, col) => (await cell(page, row, col).getAttribute('data-diff')) === 'true';
  assert.deepEqual([await diff('device', 0), await diff('device', 1), await diff('device', 2)], [false, true, true]);
  assert.deepEqual([await diff('model', 1), await diff('model', 2)], [false, false]);
  assert.deepEqual([await diff('params', 1), await diff('params', 2)], [false, true]);
  assert.equal(await cell(page, 'prune', 2).textContent(), '30%');
  assert.match(await cell(page, 'device', 1).textContent(), /A17 Pro/);
  // Column titles say what differs, so no two read the same (today's "Llama-3.2-1B · Apple A17
  // Pr…" twice is gone).
  assert.deepEqual(await page.locator('[data-testid="compare-col-title"]').allTextContents(),
    ['1. Snapdragon 8 Gen 3, unpruned', '2. Apple A17 Pro, unpruned', '3. Apple A17 Pro, 30% pruned']);
  assert.match(await text(page, 'compare-status'), /^Added scenario 3: Apple A17 Pro, 30% pruned\.$/);

  // Opening column 1 puts its scenario back in the estimator.
  await page.getByTestId('compare-open').first().click();
  await page.waitForFunction((v) => document.querySelector('[data-testid="est-sustained-tps"]').textContent.trim() === v, sd, { timeout: 15_000 });
  assert.equal(await page.getByTestId('device-picker').inputValue(), 'snapdragon-8-gen3');
  assert.equal(Number(await page.getByTestId('knob-prune').inputValue()), 0);

  await page.screenshot({ path: path.join(SHOT_DIR, 'compare.png'), fullPage: true });

  // Readable on a phone: no small inner scroll box (the box may be as tall as the screen, and a
  // table shorter than that never scrolls in it), the scenario titles and the quantity column
  // stay in view while the table scrolls, short titles, a failing verdict red.
  const boxAt = () => page.locator('.compare-box').evaluate((b) => ({ h: b.clientHeight, sh: b.scrollHeight, maxH: parseFloat(getComputedStyle(b).maxHeight), vh: window.innerHeight }));
  let box = await boxAt();
  assert.ok(box.maxH >= box.vh - 20, `the box is the screen's height, not a small inner box (max-height ${box.maxH} px of a ${box.vh} px viewport)`);
  assert.ok(box.sh <= box.h + 1 || box.h >= box.vh - 20, `a table shorter than the screen does not scroll inside its box (${box.sh} > ${box.h})`);
  assert.equal(await page.locator('[data-testid="compare-table"] th[scope="row"]').first().evaluate((e) => getComputedStyle(e).position), 'sticky');
  assert.equal(await page.locator('[data-testid="compare-table"] thead th').first().evaluate((e) => getComputedStyle(e).position), 'sticky');
  /** Scrolls the box down and right; where the header row and the first column then are. */
  const stuck = () => page.locator('.compare-box').evaluate((b) => {
    b.scrollTop = b.scrollHeight;
    b.scrollLeft = b.scrollWidth;
    const r = b.getBoundingClientRect();
    // The box's padding edge (inside its border) is where a stuck cell sits.
    r.y += b.clientTop;
    r.x += b.clientLeft;
    const head = b.querySelector('thead th:nth-child(2)').getBoundingClientRect();
    const label = b.querySelector('tbody tr:last-child th[scope="row"]').getBoundingClientRect();
    const corner = b.querySelector('thead th:first-child').getBoundingClientRect();
    const out = { scrolledDown: b.scrollTop, scrolledRight: b.scrollLeft, headTop: head.top - r.top, labelLeft: label.left - r.left, cornerTop: corner.top - r.top, cornerLeft: corner.left - r.left };
    b.scrollTop = 0;
    b.scrollLeft = 0;
    return out;
  });
  for (const t of await page.locator('[data-testid="compare-table"] .cmp-col-title').allTextContents()) {
    assert.ok([...t].length <= 32, `a short column title: ${JSON.stringify(t)}`);
  }
  const verdicts = await page.locator('[data-testid="compare-table"] tr[data-row^="verdict_"] td').evaluateAll((tds) => tds.map((td) => ({ t: td.textContent, v: td.dataset.verdict, bg: getComputedStyle(td).backgroundColor })));
  for (const v of verdicts) assert.equal(v.v, v.t, `a verdict cell is marked ${v.t}`);
  const fails = verdicts.filter((v) => v.t === 'fail');
  for (const f of fails) assert.equal(f.bg, 'rgb(253, 236, 236)', 'fail is red (the error background), not the "differs" yellow');
  t.diagnostic(`verdict cells: ${verdicts.length}, failing: ${fails.length}`);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(200);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no page-wide sideways scroll at 390 px (${overflow} px)`);
  box = await boxAt();
  assert.ok(box.maxH >= box.vh - 20, `at 390 px too the box is the screen's height (${box.maxH} of ${box.vh} px)`);
  await page.locator('[data-testid="compare-panel"]').screenshot({ path: path.join(SHOT_DIR, 'compare-390.png') });
  // A phone in landscape (or a short window): the table is taller than the screen and scrolls
  // in its box both ways; the titles stay at its top, the quantities at its left.
  await page.setViewportSize({ width: 390, height: 480 });
  await page.waitForTimeout(200);
  await page.locator('.compare-box').scrollIntoViewIfNeeded();
  const s = await stuck();
  t.diagnostic(`390x480: box scrolled ${s.scrolledDown} px down and ${s.scrolledRight} px right; header at ${s.headTop.toFixed(1)} px, first column at ${s.labelLeft.toFixed(1)} px`);
  assert.ok(s.scrolledDown > 100 && s.scrolledRight > 50, `the table scrolls inside the box at 390x480 (${s.scrolledDown} down, ${s.scrolledRight} right)`);
  assert.ok(Math.abs(s.headTop) <= 1, `the scenario titles stay at the box's top (${s.headTop} px)`);
  assert.ok(Math.abs(s.labelLeft) <= 1, `the quantity column stays at the box's left (${s.labelLeft} px)`);
  assert.ok(Math.abs(s.cornerTop) <= 1 && Math.abs(s.cornerLeft) <= 1, `the corner cell stays at the top left (${s.cornerTop}, ${s.cornerLeft})`);
  await page.locator('.compare-box').evaluate((b) => { b.scrollTop = 200; b.scrollLeft = 120; });
  await page.locator('[data-testid="compare-panel"]').screenshot({ path: path.join(SHOT_DIR, 'compare-390-scrolled.png') });
  await page.setViewportSize({ width: 1280, height: 900 });

  // Remove the middle column; the rest stay; clear empties the table.
  await page.getByTestId('compare-remove').nth(1).click();
  assert.deepEqual(await page.locator('[data-testid="compare-table"] tr[data-row="sustained"] td').allTextContents(), [sd, pruned]);
  await page.getByTestId('compare-clear').click();
  assert.equal(await page.getByTestId('compare-table').isHidden(), true);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
