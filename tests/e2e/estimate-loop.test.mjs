// The page's own loop, end to end: "this browser tab (measured)" + "the loaded model", the
// estimate against the engine's measurement for the default model in every weight format the
// page loads, every KV format and a pruned model. Each run's errors (signed %, estimate −
// measured over measured) go to $EDGEFIT_BUILD_DIR/e2e/estimate-errors.json.
//
// The bounds asserted here are loose on purpose: they catch a broken loop (an estimate that
// ignores the format, the kernel or the KV cache, a table that does not refresh, an error of
// several times), not the targets (±15 % decode, ±25 % prefill), which the JSON records
// and README reports as measured. Same environment as page.test.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text, waitStatus } from './helpers.mjs';
import * as P from '../../web/protocol.js';

const LOAD_TIMEOUT = 180_000;
const GEN_TIMEOUT = 120_000;
// The page's default run: its prompt box and 32 new tokens, greedy.
const PROMPT = 'The capital of France is';
const MAX_TOKENS = '32';
// Measured on a 2-core machine shared with other builds (load average 12), a run's own speed
// moved by 2-3× between two runs of the same format and a 5-token prefill by up to 5×, so the
// bound is a factor of 8 either way: an estimate that ignores the format or the kernel, or a roof
// 37× off (the kind of miss issue 15 reports), still fails.
const FACTOR = 8;

const browser = useBrowser();

/** The comparison table as {key: {estimate, measured, error}} (numbers, null for "–"). */
async function readTable(page) {
  return page.evaluate(() => {
    const out = {};
    for (const tr of document.querySelectorAll('[data-testid="est-compare"] tbody tr')) {
      const td = tr.querySelectorAll('td');
      const n = (s) => {
        const v = Number.parseFloat(s);
        return Number.isFinite(v) ? v : null;
      };
      const p = td[2]?.dataset.percent ?? '';
      out[tr.dataset.key] = { estimate: n(td[0].textContent), measured: n(td[1].textContent), error: p === '' ? null : Number(p) };
    }
    return out;
  });
}

/** Generates the default run and waits for the comparison table to show it. */
async function runAndCompare(page) {
  const before = await page.evaluate(() => document.querySelector('[data-testid="est-compare"] tbody')?.textContent ?? '');
  await page.getByTestId('prompt').fill(PROMPT);
  await page.getByTestId('max-tokens').fill(MAX_TOKENS);
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  try {
    await page.waitForFunction(
      (b) => {
        const c = document.querySelector('[data-testid="est-compare"]');
        const body = c?.querySelector('tbody')?.textContent ?? '';
        return c && !c.hidden && body !== '' && body !== b;
      },
      before,
      { timeout: 60_000, polling: 50 },
    );
  } catch (e) {
    const hint = await text(page, 'est-compare-hint');
    throw new Error(`the comparison did not refresh (hint: ${JSON.stringify(hint)}): ${e.message}`);
  }
  const table = await readTable(page);
  return {
    note: await text(page, 'est-device-note'),
    formats: await page.evaluate(() => document.getElementById('cmp-formats')?.textContent ?? ''),
    warm_up: await text(page, 'cmp-warmup'),
    decode_tok_s: Number(await text(page, 'metric-decode-tps')),
    table,
  };
}

