// Hostile model files in the page (issue 8, item 3, the page's half) in headless Chromium: files
// built here from the real model's bytes (truncated at many offsets, wrong magic, wrong version,
// absurd dimensions, zero heads, heads that do not divide, vocabulary / tokenizer mismatches), each
// given through the page's file input. Each must show a clear error naming the problem, with no
// page error, and leave the page usable: the estimator answers and the default model then loads
// and generates. The messages are matched on their stable parts (the field, the value) and
// printed as diagnostics. Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { launchBrowser, openPage, text, waitStatus } from './helpers.mjs';
import * as G from './gguf-craft.mjs';

const MODEL = 'models/smollm2-135m-instruct-q4_1.gguf';
const LOAD_TIMEOUT = 120_000;

let browser;
let dir;
const cases = []; // {name, file, want: [RegExp]}

before(async () => {
  browser = await launchBrowser();
  dir = await mkdtemp(path.join(os.tmpdir(), 'edgefit-hostile-'));
  const full = await readFile(MODEL);
  const h = G.parseHeader(full);
  const add = async (name, bytes, ...want) => {
    const file = path.join(dir, `${name}.gguf`);
    await writeFile(file, bytes);
    cases.push({ name, file, want });
  };
  // Truncated: in the magic, in the counts, in the metadata, in the tensor infos, right after
  // them, halfway through the tensor data, one byte short.
  const truncated = /GGUF header|truncat|past the end|end of the file/i;
  for (const at of [0, 3, 12, 1000, h.headerEnd - 10, h.headerEnd + 100, Math.floor(full.length / 2), full.length - 1]) {
    await add(`truncated at ${at} of ${full.length} bytes`, full.subarray(0, at), truncated);
  }
  const head = () => Buffer.from(full.subarray(0, 1 << 20));
  const magic = head();
  magic.write('GGUX', 0, 'latin1');
  await add('wrong magic (GGUX)', magic, /magic/i);
  const version = head();
  version.writeUInt32LE(99, 4);
  await add('wrong version (99)', version, /version/i, /99/);
  await add('absurd llama.block_count (1e9)', G.withU32(full, h, 'llama.block_count', 1_000_000_000), /block_count|n_layers|layers/i, /1000000000/);
  await add('absurd llama.embedding_length (2^31-1)', G.withU32(full, h, 'llama.embedding_length', 0x7fffffff),
    /embedding_length|hidden|dimensions/i, /2147483647|238609294/);
  await add('zero llama.attention.head_count', G.withU32(full, h, 'llama.attention.head_count', 0), /head/i, /\b0\b/);
  await add('llama.attention.head_count_kv 7 does not divide 9 heads', G.withU32(full, h, 'llama.attention.head_count_kv', 7),
    /head_count_kv|n_kv_heads|kv heads/i, /\b7\b/);
  await add('llama.vocab_size 49000 vs 49152 tokenizer tokens', G.withU32(full, h, 'llama.vocab_size', 49000), /vocab/i, /49000/, /49152/);
  await add('token_embd.weight with 49000 rows vs 49152 tokens', G.withTensorDim(full, h, 'token_embd.weight', 1, 49000),
    /token_embd/, /49000/, /49152/);
});

after(async () => {
  await browser?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('hostile model files: a clear error each, no page error, and the page stays usable', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser, t);
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="est-weights-bytes"]')?.textContent.trim() ?? ''), null, { timeout: 30_000 });
  const seen = [];
  for (const c of cases) {
    await t.test(c.name, async () => {
      await page.getByTestId('model-file').setInputFiles(c.file);
      const s = await waitStatus(page, 'ready', LOAD_TIMEOUT);
      seen.push(`${c.name}: ${s}`);
      t.diagnostic(`${c.name} -> ${s}`);
      assert.match(s, /^error: \S/, `an error, not a model: ${s}`);
      const shown = await text(page, 'error-box');
      for (const re of c.want) assert.match(shown, re, `the error box names the problem (${re})`);
      assert.doesNotMatch(shown, /crashed|RuntimeError|unreachable|restarted/, 'refused, not crashed');
      assert.equal(await page.getByTestId('error-box').isVisible(), true);
      assert.equal(await page.getByTestId('generate').isDisabled(), true, 'no model: generate is disabled');
      assert.equal(await page.getByTestId('load-default').isEnabled(), true, 'load default is usable');
      assert.equal(await page.getByTestId('model-file').isEnabled(), true, 'the file input is usable');
      assert.deepEqual(pageErrors, [], 'no page error');
      assert.deepEqual(consoleErrors, [], 'no console error (a panic would log one)');
    });
  }
  const workers = page.workers().length;
  assert.equal(workers, 1, 'the same single worker served every file (none crashed)');

  // Still usable: the estimator answers a change, and the default model loads and generates.
  const before = await text(page, 'est-weights-bytes');
  await page.getByTestId('preset-picker').selectOption('llama-3.2-1b');
  await page.waitForFunction((b) => {
    const v = document.querySelector('[data-testid="est-weights-bytes"]').textContent.trim();
    return /^\d+$/.test(v) && v !== b;
  }, before, { timeout: 30_000 });
  await page.getByTestId('load-default').click();
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready');
  assert.equal(await page.getByTestId('error-box').isVisible(), false, 'a good load clears the error');
  await page.getByTestId('chat').setChecked(false);
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('max-tokens').fill('6');
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  assert.equal(await waitStatus(page, 'done', LOAD_TIMEOUT), 'done');
  assert.ok((await text(page, 'output')).length > 0);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
