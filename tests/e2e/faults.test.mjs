// Faults in the page (issue 8, item 4) in headless Chromium: a real panic inside the worker's
// wasm (fault injection, only with ?faults=1) is reported and the worker replaced; a long
// prompt's prefill in chunks with its progress, and Stop during it; loading a model or changing the weights / KV format while generating (refused, the
// generation finishes unmixed, then the changes apply); double clicks start one job; a tab in the
// background keeps generating. Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, text, waitStatus, URL_ } from './helpers.mjs';
import { tapWorkers, sentCount } from './worker-tap.mjs';

const LOAD_TIMEOUT = 120_000;
const GEN_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

const open = (t, url = URL_) => openPage(browser(), t, { url, onPage: tapWorkers });

async function loadDefault(page) {
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the default model loads');
}

async function setKnobs(page, { prompt, maxTokens, chat = false, keep = false }) {
  await page.getByTestId('chat').setChecked(chat);
  await page.getByTestId('keep-context').setChecked(keep);
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(maxTokens));
  await page.getByTestId('temperature').fill('0');
}

async function generate(page, knobs) {
  await setKnobs(page, knobs);
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done', 'the generation ends');
  return text(page, 'output');
}

/** Waits until `n` tokens are out (or the generation ended); returns the status then. */
async function waitTokens(page, n) {
  await page.waitForFunction(
    (want) => Number(document.querySelector('[data-testid="metric-generated-tokens"]').textContent || 0) >= want ||
      document.querySelector('[data-testid="status"]').textContent !== 'generating…',
    n,
    { timeout: GEN_TIMEOUT, polling: 20 },
  );
  return text(page, 'status');
}

const PANIC_LOG = /deliberate panic \(fault injection for tests\)/;

