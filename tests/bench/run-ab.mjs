// A/B of two builds of the page in one headless Chromium: does a change make the page slower?
// Not part of `cargo xtask bench` (it needs an older build, served by hand). Each round runs A
// and then B (the order alternates between rounds, so a slow stretch of the machine does not
// land on one side), each in a fresh browser context: load the default model in WEIGHTS, set
// the KV format (B only: A may predate the picker), generate TOKENS greedy tokens after
// tests/bench/prompt.txt without the chat template (page.mjs's generateGreedy, as the other
// drivers). Prints one JSON line per run (with the build and thread count the footer names, when
// the page has one) and, at the end, the median and range per side.
//
// Usage (the older side from a git worktree, each side served with COOP/COEP or without):
//   git worktree add /tmp/old <rev> && (cd /tmp/old && cargo xtask build)
//   serve /tmp/old/build/site on :8096 and build/site on :8095, then
//   CHROMIUM=$(command -v chromium) A_URL=http://127.0.0.1:8096/ \
//     B_URL='http://127.0.0.1:8095/?wasm=simd128' B_KV=f32,int8 node tests/bench/run-ab.mjs
//
// Environment: CHROMIUM, A_URL, B_URL, ROUNDS (default 8), TOKENS (128), WEIGHTS (w4g32),
// B_KV (comma-separated KV formats for B, one run each per round; empty: the page's default).

import { readFile } from 'node:fs/promises';
import { launch } from './chromium.mjs';
import { env, emit, generateGreedy, log, pickKvFormat, runMetrics, waitStatus } from './page.mjs';

const A_URL = env('A_URL');
const B_URL = env('B_URL');
if (!A_URL || !B_URL) throw new Error('A_URL and B_URL must name the two served sites');
const ROUNDS = Number(env('ROUNDS', '8'));
const TOKENS = Number(env('TOKENS', '128'));
const WEIGHTS = env('WEIGHTS', 'w4g32');
const B_KV = env('B_KV', '').split(',').filter(Boolean);
const prompt = (await readFile(new URL('./prompt.txt', import.meta.url), 'utf8')).trimEnd();

const browser = await launch();

async function run(side, url, kv) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(url, { waitUntil: 'load' });
    const select = page.getByTestId('weights-format');
    if (await select.count()) await select.first().selectOption(WEIGHTS);
    await page.getByTestId('load-default').click();
    await waitStatus(page, 'ready', 300_000);
    if (kv) await pickKvFormat(page, kv, { ifDifferent: true });
    await generateGreedy(page, prompt, TOKENS);
    const footer = await page
      .getByTestId('engine-version')
      .evaluate((e) => ({ build: e.dataset.build ?? '', threads: Number(e.dataset.threads ?? NaN) }))
      .catch(() => ({ build: '', threads: null }));
    const metrics = await runMetrics(page);
    return { side, ...footer, ...metrics, kv: kv || metrics.kv_format || 'page default' };
  } finally {
    await context.close();
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const rows = [];
try {
  const b = (B_KV.length ? B_KV : ['']).map((kv) => ['B', B_URL, kv]);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...b, ['A', A_URL, '']] : [['A', A_URL, ''], ...b];
    for (const [side, url, kv] of order) {
      const row = { round: r, ...(await run(side, url, kv)) };
      rows.push(row);
      emit(row);
    }
  }
} finally {
  await browser.close();
}
const groups = new Map();
for (const row of rows) {
  const key = `${row.side} (KV ${row.kv})`;
  groups.set(key, [...(groups.get(key) ?? []), row]);
}
for (const [key, rs] of groups) {
  const p = rs.map((r) => r.prefill_tok_s);
  const d = rs.map((r) => r.decode_tok_s);
  const f = (xs) => `${median(xs).toFixed(1)} (${Math.min(...xs)}–${Math.max(...xs)})`;
  log(`${key}, ${rs.length} runs: prefill ${f(p)} tok/s, decode ${f(d)} tok/s (median (range))`);
}
