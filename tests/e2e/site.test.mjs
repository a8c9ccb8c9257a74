// End-to-end test of the publishable site (`cargo xtask site` → dist/) as a static host serves
// it: `cargo xtask test` serves dist/ with Python's http.server under a sub-path. Checks that
// every request stays under that sub-path on the page's own origin, that the worker picks the
// simd128 build by `WebAssembly.validate` and that the baseline (no SIMD) build runs the real
// model, and that a host without the model still gives a working page that asks for a file.
// Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, text, waitStatus, URL_ } from './helpers.mjs';

const LOAD_TIMEOUT = 180_000;

const browser = useBrowser(); // one Chromium for this file's tests

/** Opens the page at `url` recording every request's URL (page and workers) from the start. */
async function openRecorded(t, url = URL_, options = {}) {
  const urls = [];
  const opened = await openPage(browser(), t, { ...options, url, onPage: (page) => page.context().on('request', (r) => urls.push(r.url())) });
  return { ...opened, urls };
}

const build = (page) => page.getByTestId('engine-version').getAttribute('data-build');

async function waitBooted(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid="engine-version"]')?.dataset.build, null, { timeout: 60_000 });
}

test('the site works under a sub-path, stays on its origin and picks the simd128 build', async (t) => {
  const base = new URL(URL_);
  assert.notEqual(base.pathname, '/', `the site must be served under a sub-path to test relative URLs, got ${URL_}`);
  const { page, consoleErrors, pageErrors, urls } = await openRecorded(t);
  await waitBooted(page);
  assert.equal(await build(page), 'simd128', 'Chromium validates SIMD, so the simd128 build runs');
  assert.match(await text(page, 'engine-version'), /simd128/);
  await page.waitForFunction(() => document.querySelector('[data-testid="verdict-memory"]')?.textContent.trim(), null, { timeout: 30_000 });
  assert.ok(urls.length > 5, `requests seen: ${urls.length}`);
  const outside = urls.filter((u) => !u.startsWith(base.href) && !u.startsWith('blob:') && !u.startsWith('data:'));
  assert.deepEqual(outside, [], 'every request stays under the site path on its own origin');
  assert.ok(urls.some((u) => u.startsWith(new URL('pkg/', base).href)), 'the simd128 module was fetched from pkg/');
  assert.ok(!urls.some((u) => u.includes('/pkg-baseline/')), 'the baseline module was not fetched');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('?wasm=baseline runs the no-SIMD build on the real model', async (t) => {
  const { page, consoleErrors, pageErrors, urls } = await openRecorded(t, new URL('?wasm=baseline', URL_).href);
  await waitBooted(page);
  assert.equal(await build(page), 'baseline');
  assert.ok(urls.some((u) => u.includes('/pkg-baseline/edgefit_wasm_bg.wasm')), 'the baseline module was fetched');
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  const kernels = await page.locator('[data-testid="kernel-picker"] option').allTextContents();
  assert.ok(!kernels.some((k) => /simd128/.test(k)), `no simd128 kernel in the baseline build: ${kernels}`);
  await page.getByTestId('max-tokens').fill('4');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', LOAD_TIMEOUT), 'done');
  const generated = Number(await text(page, 'metric-generated-tokens'));
  assert.ok(generated >= 1 && generated <= 4, `generated ${generated}`);
  assert.ok(Number(await text(page, 'metric-decode-tps')) > 0);
  t.diagnostic(`baseline build: ${generated} tokens at ${await text(page, 'metric-decode-tps')} tok/s, kernel ${await text(page, 'metric-kernel')}`);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('an unknown ?wasm= build is a clear error', async (t) => {
  const { page } = await openPage(browser(), t, { requestFailures: false, url: new URL('?wasm=sse9', URL_).href });
  await page.getByTestId('error-box').waitFor({ state: 'visible', timeout: 30_000 });
  assert.match(await text(page, 'error-box'), /\?wasm=sse9 is not a wasm build \(simd128, baseline, threads\)/);
});

test('a host without the model: the page says so, asks for a file, and the estimator works', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, {
    requestFailures: false,
    onPage: (p) => p.route('**/models/*', (route) => route.fulfill({ status: 404, body: 'not here' })),
  });
  const button = page.getByTestId('load-default');
  await page.waitForFunction(() => document.querySelector('[data-testid="load-default"]').dataset.missing === 'true', null, { timeout: 30_000 });
  assert.equal(await button.isDisabled(), true);
  assert.match(await button.textContent(), /not on this site: load a \.gguf file/);
  assert.equal(await page.getByTestId('model-file').isEnabled(), true, 'a file can still be chosen');
  await page.waitForFunction(() => document.querySelector('[data-testid="verdict-memory"]')?.textContent.trim(), null, { timeout: 30_000 });
  assert.match(await text(page, 'verdict-memory'), /pass|fail/i);
  assert.deepEqual(pageErrors, []);
  // The manifest's 404 is the only expected console error (Chromium logs failed resources).
  assert.deepEqual(consoleErrors.filter((e) => !/404|Not Found/i.test(e)), []);
});
