// End-to-end test of the guided tour in headless Chromium: start it, walk every step with Next
// (each step quotes the numbers the estimator panel shows at that moment), open a formula, go
// back, close with Escape (the user's scenario comes back, focus returns to the start button);
// then the same at phone width. Same environment as the other e2e files: EDGEFIT_URL (required),
// EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text } from './helpers.mjs';

const browser = useBrowser(); // one Chromium for this file's tests

const STEPS = 8;

/** Waits until the estimator has answered for the current knobs (no request pending, no error). */
async function settled(page) {
  await page.waitForFunction(() => {
    const body = document.querySelector('[data-testid="est-body"]');
    return body.dataset.pending !== 'true' && /^\d/.test(document.querySelector('[data-testid="est-sustained-tps"]')?.textContent.trim() ?? '');
  }, null, { timeout: 30_000, polling: 20 });
}

/** Waits until step `n` (1-based) shows its text (all its estimates are in). */
async function stepReady(page, n) {
  try {
    await page.waitForFunction((want) => {
      const c = document.querySelector('[data-testid="guide-step-count"]').textContent.trim();
      const s = document.querySelector('[data-testid="guide-step"]');
      return c === want && s.dataset.pending !== 'true' && s.querySelector('p') !== null;
    }, `${n} / ${STEPS}`, { timeout: 60_000, polling: 40 });
  } catch (e) {
    throw new Error(`step ${n} did not show: count ${await text(page, 'guide-step-count')}, status "${await text(page, 'guide-status')}"`, { cause: e });
  }
}

/** The panel's numbers as shown now. */
async function shown(page) {
  const ids = ['est-params', 'est-weights-bytes', 'est-kv-per-token', 'est-kv-bytes', 'est-total-bytes', 'est-ttft-ms', 'est-prefill-tps',
    'est-decode-tps', 'est-sustained-tps', 'est-temp-rise', 'est-throttle-s'];
  const out = {};
  for (const id of ids) out[id] = await text(page, id);
  return out;
}

async function knobs(page) {
  const out = {};
  for (const id of ['device-picker', 'preset-picker', 'knob-weights', 'knob-kv', 'knob-context', 'knob-policy', 'knob-minutes', 'knob-prune']) {
    out[id] = await page.getByTestId(id).inputValue();
  }
  return out;
}

/** The value strings of a group's numbers in the current step ("2471763968 bytes (2.30 GiB)" …). */
const groupValues = (page, group) => page.locator('[data-testid="guide-step"] .guide-group').nth(group).locator('.num-value').allTextContents();
const firstNumber = (s) => Number(String(s).match(/-?\d+(\.\d+)?/)?.[0]);
const lit = (page, id) => page.evaluate((i) => {
  const n = document.getElementById(i);
  return (n.matches('input, select') ? n.closest('label') : n).classList.contains('guide-highlight');
}, id);
const focusedTestId = (page) => page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName);

