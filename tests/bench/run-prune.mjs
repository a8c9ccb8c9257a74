// Browser half of `cargo xtask bench prune`: the edgefit page (the real site, driven through its
// data-testids like run-kv.mjs) in headless Chromium, once per pruned model and run, each in a
// fresh browser context: pick weights w4g32 and KV f32, load the pruned GGUF as a local file
// through the page's file input (`model-file`), generate TOKENS greedy tokens after the prompt
// without the chat template, read the page's metrics. Prints one JSON object per run on stdout:
// {name, runtime, weights, kernel, kv_format, weights_bytes, prompt_tokens, generated_tokens,
// prefill_tok_s, decode_tok_s[, retried_after]} or {name, runtime, error}. A failed run is retried
// once in a fresh context before it counts as an error.
//
// Environment: CHROMIUM, EDGEFIT_URL (build/site served), PROMPT_FILE, TOKENS, RUNS,
// MODELS (a JSON array of {name, path}).

import { readFile } from 'node:fs/promises';
import { launch, forwardConsole } from './chromium.mjs';

const env = (k, d) => process.env[k] ?? d;
const EDGEFIT_URL = env('EDGEFIT_URL');
const TOKENS = Number(env('TOKENS', '64'));
const RUNS = Number(env('RUNS', '1'));
const MODELS = JSON.parse(env('MODELS', '[]'));
const prompt = (await readFile(env('PROMPT_FILE'), 'utf8')).trimEnd();

const emit = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const log = (msg) => process.stderr.write(`  ${msg}\n`);

const browser = await launch();
const runtime = `Chromium ${browser.version()} (wasm32 simd128)`;

async function waitStatus(page, want, timeout) {
  await page.waitForFunction(
    (w) => {
      const s = document.querySelector('[data-testid="status"]')?.textContent ?? '';
      return s === w || s.startsWith('error:');
    },
    want,
    { timeout, polling: 100 },
  );
  const s = await page.getByTestId('status').textContent();
  if (s !== want) throw new Error(`status "${s}" (wanted "${want}")`);
}

const text = async (page, id) => {
  const loc = page.getByTestId(id);
  return (await loc.count()) ? (await loc.first().textContent()).trim() : '';
};

const num = async (page, id) => {
  const v = Number.parseFloat(await text(page, id));
  return Number.isFinite(v) ? v : null;
};

async function run(path) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    forwardConsole(page, 'edgefit', { quiet: true });
    await page.goto(EDGEFIT_URL, { waitUntil: 'load', timeout: 120_000 });

    // w4g32 for the load (the page re-rounds the file's q8_0/f32 tensors to symmetric w4g32).
    const weights = page.getByTestId('weights-format');
    if ((await weights.count()) === 0) throw new Error('the page has no weights-format picker');
    await weights.selectOption('w4g32');
    const input = page.getByTestId('model-file');
    if ((await input.count()) === 0) throw new Error('the page has no model-file input');
    await input.setInputFiles(path);
    await waitStatus(page, 'ready', 300_000);

    // KV f32, as the native column; switching clears the cache and comes back to "ready".
    const select = page.getByTestId('kv-format');
    if ((await select.count()) === 0) throw new Error('the page has no kv-format picker');
    await page.waitForFunction(() => !document.querySelector('[data-testid="kv-format"]')?.disabled, null, {
      timeout: 60_000,
    });
    if ((await select.inputValue()) !== 'f32') {
      await select.selectOption('f32');
      await page.waitForFunction(
        () => {
          const s = document.querySelector('[data-testid="status"]')?.textContent ?? '';
          const f = document.querySelector('[data-testid="kv-format"]')?.value;
          return (s === 'ready' && f === 'f32') || s.startsWith('error:');
        },
        null,
        { timeout: 60_000, polling: 100 },
      );
      await waitStatus(page, 'ready', 1_000);
    }

    await page.getByTestId('prompt').fill(prompt);
    await page.getByTestId('max-tokens').fill(String(TOKENS));
    await page.getByTestId('temperature').fill('0');
    await page.getByTestId('chat').setChecked(false);
    if (await page.getByTestId('keep-context').count()) await page.getByTestId('keep-context').setChecked(false);
    await page.getByTestId('generate').click();
    await waitStatus(page, 'done', 900_000);

    return {
      weights: await text(page, 'metric-weights-format'),
      kernel: await text(page, 'metric-kernel'),
      kv_format: await text(page, 'metric-kv-format'),
      weights_bytes: await num(page, 'metric-weights-bytes'),
      prompt_tokens: await num(page, 'metric-prompt-tokens'),
      generated_tokens: await num(page, 'metric-generated-tokens'),
      prefill_tok_s: await num(page, 'metric-prefill-tps'),
      decode_tok_s: await num(page, 'metric-decode-tps'),
    };
  } finally {
    await context.close();
  }
}

try {
  for (const { name, path } of MODELS) {
    for (let i = 0; i < RUNS; i++) {
      try {
        let r;
        try {
          r = await run(path);
        } catch (e) {
          // One retry in a fresh context (a page that did not load in time, say); the result
          // says why it was retried.
          const why = String(e.message ?? e).split('\n')[0];
          log(`edgefit page ${name} run ${i + 1}/${RUNS} failed, retrying once: ${why}`);
          r = { ...(await run(path)), retried_after: why };
        }
        log(`edgefit page ${name} run ${i + 1}/${RUNS}: ${JSON.stringify(r)}`);
        emit({ name, runtime, ...r });
      } catch (e) {
        log(`edgefit page ${name} run ${i + 1}/${RUNS} failed: ${e.message ?? e}`);
        emit({ name, runtime, error: String(e.message ?? e).split('\n')[0] });
        break;
      }
    }
  }
} finally {
  await browser.close();
}
