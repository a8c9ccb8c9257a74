// Browser side of `cargo xtask bench kernels`: runs the edgefit-bench wasm one shape at a time,
// logging progress to the console, and leaves `window.benchResult` = Promise<{table, rows} |
// {error}> for the driver (tests/bench/run-kernels.mjs).

import init, { shapeNames, streamGbs, runShape, renderTable } from './pkg/edgefit_bench.js';

const out = document.getElementById('out');
const config = new URLSearchParams(location.search).get('config') ?? '';

function runtimeLabel() {
  const m = navigator.userAgent.match(/(?:HeadlessChrome|Chromium|Chrome)\/(\d+)/);
  const browser = m ? `Chromium ${m[1]}` : navigator.userAgent;
  const isolated = globalThis.crossOriginIsolated ? ', cross-origin isolated' : '';
  return `${browser}, wasm32 simd128 (release)${isolated}`;
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

async function main() {
  await init();
  const runtime = runtimeLabel();
  console.log(`bench: ${runtime}`);
  await tick();
  const stream = streamGbs(config);
  console.log(`bench: streaming read ${stream.toFixed(1)} GB/s`);
  let rows = [];
  for (const name of JSON.parse(shapeNames(config))) {
    await tick();
    const t0 = performance.now();
    const got = JSON.parse(runShape(name, config));
    rows = rows.concat(got);
    console.log(`bench: ${name}: ${got.length} rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  const table = renderTable(runtime, stream, config, JSON.stringify(rows));
  out.textContent = table;
  return { table, rows };
}

window.benchResult = main().catch((e) => {
  out.textContent = `error: ${e?.stack ?? e}`;
  return { error: String(e?.stack ?? e) };
});
