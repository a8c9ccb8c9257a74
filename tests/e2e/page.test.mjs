// End-to-end test of the edgefit page in headless Chromium (playwright-core + the system chromium).
//
// `cargo xtask test` builds dist/ (`cargo xtask site`), serves it under /edgefit/, and sets:
//   EDGEFIT_URL        the page's URL (required)
//   EDGEFIT_BUILD_DIR  where to save screenshots (build/; screenshots go to $EDGEFIT_BUILD_DIR/e2e/)
//   CHROMIUM           optional browser path (default /usr/bin/chromium)
//
// By hand: node --test tests/e2e/page.test.mjs  (with the two variables set and a server running).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { gotoSite } from './helpers.mjs';
import * as G from './gguf-craft.mjs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const URL_ = process.env.EDGEFIT_URL;
const BUILD_DIR = process.env.EDGEFIT_BUILD_DIR || 'build';
const SHOT_DIR = path.join(BUILD_DIR, 'e2e');

const LOAD_TIMEOUT = 120_000;
const GEN_TIMEOUT = 120_000;

const METRICS = [
  'metric-load-ms',
  'metric-ttft-ms',
  'metric-prefill-tps',
  'metric-decode-tps',
  'metric-weights-bytes',
  'metric-kv-bytes',
  'metric-peak-bytes',
];

let browser;

before(async () => {
  if (!URL_) {
    throw new Error(
      'EDGEFIT_URL is not set: this test needs the built site served over HTTP. ' +
        'Run `cargo xtask test` (it builds dist/, serves it and sets EDGEFIT_URL), or serve dist/ or build/site ' +
        'yourself and set EDGEFIT_URL=http://127.0.0.1:PORT/ and EDGEFIT_BUILD_DIR=build.',
    );
  }
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  await mkdir(SHOT_DIR, { recursive: true });
});

after(async () => {
  await browser?.close();
});

