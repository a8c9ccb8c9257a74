// Which wasm module the worker loads: the builds a site can carry, the SIMD probe, and the choice
// (chooseWasmBuild) from the browser's features and the page's `?wasm=` override. Pure ES module.


/**
 * The three wasm builds a site can carry: `pkg/` (simd128), `pkg-baseline/` (no SIMD) and
 * `pkg-threads/` (simd128 with atomics and shared memory: runs the engine on several Web
 * Workers; needs a cross-origin isolated page, see coi-serviceworker.js).
 */
export const WASM_BUILDS = Object.freeze(['simd128', 'baseline', 'threads']);
export const WASM_BUILD_DIRS = Object.freeze({ simd128: './pkg/', baseline: './pkg-baseline/', threads: './pkg-threads/' });

/** A one-line description of a build, for the footer. */
export function describeBuild(build, threads) {
  if (build === 'threads') return `threaded build (simd128, shared memory) · ${threads} thread${threads === 1 ? '' : 's'}`;
  const what = build === 'simd128' ? 'WebAssembly SIMD (simd128) build' : 'baseline build (no SIMD)';
  return `${what} · 1 thread (the threaded build needs a cross-origin isolated page)`;
}

/**
 * The smallest module that uses a SIMD instruction: one function () -> v128 whose body is
 * `i32.const 0; i8x16.splat; i8x16.popcnt; end`. `WebAssembly.validate` accepts it exactly when
 * the engine supports fixed-width SIMD.
 */
export const SIMD_PROBE = Object.freeze([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type section: func [] -> [v128]
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x0a, 0x0a, 0x01, 0x08, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0xfd, 0x62, 0x0b, // code
]);

/**
 * Which build to load: `override` (the page's `?wasm=` parameter, `null` when absent) if it
 * names a build, else threads when `isolated` (the context is cross-origin isolated and has
 * SharedArrayBuffer) and `simdSupported`, else simd128 when `simdSupported`, else baseline.
 * Returns {build} or {error} (an unknown override, simd128 or threads forced on an engine
 * without SIMD, threads forced on a page that is not cross-origin isolated).
 */
export function chooseWasmBuild(simdSupported, override = null, isolated = false) {
  if (override !== null && override !== undefined) {
    if (!WASM_BUILDS.includes(override)) {
      return { error: `?wasm=${String(override).slice(0, 40)} is not a wasm build (${WASM_BUILDS.join(', ')})` };
    }
    if ((override === 'simd128' || override === 'threads') && !simdSupported) {
      return { error: `this browser has no WebAssembly SIMD, so the ${override} build cannot run` };
    }
    if (override === 'threads' && !isolated) {
      return { error: 'the threaded build needs a cross-origin isolated page (COOP/COEP headers, or the service worker coi-serviceworker.js) with SharedArrayBuffer; this page is not' };
    }
    return { build: override };
  }
  if (simdSupported && isolated) return { build: 'threads' };
  return { build: simdSupported ? 'simd128' : 'baseline' };
}
