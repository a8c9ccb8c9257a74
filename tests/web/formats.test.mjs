// Checks protocol.js's static list of weight formats against the built wasm's `weightFormats()`.
//
// The page keeps the list in protocol.js (so the picker is filled and a load request validated
// before the wasm has compiled); this test is what keeps it equal to the engine's list. It needs
// the built site (`cargo xtask build`, which `cargo xtask test` runs before the page's tests):
// $EDGEFIT_SITE_DIR/pkg (default build/site/pkg). Run by hand without a build, it is
// skipped with a note; under `cargo xtask test` (EDGEFIT_URL set) a missing build fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as P from '../../web/protocol.js';

// The site the page's tests run against: $EDGEFIT_SITE_DIR (`cargo xtask test` sets it to dist/),
// else $EDGEFIT_BUILD_DIR/site (`cargo xtask build`'s development site).
const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const PKG = path.resolve(SITE, 'pkg');
const JS = path.join(PKG, 'edgefit_wasm.js');
const WASM = path.join(PKG, 'edgefit_wasm_bg.wasm');
const built = existsSync(JS) && existsSync(WASM);
const required = Boolean(process.env.EDGEFIT_URL);

test(
  'protocol.js WEIGHT_FORMATS lists exactly the wasm weightFormats(); the page default is auto, as in the engine',
  { skip: !built && !required ? `no built site at ${PKG}: run \`cargo xtask build\` first` : false },
  async () => {
    assert.ok(built, `the built wasm is missing at ${PKG}: \`cargo xtask build\` makes it`);
    const mod = await import(pathToFileURL(JS).href);
    mod.initSync({ module: readFileSync(WASM) });
    const fromWasm = mod.weightFormats();
    assert.deepEqual([...P.WEIGHT_FORMATS].sort(), [...fromWasm].sort(), 'web/protocol.js WEIGHT_FORMATS must list exactly the wasm weightFormats()');
    // The engine's default is `auto` (first in its list), and so is the page's: every tensor in
    // the file's own format (the default model's q4_1, a Q4_K_M file's q5_0 / q4_k / q6_k).
    assert.equal(fromWasm[0], 'auto');
    assert.equal(P.DEFAULT_WEIGHTS, 'auto');
    assert.equal(P.WEIGHT_FORMATS[0], P.DEFAULT_WEIGHTS);
  },
);
