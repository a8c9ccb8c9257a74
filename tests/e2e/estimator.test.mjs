// End-to-end test of the estimator panel in headless Chromium (playwright-core + the system
// chromium). Same environment as page.test.mjs: EDGEFIT_URL (required), EDGEFIT_BUILD_DIR,
// CHROMIUM. Screenshot: $EDGEFIT_BUILD_DIR/e2e/estimator.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, SHOT_DIR, text, URL_ } from './helpers.mjs';
import path from 'node:path';

const LOAD_TIMEOUT = 120_000;
const GEN_TIMEOUT = 120_000;

const browser = useBrowser(); // one Chromium for this file's tests

const num = async (page, id) => Number(await text(page, id));

/** Changes a control and waits until `id`'s text differs from `before` (a fresh report). */
async function changeAndWait(page, action, id) {
  const before = await text(page, id);
  await action();
  // Changed, and no estimate in flight: the panel shows the answer to its latest request (a
  // change seen while a newer request was pending was read as the new knob's value once).
  await page.waitForFunction(
    ([tid, b]) => {
      const e = document.querySelector(`[data-testid="${tid}"]`);
      const err = document.querySelector('[data-testid="est-error"]');
      if (document.querySelector('[data-testid="est-body"]')?.dataset.pending === 'true') return false;
      return (e && e.textContent.trim() !== b && e.textContent.trim() !== '') || (err && !err.hidden);
    },
    [id, before],
    { timeout: 10_000, polling: 20 },
  );
}

async function waitReport(page) {
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="est-weights-bytes"]')?.textContent.trim() ?? ''), null, { timeout: 30_000 });
}

test('estimator panel: knobs change the numbers, verdicts, formulas, errors', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await waitReport(page);
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await changeAndWait(page, () => page.getByTestId('preset-picker').selectOption('llama-3.2-1b'), 'est-weights-bytes');
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('bf16'), 'est-weights-bytes');
  const bf16 = { w: await num(page, 'est-weights-bytes'), tps: await num(page, 'est-decode-tps') };
  const t0 = Date.now();
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('w4g32'), 'est-weights-bytes');
  const recomputeMs = Date.now() - t0;
  const w4 = { w: await num(page, 'est-weights-bytes'), tps: await num(page, 'est-decode-tps') };
  assert.ok(Number.isInteger(bf16.w) && bf16.w > 2e9, `bf16 weights of Llama 3.2 1B are > 2 GB, got ${bf16.w}`);
  assert.ok(w4.w < bf16.w / 2, `w4g32 weights shrink: ${w4.w} vs ${bf16.w}`);
  assert.ok(w4.tps > bf16.tps, `w4g32 decodes faster: ${w4.tps} vs ${bf16.tps}`);

  for (const id of ['est-kv-bytes', 'est-total-bytes']) assert.match(await text(page, id), /^\d+$/, id);
  for (const id of ['est-ttft-ms', 'est-decode-tps', 'est-sustained-tps', 'est-temp-rise']) {
    const v = await text(page, id);
    assert.match(v, /^\d+(\.\d+)?$/, `${id} is a plain number, got ${v}`);
  }
  for (const v of ['memory', 'ttft', 'sustained', 'temperature']) {
    assert.match(await text(page, `verdict-${v}`), /^(pass|fail)$/, `verdict-${v}`);
  }

  // A formula expands with the values put in.
  await page.getByTestId('est-kv-bytes').click();
  const explain = page.getByTestId('explain-est-kv-bytes');
  await explain.waitFor({ state: 'visible' });
  const ex = await explain.textContent();
  assert.match(ex, /formula/);
  assert.match(ex, /KV/);
  assert.match(ex, /×/);

  // Opening a verdict's formula keeps the badges in their order (reading order: top, then left).
  await page.locator('.verdict-d').nth(1).locator('summary').click();
  const boxes = await page.locator('.verdict-d').evaluateAll((ds) => ds.map((d) => d.getBoundingClientRect()).map((r) => [Math.round(r.top), Math.round(r.left)]));
  const reading = [...boxes].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  assert.deepEqual(boxes, reading, `the verdicts stay in order with one open: ${JSON.stringify(boxes)}`);
  await page.locator('.verdict-d').nth(1).locator('summary').click();

  // Charts drew.
  assert.ok(await page.locator('[data-testid="roofline-chart"] canvas').count() > 0, 'roofline canvas');
  assert.ok(await page.locator('[data-testid="thermal-chart"] canvas').count() > 0, 'thermal canvas');
  assert.ok(await page.locator('[data-testid="mem-chart"] .mem-seg').count() >= 4, 'memory bar segments');

  // Another device changes the numbers.
  await changeAndWait(page, () => page.getByTestId('device-picker').selectOption('raspberry-pi-5'), 'est-decode-tps');
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');

  // Absurd contexts: a clear error in the panel, no crash.
  for (const ctx of ['0', '1000000000']) {
    await page.getByTestId('knob-context').fill(ctx);
    const err = page.getByTestId('est-error');
    await err.waitFor({ state: 'visible', timeout: 10_000 });
    const msg = await err.textContent();
    assert.match(msg, /context/i, `the error names the context: ${msg}`);
    t.diagnostic(`context ${ctx}: ${msg}`);
  }
  await page.getByTestId('knob-context').fill('2048');
  await page.getByTestId('est-error').waitFor({ state: 'hidden', timeout: 10_000 });
  t.diagnostic(`recompute after a knob change: ${recomputeMs} ms (incl. polling); bf16 ${bf16.tps} tok/s, w4g32 ${w4.tps} tok/s`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

/** The [low, high] a cell's "range a–b" shows, and its value. */
async function rangeOf(page, id) {
  const r = await text(page, `${id}-range`);
  const m = /^range (\d+(?:\.\d+)?)\u2013(\d+(?:\.\d+)?)$/.exec(r);
  assert.ok(m, `${id} shows a range beside it, got ${JSON.stringify(r)}`);
  return { low: Number(m[1]), high: Number(m[2]), value: await num(page, id) };
}

/** The first estimate's figures the page records (est-range-note data attributes). */
async function firstEstimate(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid="est-range-note"]')?.dataset.workerMs !== undefined, null, { timeout: 30_000 });
  return page.evaluate(() => {
    const d = document.querySelector('[data-testid="est-range-note"]').dataset;
    const mark = performance.getEntriesByName('edgefit:first-estimate')[0];
    return { workerMs: Number(d.workerMs), pageMs: mark ? mark.startTime : null, tables: d.tables };
  });
}

