// What the page drivers of the benches share (run-kv.mjs, run-prune.mjs, run-browser.mjs): the
// environment, the JSON-lines output, and driving the edgefit page through its data-testids:
// wait for a status, read a metric, pick the KV format, generate greedily.

export const env = (k, d) => process.env[k] ?? d;

/** One JSON object per line on stdout (what the xtask side reads). */
export const emit = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
/** Progress on stderr. */
export const log = (msg) => process.stderr.write(`  ${msg}\n`);

/** Waits until the page's status is `want` (or an error, which throws). */
export async function waitStatus(page, want, timeout) {
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

/** The trimmed text of the first element with data-testid `id`, '' if there is none. */
export const text = async (page, id) => {
  const loc = page.getByTestId(id);
  return (await loc.count()) ? (await loc.first().textContent()).trim() : '';
};

/** The number shown by data-testid `id`, null if there is none. */
export const num = async (page, id) => {
  const v = Number.parseFloat(await text(page, id));
  return Number.isFinite(v) ? v : null;
};

/**
 * Picks KV format `kv` on a loaded page; switching clears the cache and comes back to "ready".
 * `ifDifferent`: leave the picker alone when it already shows `kv`.
 */
export async function pickKvFormat(page, kv, { ifDifferent = false } = {}) {
  const select = page.getByTestId('kv-format');
  if ((await select.count()) === 0) throw new Error('the page has no kv-format picker');
  const offered = await select.locator('option').evaluateAll((os) => os.map((o) => o.value));
  if (!offered.includes(kv)) throw new Error(`the page offers no KV format ${kv} (it offers ${offered.join(', ')})`);
  await page.waitForFunction(() => !document.querySelector('[data-testid="kv-format"]')?.disabled, null, {
    timeout: 60_000,
  });
  if (ifDifferent && (await select.inputValue()) === kv) return;
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
}

/** `tokens` greedy tokens after `prompt`, chat template and kept context off, until "done". */
export async function generateGreedy(page, prompt, tokens) {
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('max-tokens').fill(String(tokens));
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('chat').setChecked(false);
  if (await page.getByTestId('keep-context').count()) await page.getByTestId('keep-context').setChecked(false);
  await page.getByTestId('generate').click();
  await waitStatus(page, 'done', 900_000);
}

/** The run's metrics every driver reports. */
export async function runMetrics(page) {
  return {
    weights: await text(page, 'metric-weights-format'),
    kernel: await text(page, 'metric-kernel'),
    kv_format: await text(page, 'metric-kv-format'),
    prompt_tokens: await num(page, 'metric-prompt-tokens'),
    generated_tokens: await num(page, 'metric-generated-tokens'),
    prefill_tok_s: await num(page, 'metric-prefill-tps'),
    decode_tok_s: await num(page, 'metric-decode-tps'),
  };
}