test('estimate vs measured in this tab: every weight format, every KV format, a pruned model', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  const t0 = Date.now();
  await page.getByTestId('device-picker').selectOption('this-browser');
  const runs = [];
  const record = (label, weights, kv, r) => {
    runs.push({ label, weights, kv, ...r });
    const e = r.table;
    t.diagnostic(
      `${label}: decode est ${e.decode?.estimate} / measured ${e.decode?.measured} tok/s (${e.decode?.error?.toFixed(1)} %), ` +
        `prefill est ${e.prefill?.estimate} / measured ${e.prefill?.measured} tok/s (${e.prefill?.error?.toFixed(1)} %), ` +
        `ttft ${e.ttft?.error?.toFixed(1)} % [${r.formats}] ${r.warm_up}`,
    );
  };

  // Every weight format the page loads, with the page's default KV format.
  const only = process.env.EDGEFIT_LOOP_ONLY; // for debugging by hand: "prune" skips the loops
  for (const [i, w] of P.WEIGHT_FORMATS.entries()) {
    if (only === 'prune' && i > 0) break;
    await page.getByTestId('weights-format').selectOption(w);
    if (i === 0) await page.getByTestId('load-default').click();
    assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', `loads in ${w}`);
    // A load resets the estimator's model picker: compare the loaded model again.
    await page.getByTestId('preset-picker').selectOption('@loaded');
    const kv = await page.getByTestId('kv-format').inputValue();
    record(`weights ${w}`, w, kv, await runAndCompare(page));
  }

  // Every KV format, with the default weights.
  await page.getByTestId('weights-format').selectOption(P.DEFAULT_WEIGHTS);
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const kvFormats = await page.getByTestId('kv-format').evaluate((s) => [...s.options].map((o) => o.value).filter(Boolean));
  assert.ok(kvFormats.length >= 4, `the page offers KV formats: ${kvFormats}`);
  for (const kv of only === 'prune' ? [] : kvFormats) {
    if ((await page.getByTestId('kv-format').inputValue()) !== kv) {
      await page.getByTestId('kv-format').selectOption(kv);
      assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', `switches to KV ${kv}`);
    }
    record(`kv ${kv}`, P.DEFAULT_WEIGHTS, kv, await runAndCompare(page));
  }

  // A pruned model (30 % of the MLP channels, by weight magnitude: no calibration pass).
  // Opening the panel fetches its texts (and may measure the loaded model's perplexity first).
  await page.locator('[data-testid="prune-panel"] > summary').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="prune-panel"]').dataset.texts, null, { timeout: 30_000 });
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  await page.getByTestId('prune-method').selectOption('magnitude');
  await page.getByTestId('prune-mlp').fill('0.3');
  await page.getByTestId('prune-apply').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'prunes');
  record('pruned mlp 30%', P.DEFAULT_WEIGHTS, await page.getByTestId('kv-format').inputValue(), await runAndCompare(page));

  const measurements = await text(page, 'est-device-note');
  const out = { prompt: PROMPT, max_tokens: Number(MAX_TOKENS), device_note: measurements, seconds: (Date.now() - t0) / 1000, runs };
  await writeFile(path.join(SHOT_DIR, 'estimate-errors.json'), `${JSON.stringify(out, null, 2)}\n`);
  t.diagnostic(`wrote ${path.join(SHOT_DIR, 'estimate-errors.json')} (${out.seconds.toFixed(0)} s)`);

  // The first run after the first load ran after a warm-up of the loaded model (engine
  // Engine::warm_up: before it, that run executed the forward pass, attention and the tokenizer
  // as Chromium's baseline code and missed prefill by +72.8 % on a quiet machine while the later
  // rows were within ±25 %). Its error is recorded in the JSON, not asserted against the ±25 %
  // target: on this shared 2-core machine even warm rows miss it under load (README), so such an
  // assertion would fail on the machine's load, not on the page. What is asserted is that the
  // warm-up ran before that run, with its passes, and that the note says so.
  const first = runs[0];
  const warm = /warm-up of the loaded model: (\d+) passes \(a (\d+)-token prefill and (\d+) decode steps each/.exec(first.warm_up ?? '');
  assert.ok(warm, `the first run's comparison says what the warm-up ran: ${JSON.stringify(first.warm_up)}`);
  assert.ok(Number(warm[1]) >= 2 && Number(warm[2]) >= 6 && Number(warm[3]) >= 1, `the warm-up's passes: ${first.warm_up}`);

  // Every row compared, within the loose bounds.
  for (const r of runs) {
    for (const k of ['ttft', 'prefill', 'decode', 'weights', 'kv']) {
      assert.ok(Number.isFinite(r.table[k]?.error), `${r.label}: ${k} has an error: ${JSON.stringify(r.table[k])}`);
    }
    for (const k of ['decode', 'prefill']) {
      const ratio = r.table[k].estimate / r.table[k].measured;
      assert.ok(ratio < FACTOR && ratio > 1 / FACTOR, `${r.label}: ${k} estimate ${r.table[k].estimate} vs measured ${r.table[k].measured}`);
    }
    assert.ok(Math.abs(r.table.weights.error) < 5, `${r.label}: weights bytes ${r.table.weights.error} %`);
    assert.equal(r.table.kv.error, 0, `${r.label}: the KV bytes are exact`);
  }
  // The estimate follows the format (the bug this loop had: one number for every format).
  const dec = runs.filter((r) => r.label.startsWith('weights ')).map((r) => r.table.decode.estimate);
  assert.ok(Math.max(...dec) > 1.5 * Math.min(...dec), `the decode estimate moves with the weight format: ${dec}`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
