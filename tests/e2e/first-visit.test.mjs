// What a first-time visitor sees at 1280 and 390 px, end to end in headless Chromium: no picker
// shows a clipped label, the page never scrolls sideways, and a local model with a long file name
// stays inside the screen (its name cut in the pickers, whole in their titles). Environment:
// EDGEFIT_URL (required), EDGEFIT_BUILD_DIR, CHROMIUM. Screenshots: $EDGEFIT_BUILD_DIR/e2e/first-visit-*.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR, text, waitStatus } from './helpers.mjs';

const MODEL = 'models/smollm2-135m-instruct-q4_1.gguf';
const LONG_NAME = 'my-own-finetune-of-smollm2-135m-instruct-with-a-rather-long-file-name-q4_1.gguf';
const LOAD_TIMEOUT = 180_000;

const browser = useBrowser();

/**
 * Every visible <select> whose chosen option's text is wider than the room inside it (its width
 * less its padding and the arrow, ~20 px in Chromium): [{id, text, width, room}].
 */
function clippedSelects(page) {
  return page.evaluate(() => {
    const ctx = document.createElement('canvas').getContext('2d');
    return [...document.querySelectorAll('select')]
      .filter((s) => s.offsetParent !== null && s.getClientRects().length > 0)
      .map((s) => {
        const cs = getComputedStyle(s);
        ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
        const label = s.selectedOptions[0]?.textContent ?? '';
        const width = Math.ceil(ctx.measureText(label).width);
        const room = Math.floor(s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20);
        return { id: s.id, text: label, width, room };
      })
      .filter((x) => x.width > x.room);
  });
}

/** Elements sticking out of the screen's right edge, and the page's own sideways scroll. */
function overflow(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const out = [...document.querySelectorAll('.card *, header *, .error-box, .error-box *')]
      .filter((e) => e.getClientRects().length > 0 && !e.closest('.fit-table-box, .compare-box, .chart, .mem-chart, .sr-only, .skip-link'))
      .map((e) => ({ e, r: e.getBoundingClientRect() }))
      .filter(({ r }) => r.width > 0 && r.right > vw + 1)
      .map(({ e, r }) => `${e.tagName.toLowerCase()}#${e.id || e.dataset.testid || ''} right ${Math.round(r.right)} > ${vw}`);
    return { page: document.documentElement.scrollWidth - vw, out: out.slice(0, 10) };
  });
}

async function estimatorShown(page) {
  await page.waitForFunction(
    () => document.querySelector('[data-testid="device-picker"]').options.length > 5
      && document.querySelector('[data-testid="est-sustained-tps"]')?.textContent.trim() !== ''
      && document.querySelector('[data-testid="est-body"]').dataset.pending !== 'true',
    null,
    { timeout: 60_000, polling: 100 },
  );
}

test('no clipped picker labels and no sideways scroll at 1280 and 390 px, before and after a local model with a long name', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await page.setViewportSize({ width: 1280, height: 900 });
  await estimatorShown(page);
  // The page says the estimator is starting until its first answer, which replaces the note.
  const note = await text(page, 'est-device-note');
  assert.doesNotMatch(note, /Starting the estimator/, 'the first estimate replaced the starting note');
  assert.match(note, /Snapdragon 8 Gen 3/, `the note names the device: ${note}`);
  await page.locator('[data-testid="prune-panel"] > summary').click(); // its pickers too

  // Device labels are short; the full profile name is the option's title.
  const sd = page.locator('[data-testid="device-picker"] option[value="snapdragon-8-gen3"]');
  assert.equal(await sd.textContent(), 'Snapdragon 8 Gen 3 phone');
  assert.match(await sd.getAttribute('title'), /^Snapdragon 8 Gen 3 phone \(.+\)$/);

  const check = async (when) => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
      await page.waitForTimeout(300);
      assert.deepEqual(await clippedSelects(page), [], `${when} at ${width} px: no picker label is clipped`);
      const o = await overflow(page);
      assert.ok(o.page <= 1, `${when} at ${width} px: the page does not scroll sideways (${o.page} px)`);
      assert.deepEqual(o.out, [], `${when} at ${width} px: nothing sticks out of the screen`);
    }
  };
  await check('first screen');
  // Every device in the picker, at 390 px: the longest short name fits too.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const id of await page.locator('[data-testid="device-picker"] option').evaluateAll((os) => os.map((o) => o.value))) {
    await page.getByTestId('device-picker').selectOption(id);
    const clipped = await clippedSelects(page);
    assert.deepEqual(clipped.filter((c) => c.id === 'device-picker' || c.id === 'fit-device'), [], `device ${id} at 390 px`);
  }
  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await estimatorShown(page);

  // A local model whose file name is long and has no spaces.
  await page.setViewportSize({ width: 1280, height: 900 });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'edgefit-long-name-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, LONG_NAME);
  await symlink(path.resolve(MODEL), file);
  await page.getByTestId('model-file').setInputFiles(file);
  assert.equal(await waitStatus(page, 'ready', LOAD_TIMEOUT), 'ready', 'the local file loads');
  assert.match(await text(page, 'progress-text'), new RegExp(`${LONG_NAME.replace('.gguf', '').replace(/[.]/g, '\\.')} loaded`));
  await page.getByTestId('preset-picker').selectOption('@loaded');
  const loaded = page.locator('[data-testid="preset-picker"] option[value="@loaded"]');
  assert.equal(await loaded.textContent(), 'loaded: my-own-finetune-o…ame-q4_1', 'the name is cut in the middle');
  assert.equal(await loaded.getAttribute('title'), LONG_NAME.replace('.gguf', ''), 'and whole in the title');
  await estimatorShown(page);
  await check('a long-named local model loaded');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator('.model-card').screenshot({ path: path.join(SHOT_DIR, 'first-visit-long-name-390.png') });
  assert.deepEqual(pageErrors, [], 'no page errors');
  assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('until the estimator answers, its panel says it is starting', async (t) => {
  // The wasm held back by 3 s: the panel's note must say what is happening meanwhile.
  const onPage = (page) => page.route(/edgefit_wasm_bg\.wasm$/, async (route) => {
    await new Promise((r) => setTimeout(r, 3000));
    await route.continue();
  });
  const { page } = await openPage(browser(), t, { onPage });
  assert.match(await text(page, 'est-device-note'), /^Starting the estimator/);
  await estimatorShown(page);
  assert.doesNotMatch(await text(page, 'est-device-note'), /Starting the estimator/);
});
