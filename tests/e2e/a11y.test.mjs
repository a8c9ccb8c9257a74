// Accessibility audit of the page's main views with axe-core (npm, run inside the page through
// Playwright's evaluate, so the page's Content-Security-Policy needs no exception for it).
//
// Views: the first screen (estimator), the page after a real generation (metrics filled), the
// "What fits?" results, Compare with two scenarios, the guided tour open, and the first screen at
// phone width (390 × 844). Rules: WCAG 2.0/2.1 A and AA (labels, names, contrast, ARIA, landmarks
// that axe classes as A/AA). Every violation fails the test with its rule, impact and elements.
// A keyboard check walks the first screen with Tab and asserts every control it reaches shows a
// visible focus indicator and has an accessible name.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { useBrowser, openPage, SHOT_DIR } from './helpers.mjs';

const AXE_SOURCE = await readFile(path.resolve('node_modules/axe-core/axe.min.js'), 'utf8');
const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

const browser = useBrowser(); // one Chromium for this file's tests

/** Runs axe on the whole document; returns the violations as readable lines. */
async function audit(page) {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async (tags) => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 6).map((n) => `${n.target.join(' ')}: ${n.failureSummary.replace(/\s+/g, ' ').slice(0, 220)}`),
      count: v.nodes.length,
    }));
  }, TAGS);
  return violations.map((v) => `${v.id} (${v.impact}, ${v.count} element${v.count === 1 ? '' : 's'}): ${v.help}\n    ${v.nodes.join('\n    ')}`);
}

async function assertClean(page, t, view) {
  const lines = await audit(page);
  t.diagnostic(`${view}: ${lines.length} axe violation kinds`);
  await page.screenshot({ path: path.join(SHOT_DIR, `a11y-${view}.png`), fullPage: false });
  assert.deepEqual(lines, [], `${view}: axe found violations:\n  ${lines.join('\n  ')}`);
}

async function waitReady(page) {
  // The estimator is filled once the worker booted and sent the catalog.
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="device-picker"] option').length > 1, null, { timeout: 60_000 });
}

test('axe: first screen, What fits results, Compare, guided tour (desktop)', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await waitReady(page);
  await assertClean(page, t, 'first-screen');

  await page.getByTestId('device-picker').selectOption('snapdragon-8-gen3');
  await page.getByTestId('fit-run').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="fit-status"]')?.getAttribute('data-state') === 'done', null, { timeout: 60_000 });
  await assertClean(page, t, 'what-fits');

  await page.getByTestId('compare-add').click();
  await page.getByTestId('device-picker').selectOption('apple-a17-pro');
  await page.getByTestId('compare-add').click();
  await page.getByTestId('compare-table').waitFor({ state: 'visible' });
  await assertClean(page, t, 'compare');

  await page.getByTestId('guide-start').click();
  await page.getByTestId('guide-panel').waitFor({ state: 'visible' });
  await assertClean(page, t, 'guide');
  await page.keyboard.press('Escape');

  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('axe: after loading the real model and generating (metrics, transcript)', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await waitReady(page);
  await page.getByTestId('load-default').click();
  await page.waitForFunction(() => ['ready'].includes(document.querySelector('[data-testid="status"]').textContent) || document.querySelector('[data-testid="status"]').textContent.startsWith('error:'), null, { timeout: 120_000 });
  assert.equal(await page.getByTestId('status').textContent(), 'ready');
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('max-tokens').fill('8');
  await page.getByTestId('generate').click();
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid="status"]').textContent;
    return s === 'done' || s.startsWith('error:');
  }, null, { timeout: 120_000 });
  assert.equal(await page.getByTestId('status').textContent(), 'done');
  await assertClean(page, t, 'after-generation');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('axe at phone width; Tab reaches named controls with a visible focus ring', async (t) => {
  const { page, consoleErrors, pageErrors } = await openPage(browser(), t);
  await page.setViewportSize({ width: 390, height: 844 });
  await waitReady(page);
  await assertClean(page, t, 'phone');

  // The first Tab reaches a skip link to the prompt (instead of ~49 Tabs from Load to Generate).
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'skip-to-prompt', 'the first Tab stop is the skip link');
  assert.ok(await page.getByTestId('skip-to-prompt').isVisible(), 'the skip link shows when focused');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'prompt', 'the skip link moves focus to the prompt');
  assert.equal(await page.evaluate(() => location.hash), '', 'the skip link leaves the address (share links) alone');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.evaluate(() => document.activeElement?.blur());

  // Keyboard: Tab through the first 40 stops; each focused control has a name and a visible
  // focus indicator (an outline or a box-shadow that differs from its unfocused style).
  const problems = [];
  const seen = new Set();
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('Tab');
    const info = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const cs = getComputedStyle(el);
      const ring = (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0) || cs.boxShadow !== 'none';
      const label = el.getAttribute('aria-label') || el.labels?.[0]?.textContent || el.getAttribute('title') || el.textContent;
      return { id: el.id || el.getAttribute('data-testid') || el.tagName, ring, named: Boolean(label && label.trim()) };
    });
    if (!info) continue;
    seen.add(info.id);
    if (!info.ring) problems.push(`${info.id}: no visible focus indicator`);
    if (!info.named) problems.push(`${info.id}: no accessible name`);
  }
  t.diagnostic(`Tab reached ${seen.size} distinct controls`);
  assert.ok(seen.size >= 15, `Tab should reach the page's controls, reached ${seen.size}`);
  assert.deepEqual(problems, []);

  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
