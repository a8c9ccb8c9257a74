// End-to-end test of "What fits on this device?" in headless Chromium: the page's solver (wasm
// fit) against the CLI's (`edgefit fit --json`, the same function), and "Open" showing a row in
// the estimator with four passes. Environment: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR,
// CHROMIUM, EDGEFIT_CLI (the release edgefit binary; default target/release/edgefit).
// Screenshots: $EDGEFIT_BUILD_DIR/e2e/fit.png (desktop) and fit-phone.png (390×844).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { useBrowser, openPage, gotoSite, SHOT_DIR, text } from './helpers.mjs';

const DEVICE = 'snapdragon-8-gen3';
const CLI = process.env.EDGEFIT_CLI || path.join('target', 'release', 'edgefit');
const FIT_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

async function cliFit() {
  await access(CLI).catch(() => {
    throw new Error(`no edgefit CLI at ${CLI}: run \`cargo xtask build\` or set EDGEFIT_CLI`);
  });
  const { stdout } = await promisify(execFile)(CLI, ['fit', '--device', DEVICE, '--json'], { maxBuffer: 256 << 20 });
  return JSON.parse(stdout);
}

/** Picks the device, runs the search for `scope` and `context`, waits for the summary. */
async function runFit(page, scope = 'all', context = '') {
  await page.getByTestId('fit-run').waitFor({ state: 'visible' });
  await page.waitForFunction(() => !document.querySelector('[data-testid="fit-run"]').disabled, null, { timeout: 60_000 });
  await page.getByTestId('device-picker').selectOption(DEVICE);
  await page.getByTestId('fit-scope').selectOption(scope);
  await page.getByTestId('fit-context').selectOption(context);
  // Every status text and progress value while it runs (the progress bar, model by model).
  await page.evaluate(() => {
    window.__fitSeen = [];
    const status = document.querySelector('[data-testid="fit-status"]');
    const bar = document.querySelector('[data-testid="fit-progress"]');
    new MutationObserver(() => window.__fitSeen.push({ text: status.textContent, value: bar.value, max: bar.max, hidden: bar.hidden }))
      .observe(status, { childList: true, characterData: true, subtree: true });
  });
  const t0 = Date.now();
  await page.getByTestId('fit-run').click();
  await page.waitForFunction(
    () => ['done', 'error'].includes(document.querySelector('[data-testid="fit-status"]').dataset.state),
    null,
    { timeout: FIT_TIMEOUT, polling: 50 },
  );
  const ms = Date.now() - t0;
  const status = await text(page, 'fit-status');
  assert.equal(await page.getByTestId('fit-status').getAttribute('data-state'), 'done', `the search finished: ${status}`);
  const seen = await page.evaluate(() => window.__fitSeen);
  const counted = seen.filter((s) => / \d+ \/ \d+ models?/.test(s.text));
  assert.ok(counted.length > 0, `the status counted models while searching: ${JSON.stringify(seen.slice(0, 5))}`);
  const last = counted.at(-1);
  assert.equal(last.value, last.max, `the bar reached its end: ${JSON.stringify(last)}`);
  assert.equal(last.hidden, false, 'the bar showed while searching');
  assert.equal(await page.getByTestId('fit-progress').isHidden(), true, 'the bar hides once done');
  return ms;
}

/** The rendered table rows as {rank, frontier, model, weights, kv, prune, context, sustained}. */
async function pageRows(page) {
  return page.$$eval('[data-testid="fit-row"]', (trs) => trs.map((tr) => ({
    rank: Number(tr.dataset.rank),
    frontier: tr.dataset.frontier === 'true',
    model: tr.dataset.model,
    weights: tr.dataset.weights,
    kv: tr.dataset.kv,
    prune: Number(tr.dataset.prune),
    context: Number(tr.dataset.context),
    sustained: Number(tr.dataset.sustained),
    cells: [...tr.children].map((c) => c.textContent),
  })));
}