test('runtime picker, threads, ranges beside every speed and on the chart; precomputed tables', async (t) => {
  // Before: the tables computed on the first estimate (?tables=0, what every tab did); after:
  // the site build's estimator-tables.json.
  const before = await openPage(browser(), t, { requestFailures: false, url: `${URL_}?tables=0` });
  const computed = await firstEstimate(before.page);
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  const seeded = await firstEstimate(page);
  t.diagnostic(`first estimate: tables ${computed.tables}: worker ${computed.workerMs} ms, mark at ${computed.pageMs?.toFixed(0)} ms; tables ${seeded.tables}: worker ${seeded.workerMs} ms, mark at ${seeded.pageMs?.toFixed(0)} ms`);
  assert.match(seeded.tables, /precomputed by the site build/);
  assert.match(computed.tables, /computed on the first estimate/);
  assert.ok(seeded.workerMs < computed.workerMs, `the seeded first estimate (${seeded.workerMs} ms) is faster than computing the tables (${computed.workerMs} ms)`);
  assert.ok(seeded.pageMs !== null, 'the Performance mark edgefit:first-estimate exists');

  await waitReport(page);
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await changeAndWait(page, () => page.getByTestId('preset-picker').selectOption('llama-3.2-1b'), 'est-weights-bytes');
  await changeAndWait(page, () => page.getByTestId('knob-unit').selectOption('cpu'), 'est-decode-tps');
  // Every time and speed carries its range, the value inside it.
  for (const id of ['est-ttft-ms', 'est-prefill-tps', 'est-decode-tps', 'est-sustained-tps']) {
    const r = await rangeOf(page, id);
    assert.ok(r.low <= r.value && r.value <= r.high && r.low < r.high, `${id}: ${r.value} in [${r.low}, ${r.high}]`);
  }
  const note = await text(page, 'est-range-note');
  assert.match(note, /10th to 90th percentile of measured\/estimated/);
  assert.match(note, /leave-one-source-out/);
  assert.match(note, /Runtime llamacpp on the cpu with \d+ threads: \d+% of the first decode step is fixed overhead/);
  const share = Number(await text(page, 'est-decode-overhead'));
  assert.ok(share >= 0 && share <= 100, `fixed-overhead share is a percentage, got ${share}`);
  await page.getByTestId('est-decode-tps').click();
  assert.match(await page.getByTestId('explain-est-decode-tps').textContent(), /10th-90th percentile/);

  // The runtime picker offers what runs on the unit; others are listed disabled with why.
  const opts = await page.getByTestId('knob-runtime').evaluate((s) => [...s.options].map((o) => ({ v: o.value, t: o.textContent, d: o.disabled })));
  assert.equal(opts[0].v, '');
  assert.equal(opts[0].t, 'default (llamacpp)');
  assert.equal(opts.find((o) => o.v === 'qnn').d, true, 'QNN does not run on a CPU');
  assert.match(opts.find((o) => o.v === 'qnn').t, /not on the cpu/);
  assert.equal(opts.find((o) => o.v === 'executorch').d, false);
  const llama = await num(page, 'est-decode-tps');
  await changeAndWait(page, () => page.getByTestId('knob-runtime').selectOption('executorch'), 'est-decode-tps');
  const et = await num(page, 'est-decode-tps');
  assert.notEqual(et, llama, 'another runtime, another estimate');
  assert.match(await text(page, 'est-range-note'), /Runtime executorch on the cpu/);
  // Threads: one thread decodes slower than the default.
  await changeAndWait(page, () => page.getByTestId('knob-threads').fill('1'), 'est-decode-tps');
  const one = await num(page, 'est-decode-tps');
  assert.ok(one < et, `1 thread (${one} tok/s) is slower than the default (${et} tok/s)`);
  assert.match(await text(page, 'est-range-note'), /with 1 thread:/);
  await page.getByTestId('knob-threads').fill('0');
  await page.getByTestId('est-error').waitFor({ state: 'visible', timeout: 10_000 });
  assert.match(await text(page, 'est-error'), /threads must be a whole number from 1 to 256/);
  await page.getByTestId('knob-threads').fill('2');
  await page.getByTestId('est-error').waitFor({ state: 'hidden', timeout: 10_000 });

  // The link carries the runtime and the threads.
  await page.getByTestId('share-link').click();
  const link = await page.getByTestId('share-url').inputValue();
  assert.match(link, /[#&]runtime=executorch(&|$)/);
  assert.match(link, /[#&]threads=2(&|$)/);

  // The thermal chart shades the decode range (two dashed series and a band).
  const legend = await page.locator('[data-testid="thermal-chart"] .u-legend').textContent();
  assert.match(legend, /tok\/s low/);
  assert.match(legend, /tok\/s high/);
  for (const [w, h, name] of [[1280, 900, 'estimator-runtime-1280.png'], [390, 844, 'estimator-runtime-390.png']]) {
    await page.setViewportSize({ width: w, height: h });
    await page.waitForTimeout(200);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 1, `no sideways scroll at ${w} px (overflow ${overflow} px)`);
    await page.getByTestId('est-numbers').screenshot({ path: path.join(SHOT_DIR, name) });
  }

  // Activations: 4-bit weights on the NPU decode slower with f16 activations (AI Hub's "w4":
  // every weight converted before it multiplies) than on the runtime's own int8 path; a
  // precision the unit has no peak for is refused, naming it; the link carries the knob.
  await page.getByTestId('knob-threads').fill('');
  await changeAndWait(page, () => page.getByTestId('knob-unit').selectOption('npu'), 'est-decode-tps');
  await changeAndWait(page, () => page.getByTestId('knob-runtime').selectOption('qnn'), 'est-decode-tps');
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('w4g128'), 'est-decode-tps');
  const ownPrecision = await num(page, 'est-decode-tps');
  await changeAndWait(page, () => page.getByTestId('knob-compute').selectOption('f16'), 'est-decode-tps');
  const f16 = await num(page, 'est-decode-tps');
  assert.ok(f16 < ownPrecision, `f16 activations (${f16} tok/s) decode slower than the runtime's own precision (${ownPrecision} tok/s)`);
  await page.getByTestId('share-link').click();
  assert.match(await page.getByTestId('share-url').inputValue(), /[#&]compute=f16(&|$)/);
  await page.getByTestId('knob-compute').selectOption('f32');
  await page.getByTestId('est-error').waitFor({ state: 'visible', timeout: 10_000 });
  assert.match(await text(page, 'est-error'), /no peak throughput for compute dtype f32/);
  await page.getByTestId('knob-compute').selectOption('');
  await page.getByTestId('est-error').waitFor({ state: 'hidden', timeout: 10_000 });

  // A link naming a runtime that does not run on the unit: refused in plain words.
  const bad = await openPage(browser(), t, { requestFailures: false, url: `${URL_}#v=1&device=snapdragon-8-gen3&model=llama-3.2-1b&unit=cpu&runtime=qnn` });
  await bad.page.getByTestId('est-error').waitFor({ state: 'visible', timeout: 30_000 });
  assert.match(await text(bad.page, 'est-error'), /QNN \/ Genie does not run on the cpu \(it runs on the npu\)/);
  for (const p of [before, bad, { consoleErrors, pageErrors }]) {
    assert.deepEqual(p.pageErrors, [], 'no page errors');
    assert.deepEqual(p.consoleErrors, [], 'no console errors');
  }
});

test('estimate vs measured: this browser + the loaded model after a generation', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t, { requestFailures: false });
  await waitReport(page);
  await page.getByTestId('load-default').click();
  await page.waitForFunction(() => /^(ready|error:)/.test(document.querySelector('[data-testid="status"]').textContent), null, { timeout: LOAD_TIMEOUT });
  assert.equal(await text(page, 'status'), 'ready');
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('chat').setChecked(false); // a completion, not a chat turn
  await page.getByTestId('max-tokens').fill('12');
  await page.getByTestId('temperature').fill('0');
  await page.getByTestId('generate').click();
  // The panel answers while the engine generates (estimates run between tokens).
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="metric-generated-tokens"]').textContent || 0) >= 1, null, { timeout: GEN_TIMEOUT, polling: 20 });
  await changeAndWait(page, () => page.getByTestId('knob-weights').selectOption('q8_0'), 'est-weights-bytes');
  await page.waitForFunction(() => /^(done|error:)/.test(document.querySelector('[data-testid="status"]').textContent), null, { timeout: GEN_TIMEOUT });
  assert.equal(await text(page, 'status'), 'done');

  // The micro-benchmarks report progress probe by probe (a bar and "k / n probes").
  await page.evaluate(() => {
    window.__probeNotes = [];
    const note = document.querySelector('[data-testid="est-device-note"]');
    const bar = document.querySelector('[data-testid="est-measure-progress"]');
    new MutationObserver(() => window.__probeNotes.push({ text: note.textContent, value: bar.value, max: bar.max, hidden: bar.hidden }))
      .observe(note, { childList: true, characterData: true, subtree: true });
  });
  await page.getByTestId('device-picker').selectOption('this-browser');
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const cmp = page.getByTestId('est-compare');
  // The micro-benchmarks run every probe twice (two rounds, ~10 s on a quiet 2-core machine).
  await cmp.waitFor({ state: 'visible', timeout: 90_000 });
  const rows = {};
  for (const k of ['ttft', 'prefill', 'decode', 'weights', 'kv']) {
    const cell = page.getByTestId(`cmp-error-${k}`);
    const p = Number(await cell.getAttribute('data-percent'));
    assert.ok(Number.isFinite(p), `${k} error is a finite percentage, got ${await cell.getAttribute('data-percent')}`);
    rows[k] = p;
  }
  assert.ok(Math.abs(rows.weights) < 5, `weights bytes agree (${rows.weights} %)`);
  const note = await text(page, 'est-device-note');
  assert.match(note, /Measured in this tab/);
  const probes = (await page.evaluate(() => window.__probeNotes)).filter((n) => /\d+ \/ \d+ probes/.test(n.text));
  assert.ok(probes.length >= 2, `the note counted probes while measuring: ${JSON.stringify(probes)}`);
  assert.equal(probes[0].value, 0, 'the first probe message starts at 0');
  assert.ok(probes.some((p) => !p.hidden && p.value > 0 && p.value < p.max), `the bar showed a probe in between: ${JSON.stringify(probes)}`);
  assert.equal(await page.getByTestId('est-measure-progress').isHidden(), true, 'the bar hides once measured');
  assert.match(await cmp.textContent(), /KV cache int8/);
  await page.getByTestId('est-decode-tps').click();
  await page.screenshot({ path: path.join(SHOT_DIR, 'estimator.png'), fullPage: true });
  t.diagnostic(`errors %: ${JSON.stringify(rows)}; ${note}`);
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});
