// Browser half of `cargo xtask bench kv`: the edgefit page (the real site, driven through its
// data-testids like run-browser.mjs) in headless Chromium, once per KV format and run, each in a
// fresh browser context: load the default model, pick the KV format (`kv-format`), generate
// TOKENS greedy tokens after a long prompt without the chat template, read the page's metrics.
// Prints one JSON object per run on stdout:
// {kv, runtime, weights, kernel, kv_format, kv_bytes, kv_tokens, prompt_tokens,
// generated_tokens, prefill_tok_s, decode_tok_s} or {kv, runtime, error}.
//
// Environment: CHROMIUM, EDGEFIT_URL (build/site served), PROMPT_FILE, TOKENS, RUNS,
// KV_FORMATS (comma-separated).

import { readFile } from 'node:fs/promises';
import { launch, forwardConsole } from './chromium.mjs';
import { emit, env, generateGreedy, log, num, pickKvFormat, runMetrics, waitStatus } from './page.mjs';

const EDGEFIT_URL = env('EDGEFIT_URL');
const TOKENS = Number(env('TOKENS', '64'));
const RUNS = Number(env('RUNS', '1'));
const FORMATS = env('KV_FORMATS', 'f32').split(',').filter(Boolean);
const prompt = (await readFile(env('PROMPT_FILE'), 'utf8')).trimEnd();

const browser = await launch();
const runtime = `Chromium ${browser.version()} (wasm32 simd128)`;

async function run(kv) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    forwardConsole(page, 'edgefit', { quiet: true });
    await page.goto(EDGEFIT_URL, { waitUntil: 'load' });
    await page.getByTestId('load-default').click();
    await waitStatus(page, 'ready', 300_000);

    // The KV format for the real run.
    await pickKvFormat(page, kv);

    await generateGreedy(page, prompt, TOKENS);

    const metrics = await runMetrics(page);
    if (metrics.kv_format && metrics.kv_format !== kv) throw new Error(`the page ran KV format ${metrics.kv_format}, not ${kv}`);
    return {
      ...metrics,
      kv_bytes: await num(page, 'metric-kv-bytes'),
      kv_tokens: await num(page, 'metric-kv-tokens'),
    };
  } finally {
    await context.close();
  }
}

try {
  for (const kv of FORMATS) {
    for (let i = 0; i < RUNS; i++) {
      try {
        const r = await run(kv);
        log(`edgefit page KV ${kv} run ${i + 1}/${RUNS}: ${JSON.stringify(r)}`);
        emit({ kv, runtime, ...r });
      } catch (e) {
        log(`edgefit page KV ${kv} run ${i + 1}/${RUNS} failed: ${e.message ?? e}`);
        emit({ kv, runtime, error: String(e.message ?? e).split('\n')[0] });
        break;
      }
    }
  }
} finally {
  await browser.close();
}
