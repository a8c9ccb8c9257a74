// End-to-end test of shareable links in headless Chromium (playwright-core + the system
// chromium). Same environment as page.test.mjs: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR,
// CHROMIUM. Screenshot: $EDGEFIT_BUILD_DIR/e2e/share.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text, URL_ } from './helpers.mjs';

const browser = useBrowser(); // one Chromium for this file's tests

const PROMPT = 'Say <b>markup</b> & "quotes" — Grüße, 東京 🚀\nline two #v=2&device=x';

/** Opens `url` in a fresh context, recording every request that leaves the site's origin. */
async function open(t, url = URL_) {
  const origin = new URL(URL_).origin;
  const foreign = [];
  const opened = await openPage(browser(), t, {
    requestFailures: false,
    url,
    onPage: (page) => page.context().on('request', (r) => {
      const u = r.url();
      if (!u.startsWith(`${origin}/`) && !u.startsWith('data:') && !u.startsWith('blob:')) foreign.push(u);
    }),
  });
  return { ...opened, foreign };
}

async function waitReport(page) {
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="est-weights-bytes"]')?.textContent.trim() ?? ''), null, { timeout: 30_000 });
}

/** The estimator's verdicts and numbers, as shown. */
async function shownNumbers(page) {
  return page.evaluate(() => {
    const out = {};
    for (const e of document.querySelectorAll('[data-testid^="verdict-"], #est-numbers .num-value, [data-testid="est-experience"]')) {
      out[e.getAttribute('data-testid')] = e.textContent.trim();
    }
    return out;
  });
}

/** Waits until the shown numbers stay the same for 600 ms (no report in flight). */
async function settledNumbers(page) {
  let prev = await shownNumbers(page);
  for (let i = 0; i < 50; i++) {
    await page.waitForTimeout(600);
    const now = await shownNumbers(page);
    if (JSON.stringify(now) === JSON.stringify(prev)) return now;
    prev = now;
  }
  throw new Error('the estimator never settled');
}

const CONTROLS = [
  'device-picker', 'preset-picker', 'knob-weights', 'knob-kv', 'knob-context', 'knob-prompt-tokens',
  'knob-gen-tokens', 'knob-unit', 'knob-policy', 'knob-minutes', 'weights-format', 'kv-format', 'prompt',
  'max-tokens', 'temperature', 'top-p', 'seed', 'prune-mlp', 'prune-heads', 'prune-qk', 'prune-v',
  'prune-layers', 'prune-method', 'prune-allocation', 'knob-runtime', 'knob-threads',
];

/** Every shared control's value (checkboxes: checked). */
async function controls(page) {
  return page.evaluate((ids) => {
    const out = {};
    for (const id of ids) out[id] = document.querySelector(`[data-testid="${id}"]`).value;
    for (const id of ['chat', 'keep-context']) out[id] = document.querySelector(`[data-testid="${id}"]`).checked;
    out['prune-mlp-out'] = document.getElementById('prune-mlp-out').textContent;
    return out;
  }, CONTROLS);
}

