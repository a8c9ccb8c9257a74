// Drives tests/bench/kernels.html in headless Chromium and prints the table it returns.
//
// usage: CHROMIUM=$(command -v chromium) node tests/bench/run-kernels.mjs URL
// (URL of kernels.html, with an optional ?config=... query). Started by `cargo xtask bench kernels`.

import { launch, forwardConsole } from './chromium.mjs';

const url = process.argv[2];
if (!url) {
  console.error('usage: node run-kernels.mjs URL');
  process.exit(2);
}
const browser = await launch();
try {
  const page = await browser.newPage();
  forwardConsole(page, 'chromium');
  await page.goto(url, { waitUntil: 'load' });
  const result = await page.evaluate(() => window.benchResult);
  if (!result || result.error) throw new Error(`the bench page failed: ${result?.error ?? 'no result'}`);
  process.stdout.write(result.table);
} finally {
  await browser.close();
}
