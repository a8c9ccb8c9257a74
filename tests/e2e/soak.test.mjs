// Soak test in headless Chromium (issue 8, item 5, the page's half): one conversation of many
// turns and a few thousand generated tokens on the real model, reading the engine's metrics
// after every turn (the same numbers the page shows: weights, KV, the wasm memory's size as
// peak_bytes). The wasm memory minus the KV cache's reserved bytes must stay flat; then a turn
// that does not fit the context gets the documented "context full" message and changes nothing
// (README, "Multi-turn chat"). Prints the figures before and after as diagnostics.
// Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, text, waitStatus } from './helpers.mjs';
import { tapWorkers } from './worker-tap.mjs';

const LOAD_TIMEOUT = 120_000;
const TURN_TIMEOUT = 120_000;
const TURNS = 10;
const TOKENS_PER_TURN = 200;
// Two memory figures per turn (README, "Robustness and security"):
// * heap_bytes, the heap in use as the wasm build's allocator counts it. It falls when memory is
//   freed, so it is the precise one: minus the KV cache's reserved bytes, what remains is the
//   weights, the tokenizer and the conversation itself (its token ids, its text, the tokenizer's
//   cache of words met, at most 10,000 words). That may grow by at most
//   CONVERSATION_BYTES_PER_TOKEN for each token the conversation holds (measured: about 30 B);
//   a leak of any per-token
//   buffer (one row of logits is 196,608 bytes) or per-turn scratch (the prefill's is megabytes)
//   breaks it at once.
// * peak_bytes, the wasm memory's size: it only grows, in 64 KiB pages, and the allocator may
//   need a fresh page when a turn's scratch (the whole conversation is tokenized again each
//   turn) no longer fits the free blocks, or when the cache's growth leaves blocks behind
//   (measured: about 1 MiB per 3 MiB of cache growth). So it is held to a loose bound:
//   what is not the cache moves by less than FLAT_SLACK_BYTES in the whole run.
const CONVERSATION_BYTES_PER_TOKEN = 128;
const FLAT_SLACK_BYTES = 4 << 20;

const browser = useBrowser(); // one Chromium for this file's tests

const MiB = (b) => `${(b / 2 ** 20).toFixed(2)} MiB`;

async function turn(page, prompt, maxTokens) {
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(maxTokens));
  await page.getByTestId('generate').click();
  return waitStatus(page, 'done', TURN_TIMEOUT);
}

/** The metrics of the last finished turn, checked against what the page shows. */
async function lastTurn(page) {
  const m = await page.evaluate(() => window.__tap.done.at(-1));
  assert.equal(await text(page, 'metric-peak-bytes'), String(m.peak_bytes), 'the page shows the engine’s peak bytes');
  assert.equal(await text(page, 'metric-kv-tokens'), String(m.kv_tokens), 'the page shows the tokens the cache holds');
  assert.ok(Number.isSafeInteger(m.heap_bytes) && m.heap_bytes > 0, `the wasm build counts its heap: ${m.heap_bytes}`);
  assert.equal(await text(page, 'metric-heap-bytes'), String(m.heap_bytes), 'the page shows the heap in use');
  assert.ok(m.heap_bytes <= m.peak_bytes, `the heap in use ${m.heap_bytes} B fits the wasm memory ${m.peak_bytes} B`);
  assert.ok(m.heap_bytes >= m.weights_bytes + m.kv_reserved_bytes, `the heap ${m.heap_bytes} B holds the weights and the cache`);
  return m;
}