test('a panic in the worker mid-generation is reported, the worker is replaced, and the page loads and generates again', async (t) => {
  const { page, consoleErrors, pageErrors } = await open(t, new URL('?faults=1', URL_).href);
  await loadDefault(page);
  assert.equal(await page.evaluate(() => typeof window.edgefitInjectFault), 'function', '?faults=1 offers the fault hook');
  await setKnobs(page, { prompt: 'Once upon a time, in a small village by the sea,', maxTokens: 40 });
  // The wasm panics before step 4 of this generation: after the prefill and a few tokens.
  await page.evaluate(() => window.edgefitInjectFault(4));
  await page.getByTestId('generate').click();
  const s = await waitStatus(page, 'done', GEN_TIMEOUT);
  t.diagnostic(`shown after the panic: ${s}`);
  assert.match(s, /^error: generating: the engine crashed \((RuntimeError: )?unreachable/, 'the crash is reported as such');
  assert.match(s, /the engine was restarted, load the model again$/, 'and says what happened and what to do');
  assert.equal(await page.getByTestId('error-box').isVisible(), true, 'the error box shows it');
  const tap = await page.evaluate(() => window.__tap);
  // Steps 0 to 3 ran; the worker had sent the first token at once and then a piece per 50 ms of
  // decoding, so 1 to 4 tokens reached the page before the panic (what was still to be sent went
  // down with the worker), and the page shows every one it got.
  const shown = Number(await text(page, 'metric-generated-tokens'));
  assert.equal(shown, tap.pieces.at(-1)?.generated, `the page shows the tokens the worker sent before the panic (pieces: ${JSON.stringify(tap.pieces)})`);
  assert.ok(shown >= 1 && shown <= 4, `1 to 4 tokens came out before the panic at step 4: ${shown}`);
  assert.equal(tap.errors.length, 1, `one error from the worker: ${JSON.stringify(tap.errors)}`);
  assert.equal(tap.errors[0].fatal, true, 'the panic is fatal to that worker');
  assert.equal(tap.workers, 2, 'a second worker replaced the panicked one');
  // A clear state: no model, nothing busy, every control usable again.
  assert.equal(await page.getByTestId('generate').isDisabled(), true, 'no model: generate is disabled');
  assert.equal(await page.getByTestId('stop').isDisabled(), true, 'nothing to stop');
  assert.equal(await page.getByTestId('load-default').isEnabled(), true, 'load is usable');
  assert.equal(await page.getByTestId('model-file').isEnabled(), true, 'the file input is usable');
  assert.equal(await page.getByTestId('weights-format').isEnabled(), true, 'the weights picker is usable');
  assert.match(await text(page, 'model-info'), /No model loaded/);
  for (let i = 0; i < 50 && page.workers().length !== 1; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(page.workers().length, 1, 'the panicked worker was terminated: one worker runs');

  // The fresh worker loads and generates: the same greedy text as a clean run would give.
  await loadDefault(page);
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'a good load clears the error');
  const out = await generate(page, { prompt: 'The capital of France is', maxTokens: 8 });
  assert.ok(out.trim().length > 0, `the new worker generates: ${JSON.stringify(out)}`);
  assert.equal(await text(page, 'finish-reason'), 'reached max tokens');
  assert.deepEqual(pageErrors, [], 'no page errors');
  // The panic hook's report of the deliberate panic is the only console error.
  assert.ok(consoleErrors.some((e) => PANIC_LOG.test(e)), `the panic was logged: ${JSON.stringify(consoleErrors)}`);
  assert.deepEqual(consoleErrors.filter((e) => !PANIC_LOG.test(e)), [], 'no other console errors');
});

test('a long prompt is fed in chunks with a progress bar; Stop mid-prefill ends the turn there and the next turn reuses what was fed', async (t) => {
  const { page, consoleErrors, pageErrors } = await open(t);
  await loadDefault(page);
  assert.equal(await page.evaluate(() => typeof window.edgefitInjectFault), 'undefined', 'no fault hook without ?faults=1');
  // About 1,000 prompt tokens: 16 chunks of 64 (PREFILL_CHUNK), seconds of prefill.
  const long = 'The quick brown fox jumps over the lazy dog near the old river bank. '.repeat(70);
  await setKnobs(page, { prompt: long, maxTokens: 200, keep: true });
  await page.evaluate(() => {
    window.__tap.received.length = 0;
  });
  await page.getByTestId('generate').click();
  // The second chunk's progress has come: Stop is pressed while the prefill is under way.
  await page.waitForFunction(() => window.__tap.received.filter(([type]) => type === 'prefilling').length >= 2, null, { timeout: GEN_TIMEOUT, polling: 5 });
  const before = await page.evaluate(() => {
    const q = (id) => document.querySelector(`[data-testid="${id}"]`);
    const bar = q('prefill-progress');
    const state = {
      status: q('status').textContent,
      bar: { hidden: bar.hidden, value: bar.value, max: bar.max },
      tokensAtStop: q('metric-generated-tokens').textContent,
      stopEnabled: !q('stop').disabled,
      pieces: window.__tap.received.filter(([type]) => type === 'piece').length,
    };
    q('stop').click();
    return state;
  });
  t.diagnostic(`at Stop: status "${before.status}", bar ${before.bar.value} / ${before.bar.max}`);
  assert.match(before.status, /^generating… reading the prompt: (\d+) \/ (\d+) tokens( · about [\d.]+ s left)?$/, 'the status counts the prompt tokens fed');
  const [, fedShown, totalShown] = before.status.match(/(\d+) \/ (\d+) tokens/).map(Number);
  assert.ok(fedShown >= 128 && fedShown % 64 === 0 && totalShown > 900, `chunks of 64 of a long prompt: ${fedShown} / ${totalShown}`);
  assert.deepEqual(before.bar, { hidden: false, value: before.bar.value, max: totalShown }, 'the bar is shown, out of the prompt tokens');
  assert.ok(before.bar.value >= 128 && before.bar.value < totalShown, `the bar shows the tokens fed: ${before.bar.value}`);
  assert.equal(before.pieces, 0, 'no token had come out when Stop was pressed');
  assert.equal(before.stopEnabled, true, 'Stop is enabled during the prefill');
  assert.equal(before.tokensAtStop, '', 'no token was out when Stop was pressed');
  const t0 = Date.now();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  const stopMs = Date.now() - t0;
  const done = await page.evaluate(() => window.__tap.done.at(-1));
  t.diagnostic(`stopped during a ${done.prompt_tokens}-token prefill: ${done.kv_tokens} tokens fed, ${done.generated_tokens} generated, done ${stopMs} ms after Stop`);
  assert.equal(await text(page, 'finish-reason'), 'stopped');
  assert.equal(done.generated_tokens, 0, 'Stop took effect inside the prefill: no token was generated');
  assert.ok(done.kv_tokens < done.prompt_tokens && done.kv_tokens % 64 === 0, `the prefill stopped between chunks: ${done.kv_tokens} of ${done.prompt_tokens} tokens fed`);
  assert.equal(await page.getByTestId('prefill-progress').isHidden(), true, 'the bar is hidden once the turn ends');
  assert.equal(await page.getByTestId('stop').isDisabled(), true, 'not stuck: stop is disabled');
  assert.equal(await page.getByTestId('generate').isEnabled(), true, 'not stuck: generate is enabled');
  // The next turn continues the conversation: the chunks fed before Stop are reused.
  const out = await generate(page, { prompt: ' The capital of France is', maxTokens: 6, keep: true });
  assert.ok(out.trim().length > 0, 'the next generation runs');
  const next = await page.evaluate(() => window.__tap.done.at(-1));
  t.diagnostic(`the next turn reused ${next.reused_tokens} tokens and fed ${next.prompt_tokens}`);
  assert.equal(next.reused_tokens, done.kv_tokens, 'what was fed before Stop is reused, not computed again');
  assert.equal(await text(page, 'finish-reason'), 'reached max tokens');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('while generating, a new model or a new weights / KV format is refused; the output is unmixed; then they apply', async (t) => {
  const { page, consoleErrors, pageErrors } = await open(t);
  await loadDefault(page);
  const knobs = { prompt: 'Once upon a time, in a small village by the sea,', maxTokens: 24 };
  const reference = await generate(page, knobs);
  const weights = await page.getByTestId('weights-format').inputValue();
  const kv = await page.getByTestId('kv-format').inputValue();
  const sentBefore = await page.evaluate(() => [...window.__tap.sent]);

  await setKnobs(page, knobs);
  await page.getByTestId('generate').click();
  assert.equal(await waitTokens(page, 3), 'generating…', 'still generating after 3 tokens');
  for (const id of ['load-default', 'model-file', 'weights-format', 'kv-format', 'kernel-picker', 'new-conversation', 'prune-apply', 'generate']) {
    assert.equal(await page.getByTestId(id).isDisabled(), true, `${id} is disabled while generating`);
  }
  // Changes that slip past the disabled controls (events fired by script): every one is refused.
  const slipped = await page.evaluate(() => {
    const other = (sel) => [...sel.options].map((o) => o.value).find((v) => v && v !== sel.value);
    const wf = document.getElementById('weights-format');
    const kvf = document.getElementById('kv-format');
    const to = { weights: other(wf), kv: other(kvf) };
    wf.value = to.weights;
    wf.dispatchEvent(new Event('change'));
    kvf.value = to.kv;
    kvf.dispatchEvent(new Event('change'));
    const input = document.getElementById('model-file');
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(1024)], 'another-model.gguf'));
    input.files = dt.files;
    input.dispatchEvent(new Event('change'));
    document.getElementById('load-default').dispatchEvent(new MouseEvent('click', { bubbles: true }));
    document.getElementById('gen-form').dispatchEvent(new Event('submit', { cancelable: true }));
    document.getElementById('new-conversation').dispatchEvent(new MouseEvent('click', { bubbles: true }));
    return { ...to, status: document.querySelector('[data-testid="status"]').textContent };
  });
  t.diagnostic(`tried weights ${slipped.weights}, KV ${slipped.kv}, a file, load, generate, new conversation mid-run`);
  assert.equal(slipped.status, 'generating…', 'the status stays "generating…"');
  assert.match(await text(page, 'progress-text'), /another-model\.gguf not loaded: the engine is busy/, 'the refused file is named');
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  assert.equal(await text(page, 'output'), reference, 'the output is the same greedy text as an undisturbed run: nothing mixed in');
  assert.equal(await text(page, 'finish-reason'), 'reached max tokens');
  assert.equal(await page.getByTestId('weights-format').inputValue(), weights, 'the weights picker shows the format still in use');
  assert.equal(await page.getByTestId('kv-format').inputValue(), kv, 'the KV picker shows the format still in use');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'no error');
  const sentDuring = (await page.evaluate(() => [...window.__tap.sent])).slice(sentBefore.length);
  assert.deepEqual(sentDuring.filter((m) => m !== 'estimate'), ['generate'], `only the one generate reached the worker: ${sentDuring}`);

  // After it: the KV format and the weights apply, and the page generates in them.
  await page.getByTestId('kv-format').selectOption(slipped.kv);
  assert.equal(await waitStatus(page, 'ready', 30_000), 'ready');
  await page.getByTestId('weights-format').selectOption(slipped.weights);
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', `the model reloads in ${slipped.weights}`);
  await generate(page, { prompt: 'The capital of France is', maxTokens: 4 });
  assert.equal(await text(page, 'metric-kv-format'), slipped.kv);
  assert.match(await text(page, 'metric-weights-format'), new RegExp(`^${slipped.weights}`));
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('double clicks on Load, Generate and Prune start one job each', async (t) => {
  const { page, consoleErrors, pageErrors } = await open(t);
  await page.getByTestId('load-default').dblclick();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  assert.equal(await sentCount(page, 'load-url'), 1, 'one load');

  await setKnobs(page, { prompt: 'The capital of France is', maxTokens: 8 });
  await page.getByTestId('generate').dblclick();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  assert.equal(await sentCount(page, 'generate'), 1, 'one generation');
  assert.equal(await page.locator('[data-testid="transcript"] [data-testid="turn-user"]').count(), 1, 'one user turn');
  assert.equal(Number(await text(page, 'metric-generated-tokens')), 8);

  await page.locator('[data-testid="prune-panel"] > summary').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="prune-panel"]').dataset.texts, null, { timeout: 30_000 });
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the panel’s baseline perplexity (if any) is done');
  await page.getByTestId('prune-method').selectOption('magnitude');
  await page.getByTestId('prune-mlp').fill('0.1');
  await page.getByTestId('prune-apply').dblclick();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the prune ends ready');
  assert.equal(await sentCount(page, 'prune'), 1, 'one prune');
  assert.match(await text(page, 'prune-summary'), /MLP channels/);
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'no "busy" error');
  const tap = await page.evaluate(() => window.__tap.errors);
  assert.deepEqual(tap, [], 'the worker reported no error');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('a frozen background tab: the generation keeps going and, thawed, the page shows all of it', async (t) => {
  // Headless Chromium keeps every page visible (another page in front, a minimized window: still
  // "visible"), so the test applies what a browser does to a background tab at its most severe:
  // it freezes the page (Page Lifecycle "frozen", as Chrome's tab freezing), its worker with it.
  // Timer throttling alone cannot slow the generation: the worker uses no timer (it yields
  // through a MessageChannel), and the page draws what the pieces brought on a timer at most every
  // 250 ms, which a frozen page runs again after the thaw, and at once at the end.
  const { page, consoleErrors, pageErrors } = await open(t);
  await loadDefault(page);
  const n = 48;
  const knobs = { prompt: 'Once upon a time, in a small village by the sea,', maxTokens: n };
  const piecesBefore = await page.evaluate(() => window.__tap.pieces.length);
  const reference = await generate(page, knobs);
  // The worker sends the first token at once, then a piece when 50 ms of decoding have passed
  // since the last (web/worker.js, PIECE_MS), and the rest with the end: not a message per token.
  // A piece's metrics date its last token (decode_tok_s = the tokens after the first, i.e.
  // generated − 1, over the time since the first: edgefit_engine's session). The worker counts
  // its 50 ms on the wall clock, which also runs while it yields between steps and posts, so a
  // piece holds a little less than 50 ms of decoding (47.1 ms in one CI run on a loaded 2-core
  // machine): every piece but the first and the last comes ≥ 40 ms of decoding after the one
  // before, and a message per token would come 1 / rate apart (20–30 ms here).
  const pieces = (await page.evaluate(() => window.__tap.pieces)).slice(piecesBefore);
  const at = pieces.map((p) => (p.rate > 0 ? ((p.generated - 1) / p.rate) * 1000 : 0));
  t.diagnostic(`${pieces.length} pieces for ${n} tokens over ${at.at(-1).toFixed(0)} ms of decoding`);
  assert.equal(pieces[0].generated, 1, 'the first token goes at once');
  assert.equal(pieces.reduce((s, p) => s + p.tokens, 0), n - 1, 'every decoded token is in a piece');
  for (let i = 1; i < pieces.length - 1; i++) {
    assert.ok(at[i] - at[i - 1] >= 40, `piece ${i} came ${(at[i] - at[i - 1]).toFixed(1)} ms after the one before (a piece is 50 ms of the worker's time, at least 40 of them decoding)`);
  }
  await page.evaluate(() => {
    window.__tap.tokenMs.length = 0;
  });
  await setKnobs(page, knobs);
  await page.getByTestId('generate').click();
  assert.equal(await waitTokens(page, 4), 'generating…');
  const cdp = await page.context().newCDPSession(page);
  const atFreeze = Number(await text(page, 'metric-generated-tokens'));
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  await new Promise((r) => setTimeout(r, 2000));
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  const atThaw = Number(await text(page, 'metric-generated-tokens'));
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done', 'the generation finishes after the thaw');
  assert.equal(Number(await text(page, 'metric-generated-tokens')), n, 'every token was generated');
  assert.equal(await text(page, 'finish-reason'), 'reached max tokens');
  assert.equal(await text(page, 'output'), reference, 'the same text as an undisturbed run: no piece lost or doubled');
  const tokenMs = await page.evaluate(() => window.__tap.tokenMs);
  const slowest = Math.max(...tokenMs);
  t.diagnostic(`frozen 2 s at ${atFreeze} tokens, ${atThaw} right after the thaw; slowest token ${slowest.toFixed(0)} ms ` +
    `(${slowest > 1500 ? 'the worker was paused with the page' : 'the worker kept going'}); decode ${await text(page, 'metric-decode-tps')} tokens/s`);
  assert.equal(tokenMs.length, n - 1, 'every decoded token’s time reached the chart (the first token is the prefill’s)');
  const out = await generate(page, { prompt: 'The capital of France is', maxTokens: 4 });
  assert.ok(out.trim().length > 0, 'the page generates again');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