/** Clicks row `rank`'s Open button and waits until the estimator shows its configuration. */
async function openRow(page, rank, expected) {
  await page.locator(`[data-testid="fit-row"][data-rank="${rank}"] [data-testid="fit-open"]`).click();
  const want = expected.sustained_tok_s.toFixed(2);
  await page.waitForFunction(
    (w) => document.querySelector('[data-testid="est-body"]').dataset.pending !== 'true'
      && document.querySelector('[data-testid="est-sustained-tps"]')?.textContent.trim() === w
      && document.querySelector('[data-testid="est-error"]').hidden,
    want,
    { timeout: 15_000, polling: 20 },
  ).catch(async () => {
    throw new Error(`row ${rank}: the estimator shows ${await text(page, 'est-sustained-tps')} tok/s, want ${want}; error: ${await text(page, 'est-error')}`);
  });
  const knobs = {
    device: await page.getByTestId('device-picker').inputValue(),
    model: await page.getByTestId('preset-picker').inputValue(),
    weights: await page.getByTestId('knob-weights').inputValue(),
    kv: await page.getByTestId('knob-kv').inputValue(),
    context: Number(await page.getByTestId('knob-context').inputValue()),
    prune: Number(await page.getByTestId('knob-prune').inputValue()),
  };
  assert.deepEqual(knobs, { device: DEVICE, model: expected.model, weights: expected.weights, kv: expected.kv, context: expected.context, prune: expected.prune }, `row ${rank}: the estimator's knobs`);
  for (const v of ['memory', 'ttft', 'sustained', 'temperature']) {
    assert.equal(await text(page, `verdict-${v}`), 'pass', `row ${rank} (${expected.model} ${expected.weights}/${expected.kv} prune ${expected.prune} ctx ${expected.context}): ${v} verdict`);
  }
  assert.equal(await text(page, 'est-sustained-tps'), want, `row ${rank}: sustained tok/s`);
}

