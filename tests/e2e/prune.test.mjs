// End-to-end test of the pruning panel in headless Chromium (playwright-core + the system
// chromium): prune the loaded default model in the worker, run the smaller model, see its shape
// in the estimate, download it, and go back to the model as loaded. Same environment as
// page.test.mjs: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM. Screenshot:
// $EDGEFIT_BUILD_DIR/e2e/prune.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, SHOT_DIR, text, waitStatus } from './helpers.mjs';
import { stat } from 'node:fs/promises';
import path from 'node:path';

const LOAD_TIMEOUT = 120_000;
const JOB_TIMEOUT = 120_000;

// SmolLM2-135M: 30 layers, hidden 576, MLP width 1536. Removing 20% of the MLP channels keeps
// round(0.8 · 1536) = 1229 per layer, so 307 channels × (gate + up + down: 3 × 576) × 30 layers go.
const MLP_REMOVED_PARAMS = 307 * 3 * 576 * 30;

const browser = useBrowser(); // one Chromium for this file's tests

async function int(page, id) {
  const s = await text(page, id);
  assert.match(s, /^\d+$/, `${id} should be a plain integer, got ${JSON.stringify(s)}`);
  return Number(s);
}

/** Waits for the estimate panel's parameter count to be `want`; returns what it shows. */
async function estParams(page, want) {
  await page
    .waitForFunction(
      (w) => document.querySelector('[data-testid="est-params"]')?.textContent.trim() === String(w),
      want,
      { timeout: 30_000, polling: 50 },
    )
    .catch(() => {});
  return int(page, 'est-params');
}