test('soak: many turns, thousands of tokens: memory minus the KV cache stays flat; the context limit is a clear error', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { onPage: tapWorkers });
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  const loaded = await page.evaluate(() => window.__tap.last);
  await page.getByTestId('chat').setChecked(false);
  await page.getByTestId('keep-context').setChecked(true);
  await page.getByTestId('temperature').fill('0.8');
  await page.getByTestId('top-p').fill('0.95');
  await page.getByTestId('seed').fill('7');

  const rows = [];
  const t0 = Date.now();
  let generated = 0;
  for (let i = 0; i < TURNS; i++) {
    const s = await turn(page, `\n\nChapter ${i + 1}. The next morning,`, TOKENS_PER_TURN);
    assert.equal(s, 'done', `turn ${i + 1} ends: ${s}`);
    const m = await lastTurn(page);
    generated += m.generated_tokens;
    rows.push({ turn: i + 1, generated: m.generated_tokens, kvTokens: m.kv_tokens, reused: m.reused_tokens, kvBytes: m.kv_bytes,
      kvReserved: m.kv_reserved_bytes, weights: m.weights_bytes, peak: m.peak_bytes, notKv: m.peak_bytes - m.kv_reserved_bytes,
      heap: m.heap_bytes, heapNotKv: m.heap_bytes - m.kv_reserved_bytes, decode: m.decode_tok_s });
  }
  const seconds = (Date.now() - t0) / 1000;
  for (const r of rows) {
    t.diagnostic(`turn ${r.turn}: +${r.generated} tokens, cache ${r.kvTokens} tokens (${r.reused} reused), kv ${r.kvBytes} B ` +
      `(reserved ${r.kvReserved} B), weights ${r.weights} B, heap in use ${r.heap} B, heap minus KV reserved ${r.heapNotKv} B, ` +
      `wasm memory ${r.peak} B, memory minus KV reserved ${r.notKv} B, ${r.decode.toFixed(1)} tok/s`);
  }
  const first = rows[0];
  const last = rows.at(-1);
  t.diagnostic(`soak: ${TURNS} turns, ${generated} tokens generated in ${seconds.toFixed(1)} s; after load: wasm memory ${loaded.peak_bytes} B (${MiB(loaded.peak_bytes)})`);
  t.diagnostic(`soak: heap in use ${first.heap} B -> ${last.heap} B; heap minus KV reserved ${first.heapNotKv} B -> ${last.heapNotKv} B ` +
    `(+${last.heapNotKv - first.heapNotKv} B for ${last.kvTokens - first.kvTokens} more tokens held: ` +
    `${((last.heapNotKv - first.heapNotKv) / (last.kvTokens - first.kvTokens)).toFixed(1)} B per token)`);
  t.diagnostic(`soak: wasm memory ${first.peak} B -> ${last.peak} B (${MiB(first.peak)} -> ${MiB(last.peak)}); KV reserved ${first.kvReserved} -> ${last.kvReserved} B; ` +
    `memory minus KV reserved ${first.notKv} B -> ${last.notKv} B (${MiB(first.notKv)} -> ${MiB(last.notKv)}, max ${MiB(Math.max(...rows.map((r) => r.notKv)))})`);

  assert.ok(generated >= 2000, `a few thousand tokens: ${generated}`);
  assert.ok(last.kvTokens > first.kvTokens && last.reused > 0, 'one conversation: the cache kept growing and was reused');
  for (const r of rows) {
    assert.equal(r.weights, first.weights, `turn ${r.turn}: the weights do not change`);
    assert.ok(r.kvReserved >= r.kvBytes, `turn ${r.turn}: the reserved cache holds its bytes`);
  }
  // The heap: turn after turn, what is not the cache grows only with the conversation. The
  // first turn is the warm-up, as in the engine's own soak test (crates/engine/tests/soak.rs):
  // since the forward pass keeps its buffers between calls (issue 17), the second turn grew the
  // heap once by ~350 KB (seen in session 9, then flat within a few KB a turn; not a leak, but not
  // yet traced to the buffer that grows); every later turn is held to the second one.
  const warm = rows[1];
  t.diagnostic(`warm-up: heap minus KV reserved ${first.heapNotKv} B after turn 1, ${warm.heapNotKv} B after turn 2`);
  for (const r of rows.slice(2)) {
    const allowed = CONVERSATION_BYTES_PER_TOKEN * (r.kvTokens - warm.kvTokens);
    assert.ok(r.heapNotKv - warm.heapNotKv <= allowed,
      `turn ${r.turn}: the heap minus the KV cache grew by ${r.heapNotKv - warm.heapNotKv} B since turn 2, more than ` +
      `${CONVERSATION_BYTES_PER_TOKEN} B for each of the ${r.kvTokens - warm.kvTokens} tokens the conversation gained (${allowed} B)`);
  }
  const drift = Math.max(...rows.map((r) => r.notKv)) - first.notKv;
  assert.ok(drift <= FLAT_SLACK_BYTES, `memory minus the KV cache stays flat: it grew by ${drift} B (${MiB(drift)}) over ${TURNS} turns`);

  // The context limit (README, "Multi-turn chat"): a turn that does not fit fails with "context
  // full: … start a new conversation or ask for fewer tokens", the page adds what to press, and
  // nothing changes: the next turn still continues the same cache.
  const limit = Number(await text(page, 'metric-kv-limit'));
  assert.equal(limit, 8192, 'SmolLM2’s context');
  const words = Math.max(500, limit - 4096 - last.kvTokens + 500);
  const s = await turn(page, ' word'.repeat(words), 4096);
  t.diagnostic(`a turn of about ${words} prompt tokens and 4096 new ones on top of ${last.kvTokens} cached: ${s}`);
  const full = s.match(/^error: context full: (\d+) tokens needed but the context holds (\d+); start a new conversation or ask for fewer tokens — press “New conversation” to start over with an empty cache$/);
  assert.ok(full, `the documented message: ${s}`);
  assert.ok(Number(full[1]) > limit && Number(full[2]) === limit, `needed ${full[1]} > limit ${full[2]}`);
  assert.equal(await page.getByTestId('error-box').isVisible(), true);
  assert.equal(await page.locator('[data-testid="transcript"] [data-testid="turn-user"]').last().getAttribute('data-state'), 'failed',
    'the refused turn is marked failed in the transcript');
  assert.equal(await page.getByTestId('generate').isEnabled(), true, 'not stuck');
  assert.equal(await page.getByTestId('new-conversation').isEnabled(), true);

  assert.equal(await turn(page, '\n\nThe end.', 8), 'done', 'a turn that fits still runs');
  const after = await lastTurn(page);
  assert.ok(after.reused_tokens >= last.kvTokens - 1, `the refused turn changed nothing: ${after.reused_tokens} of ${last.kvTokens} cached tokens reused`);
  const afterNotKv = after.heap_bytes - after.kv_reserved_bytes;
  const afterAllowed = CONVERSATION_BYTES_PER_TOKEN * (after.kv_tokens - last.kvTokens);
  t.diagnostic(`after the refused turn and an 8-token one: heap minus KV reserved ${last.heapNotKv} B -> ${afterNotKv} B ` +
    `(${after.kv_tokens - last.kvTokens} more tokens held)`);
  assert.ok(afterNotKv - last.heapNotKv <= afterAllowed,
    `the refused turn kept nothing: the heap minus the KV cache grew by ${afterNotKv - last.heapNotKv} B (allowed ${afterAllowed} B)`);
  await page.getByTestId('new-conversation').click();
  assert.equal(await turn(page, 'Once upon a time', 8), 'done');
  const fresh = await lastTurn(page);
  assert.equal(fresh.reused_tokens, 0, 'New conversation starts over');
  const freshNotKv = fresh.heap_bytes - fresh.kv_reserved_bytes;
  t.diagnostic(`after New conversation: cache ${fresh.kv_tokens} tokens, reserved ${fresh.kv_reserved_bytes} B, heap in use ${fresh.heap_bytes} B, ` +
    `heap minus KV reserved ${freshNotKv} B, wasm memory ${fresh.peak_bytes} B`);
  assert.ok(freshNotKv < afterNotKv, `New conversation gives the old conversation's memory back: ${afterNotKv} B -> ${freshNotKv} B`);
  assert.ok(fresh.peak_bytes - fresh.kv_reserved_bytes <= first.notKv + FLAT_SLACK_BYTES, 'the wasm memory stays within its slack');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