test('guide: every step quotes the live numbers; formulas open; Back; Escape restores the user’s scenario', async (t) => {
  // Request failures are not checked (as in estimator.test.mjs): a retried navigation aborts the
  // first one's requests (the default model's HEAD among them); console and page errors are.
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await settled(page);

  // The user's own scenario, different from the tour's in model, context, policy and pruning.
  await page.getByTestId('preset-picker').selectOption('qwen2.5-0.5b');
  await page.getByTestId('knob-context').fill('4096');
  await page.getByTestId('knob-policy').selectOption('capped');
  await page.getByTestId('knob-prune').fill('0.1');
  await page.getByTestId('knob-prune').dispatchEvent('input');
  await settled(page);
  const mine = await knobs(page);
  const mineNumbers = await shown(page);
  assert.equal(mine['preset-picker'], 'qwen2.5-0.5b');

  assert.equal(await page.getByTestId('guide-panel').isHidden(), true);
  await page.getByTestId('guide-start').click();
  assert.equal(await page.getByTestId('guide-panel').isVisible(), true);
  assert.equal(await page.getByTestId('guide-panel').getAttribute('role'), 'region');
  assert.equal(await focusedTestId(page), 'guide-panel', 'focus moves to the tour');

  const seen = [];
  for (let n = 1; n <= STEPS; n++) {
    await stepReady(page, n);
    const step = await page.getByTestId('guide-step').getAttribute('data-step');
    seen.push(step);
    const body = await text(page, 'guide-step');
    const now = await shown(page);
    const k = await knobs(page);
    const quotes = (...ids) => {
      for (const id of ids) assert.ok(body.includes(now[id]), `step ${n} (${step}) quotes ${id} = ${now[id]}`);
    };
    assert.doesNotMatch(body, /NaN|undefined/, `step ${n} has no NaN`);
    assert.equal(await page.getByTestId('guide-prev').isDisabled(), n === 1);
    assert.equal(await page.getByTestId('guide-next').isDisabled(), n === STEPS);
    assert.equal(k['preset-picker'], 'llama-3.2-1b', 'the tour sets its model');

    if (step === 'golden-four') {
      quotes('est-total-bytes', 'est-ttft-ms', 'est-sustained-tps', 'est-temp-rise');
      assert.equal(k['device-picker'], 'snapdragon-8-gen3');
      assert.ok(await lit(page, 'verdicts'), 'the verdicts are outlined');
    } else if (step === 'bytes-per-token') {
      quotes('est-decode-tps', 'est-weights-bytes');
      // The bound is weights / bandwidth, from the numbers the panel shows.
      // The note rounds the bandwidth to 3 digits (47.0 GB/s), the step quotes it to 2 decimals
      // (46.95 GB/s): the step's bound must agree with the note's figure within that rounding.
      const bwText = (await text(page, 'est-device-note')).match(/([\d.]+) GB\/s/)[1];
      const bw = Number(bwText);
      const halfUlp = 0.5 * 10 ** -((bwText.split('.')[1] ?? '').length);
      const ms = (Number(now['est-weights-bytes']) / (bw * 1e9)) * 1e3;
      const quoted = Number(body.match(/at least ([\d.]+) ms per token/)?.[1]);
      assert.ok(Math.abs(quoted - ms) <= ms * (halfUlp / bw) + 0.005, `bound ${ms.toFixed(2)} ms (from ${bwText} GB/s) vs ${quoted} ms in: ${body}`);
      // Open one number's formula: it has the formula and the values put in.
      const d = page.getByTestId('guide-formula').nth(1);
      await d.locator('summary').click();
      assert.equal(await d.evaluate((x) => x.open), true);
      assert.match(await d.locator('.f-formula').textContent(), /weight bytes \/ bandwidth/);
      assert.match(await d.locator('.f-values').textContent(), new RegExp(`${now['est-weights-bytes']} B`));
      const w = page.getByTestId('guide-formula').first();
      await w.locator('summary').click();
      assert.ok((await w.locator('.f-formula').textContent()).length > 5);
      assert.ok((await w.locator('.f-values').textContent()).length > 5);
      assert.ok(await lit(page, 'est-numbers'));
    } else if (step === 'roofline') {
      quotes('est-prefill-tps', 'est-decode-tps');
      assert.match(body, /ridge point of this device is [\d.]+ FLOP\/byte/);
      assert.ok(await lit(page, 'roofline-chart'));
    } else if (step === 'weight-formats') {
      assert.equal(k['knob-weights'], 'w4g32', 'the panel ends on w4g32');
      quotes('est-weights-bytes', 'est-decode-tps');
      const [f16, w4] = [await groupValues(page, 0), await groupValues(page, 1)];
      assert.ok(firstNumber(w4[0]) < firstNumber(f16[0]), `w4g32 weights ${w4[0]} < f16 ${f16[0]}`);
      assert.equal(String(firstNumber(w4[0])), now['est-weights-bytes']);
      assert.ok(firstNumber(w4[3]) > firstNumber(f16[3]), `w4g32 decode ${w4[3]} > f16 ${f16[3]}`);
      assert.ok(await lit(page, 'k-weights'));
    } else if (step === 'kv-cache') {
      assert.equal(k['knob-kv'], 'kivi4');
      assert.equal(k['knob-context'], '8192');
      quotes('est-kv-bytes', 'est-total-bytes');
      const kv = [];
      for (let g = 0; g < 3; g++) kv.push(firstNumber((await groupValues(page, g))[1]));
      assert.ok(kv[0] > kv[1] && kv[1] > kv[2], `KV bytes f16 > int8 > kivi4: ${kv}`);
      assert.ok(await lit(page, 'mem-chart'));
    } else if (step === 'pruning') {
      assert.equal(Number(k['knob-prune']), 0.3);
      quotes('est-params', 'est-weights-bytes', 'est-decode-tps');
      const [a, b] = [await groupValues(page, 0), await groupValues(page, 1)];
      assert.ok(firstNumber(b[0]) < firstNumber(a[0]), `pruned params ${b[0]} < ${a[0]}`);
      assert.ok(firstNumber(b[1]) < firstNumber(a[1]), 'pruned weights are smaller');
    } else if (step === 'heat') {
      assert.equal(k['knob-policy'], 'paced');
      quotes('est-sustained-tps', 'est-temp-rise');
      assert.ok(await lit(page, 'thermal-chart'));
    } else if (step === 'what-fits') {
      quotes('est-total-bytes', 'est-ttft-ms', 'est-sustained-tps', 'est-temp-rise');
      assert.match(body, /What fits on this device\?/);
      assert.ok(await lit(page, 'fit-panel'));
    }
    if (n < STEPS) await page.getByTestId('guide-next').click();
  }
  assert.deepEqual(seen, ['golden-four', 'bytes-per-token', 'roofline', 'weight-formats', 'kv-cache', 'pruning', 'heat', 'what-fits']);

  // Back to the heat step: it estimates again and outlines the thermal chart.
  await page.getByTestId('guide-prev').click();
  await stepReady(page, STEPS - 1);
  assert.equal(await page.getByTestId('guide-step').getAttribute('data-step'), 'heat');
  assert.ok(await lit(page, 'thermal-chart'));
  assert.ok(!(await lit(page, 'fit-panel')), 'the previous step’s outline is gone');
  await page.screenshot({ path: path.join(SHOT_DIR, 'guide.png') });

  // Escape closes; the user's scenario and its numbers come back; focus is on the start button.
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('guide-panel').isHidden(), true);
  assert.equal(await focusedTestId(page), 'guide-start');
  await settled(page);
  assert.deepEqual(await knobs(page), mine);
  assert.deepEqual(await shown(page), mineNumbers);
  assert.equal(await page.locator('.guide-highlight').count(), 0);

  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('guide at phone width (390 × 844): a bottom sheet, no sideways scrolling, Close restores focus', async (t) => {
  // Request failures are not checked (as in estimator.test.mjs): a retried navigation aborts the
  // first one's requests (the default model's HEAD among them); console and page errors are.
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await page.setViewportSize({ width: 390, height: 844 });
  await settled(page);
  await page.getByTestId('guide-start').click();
  await stepReady(page, 1);
  await page.getByTestId('guide-next').click();
  await stepReady(page, 2);
  const box = await page.getByTestId('guide-panel').boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 390.5, `panel within the width: ${JSON.stringify(box)}`);
  assert.ok(box.y + box.height <= 844.5 && box.height <= 844 * 0.55, `panel is a bottom sheet: ${JSON.stringify(box)}`);
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'no sideways scrolling');
  await page.screenshot({ path: path.join(SHOT_DIR, 'guide-phone.png') });
  await page.getByTestId('guide-close').click();
  assert.equal(await page.getByTestId('guide-panel').isHidden(), true);
  assert.equal(await focusedTestId(page), 'guide-start');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