async function setRange(page, id, value) {
  await page.getByTestId(id).evaluate((e, v) => {
    e.value = v;
    e.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}

test('a shared link restores every setting and the estimate in a fresh page', async (t) => {
  const a = await open(t);
  const { page } = a;
  await waitReport(page);
  const defaults = await controls(page);

  // The engine's KV format first: the estimator's KV knob follows it, and is then set apart.
  await page.getByTestId('kv-format').selectOption('f16');
  await page.waitForFunction(() => document.querySelector('[data-testid="metric-kv-format"]').textContent === 'f16', null, { timeout: 10_000 });
  await page.getByTestId('weights-format').selectOption('q8_0');
  await page.getByTestId('device-picker').selectOption('tensor-g4');
  await page.getByTestId('preset-picker').selectOption('llama-3.2-1b');
  await page.getByTestId('knob-weights').selectOption('q4_k');
  await page.getByTestId('knob-kv').selectOption('int4g32');
  await page.getByTestId('knob-context').fill('8192');
  await page.getByTestId('knob-prompt-tokens').fill('300');
  await page.getByTestId('knob-gen-tokens').fill('200');
  await page.getByTestId('knob-policy').selectOption('paced');
  await page.getByTestId('knob-minutes').fill('7.5');
  await page.getByTestId('knob-unit').selectOption('cpu');
  await page.getByTestId('knob-runtime').selectOption('litert');
  await page.getByTestId('knob-threads').fill('3');
  await page.getByTestId('prompt').fill(PROMPT);
  await page.getByTestId('chat').uncheck(); // on by default: the link must carry it off
  await page.getByTestId('keep-context').uncheck();
  await page.getByTestId('max-tokens').fill('64');
  await page.getByTestId('temperature').fill('0.7');
  await page.getByTestId('top-p').fill('0.85');
  await page.getByTestId('seed').fill('1234');
  await page.locator('#prune-panel > summary').click();
  await page.waitForFunction(() => document.getElementById('prune-panel').dataset.texts, null, { timeout: 10_000 });
  await setRange(page, 'prune-mlp', '0.3');
  await setRange(page, 'prune-qk', '0.5');
  await page.getByTestId('prune-layers').fill('2');
  await page.getByTestId('prune-method').selectOption('magnitude');
  await page.getByTestId('prune-allocation').selectOption('global');
  const want = await controls(page);
  const wantNumbers = await settledNumbers(page);
  // The settings really moved off the defaults (else the comparison below proves nothing).
  for (const id of ['device-picker', 'preset-picker', 'knob-weights', 'knob-kv', 'knob-context', 'knob-policy', 'knob-runtime', 'knob-threads', 'kv-format', 'weights-format', 'prompt', 'chat', 'seed', 'prune-mlp', 'prune-method']) {
    assert.notDeepEqual(want[id], defaults[id], `${id} was changed`);
  }
  assert.equal(want['kv-format'], 'f16');
  assert.equal(want['knob-kv'], 'int4g32');
  assert.equal(want['prune-mlp-out'], '30%');

  await page.getByTestId('share-link').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="share-url"]').value !== '', null, { timeout: 5_000 });
  const link = await page.getByTestId('share-url').inputValue();
  const hash = await page.evaluate(() => location.hash);
  assert.equal(new URL(link).hash, hash, 'the address bar holds the link');
  assert.equal(link.split('#')[0], URL_.split('#')[0], 'the link is the site with a fragment');
  assert.match(hash, /^#v=1&device=tensor-g4&model=llama-3\.2-1b&/);
  assert.ok(link.length < 2000, `a short link, no model data: ${link.length} characters`);
  await page.waitForFunction(() => document.querySelector('[data-testid="share-status"]').textContent !== '', null, { timeout: 5_000 });
  assert.match(await text(page, 'share-status'), /copied|copy it/);
  t.diagnostic(`link: ${link}`);

  // A fresh context opens the link.
  const b = await open(t, link);
  await waitReport(b.page);
  await b.page.waitForFunction((w) => document.querySelector('[data-testid="knob-context"]').value === w, want['knob-context'], { timeout: 15_000 });
  await b.page.waitForFunction(() => document.querySelector('[data-testid="kv-format"]').value === 'f16'
    && document.querySelector('[data-testid="metric-kv-format"]').textContent === 'f16', null, { timeout: 10_000 });
  const got = await controls(b.page);
  assert.deepEqual(got, want, 'every setting restored');
  const gotNumbers = await settledNumbers(b.page);
  assert.deepEqual(gotNumbers, wantNumbers, 'the same verdicts and numbers');
  assert.match(gotNumbers['verdict-memory'], /^(pass|fail)$/);
  assert.match(gotNumbers['est-weights-bytes'], /^\d+$/);
  t.diagnostic(`restored: weights ${gotNumbers['est-weights-bytes']} B, decode ${gotNumbers['est-decode-tps']} tok/s, memory ${gotNumbers['verdict-memory']}`);

  // The prompt is plain text: exactly the characters, no element made of its markup.
  assert.equal(await b.page.getByTestId('prompt').inputValue(), PROMPT);
  assert.equal(await b.page.locator('b', { hasText: 'markup' }).count(), 0, 'no <b> from the link');
  assert.ok(await b.page.getByTestId('share-error').isHidden(), 'no share error');
  assert.ok(await b.page.getByTestId('share-note').isHidden(), 'no loaded-model note');
  assert.equal(await text(b.page, 'status'), 'no model loaded', 'nothing was loaded by the link');
  await b.page.evaluate(() => window.scrollTo(0, 0));
  await b.page.screenshot({ path: path.join(SHOT_DIR, 'share.png'), fullPage: false });
  // Opening the pruning panel (it asks the site for its texts) keeps the link's settings.
  await b.page.locator('#prune-panel > summary').click();
  await b.page.waitForFunction(() => document.getElementById('prune-panel').dataset.texts, null, { timeout: 10_000 });
  assert.deepEqual(await controls(b.page), want, 'settings kept after opening the pruning panel');

  for (const [name, x] of [['sender', a], ['receiver', b]]) {
    assert.deepEqual(x.pageErrors, [], `${name}: no page errors`);
    assert.deepEqual(x.consoleErrors, [], `${name}: no console errors`);
    assert.deepEqual(x.foreign, [], `${name}: no request outside the site`);
  }
});

test('bad links: the good fields applied, every bad one listed; an unreadable link keeps the defaults', async (t) => {
  // [fragment, error, context after, model after]; fatal links keep every default.
  const cases = [
    ['#v=1&device=no-such-phone&context=4096', /device "no-such-phone" is not one this page knows/, '4096', 'smollm2-135m'],
    ['#v=1&context=4096&prompt=%E2%9C', /prompt has a bad percent-encoding/, '4096', 'smollm2-135m'],
    ['#v=1&context=4096&model=llama-3.2-1b&colour=red&device=no-such-phone', /unknown field "colour".*device "no-such-phone"/, '4096', 'llama-3.2-1b'],
    ['#v=1&context=0', /context must be a whole number from 1 to 2097152, got "0"/, '2048', 'smollm2-135m'],
    ['#v=2&context=4096', /cannot be opened: .*version "2"/, '2048', 'smollm2-135m'],
    [`#v=1&context=4096&prompt=${'x'.repeat(70_000)}`, /cannot be opened: .*too long/, '2048', 'smollm2-135m'],
  ];
  for (const [fragment, re, context, model] of cases) {
    const { page, consoleErrors, pageErrors, foreign } = await open(t, `${URL_.split('#')[0]}${fragment}`);
    await waitReport(page);
    const err = page.getByTestId('share-error');
    await err.waitFor({ state: 'visible', timeout: 15_000 });
    const msg = await err.textContent();
    assert.match(msg, re, fragment.slice(0, 60));
    assert.match(msg, context === '2048' && model === 'smollm2-135m' && /cannot be opened/.test(msg) ? /The page keeps its settings/ : /not applied|cannot be opened/);
    assert.equal(await err.getAttribute('role'), 'alert');
    assert.equal(await page.getByTestId('device-picker').inputValue(), 'snapdragon-8-gen3', 'a bad device is not applied');
    assert.equal(await page.getByTestId('preset-picker').inputValue(), model);
    assert.equal(await page.getByTestId('knob-context').inputValue(), context, 'the good fields are applied');
    // Usable: a knob still changes the estimate.
    const before = await text(page, 'est-weights-bytes');
    await page.getByTestId('knob-weights').selectOption('f32');
    await page.waitForFunction((b) => document.querySelector('[data-testid="est-weights-bytes"]').textContent.trim() !== b, before, { timeout: 10_000 });
    t.diagnostic(`${fragment.slice(0, 50)} → ${msg}`);
    assert.deepEqual(pageErrors, [], 'no page errors');
    assert.deepEqual(consoleErrors, [], 'no console errors');
    assert.deepEqual(foreign, [], 'no request outside the site');
  }
});

test('a link naming a loaded file shows a note and loads nothing; hashchange applies a link', async (t) => {
  const name = 'my <i>model</i>.gguf';
  const fragment = `#v=1&model=%40loaded&context=1024&loaded_file=${encodeURIComponent(name)}&loaded_arch=llama&loaded_layers=30&loaded_hidden=576`;
  const { page, consoleErrors, pageErrors, foreign } = await open(t, `${URL_.split('#')[0]}${fragment}`);
  await waitReport(page);
  const note = page.getByTestId('share-note');
  await note.waitFor({ state: 'visible', timeout: 15_000 });
  const msg = await note.textContent();
  assert.ok(msg.includes('my <i>model</i>.gguf (llama, 30 layers, hidden 576)'), msg);
  assert.match(msg, /by hand/);
  assert.equal(await page.locator('i', { hasText: 'model' }).count(), 0, 'the name is text');
  assert.equal(await page.getByTestId('knob-context').inputValue(), '1024');
  assert.equal(await page.getByTestId('preset-picker').inputValue(), 'smollm2-135m', 'no loaded model: the preset stays');
  assert.equal(await text(page, 'status'), 'no model loaded');
  assert.equal(await page.getByTestId('share-load-default').count(), 0, 'a file of the user: no button');

  // A link naming the default model's file offers to load it from the note.
  await page.evaluate(() => { location.hash = '#v=1&context=1536&loaded_file=smollm2-135m-instruct-q4_1.gguf&loaded_arch=llama'; });
  await page.waitForFunction(() => document.querySelector('[data-testid="knob-context"]').value === '1536', null, { timeout: 10_000 });
  assert.equal(await page.getByTestId('share-load-default').isVisible(), true, 'the default file: "Load default model" in the note');

  // Editing the fragment applies the new link in place; a bad one is refused, settings kept.
  await page.evaluate(() => { location.hash = '#v=1&device=raspberry-pi-5&context=512'; });
  await page.waitForFunction(() => document.querySelector('[data-testid="knob-context"]').value === '512', null, { timeout: 10_000 });
  assert.equal(await page.getByTestId('device-picker').inputValue(), 'raspberry-pi-5');
  assert.ok(await note.isHidden(), 'the note goes with the link that needed it');
  await page.evaluate(() => { location.hash = '#v=1&device=raspberry-pi-5&context=abc'; });
  await page.getByTestId('share-error').waitFor({ state: 'visible', timeout: 10_000 });
  assert.match(await text(page, 'share-error'), /context must be a whole number.*got "abc"/);
  assert.equal(await page.getByTestId('knob-context').inputValue(), '512', 'the bad context is not applied');
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
  assert.deepEqual(foreign, [], 'no request outside the site');
});

test('with a model loaded, the link names the file and its shape, and carries no model data', async (t) => {
  const { page, consoleErrors, pageErrors, foreign } = await open(t);
  await waitReport(page);
  await page.getByTestId('load-default').click();
  await page.waitForFunction(() => /^(ready|error:)/.test(document.querySelector('[data-testid="status"]').textContent), null, { timeout: 120_000 });
  assert.equal(await text(page, 'status'), 'ready');
  await page.getByTestId('preset-picker').selectOption('@loaded');
  await page.getByTestId('share-link').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="share-url"]').value !== '', null, { timeout: 5_000 });
  const link = await page.getByTestId('share-url').inputValue();
  t.diagnostic(`link: ${link}`);
  assert.match(link, /&model=%40loaded&/);
  assert.match(link, /&loaded_file=smollm2-135m-instruct-q4_1\.gguf&loaded_arch=[a-z0-9.-]+&loaded_params=\d+&loaded_layers=30&loaded_hidden=576&/);
  assert.ok(link.length < 2000, `no model data in the link: ${link.length} characters`);

  const b = await open(t, link);
  await waitReport(b.page);
  const note = b.page.getByTestId('share-note');
  await note.waitFor({ state: 'visible', timeout: 15_000 });
  const msg = await note.textContent();
  assert.match(msg, /smollm2-135m-instruct-q4_1\.gguf \(.*30 layers, hidden 576/);
  assert.match(msg, /load that file by hand/);
  assert.equal(await text(b.page, 'status'), 'no model loaded', 'the receiver loads nothing');
  const modelRequests = [];
  b.page.context().on('request', (r) => { if (/\.gguf/.test(r.url())) modelRequests.push(r.url()); });
  await b.page.waitForTimeout(500);
  assert.deepEqual(modelRequests, []);
  for (const [name, x] of [['sender', { consoleErrors, pageErrors, foreign }], ['receiver', b]]) {
    assert.deepEqual(x.pageErrors, [], `${name}: no page errors`);
    assert.deepEqual(x.consoleErrors, [], `${name}: no console errors`);
    assert.deepEqual(x.foreign, [], `${name}: no request outside the site`);
  }
});
