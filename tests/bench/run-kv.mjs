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

const env = (k, d) => process.env[k] ?? d;
const EDGEFIT_URL = env('EDGEFIT_URL');
const TOKENS = Number(env('TOKENS', '64'));
const RUNS = Number(env('RUNS', '1'));
const FORMATS = env('KV_FORMATS', 'f32').split(',').filter(Boolean);
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

async function run(kv) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    forwardConsole(page, 'edgefit', { quiet: true });
    await page.goto(EDGEFIT_URL, { waitUntil: 'load' });
    await page.getByTestId('load-default').click();
    await waitStatus(page, 'ready', 300_000);

    // The KV format for the real run; switching clears the cache and comes back to "ready".
    const select = page.getByTestId('kv-format');
    if ((await select.count()) === 0) throw new Error('the page has no kv-format picker');
    const offered = await select.locator('option').evaluateAll((os) => os.map((o) => o.value));
    if (!offered.includes(kv)) throw new Error(`the page offers no KV format ${kv} (it offers ${offered.join(', ')})`);
    await page.waitForFunction(() => !document.querySelector('[data-testid="kv-format"]')?.disabled, null, {
      timeout: 60_000,
    });
    await select.selectOption(kv);
    await page.waitForFunction(
      (want) => {
        const s = document.querySelector('[data-testid="status"]')?.textContent ?? '';
        const f = document.querySelector('[data-testid="kv-format"]')?.value;
        return (s === 'ready' && f === want) || s.startsWith('error:');
      },
      kv,
      { timeout: 60_000, polling: 100 },
    );
    await waitStatus(page, 'ready', 1_000);

    await page.getByTestId('prompt').fill(prompt);
    await page.getByTestId('max-tokens').fill(String(TOKENS));
    await page.getByTestId('temperature').fill('0');
    await page.getByTestId('chat').setChecked(false);
    if (await page.getByTestId('keep-context').count()) await page.getByTestId('keep-context').setChecked(false);
    await page.getByTestId('generate').click();
    await waitStatus(page, 'done', 900_000);

    const used = await text(page, 'metric-kv-format');
    if (used && used !== kv) throw new Error(`the page ran KV format ${used}, not ${kv}`);
    return {
      weights: await text(page, 'metric-weights-format'),
      kernel: await text(page, 'metric-kernel'),
      kv_format: used,
      kv_bytes: await num(page, 'metric-kv-bytes'),
      kv_tokens: await num(page, 'metric-kv-tokens'),
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