/** Opens the page in a fresh context; collects console errors (page and workers) and page errors. */
async function openPage(t, viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport, serviceWorkers: 'block' });
  const page = await context.newPage();
  const consoleErrors = [];
  const pageErrors = [];
  const onConsole = (where) => (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`${where}: ${msg.text()} (${msg.location()?.url ?? ''})`);
  };
  page.on('console', onConsole('page'));
  page.on('worker', (w) => w.on('console', onConsole(`worker ${w.url()}`)));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('requestfailed', (r) => consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`));
  t.after(() => context.close());
  await gotoSite(page, t);
  return { page, consoleErrors, pageErrors };
}

const status = (page) => page.getByTestId('status').textContent();
const text = async (page, id) => (await page.getByTestId(id).textContent()).trim();

/** Waits until status is `want` or an error; returns the final status text. */
async function waitStatus(page, want, timeout) {
  await page.waitForFunction(
    (w) => {
      const s = document.querySelector('[data-testid="status"]').textContent;
      return s === w || s.startsWith('error:');
    },
    want,
    { timeout, polling: 100 },
  );
  return status(page);
}

async function loadDefault(page) {
  const button = page.getByTestId('load-default');
  assert.equal(await button.isEnabled(), true, 'load default button should be enabled');
  await button.click();
  const s = await waitStatus(page, 'ready', LOAD_TIMEOUT);
  assert.equal(s, 'ready', `loading the default model ended with status "${s}"`);
}

async function setKnobs(page, { prompt, maxTokens, temperature }) {
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(maxTokens));
  await page.getByTestId('temperature').fill(String(temperature));
}

const num = async (page, id) => Number.parseFloat((await page.getByTestId(id).textContent()).trim());

test('loads the default model, generates 16 tokens greedily, shows metrics', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(t);
  assert.match(await page.title(), /edgefit/);
  // The first run a newcomer makes: a question, with the chat template.
  assert.equal(await page.getByTestId('prompt').inputValue(), 'What is the capital of France?');
  assert.equal(await page.getByTestId('chat').isChecked(), true, 'the chat template is on by default');
  assert.equal(await page.getByTestId('generate').isDisabled(), true, 'generate is disabled before a model is loaded');
  assert.equal(await page.getByTestId('stop').isDisabled(), true, 'stop is disabled when not generating');

  const t0 = Date.now();
  await loadDefault(page);
  const loadS = (Date.now() - t0) / 1000;

  const progress = page.getByTestId('load-progress');
  const value = Number(await progress.evaluate((p) => p.value));
  const max = Number(await progress.evaluate((p) => p.max));
  assert.ok(max > 90e6, `load-progress max should be the model size in bytes, got ${max}`);
  assert.equal(value, max, 'load-progress should reach its max');
  assert.match(await page.getByTestId('progress-text').textContent(), /\d+(\.\d+)? \/ \d+(\.\d+)? MiB · smollm2-135m-instruct-q4_1 loaded \(auto \(the file's q4_1 kept\)\)/);
  // One unit for bytes: the metrics in MiB like the estimator, the model by its file name.
  assert.match(await page.getByTestId('metric-weights-mb').textContent(), /^\(\d+(\.\d+)? MiB\)$/);
  assert.match(await text(page, 'model-info'), /Name\s*smollm2-135m-instruct-q4_1/);
  assert.match(await text(page, 'load-default'), /^Load default model \(SmolLM2-135M-Instruct, 93\.8 MiB\)$/, 'the size from the site manifest, in MiB');

  await setKnobs(page, { prompt: 'The capital of France is', maxTokens: 16, temperature: 0 });
  await page.getByTestId('chat').setChecked(false);
  // Every time the page draws streamed text into the output (one appended text node a draw).
  await page.evaluate(() => {
    window.__draws = [];
    new MutationObserver((records) => {
      if (records.some((r) => r.addedNodes.length > 0)) window.__draws.push(performance.now());
    }).observe(document.querySelector('[data-testid="output"]'), { childList: true });
  });
  const t1 = Date.now();
  await page.getByTestId('generate').click();
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  const genS = (Date.now() - t1) / 1000;
  assert.equal(s, 'done', `generation ended with status "${s}"`);
  // The page draws streamed pieces at most every 250 ms (web/run-panel.js STREAM_RENDER_MS; plus
  // the first at once and the last at the end), not once per token: n draws span at least
  // (n − 2) · 250 ms.
  const draws = await page.evaluate(() => window.__draws);
  const spanMs = draws.length ? draws[draws.length - 1] - draws[0] : 0;
  t.diagnostic(`${draws.length} draws of the output over ${spanMs.toFixed(0)} ms`);
  assert.ok(draws.length >= 1, 'the output was drawn');
  // (Half a period of slack: the observer stamps a draw a moment after the page times it.)
  assert.ok(draws.length <= Math.floor(spanMs / 250 + 0.5) + 2, `${draws.length} draws in ${spanMs.toFixed(0)} ms: more than one per 250 ms`);

  const output = await page.getByTestId('output').textContent();
  assert.match(output, /Paris/, `output should mention Paris, got ${JSON.stringify(output)}`);
  // Shown once: in the conversation; the raw output waits, folded, under it.
  assert.match(await text(page, 'transcript'), /Paris/);
  assert.equal(await page.getByTestId('output').isVisible(), false, 'the answer is not shown a second time');

  const values = {};
  for (const id of METRICS) {
    const text = (await page.getByTestId(id).textContent()).trim();
    assert.match(text, /^\d+(\.\d+)?$/, `${id} should be a plain number, got ${JSON.stringify(text)}`);
    values[id] = Number(text);
    assert.ok(values[id] > 0, `${id} should be positive, got ${text}`);
  }
  const generated = await num(page, 'metric-generated-tokens');
  assert.ok(generated >= 1 && generated <= 16, `generated tokens should be in 1..16, got ${generated}`);
  assert.equal(await page.getByTestId('stop').isDisabled(), true, 'stop is disabled after the generation');
  assert.equal(await page.getByTestId('generate').isEnabled(), true, 'generate is enabled after the generation');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'no error box in normal use');

  // The chart drew something (uPlot renders a canvas).
  assert.equal(await page.locator('[data-testid="token-chart"] canvas').count() > 0, true, 'chart canvas present');

  const shot = path.join(SHOT_DIR, 'page.png');
  await page.screenshot({ path: shot, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: path.join(SHOT_DIR, 'page-narrow.png'), fullPage: true });
  // The default model is kept in the Cache API: a second visit loads it without downloading,
  // and "Forget the cached model" removes it.
  await page.getByTestId('forget-model').waitFor({ state: 'visible', timeout: 30_000 });
  await page.setViewportSize({ width: 1360, height: 900 });
  await page.reload();
  const downloads = [];
  page.on('request', (r) => {
    if (r.url().endsWith('.gguf')) downloads.push(r.url());
  });
  await page.getByTestId('forget-model').waitFor({ state: 'visible', timeout: 15_000 });
  await loadDefault(page);
  assert.deepEqual(downloads, [], 'the second load reads the cached model');
  await page.getByTestId('forget-model').click();
  await page.getByTestId('forget-model').waitFor({ state: 'hidden', timeout: 5_000 });
  assert.deepEqual(await page.evaluate(async () => (await caches.keys())), [], 'the cache is gone');


  t.diagnostic(
    `load ${loadS.toFixed(1)} s (engine ${values['metric-load-ms']} ms), generate ${genS.toFixed(1)} s; ` +
      `prefill ${values['metric-prefill-tps']} tok/s, decode ${values['metric-decode-tps']} tok/s, ` +
      `ttft ${values['metric-ttft-ms']} ms; output ${JSON.stringify(output)}; screenshot ${shot}`,
  );
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('the default first run on a phone (390 px): the skip link, a good first answer, a bad knob named beside Generate', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(t, { width: 390, height: 844 });
  // The skip link (the first Tab stop) brings the prompt into view and focuses it.
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'skip-to-prompt');
  const skip = await page.getByTestId('skip-to-prompt').boundingBox();
  assert.ok(skip && skip.x >= 0 && skip.x + skip.width <= 390 && skip.y >= 0, `the focused skip link shows inside the screen: ${JSON.stringify(skip)}`);
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'prompt');
  const inView = await page.evaluate(() => {
    const r = document.getElementById('prompt').getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, vh: window.innerHeight };
  });
  assert.ok(inView.top >= 0 && inView.bottom <= inView.vh, `the prompt is on screen after the skip link: ${JSON.stringify(inView)}`);

  await loadDefault(page);
  // Nothing changed: the default prompt (a question), the chat template on, the default knobs.
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  const answer = await page.getByTestId('output').textContent();
  const reason = await page.getByTestId('finish-reason').getAttribute('data-reason');
  t.diagnostic(`the default first run answered ${JSON.stringify(answer)} (${reason})`);
  assert.match(answer, /Paris/, `the first answer names Paris: ${JSON.stringify(answer)}`);
  assert.equal(reason, 'stop', 'the first answer ends by itself, within the default max tokens');
  assert.match(await text(page, 'transcript'), /^you\s*What is the capital of France\?\s*model\s*.*Paris/s);

  // A bad knob: named beside Generate in plain words with the input's own range, marked, focused;
  // nothing is generated and the page's error box stays shut.
  await page.getByTestId('max-tokens').fill('5000');
  await page.getByTestId('generate').click();
  await page.getByTestId('gen-error').waitFor({ state: 'visible', timeout: 5_000 });
  assert.equal(await text(page, 'gen-error'), 'Max tokens must be a whole number from 1 to 4096; got 5000.');
  assert.equal(await page.getByTestId('max-tokens').getAttribute('max'), '4096', 'the same range as the input\'s own');
  assert.equal(await page.getByTestId('max-tokens').getAttribute('aria-invalid'), 'true');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'max-tokens');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'not in the global error box');
  const box = await page.getByTestId('gen-error').boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 390, `the message fits the phone's width: ${JSON.stringify(box)}`);
  await page.getByTestId('seed').fill('-1');
  await page.getByTestId('max-tokens').fill('8');
  assert.equal(await page.getByTestId('gen-error').isVisible(), false, 'editing the input clears its message');
  await page.getByTestId('generate').click();
  assert.equal(await text(page, 'gen-error'), 'Seed must be a whole number from 0 to 4294967295; got -1.');
  await page.getByTestId('seed').fill('42');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done', 'valid knobs generate again');
  assert.equal(await page.getByTestId('gen-error').isVisible(), false);
  const widths = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, view: window.innerWidth }));
  assert.ok(widths.doc <= widths.view + 1, `the page does not scroll sideways at 390 px: ${JSON.stringify(widths)}`);
  await page.screenshot({ path: path.join(SHOT_DIR, 'first-run-phone.png'), fullPage: true });
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('the chat template answers an instruct question', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(t);
  await loadDefault(page);
  assert.equal(await page.getByTestId('chat').isEnabled(), true, 'the default model has a chat template');
  await setKnobs(page, { prompt: 'What is the capital of France? Answer in one sentence.', maxTokens: 24, temperature: 0 });
  await page.getByTestId('chat').setChecked(true);
  // Ctrl+Enter in the prompt generates (the keyboard's Generate).
  await page.getByTestId('prompt').press('Control+Enter');
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  assert.equal(s, 'done', `generation ended with status "${s}"`);
  const output = await page.getByTestId('output').textContent();
  const generated = await num(page, 'metric-generated-tokens');
  const promptTokens = await num(page, 'metric-prompt-tokens');
  t.diagnostic(`chat: ${promptTokens} prompt tokens, ${generated} generated: ${JSON.stringify(output)}`);
  assert.ok(promptTokens > 20, `the template wraps the prompt (prompt tokens ${promptTokens})`);
  assert.ok(generated >= 1, 'the answer has at least one token');
  assert.match(output, /Paris/, `the answer should mention Paris, got ${JSON.stringify(output)}`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('a non-GGUF file shows an error and the page recovers', async (t) => {
  const { page, pageErrors } = await openPage(t);
  await page.getByTestId('model-file').setInputFiles({
    name: 'not-a-model.gguf',
    mimeType: 'application/octet-stream',
    buffer: Buffer.from('this is plain text, not a GGUF model file\n'.repeat(8)),
  });
  const s = await waitStatus(page, 'ready', LOAD_TIMEOUT);
  assert.match(s, /^error: \S/, `status should be "error: <message>", got ${JSON.stringify(s)}`);
  assert.ok(s.length > 'error: '.length + 5, `error message should say something, got ${JSON.stringify(s)}`);
  assert.equal(await page.getByTestId('error-box').isVisible(), true, 'the error box is visible');
  assert.equal(await page.getByTestId('generate').isDisabled(), true, 'no model: generate stays disabled');
  assert.equal(await page.getByTestId('load-default').isEnabled(), true, 'load default is usable again');
  assert.equal(await page.getByTestId('model-file').isEnabled(), true, 'the file input is usable again');

  assert.doesNotMatch(await text(page, 'progress-text'), /building the model/, 'no "building" left under the error');

  // Recovery: the default model still loads and the error box goes away.
  await loadDefault(page);
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'error box cleared after a good load');
  assert.equal(await page.getByTestId('generate').isEnabled(), true, 'generate enabled after recovering');
  t.diagnostic(`error shown: ${s}`);

  // A failed load keeps the working model: an unsupported architecture in a real-size file
  // (the default model with general.architecture "mamba") is refused from its header at once.
  const full = await readFile(path.join(process.env.EDGEFIT_SITE_DIR || 'dist', 'models/smollm2-135m-instruct-q4_1.gguf'));
  const h = G.parseHeader(full);
  const mamba = Buffer.from(full);
  mamba.write('mamba', h.kv.get('general.architecture').offset + 8, 'latin1');
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'edgefit-page-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [name, buffer, want] of [
    ['mamba.gguf', mamba, /mamba.gguf was not loaded \(checked from its first [1-9](\.0)? MiB\): .*mamba.*Pick a GGUF model of an architecture this engine builds/],
    ['random.bin', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 2654435761) >>> 24)), /random.bin was not loaded \(checked from its first 4\.0 KiB\): .*magic/],
  ]) {
    const file = path.join(dir, name); // a real file: Playwright sends no buffer over 50 MB
    await writeFile(file, buffer);
    const t0 = Date.now();
    await page.getByTestId('model-file').setInputFiles(file);
    const e = await waitStatus(page, 'ready', LOAD_TIMEOUT);
    const ms = Date.now() - t0;
    assert.match(e, want);
    assert.match(await text(page, 'progress-text'), /^not loaded; still running smollm2-135m-instruct-q4_1 \(auto\)$/);
    assert.equal(await page.getByTestId('generate').isEnabled(), true, `${name}: the working model still runs`);
    assert.match(await text(page, 'model-info'), /Name\s*smollm2-135m-instruct-q4_1/);
    assert.equal(await page.getByTestId('preset-picker').inputValue(), '@loaded', 'the estimator keeps the loaded model');
    t.diagnostic(`${name} (${buffer.length} bytes) refused in ${ms} ms: ${e}`);
  }
  await setKnobs(page, { prompt: 'The capital of France is', maxTokens: 4, temperature: 0 });
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done', 'the kept model generates');
  assert.deepEqual(pageErrors, [], 'no page errors');
});

