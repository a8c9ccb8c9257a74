// Browser half of `cargo xtask bench e2e`: in one headless Chromium, the edgefit page (the real
// site, driven through its data-testids like tests/e2e/page.test.mjs) and the wllama page, in
// RUNS rounds (every page, build, thread count and weight format once a round), each run in a
// fresh browser context. Prints one JSON object per run on stdout:
// {engine, runtime, weights, build, asked_threads, threads, load_ms, peak_bytes, prompt_tokens,
// generated_tokens, prefill_tok_s, decode_tok_s} or {engine, runtime, weights, asked_threads,
// threads, error}.
//
// Threads: both servers send COOP/COEP (xtask's serve), so both pages are cross-origin isolated.
// The edgefit page runs once on its single-threaded simd128 build (`?wasm=simd128`, 1 thread:
// the reference of the threaded build's memory) and then on its threaded build
// (`?wasm=threads&threads=N`) at each count of THREADS; `threads` in a row is what the page's
// footer says the engine ran with (`data-threads` of engine-version, read after the run), and
// `build` its `data-build`, so a page that ran another build or count is visible (xtask refuses
// a row whose `threads` is not `asked_threads`). wllama is asked for `n_threads: N` and reports
// its own `getNumThreads()` and `isMultithread()` (its multi-thread wasm runs when the page is
// isolated and N > 1).
//
// Environment: CHROMIUM, EDGEFIT_URL (build/site served), PEERS_URL (target/bench/site served;
// empty: skip wllama), MODEL_PATH (relative URL of the GGUF on the peers' server), MODEL_FILE
// (the GGUF on disk, given to the page's file input; unset: the page's default-model button),
// PEER_WEIGHTS (how wllama's row names the file's weights), PROMPT_FILE, TOKENS, RUNS, WEIGHTS
// (comma-separated formats to ask the page for, when it offers a choice), THREADS
// (comma-separated thread counts, default 1).

import { readFile } from 'node:fs/promises';
import { launch, forwardConsole } from './chromium.mjs';
import { emit, env, log, waitStatus } from './page.mjs';

const EDGEFIT_URL = env('EDGEFIT_URL');
const PEERS_URL = env('PEERS_URL', '');
const MODEL = env('MODEL_PATH', 'models/smollm2-135m-instruct-q4_1.gguf');
const TOKENS = Number(env('TOKENS', '128'));
const RUNS = Number(env('RUNS', '3'));
const WEIGHTS = env('WEIGHTS', 'f32,w4g32').split(',').filter(Boolean);
const MODEL_FILE = env('MODEL_FILE', '');
const PEER_WEIGHTS = env('PEER_WEIGHTS', 'q4_1 (GGUF as is)');
const THREADS = env('THREADS', '1')
  .split(',')
  .filter(Boolean)
  .map((t) => {
    const n = Number(t);
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`THREADS: ${JSON.stringify(t)} is not a thread count`);
    return n;
  });
const prompt = (await readFile(env('PROMPT_FILE'), 'utf8')).trimEnd();

const browser = await launch();
const version = browser.version();
const chromium = `Chromium ${version.split('.')[0]}`;
/** The page's runs: the single-threaded simd128 build at 1 thread, then the threaded build at each count. */
const PAGE_RUNS = [{ build: 'simd128', threads: 1 }, ...THREADS.map((threads) => ({ build: 'threads', threads }))];
const pageRuntime = (build) => `${chromium} (wasm32 simd128${build === 'threads' ? ', threaded build' : ''})`;
const withQuery = (base, query) => {
  const u = new URL(base);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, String(v));
  return u.href;
};

async function withPage(name, url, fn) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    forwardConsole(page, name, { quiet: true });
    // One retry, as tests/e2e/helpers.mjs's gotoSite: a first navigation in a fresh Chromium
    // sometimes never reaches `load` within 30 s (seen in the e2e suite and in a bench run of
    // session 9, while the same URL loaded in under a second right after).
    try {
      await page.goto(url, { waitUntil: 'load' });
    } catch (e) {
      if (e?.name !== 'TimeoutError') throw e;
      console.error(`${name}: page.goto timed out once; retrying`);
      await page.goto(url, { waitUntil: 'load' });
    }
    return await fn(page);
  } finally {
    await context.close();
  }
}

const num = async (page, id) => {
  const loc = page.getByTestId(id);
  if ((await loc.count()) === 0) return null;
  const v = Number.parseFloat((await loc.textContent()).trim());
  return Number.isFinite(v) ? v : null;
};

/** A weights <select> on the page, if the page offers one (the lead is adding it). */
async function weightsSelect(page) {
  for (const id of ['weights-format', 'weights', 'load-weights']) {
    const loc = page.getByTestId(id);
    if ((await loc.count()) > 0) return loc.first();
  }
  return null;
}

/** The build and thread count the page's footer names (engine-version's data attributes). */
const footer = (page) =>
  page.getByTestId('engine-version').evaluate((e) => ({ build: e.dataset.build ?? '', threads: Number(e.dataset.threads ?? NaN) }));

