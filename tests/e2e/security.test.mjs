// Security and privacy of the page (issue 8, item 6) in headless Chromium: the Content-Security-
// Policy (index.html's meta tag) is in force and nothing the page does violates it; model output
// that is markup stays inert text; every request stays on the page's origin and none carries a
// byte of the user's model file. Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, link, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { useBrowser, openPage, text, waitStatus, URL_, SHOT_DIR } from './helpers.mjs';
import { tapWorkers } from './worker-tap.mjs';

const MODEL = 'models/smollm2-135m-instruct-q4_1.gguf';
const LOAD_TIMEOUT = 120_000;
const JOB_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

/** Records every securitypolicyviolation the document sees, from before the page's scripts run. */
async function watchCsp(page) {
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
}

async function generate(page, { prompt, maxTokens, chat = false }) {
  await page.getByTestId('chat').setChecked(chat);
  await page.getByTestId('keep-context').setChecked(false);
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(maxTokens));
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', JOB_TIMEOUT), 'done');
}

async function estimatorSettled(page) {
  await page.waitForFunction(() => {
    const body = document.querySelector('[data-testid="est-body"]');
    return body.dataset.pending !== 'true' && /^\d/.test(document.querySelector('[data-testid="est-sustained-tps"]')?.textContent.trim() ?? '');
  }, null, { timeout: 30_000, polling: 20 });
}

/** Estimator, compare, guide, fit, share link: the page's parts that need no model. */
async function usePanels(page) {
  await estimatorSettled(page);
  await page.getByTestId('preset-picker').selectOption('llama-3.2-1b');
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await estimatorSettled(page);
  await page.getByTestId('compare-add').click();
  await page.getByTestId('knob-prune').fill('0.2');
  await page.getByTestId('knob-prune').dispatchEvent('input');
  await estimatorSettled(page);
  await page.getByTestId('compare-add').click();
  assert.equal(await page.getByTestId('compare-table').isVisible(), true, 'the comparison is shown');
  await page.getByTestId('guide-start').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="guide-step"] p') !== null, null, { timeout: 60_000 });
  await page.getByTestId('guide-next').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="guide-step-count"]').textContent.trim().startsWith('2 /'), null, { timeout: 60_000 });
  await page.getByTestId('guide-close').click();
  await page.waitForFunction(() => !document.querySelector('[data-testid="fit-run"]').disabled, null, { timeout: 60_000 });
  await page.getByTestId('fit-run').click();
  await page.waitForFunction(() => ['done', 'error'].includes(document.querySelector('[data-testid="fit-status"]').dataset.state), null, { timeout: JOB_TIMEOUT });
  assert.equal(await page.getByTestId('fit-status').getAttribute('data-state'), 'done', 'the fit search ran');
  await page.getByTestId('share-link').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="share-url"]').value.includes('#'), null, { timeout: 10_000 });
}

test('the Content-Security-Policy is in force and a full use of the page violates none of it', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { onPage: watchCsp });
  const csp = await page.evaluate(() => document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? null);
  t.diagnostic(`CSP: ${csp}`);
  assert.ok(csp, 'index.html carries a CSP');
  for (const d of ["default-src 'self'", "script-src 'self' 'wasm-unsafe-eval'", "object-src 'none'", "base-uri 'none'", "style-src 'self'", "connect-src 'self'"]) {
    assert.ok(csp.includes(d), `the CSP has ${d}`);
  }
  // It is in force: an injected inline script and a script from another origin do not run.
  const injected = await page.evaluate(async () => {
    const s = document.createElement('script');
    s.textContent = 'window.__inlineRan = true;';
    document.body.append(s);
    const remote = document.createElement('script');
    remote.src = 'https://example.com/evil.js';
    const loaded = new Promise((resolve) => {
      remote.onload = () => resolve('loaded');
      remote.onerror = () => resolve('blocked');
    });
    document.body.append(remote);
    const r = await loaded;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const seen = [...window.__csp];
    window.__csp.length = 0;
    s.remove();
    remote.remove();
    return { inline: window.__inlineRan === true, remote: r, seen };
  });
  assert.equal(injected.inline, false, 'an injected inline script does not run');
  assert.equal(injected.remote, 'blocked', 'a script from another origin does not load');
  assert.equal(injected.seen.length, 2, `both were reported as violations: ${JSON.stringify(injected.seen)}`);
  const cspConsole = consoleErrors.splice(0).filter((e) => !/Content Security Policy|example\.com/.test(e));
  assert.deepEqual(cspConsole, [], 'only the two deliberate violations were logged');

  // A full use: estimator, compare, guide, fit, share link; load, generate (the latency chart),
  // pruning with its perplexity and quality chart.
  await usePanels(page);
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  await generate(page, { prompt: 'The capital of France is', maxTokens: 12 });
  assert.ok(await page.locator('[data-testid="token-chart"] canvas').count() > 0, 'the latency chart (uPlot) is drawn');
  await page.locator('[data-testid="prune-panel"] > summary').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="prune-panel"]').dataset.texts, null, { timeout: 30_000 });
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready');
  await page.getByTestId('prune-method').selectOption('magnitude');
  await page.getByTestId('prune-mlp').fill('0.1');
  await page.getByTestId('prune-apply').click();
  assert.equal(await waitStatus(page, 'ready', JOB_TIMEOUT), 'ready', 'the prune ran');
  await generate(page, { prompt: 'The capital of France is', maxTokens: 4 });

  const violations = await page.evaluate(() => window.__csp);
  assert.deepEqual(violations, [], 'no securitypolicyviolation in a full use');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, [], 'no console error (Chromium logs every CSP violation as one)');
});

