// Gemma 3 270M's matrix products (edgefit_bench::gemma) on wasm32 simd128 in Node: one token,
// one thread. Prints the table.
//
// usage: node tests/bench/run-gemma-node.mjs PKG_DIR
// (PKG_DIR: `wasm-bindgen --target nodejs` output for
// target/wasm32-unknown-unknown/release/edgefit_bench.wasm)

import { createRequire } from 'node:module';
import path from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node run-gemma-node.mjs PKG_DIR');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const bench = require(path.resolve(dir, 'edgefit_bench.js'));
process.stdout.write(bench.runGemma(`Node ${process.version}, wasm32 simd128`, ''));