async function edgefitRun(weights, run) {
  const url = withQuery(EDGEFIT_URL, run.build === 'threads' ? { wasm: 'threads', threads: run.threads } : { wasm: 'simd128' });
  return withPage('edgefit', url, async (page) => {
    // The worker has started its build (and, threaded, set the asked count, or refused it).
    await page.waitForFunction(
      ([b, n]) => {
        const v = document.querySelector('[data-testid="engine-version"]');
        const err = document.querySelector('[data-testid="error-box"]');
        return (v?.dataset.build === b && v?.dataset.threads === String(n)) || (err && !err.hidden && err.textContent.trim());
      },
      [run.build, run.threads],
      { timeout: 60_000, polling: 100 },
    ).catch(() => {});
    let label = 'page default';
    const select = await weightsSelect(page);
    if (select && weights) {
      await select.selectOption(weights);
      label = weights;
    }
    if (MODEL_FILE) await page.getByTestId('model-file').setInputFiles(MODEL_FILE);
    else await page.getByTestId('load-default').click();
    await waitStatus(page, 'ready', 300_000);
    await page.getByTestId('prompt').fill(prompt);
    await page.getByTestId('max-tokens').fill(String(TOKENS));
    await page.getByTestId('temperature').fill('0');
    await page.getByTestId('chat').setChecked(false);
    await page.getByTestId('generate').click();
    await waitStatus(page, 'done', 600_000);
    const ran = await footer(page);
    const errorBox = page.getByTestId('error-box');
    const shown = (await errorBox.count()) && (await errorBox.isVisible()) ? (await errorBox.textContent()).trim() : '';
    // What the page says it ran (metric-weights-format, metric-kernel), when it shows that.
    const text = async (id) => ((await page.getByTestId(id).count()) ? (await page.getByTestId(id).textContent()).trim() : '');
    const used = await text('metric-weights-format');
    const kernel = await text('metric-kernel');
    if (used) label = used;
    if (kernel) label += `, ${kernel}`;
    return {
      weights: label,
      build: ran.build,
      asked_threads: run.threads,
      threads: ran.threads,
      ...(ran.build !== run.build ? { build_error: `asked for the ${run.build} build, the page ran ${ran.build || 'no build'}` } : {}),
      ...(shown ? { page_error: shown } : {}),
      load_ms: await num(page, 'metric-load-ms'),
      peak_bytes: await num(page, 'metric-peak-bytes'),
      prompt_tokens: await num(page, 'metric-prompt-tokens'),
      generated_tokens: await num(page, 'metric-generated-tokens'),
      prefill_tok_s: await num(page, 'metric-prefill-tps'),
      decode_tok_s: await num(page, 'metric-decode-tps'),
    };
  });
}

try {
  // edgefit: one row per weight format the page offers, else one row for its default.
  const offered = await withPage('edgefit', EDGEFIT_URL, async (page) => {
    const select = await weightsSelect(page);
    if (!select) return null;
    const values = await select.locator('option').evaluateAll((os) => os.map((o) => o.value));
    return WEIGHTS.filter((w) => values.includes(w));
  });
  const formats = offered && offered.length ? offered : [null];
  if (!offered) log('the edgefit page offers no weights choice yet: benchmarking its default');
  // Every (engine, build, threads, weights) is a job; the RUNS runs go round by round, each job
  // once a round, so a stretch of this kind of VM's slow mode falls on every row alike rather
  // than on one job's runs in a row. A job that failed runs no more.
  const jobs = [];
  for (const run of PAGE_RUNS) {
    const runtime = pageRuntime(run.build);
    for (const w of formats) {
      jobs.push({
        label: (r) => `edgefit page (${run.build}, ${run.threads} thread(s)) ${r.weights}`,
        go: async () => ({ engine: 'edgefit page', runtime, ...(await edgefitRun(w, run)) }),
        failed: (e) => ({ engine: 'edgefit page', runtime, weights: w ?? 'page default', asked_threads: run.threads, threads: run.threads, error: e }),
      });
    }
  }
  if (PEERS_URL) {
    const pkg = JSON.parse(await readFile(new URL('./node_modules/@wllama/wllama/package.json', import.meta.url), 'utf8'));
    const engine = `wllama ${pkg.version} (llama.cpp wasm)`;
    for (const threads of THREADS) {
      // One runtime name at every count (the scaling lines pair a row with its 1-thread twin);
      // a count above 1 that did not start the multi-thread build is an error row.
      const runtime = `${chromium} (wasm, pthreads when isolated)`;
      let shown = false;
      jobs.push({
        label: () => `wllama (${threads} thread(s))`,
        go: async () => {
          const r = await withPage('wllama', `${PEERS_URL}wllama.html`, async (page) => {
            await page.waitForFunction(() => window.wllamaReady === true, null, { timeout: 60_000 });
            return page.evaluate((a) => window.runWllama(a), { model: MODEL, prompt, tokens: TOKENS, threads });
          });
          const { text, multithread, ...rest } = r;
          if (!shown) log(`wllama text: ${JSON.stringify(text.slice(0, 160))}`);
          shown = true;
          const bad = threads > 1 && !multithread ? { build_error: `asked for ${threads} threads, wllama did not start its multi-thread build` } : {};
          log(`wllama (${threads} thread(s)): multithread ${multithread}`);
          return { engine, runtime, weights: PEER_WEIGHTS, asked_threads: threads, ...rest, ...bad };
        },
        failed: (e) => ({ engine, runtime, weights: PEER_WEIGHTS, asked_threads: threads, threads, error: e }),
      });
    }
  }
  for (let i = 0; i < RUNS; i++) {
    for (const job of jobs) {
      if (job.dead) continue;
      try {
        const r = await job.go();
        log(`${job.label(r)} run ${i + 1}/${RUNS}: ${JSON.stringify(r)}`);
        emit(r);
      } catch (e) {
        job.dead = true;
        emit(job.failed(String(e.message ?? e)));
      }
    }
  }
} finally {
  await browser.close();
}
