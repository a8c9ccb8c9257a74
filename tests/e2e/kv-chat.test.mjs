// End-to-end tests of the real run's KV cache format picker, the live KV bytes beside the
// estimator's, and multi-turn chat that keeps the cache, in headless Chromium (playwright-core
// + the system chromium). Same environment as page.test.mjs: EDGEFIT_URL (required),
// EDGEFIT_BUILD_DIR, CHROMIUM. Screenshot: $EDGEFIT_BUILD_DIR/e2e/kv-chat.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, SHOT_DIR, text, waitStatus } from './helpers.mjs';
import path from 'node:path';

const LOAD_TIMEOUT = 120_000;
const GEN_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

/** A metric element's plain integer (fails on anything else). */
async function int(page, id) {
  const s = await text(page, id);
  assert.match(s, /^\d+$/, `${id} should be a plain integer, got ${JSON.stringify(s)}`);
  return Number(s);
}

async function loadDefault(page) {
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the default model loads');
}

/** Fills the form and generates; waits for done. */
async function generate(page, { prompt, maxTokens, chat, keep }) {
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(maxTokens));
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('chat').setChecked(chat);
  await page.getByTestId('keep-context').setChecked(keep);
  await page.getByTestId('generate').click();
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  assert.equal(s, 'done', `generation ended with status "${s}"`);
}

/** The run's KV numbers as shown on the page. */
async function kvShown(page) {
  return {
    format: await text(page, 'metric-kv-format'),
    tokens: await int(page, 'metric-kv-tokens'),
    bytes: await int(page, 'metric-kv-bytes'),
    estimate: await int(page, 'metric-kv-estimate-bytes'),
    match: await text(page, 'metric-kv-match'),
    reused: await int(page, 'metric-reused-tokens'),
    limit: await int(page, 'metric-kv-limit'),
    prompt: await int(page, 'metric-prompt-tokens'),
    generated: await int(page, 'metric-generated-tokens'),
  };
}

// Long enough (> 64 tokens) that kivi4 stores whole 32-token groups as well as its residual.
const LONG_PROMPT =
  'We the People of the United States, in Order to form a more perfect Union, establish Justice, insure domestic ' +
  'Tranquility, provide for the common defence, promote the general Welfare, and secure the Blessings of Liberty ' +
  'to ourselves and our Posterity, do ordain and establish this Constitution for the United States of America. ' +
  'The capital of France is';