test('what fits: the page ranks exactly as `edgefit fit`, and Open shows four passes', async (t) => {
  const cliStarted = Date.now();
  const cli = await cliFit();
  const cliMs = Date.now() - cliStarted;
  assert.ok(cli.rows.length > 50, `the CLI finds more than 50 passing configurations on ${DEVICE}, got ${cli.rows.length}`);

  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  const pageMs = await runFit(page);

  // Summary: the same counts as the CLI.
  const summary = page.getByTestId('fit-summary');
  const counts = {};
  for (const k of ['tried', 'passing', 'memory', 'ttft', 'sustained', 'temperature', 'invalid']) {
    counts[k] = Number(await summary.getAttribute(`data-${k}`));
  }
  assert.deepEqual(counts, { tried: cli.tried, passing: cli.rows.length, ...cli.failed }, 'summary counts equal the CLI');
  const stext = await text(page, 'fit-summary');
  assert.ok(stext.startsWith(`${cli.rows.length} of ${cli.tried} configurations pass`), stext);
  assert.match(stext, new RegExp(`failed: memory ${cli.failed.memory}, TTFT ${cli.failed.ttft}, sustained ${cli.failed.sustained}, temperature ${cli.failed.temperature}`));

  // Table: the CLI's ranking, each model's best row first (then the rest in rank order), 50 rows.
  const rows = await pageRows(page);
  assert.equal(rows.length, 50, 'the table shows 50 rows');
  const key = (r) => ({ rank: r.rank, model: r.model, weights: r.weights, kv: r.kv, prune: r.prune, context: r.context, frontier: r.frontier });
  const models = new Set();
  const firsts = [];
  const others = [];
  for (const r of cli.rows) (models.has(r.model) ? others : (models.add(r.model), firsts)).push(r);
  const shown = [...firsts, ...others].slice(0, 50);
  assert.deepEqual(rows.map(key), shown.map(key), 'the rows equal the CLI\'s, best per model first');
  assert.equal(new Set(rows.slice(0, firsts.length).map((r) => r.model)).size, Math.min(firsts.length, 50), 'no model repeats before every model showed its best');
  // The two parts are labelled, each heading right before its first row (the table jumps from
  // the last model's best rank back to rank 2 at the second).
  const layout = await page.$$eval('#fit-body tr', (trs) => trs.map((tr) => (tr.dataset.testid === 'fit-section' ? `§${tr.textContent}` : tr.dataset.rank)));
  assert.match(layout[0], new RegExp(`^§Each model's best configuration \\(${Math.min(firsts.length, 50)} models?, by rank\\)$`), layout[0]);
  if (firsts.length < 50) {
    assert.match(layout[firsts.length + 1], /^§More passing configurations, by rank \(\d+ rows? of \d+\)$/, JSON.stringify(layout.slice(firsts.length - 1, firsts.length + 3)));
  }
  assert.equal(layout.filter((x) => !x.startsWith('§')).length, 50);
  rows.forEach((r, i) => assert.equal(r.sustained, shown[i].sustained_tok_s, `row ${i + 1} sustained tok/s`));
  assert.equal(rows[0].cells[2], cli.rows[0].model, 'cells are text');
  // Bytes in binary units, as everywhere on the page: the peak memory column in MiB.
  const heads = await page.$$eval('#fit-head th', (ths) => ths.map((th) => th.textContent));
  const peakCol = heads.indexOf('peak (MiB)');
  assert.ok(peakCol > 0, `a peak (MiB) column: ${heads.join(' | ')}`);
  rows.slice(0, 5).forEach((r, i) => assert.equal(r.cells[peakCol], (shown[i].peak_memory_bytes / 2 ** 20).toFixed(1), `row ${i + 1} peak MiB`));
  assert.ok(!heads.some((h) => /\bMB\b|\bGB\b/.test(h)), `no decimal byte units in the table's titles: ${heads.join(' | ')}`);

  // Chart: drawn, with both series in the legend.
  assert.ok(await page.locator('[data-testid="fit-chart"] canvas').count() > 0, 'fit chart canvas');
  const legend = await page.locator('[data-testid="fit-chart"] .u-legend').textContent();
  assert.match(legend, /frontier/);
  assert.match(legend, /other passing/);
  assert.ok(!legend.includes('–'), `the legend names the series without "–" placeholders: ${legend}`);

  // Open row 1 and a frontier row: the estimator shows them with four passes.
  await openRow(page, 1, cli.rows[0]);
  const frontier = shown.slice(1).find((r) => r.frontier && (r.prune > 0 || r.model !== cli.rows[0].model))
    ?? shown.slice(1).find((r) => r.frontier)
    ?? shown[1]; // the frontier may all be row 1's model: then the next model's best row
  assert.ok(frontier, 'a second row to open');
  await openRow(page, frontier.rank, frontier);
  t.diagnostic(`second row opened (frontier: ${frontier.frontier}): #${frontier.rank} ${frontier.model} ${frontier.weights}/${frontier.kv} prune ${frontier.prune} ctx ${frontier.context}`);

  // The device picker in the panel is the estimator's: another device marks the results stale.
  assert.equal(await page.getByTestId('fit-device').inputValue(), DEVICE);
  assert.equal(await page.getByTestId('fit-stale').isHidden(), true, 'fresh results are not stale');
  await page.getByTestId('fit-device').selectOption('raspberry-pi-5');
  assert.equal(await page.getByTestId('device-picker').inputValue(), 'raspberry-pi-5', 'the estimator follows the panel');
  assert.match(await text(page, 'fit-stale'), /These results are for .*press “Find what fits” again/);
  assert.equal(await page.getByTestId('fit-table').getAttribute('data-stale'), 'true');
  await page.getByTestId('device-picker').selectOption(DEVICE);
  assert.equal(await page.getByTestId('fit-device').inputValue(), DEVICE, 'the panel follows the estimator');
  assert.equal(await page.getByTestId('fit-stale').isHidden(), true, 'the same device again: not stale');

  // Keyboard: the Open buttons are real buttons reachable by Tab.
  assert.equal(await page.locator('[data-testid="fit-open"]').first().evaluate((b) => b.tagName), 'BUTTON');

  // At desktop width the whole table is in view: nothing hides behind a sideways scroll.
  const box = await page.locator('.fit-table-box').first().evaluate((e) => ({ sw: e.scrollWidth, cw: e.clientWidth }));
  assert.ok(box.sw <= box.cw, `the ranked table fits its box at 1280 px: ${box.sw} > ${box.cw} px`);
  await page.getByTestId('fit-panel').scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(SHOT_DIR, 'fit.png'), fullPage: true });
  t.diagnostic(`page: ${pageMs} ms for the search (incl. polling); CLI: ${cliMs} ms; ${cli.rows.length} of ${cli.tried} pass`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('what fits at 390 px: the table scrolls inside its box, the page does not', async (t) => {
  const context = await browser().newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true, serviceWorkers: 'block' });
  t.after(() => context.close());
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await gotoSite(page, t);
  await runFit(page, 'family:llama', '2048');
  const widths = await page.evaluate(() => {
    const box = document.querySelector('.fit-table-box');
    return { doc: document.documentElement.scrollWidth, view: window.innerWidth, box: box.clientWidth, table: box.scrollWidth };
  });
  assert.ok(widths.doc <= widths.view + 1, `the page does not scroll sideways: ${JSON.stringify(widths)}`);
  assert.ok(widths.table > widths.box, `the table scrolls inside its box: ${JSON.stringify(widths)}`);
  assert.ok((await pageRows(page)).every((r) => r.context === 2048 && /llama|smollm|sheared|falcon3/.test(r.model)), `llama family (llama architecture: Llama, SmolLM2, Sheared-LLaMA, Falcon3) at 2048 only: ${JSON.stringify((await pageRows(page)).map((r) => r.model))}`);
  await page.getByTestId('fit-panel').scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(SHOT_DIR, 'fit-phone.png') });
  assert.deepEqual(errors, [], 'no console errors');
});
