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
import { emit, env, generateGreedy, log, num, pickKvFormat, runMetrics, waitStatus } from './page.mjs';

const EDGEFIT_URL = env('EDGEFIT_URL');
const TOKENS = Number(env('TOKENS', '64'));
const RUNS = Number(env('RUNS', '1'));
const MODELS = JSON.parse(env('MODELS', '[]'));
const prompt = (await readFile(env('PROMPT_FILE'), 'utf8')).trimEnd();

const browser = await launch();
const runtime = `Chromium ${browser.version()} (wasm32 simd128)`;

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

    // KV f32, as the native column.
    await pickKvFormat(page, 'f32', { ifDifferent: true });

    await generateGreedy(page, prompt, TOKENS);

    return { ...(await runMetrics(page)), weights_bytes: await num(page, 'metric-weights-bytes') };
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