test('KV format picker: each format runs, its measured KV bytes equal the estimator kvBytes, k8v16 is smaller', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  const picker = page.getByTestId('kv-format');
  assert.ok((await picker.evaluate((e) => e.labels.length)) > 0, 'the KV picker has a <label>');
  // The list comes from the wasm (catalog), before any model is loaded.
  await page.waitForFunction(() => document.querySelector('[data-testid="kv-format"]').options.length > 1, null, { timeout: 30_000 });
  const offered = await picker.evaluate((s) => [...s.options].map((o) => o.value));
  for (const f of ['f32', 'f16', 'k8v16', 'int4g32']) assert.ok(offered.includes(f), `${f} is offered: ${offered}`);
  assert.equal(await picker.inputValue(), 'int8', 'the engine default (int8, edgefit_estimate::DEFAULT_KV_FORMAT) is selected');

  await loadDefault(page);
  assert.equal(await text(page, 'metric-kv-format'), 'int8', 'after loading, the metrics name the KV format');

  // Compare with the estimator for this exact run (this tab, the loaded model).
  await page.getByTestId('device-picker').selectOption('this-browser');
  await page.getByTestId('preset-picker').selectOption('@loaded');

  // f16 first: each format is picked by the user, so the estimate's KV knob follows every one.
  const formats = ['f16', 'f32', 'k8v16', 'int4g32', ...(offered.includes('kivi4') ? ['kivi4'] : [])];
  const seen = {};
  for (const f of formats) {
    await picker.selectOption(f);
    assert.equal(await waitStatus(page, 'ready', 30_000), 'ready', `switching to ${f} ends ready`);
    assert.equal(await picker.inputValue(), f);
    assert.equal(await page.getByTestId('knob-kv').inputValue(), f, `the estimate's KV knob follows the run (${f})`);
    await generate(page, { prompt: LONG_PROMPT, maxTokens: 4, chat: false, keep: false });
    const kv = await kvShown(page);
    assert.equal(kv.format, f, `metric-kv-format shows ${f}`);
    // More than two 32-token groups: kivi4's grouped part and its f16 residual both hold tokens.
    assert.ok(kv.tokens > 64, `${f}: the cache holds the prompt's tokens (${kv.tokens})`);
    assert.equal(kv.bytes, kv.estimate, `${f}: measured KV bytes ${kv.bytes} equal the estimator's ${kv.estimate} for ${kv.tokens} tokens`);
    assert.equal(kv.match, 'equal', `${f}: the marker says equal`);
    assert.equal(kv.reused, 0, `${f}: a fresh run reuses nothing`);
    assert.ok(kv.limit >= 2048 && kv.limit >= kv.tokens, `${f}: the context limit is shown (${kv.limit})`);
    // The comparison table uses the same exact bytes.
    await page.waitForFunction(
      (fmt) => (document.querySelector('[data-testid="cmp-formats"]')?.textContent ?? '').includes(`KV cache ${fmt}`),
      f,
      { timeout: 30_000 },
    );
    assert.equal(Number(await page.getByTestId('cmp-error-kv').getAttribute('data-percent')), 0, `${f}: the comparison's KV row agrees exactly`);
    seen[f] = kv;
  }
  const perToken = (f) => seen[f].bytes / seen[f].tokens;
  assert.ok(perToken('k8v16') < perToken('f16'), `k8v16 ${perToken('k8v16')} B/token < f16 ${perToken('f16')}`);
  assert.ok(perToken('f16') < perToken('f32'), `f16 ${perToken('f16')} B/token < f32 ${perToken('f32')}`);
  assert.ok(perToken('int4g32') < perToken('k8v16'), `int4g32 ${perToken('int4g32')} B/token < k8v16 ${perToken('k8v16')}`);
  t.diagnostic(Object.entries(seen).map(([f, kv]) => `${f}: ${kv.bytes} B for ${kv.tokens} tokens`).join('; '));
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('multi-turn chat keeps the cache; the transcript is text; New conversation starts over', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await loadDefault(page);
  // Continue conversation is on by default with the chat template.
  await page.getByTestId('chat').setChecked(false);
  await page.getByTestId('chat').setChecked(true);
  assert.equal(await page.getByTestId('keep-context').isChecked(), true, 'chat mode turns "Continue conversation" on');

  // Turn 1; while it runs, the pickers are disabled and the KV numbers grow live.
  await page.getByTestId('prompt').fill('What is the capital of France?');
  await page.getByTestId('max-tokens').fill('12');
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  // One snapshot of the page, taken in the page in one go: a fast machine can finish the
  // 12 tokens between two separate reads (status "generating…", then a re-enabled button).
  const snap = await (await page.waitForFunction(
    () => {
      const q = (id) => document.querySelector(`[data-testid="${id}"]`);
      const status = q('status').textContent;
      if (!(Number(q('metric-generated-tokens').textContent || 0) >= 2 || status !== 'generating…')) return null;
      return {
        status,
        kvDisabled: q('kv-format').disabled,
        newDisabled: q('new-conversation').disabled || q('new-conversation').getAttribute('aria-disabled') === 'true',
        kvTokens: q('metric-kv-tokens').textContent.trim(),
        kvEstimate: q('metric-kv-estimate-bytes').textContent.trim(),
      };
    },
    null,
    { timeout: GEN_TIMEOUT, polling: 20 },
  )).jsonValue();
  if (snap.status === 'generating…') {
    assert.equal(snap.kvDisabled, true, 'the KV picker is disabled while generating');
    assert.equal(snap.newDisabled, true, 'New conversation is disabled while generating');
    assert.match(snap.kvTokens, /^\d+$/, 'KV tokens shown during decode');
    assert.match(snap.kvEstimate, /^\d+$/, 'the KV estimate is shown during decode');
  }
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  const turn1 = await kvShown(page);
  const answer1 = await text(page, 'output');
  assert.equal(turn1.reused, 0, 'the first turn reuses nothing');
  assert.ok(turn1.tokens > 0);
  assert.equal(turn1.bytes, turn1.estimate);

  // Turn 2 continues: the transcript is text, never HTML.
  const prompt2 = 'Say <b>x</b> & stop.';
  await generate(page, { prompt: prompt2, maxTokens: 8, chat: true, keep: true });
  const turn2 = await kvShown(page);
  t.diagnostic(`turn 1: ${JSON.stringify(turn1)} ${JSON.stringify(answer1)}; turn 2: ${JSON.stringify(turn2)}`);
  assert.ok(turn2.tokens > turn1.tokens, `the cache grows across turns: ${turn1.tokens} -> ${turn2.tokens}`);
  assert.ok(turn2.reused > 0, `turn 2 reuses the cached tokens of turn 1 (reused ${turn2.reused})`);
  assert.ok(turn2.reused <= turn1.tokens, `reused ${turn2.reused} <= held before ${turn1.tokens}`);
  assert.ok(turn2.prompt < turn2.reused + turn2.prompt && turn2.prompt < turn2.tokens,
    `turn 2 feeds fewer tokens (${turn2.prompt}) than the conversation holds (${turn2.tokens})`);
  assert.equal(turn2.bytes, turn2.estimate, 'measured KV bytes equal the estimate after turn 2');
  assert.equal(turn2.match, 'equal');

  const transcript = page.getByTestId('transcript');
  const users = await page.locator('[data-testid="transcript"] [data-testid="turn-user"] .text').allTextContents();
  const models = await page.locator('[data-testid="transcript"] [data-testid="turn-model"] .text').allTextContents();
  assert.deepEqual(users, ['What is the capital of France?', prompt2], 'both user turns are shown, in order');
  assert.equal(models.length, 2, 'both answers are shown');
  assert.equal(models[0], answer1, 'the first answer stays in the transcript');
  assert.ok((await transcript.textContent()).includes('<b>x</b>'), 'the markup shows literally');
  assert.equal(await page.locator('[data-testid="transcript"] b').count(), 0, 'no <b> element was made from the prompt');
  await page.screenshot({ path: path.join(SHOT_DIR, 'kv-chat.png'), fullPage: true });

  // New conversation: the transcript clears and the next turn starts with an empty cache.
  await page.getByTestId('new-conversation').click();
  assert.equal(await page.locator('[data-testid="transcript"] [data-testid^="turn-"]').count(), 0, 'the transcript is cleared');
  await generate(page, { prompt: 'What is the capital of France?', maxTokens: 4, chat: true, keep: true });
  const turn3 = await kvShown(page);
  assert.equal(turn3.reused, 0, 'after New conversation nothing is reused');
  assert.ok(turn3.tokens < turn2.tokens, `the cache starts over: ${turn3.tokens} < ${turn2.tokens}`);
  assert.equal(await page.locator('[data-testid="transcript"] [data-testid="turn-user"]').count(), 1, 'one user turn after New conversation');
  // Switching the chat template mid-conversation: the engine reads the turns again in the new
  // mode, and the transcript says so between the turns.
  await generate(page, { prompt: ' And Spain?', maxTokens: 3, chat: false, keep: true });
  assert.match(await text(page, 'turn-note'), /Chat template off: the earlier turns are read again as plain text/);
  assert.deepEqual(await page.locator('[data-testid="transcript"] [data-testid^="turn-"]').evaluateAll((ls) => ls.map((l) => l.dataset.role)), ['user', 'model', 'note', 'user', 'model']);

  // Changing the KV format clears the cache too, and the conversation starts over.
  await page.getByTestId('kv-format').selectOption('f16');
  assert.equal(await waitStatus(page, 'ready', 30_000), 'ready');
  assert.equal(await page.locator('[data-testid="transcript"] [data-testid^="turn-"]').count(), 0, 'a new KV format starts a new conversation');
  await generate(page, { prompt: 'Hello!', maxTokens: 4, chat: true, keep: true });
  const turn4 = await kvShown(page);
  assert.equal(turn4.format, 'f16');
  assert.equal(turn4.reused, 0, 'nothing is reused after a KV format change');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'no error in normal use');
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
