// Shared by the end-to-end files (not a test file itself): the headless Chromium they launch,
// a page with its console / page errors collected, and the status wait. Environment:
// EDGEFIT_URL (the served site: dist/ under `cargo xtask test`, required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { before, after } from 'node:test';
import { chromium } from 'playwright-core';

export const URL_ = process.env.EDGEFIT_URL;
export const BUILD_DIR = process.env.EDGEFIT_BUILD_DIR || 'build';
export const SHOT_DIR = path.join(BUILD_DIR, 'e2e');

/** Launches the system Chromium headless (never a downloaded one) and makes SHOT_DIR. */
export async function launchBrowser() {
  if (!URL_) throw new Error('EDGEFIT_URL is not set: run `cargo xtask test` (see page.test.mjs)');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  await mkdir(SHOT_DIR, { recursive: true });
  return browser;
}

/**
 * One headless Chromium for the calling test file: launched before its tests, closed after them
 * (registers node:test `before`/`after`). Returns a getter for it.
 */
export function useBrowser() {
  let browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });
  return () => browser;
}

/**
 * Opens the site in a fresh context (closed when test `t` ends) and collects console errors of
 * the page and its workers, uncaught page errors and, with `requestFailures`, failed requests.
 * `url`: another address than EDGEFIT_URL (e.g. with a fragment); `onPage(page)` runs before the
 * navigation (to watch its requests); `serviceWorkers: 'allow'` lets the page register its
 * cross-origin isolation service worker.
 */
export async function openPage(browser, t, { acceptDownloads = false, requestFailures = true, url = URL_, onPage = null, serviceWorkers = 'block' } = {}) {
  // Service workers are blocked unless asked for: on the plain static server the page's
  // coi-serviceworker.js would otherwise reload every fresh context once into the threaded build
  // (tests/web/threads.test.mjs tests that path); the other tests check the page as it runs
  // without cross-origin isolation.
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, acceptDownloads, serviceWorkers });
  const page = await context.newPage();
  const consoleErrors = [];
  const pageErrors = [];
  const onConsole = (where) => (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`${where}: ${msg.text()}`);
  };
  page.on('console', onConsole('page'));
  page.on('worker', (w) => w.on('console', onConsole('worker')));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  if (requestFailures) {
    page.on('requestfailed', (r) => consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`));
  }
  t.after(() => context.close());
  if (onPage) await onPage(page);
  await gotoSite(page, t, url);
  return { page, consoleErrors, pageErrors };
}

/**
 * Navigates to the site and waits for `load`, trying a second time after a timeout: on this
 * 2-core machine a navigation occasionally never reached `load` within 30 s (seen in 4 of 6 runs
 * of the suite, on different tests, also on an idle machine; cause not found yet). The retry is
 * reported as a test diagnostic, and a second timeout fails the test.
 */
export async function gotoSite(page, t, url = URL_) {
  try {
    await page.goto(url, { waitUntil: 'load' });
  } catch (e) {
    if (e?.name !== 'TimeoutError') throw e;
    t.diagnostic(`page.goto timed out once; retrying (${String(e.message).split('\n')[0]})`);
    await page.goto(url, { waitUntil: 'load' });
  }
}

/** A test id's trimmed text. */
export const text = async (page, id) => (await page.getByTestId(id).textContent()).trim();

/** Waits until the status is `want` or an error; returns the final status text. */
export async function waitStatus(page, want, timeout) {
  await page.waitForFunction(
    (w) => {
      const s = document.querySelector('[data-testid="status"]').textContent;
      return s === w || s.startsWith('error:');
    },
    want,
    { timeout, polling: 50 },
  );
  return text(page, 'status');
}
