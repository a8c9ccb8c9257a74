// The second real model in the page: Gemma 3 270M instruction-tuned, Q4_K_M (a mix of q5_0,
// q4_k, q6_k and q8_0 tensors, a 262,144-token SentencePiece vocabulary, sliding-window layers),
// loaded from a local file as a user would. It runs on its own blocks (weights auto, the page's
// default) with an f32 KV cache, and its greedy continuation must be the one transformers printed
// for the same file (tests/golden/gemma3-270m.json, made by tests/golden/make_gemma_goldens.py).
// The model info names the architecture, the tokenizer and the per-tensor formats; the
// estimate-vs-measured table covers the run, and the pruning panel says what gemma3 cannot have
// pruned or exported. `cargo xtask test` fetches the file in its setup step.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text, waitStatus } from './helpers.mjs';

const FILE = path.resolve('models/gemma3-270m-it-q4_k_m.gguf');
const GOLDEN = JSON.parse(readFileSync(path.resolve('tests/golden/gemma3-270m.json'), 'utf8'));
const LOAD_TIMEOUT = 180_000;
const GEN_TIMEOUT = 120_000;

const browser = useBrowser();

test('Gemma 3 270M Q4_K_M from a local file: its own blocks, the reference greedy text, formats, estimate, pruning limits', async (t) => {
  assert.ok(existsSync(FILE), `${FILE} is missing: \`cargo xtask setup --gemma\` fetches it`);
  const capital = GOLDEN.cases.find((c) => c.name === 'capital');
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  assert.equal(await page.getByTestId('weights-format').inputValue(), 'auto', 'auto is the default');
  await page.getByTestId('kv-format').selectOption('f32'); // the reference ran with f32 keys and values
  await page.getByTestId('device-picker').selectOption('this-browser');

  const t0 = Date.now();
  await page.getByTestId('model-file').setInputFiles(FILE);
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  const loadMs = Date.now() - t0;
  assert.match(await text(page, 'progress-text'), /gemma3-270m-it-q4_k_m loaded \(auto \(the file's q8_0, q5_0, q4_k, q6_k kept\)\)/);

  const info = await page.getByTestId('model-info').innerText();
  assert.match(info, /Architecture\s*gemma3/);
  assert.match(info, /Tokenizer\s*SentencePiece BPE with byte fallback/);
  assert.match(info, /Parameters\s*268 M \(268,098,176\)/);
  assert.match(info, /Stored as\s*q8_0 × 10 \([\d.]+ MiB\), q5_0 × 81 \([\d.]+ MiB\), q4_k × 27 \([\d.]+ MiB\), q6_k × 9 \([\d.]+ MiB\)/);
  assert.match(info, /Converted\s*none/);
  assert.match(info, /Vocabulary\s*262,144/);
  assert.match(info, /Chat template\s*no/);
  // No chat template in the file: the chat switch is off and disabled, not silently ignored.
  assert.equal(await page.getByTestId('chat').isChecked(), false);
  assert.equal(await page.getByTestId('chat').isDisabled(), true);

  // Pruning: gemma3 keeps its Q/K dims (QK-norm) and has no exporter; the panel says so.
  assert.match(await text(page, 'prune-limits'), /^Q\/K dims stay whole for gemma3: .*q\/k RMSNorm.* No download for gemma3: .*exporting `gemma3`/);
  assert.equal(await page.getByTestId('prune-qk').isDisabled(), true);
  assert.equal(await page.getByTestId('prune-mlp').isDisabled(), false);
  assert.equal(await page.getByTestId('prune-download').isDisabled(), true);
  assert.equal(await page.getByTestId('prune-apply').isDisabled(), false);

  // The reference's greedy continuation, token for token (16 tokens).
  await page.getByTestId('preset-picker').selectOption('@loaded');
  await page.getByTestId('prompt').fill(capital.prompt);
  await page.getByTestId('max-tokens').fill(String(capital.greedy.tokens.length));
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', GEN_TIMEOUT), 'done');
  assert.equal(await page.getByTestId('output').textContent(), capital.greedy.text, 'the greedy text transformers printed for this file');
  assert.equal(await text(page, 'metric-generated-tokens'), String(capital.greedy.tokens.length));
  assert.equal(await text(page, 'metric-weights-format'), "auto (the file's q8_0, q5_0, q4_k, q6_k kept) · embedding q8_0");
  assert.equal(await text(page, 'metric-kv-match'), 'equal', "the KV bytes are the estimator's for the sliding-window layers");

  // Estimate vs measured for this run: every row filled; the byte rows close.
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid="est-compare"]');
    return c && !c.hidden && c.querySelectorAll('tbody tr').length >= 5;
  }, null, { timeout: 60_000, polling: 50 });
  const rows = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('[data-testid="est-compare"] tbody tr')].map((tr) => {
    const td = tr.querySelectorAll('td');
    return [tr.dataset.key, { estimate: Number.parseFloat(td[0].textContent), measured: Number.parseFloat(td[1].textContent), error: Number(td[2]?.dataset.percent) }];
  })));
  for (const k of ['ttft', 'prefill', 'decode', 'weights', 'kv']) {
    assert.ok(Number.isFinite(rows[k]?.estimate) && Number.isFinite(rows[k]?.measured), `${k}: ${JSON.stringify(rows[k])}`);
  }
  assert.equal(rows.kv.error, 0, 'KV bytes exact');
  // The comparison sizes the file matrix by matrix as a q4_k (Q4_K_M) file: the bytes held.
  assert.equal(rows.weights.error, 0, `weight bytes exact: ${rows.weights.error} %`);
  t.diagnostic(`Gemma 3 270M in the page: loaded in ${loadMs} ms; decode ${rows.decode.measured} tok/s (estimate ${rows.decode.estimate}, ${rows.decode.error.toFixed(1)} %), prefill ${rows.prefill.measured} tok/s (estimate ${rows.prefill.estimate}, ${rows.prefill.error.toFixed(1)} %), weights ${rows.weights.error.toFixed(2)} %`);
  await page.screenshot({ path: path.join(SHOT_DIR, 'gemma3-270m.png'), fullPage: false });
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
