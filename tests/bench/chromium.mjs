// Launches the system Chromium for the bench drivers, the same way the e2e tests do: never a
// downloaded browser, no network beyond loopback.
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export async function launch() {
  const executablePath = process.env.CHROMIUM;
  if (!executablePath) throw new Error('CHROMIUM is not set (the path of `command -v chromium`)');
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
}

/** Forwards a page's (and its workers') console and errors to stderr, prefixed. */
export function forwardConsole(page, prefix, { quiet = false } = {}) {
  const show = (where) => (msg) => {
    if (quiet && msg.type() !== 'error' && !msg.text().startsWith('bench:')) return;
    process.stderr.write(`  [${prefix}${where}] ${msg.text()}\n`);
  };
  page.on('console', show(''));
  page.on('worker', (w) => w.on('console', show(' worker')));
  page.on('pageerror', (e) => process.stderr.write(`  [${prefix}] page error: ${e}\n`));
}