test('model output that is markup is shown as inert text', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { onPage: watchCsp });
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  const imgsBefore = await page.evaluate(() => document.querySelectorAll('img, script, iframe').length);
  // Greedy, the instruct model repeats the payload: an <img> whose onerror would set __pwned.
  const prompt = 'Repeat this HTML exactly, nothing else: <img src=x onerror="window.__pwned=1">';
  await generate(page, { prompt, maxTokens: 30, chat: true });
  const out = await text(page, 'output');
  t.diagnostic(`the model wrote: ${JSON.stringify(out)}`);
  assert.ok(out.includes('<'), 'the output contains markup');
  assert.match(out, /<img[^>]*onerror=/, 'the output is an <img> tag with an onerror handler');
  await new Promise((r) => setTimeout(r, 300)); // an image's onerror would have fired by now
  const dom = await page.evaluate(() => ({
    pwned: window.__pwned,
    outputElements: document.querySelector('[data-testid="output"]').childElementCount,
    transcriptTextElements: [...document.querySelectorAll('[data-testid="transcript"] .text')].map((n) => n.childElementCount),
    transcript: document.querySelector('[data-testid="transcript"]').textContent,
    imgs: document.querySelectorAll('img, script, iframe').length,
  }));
  assert.equal(dom.pwned, undefined, 'no onerror handler ran');
  assert.equal(dom.outputElements, 0, 'the output holds text only, no element');
  assert.deepEqual(dom.transcriptTextElements, [0, 0], 'the transcript turns hold text only');
  assert.ok(dom.transcript.includes('<img src=x onerror='), 'the prompt shows literally in the transcript');
  assert.equal(dom.imgs, imgsBefore, 'no img, script or iframe was created');
  assert.deepEqual(await page.evaluate(() => window.__csp), []);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('every request stays on the origin; a user file is read locally and never sent', async (t) => {
  const requests = [];
  const sockets = [];
  const onPage = async (page) => {
    await tapWorkers(page);
    await page.context().route('**/*', (route) => {
      const r = route.request();
      requests.push({ url: r.url(), method: r.method(), body: r.postDataBuffer(), type: r.resourceType() });
      return route.continue();
    });
    page.on('websocket', (ws) => sockets.push(ws.url()));
  };
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { onPage });
  const origin = new URL(URL_).origin;
  // The user's file, under a name of its own (a hard link to the model, or a copy).
  const userFile = path.join(SHOT_DIR, 'private-user-model.gguf');
  await rm(userFile, { force: true });
  await link(MODEL, userFile).catch(() => copyFile(MODEL, userFile));
  t.after(() => rm(userFile, { force: true }));
  const { size } = await stat(userFile);
  await page.getByTestId('model-file').setInputFiles(userFile);
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the user file loads');
  assert.match(await text(page, 'progress-text'), /loaded/);
  await generate(page, { prompt: 'The capital of France is', maxTokens: 8 });
  await usePanels(page);
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  await generate(page, { prompt: 'Hello', maxTokens: 4 });
  const sent = await page.evaluate(() => window.__tap.sent);
  assert.ok(sent.includes('load-file'), 'the file went to the worker as a File');

  t.diagnostic(`${requests.length} requests: ${[...new Set(requests.map((r) => `${r.method} ${r.type}`))].join(', ')}`);
  const urls = requests.map((r) => r.url);
  assert.ok(urls.some((u) => u.endsWith('/edgefit_wasm_bg.wasm')), 'the worker’s own requests are seen (the wasm module)');
  assert.ok(urls.some((u) => u.endsWith('.gguf')), 'the worker’s model download is seen');
  const elsewhere = requests.filter((r) => new URL(r.url).origin !== origin && !/^(data|blob):/.test(r.url));
  assert.deepEqual(elsewhere.map((r) => r.url), [], 'no request leaves the origin');
  const withBody = requests.filter((r) => r.body !== null && r.body.length > 0);
  assert.deepEqual(withBody.map((r) => `${r.method} ${r.url} (${r.body.length} bytes)`), [], 'no request carries a body');
  assert.deepEqual([...new Set(requests.map((r) => r.method))].filter((m) => m !== 'GET' && m !== 'HEAD'), [], 'only GET and HEAD');
  assert.deepEqual(urls.filter((u) => u.includes('private-user-model')), [], 'no request names the user file');
  assert.deepEqual(sockets, [], 'no WebSocket');
  t.diagnostic(`the user file (${size} bytes) was read in the worker; no request had a body`);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
