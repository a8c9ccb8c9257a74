// End-to-end test of the estimator panel in headless Chromium (playwright-core + the system
// chromium). Same environment as page.test.mjs: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR,
// CHROMIUM. Screenshot: $EDGEFIT_BUILD_DIR/e2e/estimator.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, SHOT_DIR, text } from './helpers.mjs';
import path from 'node:path';

const LOAD_TIMEOUT = 120_000;
const GEN_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

const num = async (page, id) => Number(await text(page, id));

/** Changes a control and waits until `id`'s text differs from `before` (a fresh report). */
async function changeAndWait(page, action, id) {
  const before = await text(page, id);
  await action();
  await page.waitForFunction(
    ([tid, b]) => {
      const e = document.querySelector(`[data-testid="${tid}"]`);
      const err = document.querySelector('[data-testid="est-error"]');
      return (e && e.textContent.trim() !== b && e.textContent.trim() !== '') || (err && !err.hidden);
    },
    [id, before],
    { timeout: 10_000, polling: 20 },
  );
}

async function waitReport(page) {
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="est-weights-bytes"]')?.textContent.trim() ?? ''), null, { timeout: 30_000 });
}

test('estimator panel: knobs change the numbers, verdicts, formulas, errors', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await waitReport(page);
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await changeAndWait(page, () => page.getByTestId('preset-picker').selectOption('llama-3.2-1b'), 'est-weights-bytes');
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('bf16'), 'est-weights-bytes');
  const bf16 = { w: await num(page, 'est-weights-bytes'), tps: await num(page, 'est-decode-tps') };
  const t0 = Date.now();
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('w4g32'), 'est-weights-bytes');
  const recomputeMs = Date.now() - t0;
  const w4 = { w: await num(page, 'est-weights-bytes'), tps: await num(page, 'est-decode-tps') };
  assert.ok(Number.isInteger(bf16.w) && bf16.w > 2e9, `bf16 weights of Llama 3.2 1B are > 2 GB, got ${bf16.w}`);
  assert.ok(w4.w < bf16.w / 2, `w4g32 weights shrink: ${w4.w} vs ${bf16.w}`);
  assert.ok(w4.tps > bf16.tps, `w4g32 decodes faster: ${w4.tps} vs ${bf16.tps}`);

  for (const id of ['est-kv-bytes', 'est-total-bytes']) assert.match(await text(page, id), /^\d+$/, id);
  for (const id of ['est-ttft-ms', 'est-decode-tps', 'est-sustained-tps', 'est-temp-rise']) {
    const v = await text(page, id);
    assert.match(v, /^\d+(\.\d+)?$/, `${id} is a plain number, got ${v}`);
  }
  for (const v of ['memory', 'ttft', 'sustained', 'temperature']) {
    assert.match(await text(page, `verdict-${v}`), /^(pass|fail)$/, `verdict-${v}`);
  }

  // A formula expands with the values put in.
  await page.getByTestId('est-kv-bytes').click();
  const explain = page.getByTestId('explain-est-kv-bytes');
  await explain.waitFor({ state: 'visible' });
  const ex = await explain.textContent();
  assert.match(ex, /formula/);
  assert.match(ex, /KV/);
  assert.match(ex, /×/);

  // Charts drew.
  assert.ok(await page.locator('[data-testid="roofline-chart"] canvas').count() > 0, 'roofline canvas');
  assert.ok(await page.locator('[data-testid="thermal-chart"] canvas').count() > 0, 'thermal canvas');
  assert.ok(await page.locator('[data-testid="mem-chart"] .mem-seg').count() >= 4, 'memory bar segments');

  // Another device changes the numbers.
  await changeAndWait(page, () => page.getByTestId('device-picker').selectOption('raspberry-pi-5'), 'est-decode-tps');
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');

  // Absurd contexts: a clear error in the panel, no crash.
  for (const ctx of ['0', '1000000000']) {
    await page.getByTestId('knob-context').fill(ctx);
    const err = page.getByTestId('est-error');
    await err.waitFor({ state: 'visible', timeout: 10_000 });
    const msg = await err.textContent();
    assert.match(msg, /context/i, `the error names the context: ${msg}`);
    t.diagnostic(`context ${ctx}: ${msg}`);
  }
  await page.getByTestId('knob-context').fill('2048');
  await page.getByTestId('est-error').waitFor({ state: 'hidden', timeout: 10_000 });
  t.diagnostic(`recompute after a knob change: ${recomputeMs} ms (incl. polling); bf16 ${bf16.tps} tok/s, w4g32 ${w4.tps} tok/s`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('estimate vs measured: this browser + the loaded model after a generation', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await waitReport(page);
  await page.getByTestId('load-default').click();
  await page.waitForFunction(() => /^(ready|error:)/.test(document.querySelector('[data-testid="status"]').textContent), null, { timeout: LOAD_TIMEOUT });
  assert.equal(await text(page, 'status'), 'ready');
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('max-tokens').fill('12');
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  // The panel answers while the engine generates (estimates run between tokens).
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="metric-generated-tokens"]').textContent || 0) >= 1, null, { timeout: GEN_TIMEOUT, polling: 20 });
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('q8_0'), 'est-weights-bytes');
  await page.waitForFunction(() => /^(done|error:)/.test(document.querySelector('[data-testid="status"]').textContent), null, { timeout: GEN_TIMEOUT });
  assert.equal(await text(page, 'status'), 'done');

  // The micro-benchmarks report progress probe by probe (a bar and "k / n probes").
  await page.evaluate(() => {
    window.__probeNotes = [];
    const note = document.querySelector('[data-testid="est-device-note"]');
    const bar = document.querySelector('[data-testid="est-measure-progress"]');
    new MutationObserver(() => window.__probeNotes.push({ text: note.textContent, value: bar.value, max: bar.max, hidden: bar.hidden }))
      .observe(note, { childList: true, characterData: true, subtree: true });
  });
  await page.getByTestId('device-picker').selectOption('this-browser');
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const cmp = page.getByTestId('est-compare');
  await cmp.waitFor({ state: 'visible', timeout: 30_000 });
  const rows = {};
  for (const k of ['ttft', 'prefill', 'decode', 'weights', 'kv']) {
    const cell = page.getByTestId(`cmp-error-${k}`);
    const p = Number(await cell.getAttribute('data-percent'));
    assert.ok(Number.isFinite(p), `${k} error is a finite percentage, got ${await cell.getAttribute('data-percent')}`);
    rows[k] = p;
  }
  assert.ok(Math.abs(rows.weights) < 5, `weights bytes agree (${rows.weights} %)`);
  const note = await text(page, 'est-device-note');
  assert.match(note, /Measured in this tab/);
  const probes = (await page.evaluate(() => window.__probeNotes)).filter((n) => /\d+ \/ \d+ probes/.test(n.text));
  assert.ok(probes.length >= 2, `the note counted probes while measuring: ${JSON.stringify(probes)}`);
  assert.equal(probes[0].value, 0, 'the first probe message starts at 0');
  assert.ok(probes.some((p) => !p.hidden && p.value > 0 && p.value < p.max), `the bar showed a probe in between: ${JSON.stringify(probes)}`);
  assert.equal(await page.getByTestId('est-measure-progress').isHidden(), true, 'the bar hides once measured');
  assert.match(await cmp.textContent(), /KV cache int8/);
  await page.getByTestId('est-decode-tps').click();
  await page.screenshot({ path: path.join(SHOT_DIR, 'estimator.png'), fullPage: true });
  t.diagnostic(`errors %: ${JSON.stringify(rows)}; ${note}`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