test('Stop ends a long generation early', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(t);
  await loadDefault(page);
  await setKnobs(page, { prompt: 'Once upon a time, in a small village by the sea,', maxTokens: 200, temperature: 0 });
  await page.getByTestId('generate').focus();
  await page.keyboard.press('Enter');
  // Wait for a few tokens, then stop.
  await page.waitForFunction(
    () => {
      const s = document.querySelector('[data-testid="status"]').textContent;
      const n = Number(document.querySelector('[data-testid="metric-generated-tokens"]').textContent || 0);
      return n >= 3 || s !== 'generating…';
    },
    null,
    { timeout: GEN_TIMEOUT, polling: 50 },
  );
  assert.equal(await status(page), 'generating…', 'still generating after 3 tokens');
  // Busy, Generate keeps the keyboard focus: aria-disabled, not disabled (focus would jump away).
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'generate', 'focus stays on Generate');
  assert.equal(await page.getByTestId('generate').getAttribute('aria-disabled'), 'true');
  assert.equal(await page.getByTestId('load-default').getAttribute('aria-disabled'), 'true');
  await page.keyboard.press('Enter'); // ignored while busy: no second generation, no error
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'Enter on a busy Generate is ignored');
  assert.equal(await page.getByTestId('stop').isEnabled(), true, 'stop is enabled while generating');
  assert.equal(await page.getByTestId('weights-format').isDisabled(), true, 'the weights picker is disabled while generating');
  assert.equal(await page.getByTestId('kernel-picker').isDisabled(), true, 'the kernel picker is disabled while generating');
  assert.equal(await page.getByTestId('load-default').isDisabled(), true, 'load default is disabled while generating');
  await page.getByTestId('stop').click();
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  assert.equal(s, 'done');
  const generated = await num(page, 'metric-generated-tokens');
  assert.ok(generated >= 3 && generated < 200, `a stopped generation has fewer than 200 tokens, got ${generated}`);
  assert.equal(await page.getByTestId('finish-reason').getAttribute('data-reason'), 'stopped');
  assert.equal(await page.getByTestId('stop').isDisabled(), true, 'stop is disabled after stopping');
  assert.equal(await page.getByTestId('generate').isEnabled(), true, 'generate is enabled after stopping');
  t.diagnostic(`stopped after ${generated} tokens`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

/** Generates `maxTokens` greedy tokens from `prompt` (no chat template); returns the output text. */
async function generateGreedy(page, prompt, maxTokens) {
  await setKnobs(page, { prompt, maxTokens, temperature: 0 });
  await page.getByTestId('chat').setChecked(false);
  await page.getByTestId('generate').click();
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  assert.equal(s, 'done', `generation ended with status "${s}"`);
  return page.getByTestId('output').textContent();
}


test('weights format and kernel pickers: auto by default, scalar = simd128 tokens, f32 reloads', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(t);
  const weights = page.getByTestId('weights-format');
  const kernel = page.getByTestId('kernel-picker');
  assert.equal(await weights.inputValue(), 'auto', 'auto is the default weight format');
  assert.equal(await kernel.isDisabled(), true, 'no model: the kernel picker is disabled');
  // Every control has a label.
  for (const id of ['weights-format', 'kernel-picker']) {
    assert.ok((await page.getByTestId(id).evaluate((e) => e.labels.length)) > 0, `${id} has a <label>`);
  }

  await loadDefault(page);
  assert.equal(await weights.inputValue(), 'auto');
  assert.equal(await kernel.inputValue(), 'simd128', 'the SIMD build runs the simd128 kernel by default');
  const kernels = await kernel.evaluate((s) => [...s.options].map((o) => o.value));
  assert.ok(kernels.includes('scalar') && kernels.includes('simd128'), `kernels offered: ${kernels}`);
  assert.equal(await text(page, 'metric-kernel'), 'simd128');
  assert.equal(await text(page, 'metric-weights-format'), "auto (the file's q4_1 kept) · embedding q8_0");
  const info = await text(page, 'model-info');
  assert.match(info, /Stored as/);
  const w4Bytes = await num(page, 'metric-weights-bytes');
  assert.ok(w4Bytes > 50e6 && w4Bytes < 150e6, `the 4-bit weights of SmolLM2-135M are about 100 MB, got ${w4Bytes}`);

  const prompt = 'The capital of France is';
  const simd = await generateGreedy(page, prompt, 8);
  assert.equal(await text(page, 'metric-kernel'), 'simd128');
  assert.equal(await text(page, 'metric-weights-format'), "auto (the file's q4_1 kept) · embedding q8_0");
  const simdDecode = await num(page, 'metric-decode-tps');
  assert.ok(simd.length > 0, 'simd128 generated text');

  // Switch the kernel: the picker and the model info follow; the next run uses it.
  await kernel.selectOption('scalar');
  assert.equal(await waitStatus(page, 'ready', 30_000), 'ready', 'the kernel switch ends ready');
  assert.equal(await kernel.inputValue(), 'scalar');
  assert.match(await text(page, 'model-info'), /Kernel\s*scalar/);
  const scalar = await generateGreedy(page, prompt, 8);
  assert.equal(await text(page, 'metric-kernel'), 'scalar', 'the run used the scalar kernel');
  const scalarDecode = await num(page, 'metric-decode-tps');
  assert.equal(scalar, simd, 'greedy decoding gives the same text on the scalar and simd128 kernels');

  // Switch the weights: the model is built in f32 from the bytes the worker kept (no second
  // download), and the estimator keeps "the loaded model".
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const modelRequests = [];
  page.on('request', (r) => {
    if (r.url().endsWith('.gguf')) modelRequests.push(r.url());
  });
  await weights.selectOption('f32');
  assert.equal(await weights.isDisabled(), true, 'the weights picker is disabled while reloading');
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the f32 reload ends ready');
  assert.equal(await weights.inputValue(), 'f32');
  assert.equal(await text(page, 'metric-weights-format'), 'f32 · embedding f32');
  const progress = page.getByTestId('load-progress');
  assert.equal(Number(await progress.evaluate((p) => p.value)), Number(await progress.evaluate((p) => p.max)), 'the reload showed its progress to the end');
  const f32Bytes = await num(page, 'metric-weights-bytes');
  assert.ok(f32Bytes > 4 * w4Bytes, `f32 weights are far larger than w4g32: ${f32Bytes} vs ${w4Bytes}`);
  assert.match(await text(page, 'model-info'), /Stored as\s*f32 ×/);
  assert.equal(await kernel.inputValue(), 'scalar', 'the chosen kernel is kept across a reload');
  assert.deepEqual(modelRequests, [], 'switching the weights format downloads nothing');
  assert.equal(await page.getByTestId('preset-picker').inputValue(), '@loaded', 'the estimator keeps the loaded model');
  const f32 = await generateGreedy(page, prompt, 8);
  assert.ok((await num(page, 'metric-generated-tokens')) >= 1, 'f32 generates');
  assert.equal(await text(page, 'metric-weights-format'), 'f32 · embedding f32');

  t.diagnostic(
    `w4g32 ${w4Bytes} B, f32 ${f32Bytes} B; decode simd128 ${simdDecode} tok/s, scalar ${scalarDecode} tok/s; ` +
      `simd128/scalar ${JSON.stringify(simd)}; f32 ${JSON.stringify(f32)}`,
  );
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