test('pruning panel: prune MLP 20% in the worker, run it, estimate it, download it, reset', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { acceptDownloads: true });
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the default model loads');
  const paramsLoaded = await int(page, 'metric-params');
  assert.ok(paramsLoaded > 130e6 && paramsLoaded < 140e6, `SmolLM2-135M's parameters: ${paramsLoaded}`);
  assert.equal(await page.getByTestId('prune-apply').isEnabled(), true, 'Prune is enabled once a model runs');
  assert.equal(await page.getByTestId('prune-reset').isDisabled(), true, 'nothing to reset before a prune');

  // Opening the panel asks the site for the texts; with the evaluation text the loaded model's
  // perplexity is measured at once (the chart's first point).
  await page.locator('[data-testid="prune-panel"] > summary').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="prune-panel"]').dataset.texts, null, { timeout: 30_000 });
  const texts = await page.getByTestId('prune-panel').getAttribute('data-texts');
  const evalServed = texts.includes(' eval');
  t.diagnostic(`texts served: ${texts}`);
  assert.equal(await page.getByTestId('prune-method').inputValue(), texts.startsWith('calibration') ? 'activation' : 'magnitude',
    'activation importance is the default exactly when the calibration text is served');
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready');
  let pplLoaded = null;
  if (evalServed) {
    pplLoaded = Number(await text(page, 'metric-perplexity'));
    assert.ok(pplLoaded > 1 && pplLoaded < 100, `the loaded model's perplexity: ${pplLoaded}`);
  }

  // A bad knob is named beside Prune, in plain words with the input's own range (not in the
  // page's error box), the input marked and focused; editing it clears the message.
  await page.getByTestId('prune-layers').fill('30');
  await page.getByTestId('prune-apply').click();
  await page.getByTestId('prune-error').waitFor({ state: 'visible', timeout: 5_000 });
  assert.equal(await text(page, 'prune-error'),
    'Layers dropped must be a whole number from 0 to 29 (the model has 30 layers and keeps at least one); got 30.');
  assert.equal(await page.getByTestId('prune-layers').getAttribute('aria-invalid'), 'true');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'prune-layers', 'the bad input has the focus');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'not in the global error box');
  assert.equal(await text(page, 'status'), 'ready', 'nothing started');
  await page.getByTestId('prune-layers').fill('0');
  assert.equal(await page.getByTestId('prune-error').isVisible(), false, 'editing the input clears the message');
  assert.equal(await page.getByTestId('prune-layers').getAttribute('aria-invalid'), null);

  // The download's format is said before the click: the loaded 4-bit weights cannot be written,
  // so the button says q8_0 and the note beside it says why.
  assert.equal(await text(page, 'prune-download'), 'Download GGUF (q8_0)');
  assert.match(await text(page, 'prune-download-note'),
    /^Downloads as q8_0: the engine writes GGUF in f32, f16 or q8_0, not yet in the loaded 4-bit q4_1, so the file is larger than the model in memory\.$/);

  // Prune 20% of the MLP channels with the default importance (activation-aware when the
  // calibration text is served: the worker calibrates first, with progress).
  await page.getByTestId('prune-mlp').fill('0.2');
  assert.equal(await page.locator('#prune-mlp-out').textContent(), '20%');
  const method = await page.getByTestId('prune-method').inputValue();
  let t0 = Date.now();
  await page.getByTestId('prune-apply').click();
  assert.equal(await page.getByTestId('generate').isDisabled(), true, 'generation waits while pruning');
  if (method === 'activation') {
    await page.waitForFunction(
      () => /^calibrating · \d+ \/ 1024 tokens/.test(document.querySelector('[data-testid="prune-progress-text"]').textContent),
      null,
      { timeout: JOB_TIMEOUT, polling: 20 },
    );
  }
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready', 'the prune (and its perplexity) ends ready');
  const pruneMs = Date.now() - t0;
  const paramsPruned = await int(page, 'metric-params');
  assert.equal(paramsPruned, paramsLoaded - MLP_REMOVED_PARAMS, `20% of the MLP channels go: ${paramsLoaded} -> ${paramsPruned}`);
  assert.match(await text(page, 'prune-summary'), /^9210 MLP channels$/, 'the report names what went (307 × 30)');
  assert.equal(await page.getByTestId('prune-reset').isEnabled(), true);
  assert.equal(await text(page, 'metric-load-label'), 'Prune', 'the time metric names the change it timed');
  const weightsPruned = await int(page, 'metric-weights-bytes');
  const peakBytes = await int(page, 'metric-peak-bytes');
  let pplPruned = null;
  if (evalServed) {
    pplPruned = Number(await text(page, 'metric-perplexity'));
    assert.ok(Number.isFinite(pplPruned) && pplPruned > pplLoaded, `pruning costs quality: ${pplLoaded} -> ${pplPruned}`);
    // More than twice the perplexity as loaded: the page warns (and only then).
    // On a line of its own, not run into the note.
    const warned = await page.getByTestId('prune-warning').isVisible();
    assert.equal(warned, pplPruned > 2 * pplLoaded, `warning shown = ${warned} for ${pplLoaded} -> ${pplPruned}`);
    if (warned) assert.match(await text(page, 'prune-warning'), /^Warning: perplexity rose \d+\.\d× /);
    assert.doesNotMatch(await text(page, 'prune-note'), /Warning/, 'the note itself carries no warning');
    // The chart's legend names its series without "–" placeholders.
    assert.doesNotMatch(await page.locator('[data-testid="prune-chart"] .u-legend').textContent(), /–/);
    assert.equal(await page.locator('[data-testid="prune-chart"] canvas').count() > 0, true, 'the quality/size chart is drawn');
  }
  // The model info shows the pruned model too.
  assert.match(await text(page, 'model-info'), new RegExp(paramsPruned.toLocaleString('en-US')));
  assert.match(await text(page, 'model-info'), /Pruned widths\s*FFN \d+(\u2013\d+)?, \d+(\u2013\d+)? heads/, 'the model info shows the pruned widths');
  // Its weights are named for what they are (re-quantized after pruning, nothing of the file's
  // kept), the same in the model info and the metrics; the config's widths say "as loaded".
  assert.match(await text(page, 'model-info'), /Weights in memory\s*[\d.]+ MiB \(w4g32 \(re-quantized after pruning\) · embedding q8_0\)/);
  assert.equal(await text(page, 'metric-weights-format'), 'w4g32 (re-quantized after pruning) · embedding q8_0');
  assert.match(await text(page, 'model-info'), /FFN size\s*1536 as loaded/);

  // The pruned model generates.
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('max-tokens').fill('6');
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('chat').setChecked(false);
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', JOB_TIMEOUT), 'done');
  assert.ok((await int(page, 'metric-generated-tokens')) > 0, 'the pruned model generated tokens');
  const out = await text(page, 'output');

  // The estimate describes the pruned shape.
  await page.getByTestId('preset-picker').selectOption('@loaded');
  assert.equal(await estParams(page, paramsPruned), paramsPruned, "the estimate's parameters for the loaded model are the pruned model's");
  assert.match(await page.locator('[data-testid="preset-picker"] option[value="@loaded"]').textContent(), /pruned/);

  // Download the running (pruned) model as GGUF q8_0.
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: JOB_TIMEOUT }), page.getByTestId('prune-download').click()]);
  assert.match(download.suggestedFilename(), /-pruned-.*-q8_0\.gguf$/, download.suggestedFilename());
  const file = await download.path();
  const size = (await stat(file)).size;
  assert.ok(size > 50e6, `the GGUF file has the model's bytes: ${size}`);
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready');
  // The 4-bit model downloads as q8_0, and the page says why.
  assert.match(await text(page, 'prune-progress-text'), /saved as q8_0: the engine writes GGUF in f32, f16 or q8_0, not yet in the loaded 4-bit w4g32/);
  await page.screenshot({ path: path.join(SHOT_DIR, 'prune.png'), fullPage: true });

  // The same ratio by magnitude: the same shape (the ratio fixes it), and, with calibration,
  // worse quality (module docs of prune.rs: magnitude is a fallback only). Each prune starts
  // from the model as loaded.
  let pplMagnitude = null;
  let magnitudeMs = null;
  if (method === 'activation') {
    await page.getByTestId('prune-method').selectOption('magnitude');
    t0 = Date.now();
    await page.getByTestId('prune-apply').click();
    assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready');
    magnitudeMs = Date.now() - t0;
    assert.equal(await int(page, 'metric-params'), paramsPruned, 'the same ratio gives the same parameter count');
    if (evalServed) {
      pplMagnitude = Number(await text(page, 'metric-perplexity'));
      assert.ok(pplMagnitude > pplPruned, `magnitude ${pplMagnitude} is worse than activation ${pplPruned}`);
    }
  }

  // Reset: the model as loaded runs again, here and in the estimate.
  await page.getByTestId('prune-reset').click();
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready');
  assert.equal(await int(page, 'metric-params'), paramsLoaded, 'reset runs the model as loaded');
  assert.equal(await text(page, 'metric-load-label'), 'Restore');
  assert.equal(await estParams(page, paramsLoaded), paramsLoaded, 'the estimate follows the reset');
  if (evalServed) assert.equal(Number(await text(page, 'metric-perplexity')), pplLoaded, "the loaded model's perplexity is shown again");

  t.diagnostic(`${method} prune ${pruneMs} ms (magnitude ${magnitudeMs} ms, perplexity ${pplMagnitude}); params ${paramsLoaded} -> ${paramsPruned}; weights ${weightsPruned} B; ` +
    `wasm memory after prune ${peakBytes} B; perplexity ${pplLoaded} -> ${pplPruned}; GGUF ${size} B; output ${JSON.stringify(out)}`);
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'no error in normal use');
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
