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

  // Opening column 1 puts its scenario back in the estimator.
  await page.getByTestId('compare-open').first().click();
  await page.waitForFunction((v) => document.querySelector('[data-testid="est-sustained-tps"]').textContent.trim() === v, sd, { timeout: 15_000 });
  assert.equal(await page.getByTestId('device-picker').inputValue(), 'snapdragon-8-gen3');
  assert.equal(Number(await page.getByTestId('knob-prune').inputValue()), 0);

  await page.screenshot({ path: path.join(SHOT_DIR, 'compare.png'), fullPage: true });

  // Readable on a phone: no inner scroll box (the table is as tall as it is), the quantity column
  // stays in view while the columns scroll sideways, short titles, a failing verdict red.
  const box = await page.locator('.compare-box').evaluate((b) => ({ h: b.clientHeight, sh: b.scrollHeight, maxH: getComputedStyle(b).maxHeight }));
  assert.equal(box.maxH, 'none', 'no inner max-height box');
  assert.ok(box.sh <= box.h + 1, `the table does not scroll inside its box (${box.sh} > ${box.h})`);
  assert.equal(await page.locator('[data-testid="compare-table"] th[scope="row"]').first().evaluate((e) => getComputedStyle(e).position), 'sticky');
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
  await page.locator('[data-testid="compare-panel"]').screenshot({ path: path.join(SHOT_DIR, 'compare-390.png') });
  await page.setViewportSize({ width: 1280, height: 900 });

  // Remove the middle column; the rest stay; clear empties the table.
  await page.getByTestId('compare-remove').nth(1).click();
  assert.deepEqual(await page.locator('[data-testid="compare-table"] tr[data-row="sustained"] td').allTextContents(), [sd, pruned]);
  await page.getByTestId('compare-clear').click();
  assert.equal(await page.getByTestId('compare-table').isHidden(), true);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
