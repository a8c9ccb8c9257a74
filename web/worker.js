// edgefit worker: owns the wasm engine. The page (main.js) never touches the wasm.
//
// It reads the model (fetch with a streaming reader, or a user-chosen File), builds the engine,
// and runs generation: the prefill one `prefillChunk()` at a time, then one `step()` per token.
// Between chunks and tokens it yields to the event loop through
// a MessageChannel (a task with no timer clamping, unlike setTimeout) so a `stop` message from
// the page is handled between two of them. Every message shape lives in protocol.js.
//
// After every step it posts the engine's metrics (`metricsSince`: a JS object whose token_ms holds
// only the decode latencies since the last piece) with the estimator's bytes for the tokens the
// KV cache holds (the wasm's kvBytes for the loaded model's ModelSpec and the run's KV format),
// so the page shows the measured and the estimated KV bytes side by side as the cache grows.
// The KV format chosen with set-kv-format, like the kernel, is applied again after every load.
//
// The wasm speaks JavaScript (crates/wasm): info, metrics, specs, device profiles, estimates and
// fit results come back as plain objects and go in as objects; start takes one options object
// (P.startOptions of the generate message). No JSON text crosses the boundary but the
// estimator's tables, a file fetched as text.
//
// A panic inside the wasm (a WebAssembly.RuntimeError) poisons the instance: the worker reports it
// as a fatal error and the page replaces this worker with a fresh one.

import * as P from './protocol.js';

let wasm = null; // the wasm-bindgen module, once initialised
let engine = null; // the loaded Engine, if any
let chosenKernel = null; // the kernel set-kernel last chose; applied again after every load
let chosenKvFormat = null; // the KV format set-kv-format last chose; applied again after every load
let chosenThreads = 1; // the thread count set-threads last chose; applied again after every load
// A set-threads that came while another job ran (the page asks for its chosen count as soon as
// the worker boots, and a visitor may click Load before that): a load takes it as its own count;
// after any other job it runs next. Refusing it instead left the page on one thread under an
// error when Load was clicked within the first moment of a `?threads=N` link.
let pendingThreads = null;
let build = null; // which wasm build runs (P.WASM_BUILDS)
let kvFormats = []; // the wasm's kvFormats()
let loadedSpec = null; // the loaded model's ModelSpec object (for kvBytes), read once per load
let busy = false; // a load or a generation is running
let stopRequested = false;
let poisoned = false;
// Fault injection for the page's tests (protocol.js injectFault): only with faults=1 in this
// worker's URL; faultAtStep is the generation step before which the wasm is made to panic.
const faultsEnabled = new URL(self.location.href).searchParams.get('faults') === '1';
let faultAtStep = null;

/** The fit's model id of the loaded model (the page's estimator picker uses the same value). */
const LOADED_ID = '@loaded';

const post = (msg) => self.postMessage(msg);
/** The longest stretch of decoding a piece holds (generate: the first token goes at once). */
const PIECE_MS = 50;

// ---- yielding without timer clamping --------------------------------------------------------
const yieldChannel = new MessageChannel();
const yieldQueue = [];
yieldChannel.port1.onmessage = () => yieldQueue.shift()?.();
function yieldToEventLoop() {
  return new Promise((resolve) => {
    yieldQueue.push(resolve);
    yieldChannel.port2.postMessage(null);
  });
}

// ---- wasm ------------------------------------------------------------------------------------
async function boot() {
  // The threaded build when this context is cross-origin isolated (SharedArrayBuffer exists)
  // and validates SIMD, else simd128 when it validates a SIMD instruction, else the baseline
  // build; the page may force one with ?wasm=simd128|baseline|threads (passed on in this
  // worker's URL). A site built without the threaded variant (no nightly toolchain) falls back
  // to simd128.
  const simd = WebAssembly.validate(new Uint8Array(P.SIMD_PROBE));
  const isolated = self.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
  const override = new URL(self.location.href).searchParams.get('wasm');
  const choice = P.chooseWasmBuild(simd, override, isolated);
  if (choice.error) throw new Error(choice.error);
  let chosen = choice.build;
  let mod;
  try {
    mod = await import(`${P.WASM_BUILD_DIRS[chosen]}edgefit_wasm.js`);
  } catch (e) {
    const dir = P.WASM_BUILD_DIRS[chosen];
    if (chosen === 'baseline') {
      throw new Error(`this browser has no WebAssembly SIMD and this site carries no baseline build (${dir}); build it with \`cargo xtask site\` (${P.errorMessage(e)})`);
    }
    if (chosen !== 'threads' || override === 'threads') throw e;
    console.warn(`edgefit: this site carries no threaded build (${dir}): running the simd128 build on one thread`);
    chosen = 'simd128';
    mod = await import(`${P.WASM_BUILD_DIRS[chosen]}edgefit_wasm.js`);
  }
  if (chosen === 'threads') installPoolSpawner(new URL(P.WASM_BUILD_DIRS.threads, self.location.href).href);
  await mod.default();
  wasm = mod;
  build = chosen;
  post(P.booted(typeof mod.version === 'function' ? mod.version() : 'unknown', chosen));
  post(P.threadsSet(1));
  kvFormats = mod.kvFormats();
  const runtimes = typeof mod.runtimeIds === 'function' ? mod.runtimeIds() : undefined;
  post(P.catalog(mod.presetIds(), mod.deviceIds(), kvFormats, runtimes));
}

// ---- the threaded build's pool: Web Workers over the same memory -----------------------------
// The wasm's pool (edgefit_kernels::pool) starts each of its threads by calling
// edgefitSpawnPoolWorker(module, memory, ptr) synchronously; a pool worker (pool-worker.js)
// instantiates the same module over the same shared memory and runs the closure `ptr`. A worker
// starts asynchronously (a nested worker may need this thread's event loop to get going), so
// after engine.setThreads the worker awaits every start before the engine runs a region, which
// would otherwise wait for a worker that never came.
let poolStarts = [];
const POOL_START_TIMEOUT_MS = 20_000;

function installPoolSpawner(dirHref) {
  globalThis.edgefitSpawnPoolWorker = (module, memory, ptr) => {
    const w = new Worker(new URL('./pool-worker.js', import.meta.url), { type: 'module', name: 'edgefit-pool' });
    poolStarts.push(
      new Promise((resolve, reject) => {
        w.onmessage = (e) => (e.data?.started ? resolve() : reject(new Error(`a pool worker failed: ${e.data?.error ?? 'unknown error'}`)));
        w.onerror = (e) => reject(new Error(`a pool worker failed to start: ${e.message || 'no message'}`));
      }),
    );
    w.postMessage({ dir: dirHref, module, memory, ptr });
  };
}

/** Waits until the pool workers the last setThreads started have instantiated the module. */
async function awaitPoolStarts() {
  const starts = poolStarts;
  poolStarts = [];
  if (!starts.length) return;
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the pool workers did not start within ${POOL_START_TIMEOUT_MS / 1000} s`)), POOL_START_TIMEOUT_MS);
  });
  try {
    await Promise.race([Promise.all(starts), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the loaded engine on `threads` threads (1 on the single-threaded builds, which refuse
 * more). On a pool that does not start, the engine goes back to one thread and this throws.
 */
async function applyThreads(threads) {
  engine.setThreads(threads);
  try {
    await awaitPoolStarts();
  } catch (e) {
    engine.setThreads(1);
    throw e;
  }
}

/** Why this build cannot run `threads` threads, or null. */
function threadsRefusal(threads) {
  if (build !== 'threads' && threads !== 1) {
    return `threads ${threads}: this page runs the ${build ?? 'unstarted'} build, which has one thread (the threaded build needs a cross-origin isolated page)`;
  }
  const max = wasm && typeof wasm.maxThreads === 'function' ? wasm.maxThreads() : P.MAX_THREADS;
  const e = P.checkThreads(threads, max);
  return e ? `set-threads: ${e}` : null;
}

/** Takes a set-threads that waited for a load as the count that load applies (or refuses it). */
function takePendingThreads() {
  if (pendingThreads === null) return;
  const n = pendingThreads;
  pendingThreads = null;
  const refused = threadsRefusal(n);
  if (refused) post(P.error(refused, false));
  else chosenThreads = n;
}

async function setThreads(threads) {
  await ready;
  const refused = threadsRefusal(threads);
  if (refused) {
    post(P.error(refused, false));
    return;
  }
  try {
    if (engine) await applyThreads(threads);
    chosenThreads = threads;
    post(P.threadsSet(threads));
  } catch (err) {
    report(err, 'setting the thread count');
    if (engine) post(P.threadsSet(1));
  }
}

const ready = boot().catch((e) => {
  poisoned = true;
  post(P.error(`could not start the wasm engine: ${P.errorMessage(e)}`, true));
});

// ---- the estimator's tables ------------------------------------------------------------------
// The ranges' bands and the runtimes refitted on the validation set come from leave-one-source-
// out refits that take about a second in wasm; the site build computes them once
// (estimator-tables.json, `cargo xtask site`) and the worker hands them to the wasm before the
// first estimate. Without the file, or with tables of other data (the wasm refuses them, naming
// the key), the first estimate computes them as before. `?tables=0` in the page address forces
// that (to measure the difference). tablesSource says which happened, for the page's note.
let tablesSource = 'computed on the first estimate';
const tablesReady = (async () => {
  await ready;
  if (!wasm || typeof wasm.seedEstimatorTables !== 'function') return;
  if (new URL(self.location.href).searchParams.get('tables') === '0') {
    tablesSource = 'computed on the first estimate (?tables=0)';
    return;
  }
  try {
    const res = await fetch(new URL('./estimator-tables.json', self.location.href));
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const text = await res.text();
    wasm.seedEstimatorTables(text);
    tablesSource = 'precomputed by the site build (estimator-tables.json)';
  } catch (e) {
    if (isPanic(e)) throw e;
    tablesSource = `computed on the first estimate (estimator-tables.json not used: ${P.errorMessage(e)})`;
  }
})().catch((e) => report(e, 'reading the estimator tables'));

function isPanic(e) {
  return typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError;
}

function report(e, context) {
  const fatal = isPanic(e);
  if (fatal) poisoned = true;
  const msg = P.errorMessage(e);
  post(P.error(fatal ? `${context}: the engine crashed (${msg})` : msg, fatal));
}

// ---- loading ---------------------------------------------------------------------------------
const PROGRESS_EVERY_MS = 100;

/** Reads a ReadableStream of bytes into one Uint8Array, posting progress. */
async function readAll(stream, total) {
  const reader = stream.getReader();
  let buf = total ? new Uint8Array(total) : new Uint8Array(1 << 24);
  let loaded = 0;
  let lastPost = 0;
  post(P.progress(0, total));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.length > buf.length) {
      // Content-Length missing or wrong: grow.
      const bigger = new Uint8Array(Math.max(buf.length * 2, loaded + value.length));
      bigger.set(buf.subarray(0, loaded));
      buf = bigger;
    }
    buf.set(value, loaded);
    loaded += value.length;
    const now = performance.now();
    if (now - lastPost >= PROGRESS_EVERY_MS) {
      lastPost = now;
      post(P.progress(loaded, total));
    }
  }
  const bytes = buf.length === loaded ? buf : buf.subarray(0, loaded);
  post(P.progress(loaded, total && total === loaded ? total : loaded));
  return bytes;
}

// The default model is kept in the Cache API (as the browser peers keep theirs), so a second
// visit reads it from disk instead of downloading ~94 MiB; the page's "Forget the cached model"
// deletes this cache. A site without the Cache API (or a refused quota) just downloads.
const MODEL_CACHE = 'edgefit-models-v1';

async function openModelCache() {
  try {
    return typeof caches === 'undefined' ? null : await caches.open(MODEL_CACHE);
  } catch {
    return null;
  }
}

async function fetchModel(url) {
  const cache = url.endsWith(P.DEFAULT_MODEL_FILE) ? await openModelCache() : null;
  const hit = cache ? await cache.match(url).catch(() => null) : null;
  if (hit && hit.body) {
    const len = Number(hit.headers.get('Content-Length'));
    post(P.cached(true));
    return readAll(hit.body, Number.isSafeInteger(len) && len > 0 ? len : null);
  }
  const res = await fetch(url);
  if (cache && res.ok && res.body) {
    // A copy goes to the cache while the page reads the other (a failed put only costs the cache).
    cache.put(url, res.clone()).then(() => post(P.cached(true)), () => {});
  }
  if (!res.ok) throw new Error(`could not fetch ${url}: HTTP ${res.status} ${res.statusText}`.trim());
  const len = Number(res.headers.get('Content-Length'));
  const total = Number.isSafeInteger(len) && len > 0 ? len : null;
  if (!res.body) return new Uint8Array(await res.arrayBuffer());
  return readAll(res.body, total);
}

async function readFile(file) {
  if (typeof file.stream === 'function') return readAll(file.stream(), file.size || null);
  post(P.progress(0, file.size));
  const bytes = new Uint8Array(await file.arrayBuffer());
  post(P.progress(bytes.length, bytes.length));
  return bytes;
}

// The last loaded file's bytes, kept so a change of weight format builds from them without
// reading the file again (98 MB of download for the default model): {key, bytes}.
let lastFile = null;

/** What identifies a load's source: the URL, or a File's name, size and modification time. */
function sourceKey(source) {
  if (source.kind === 'url') return `url ${source.url}`;
  const f = source.file;
  return `file ${f.name} ${f.size} ${f.lastModified ?? ''}`;
}

// The first bytes read to check a chosen file's header before reading all of it; grown (×4, up
// to HEADER_MAX) while the header runs past them (a large vocabulary is a few MB of metadata).
const HEADER_FIRST = 1 << 20;
const HEADER_MAX = 64 << 20;
/** What to do instead, after a refusal from the header alone. */
const REFUSED_HINT =
  'Pick a GGUF model of an architecture this engine builds (the default model is one), or estimate this model without loading it: drop its config.json in the estimator panel.';

/**
 * Checks a chosen file's GGUF header from its first bytes (wasm checkGgufHeader: magic,
 * version, tensor layout against the file's size, architecture), so an unsupported 250 MB file
 * is refused at once instead of after reading it all. Throws the refusal; returns quietly when
 * the header is fine or longer than HEADER_MAX (the full load then judges).
 */
async function checkFileHeader(file) {
  if (typeof file.slice !== 'function' || typeof wasm.checkGgufHeader !== 'function') return;
  let n = Math.min(file.size, HEADER_FIRST);
  for (;;) {
    const prefix = new Uint8Array(await file.slice(0, n).arrayBuffer());
    const r = wasm.checkGgufHeader(prefix, file.size); // {status, ...}
    if (r.status === 'ok') return;
    if (r.status === 'refused') {
      throw new Error(`${file.name} was not loaded (checked from its first ${P.formatMB(n)}): ${r.message}. ${REFUSED_HINT}`);
    }
    if (n >= file.size || n >= HEADER_MAX) return;
    n = Math.min(file.size, n * 4);
  }
}

/**
 * Loads `source` ({kind: 'url', url} | {kind: 'file', file}) in `weights`. The new engine is
 * built beside the running one, which is freed only once the new one is built: a file that
 * fails (unsupported, damaged, too large) leaves the working model running.
 */
async function load(source, weights) {
  await ready;
  if (!wasm) return;
  const key = sourceKey(source);
  let bytes = lastFile?.key === key ? lastFile.bytes : null;
  if (bytes) {
    post(P.progress(bytes.length, bytes.length)); // already here: nothing to read
  } else {
    try {
      if (source.kind === 'file') await checkFileHeader(source.file);
      bytes = await (source.kind === 'url' ? fetchModel(source.url) : readFile(source.file));
    } catch (e) {
      if (isPanic(e)) throw e;
      post(P.error(P.errorMessage(e), false));
      return;
    }
  }
  post(P.parsing(bytes.length));
  // Let the page paint "parsing" before the (synchronous) parse.
  await yieldToEventLoop();
  let next;
  try {
    next = wasm.Engine.loadGguf(bytes, weights);
  } catch (e) {
    report(e, 'loading the model'); // the running engine, if any, is kept
    return;
  }
  try {
    if (engine) engine.free();
    engine = next;
    lastFile = { key, bytes };
    calibratedFor = null;
    keepChosenKernel();
    if (chosenKvFormat !== null) engine.setKvFormat(chosenKvFormat);
    takePendingThreads();
    if (chosenThreads !== 1) {
      try {
        await applyThreads(chosenThreads);
      } catch (e) {
        chosenThreads = 1;
        report(e, 'setting the thread count');
      }
      post(P.threadsSet(chosenThreads));
    }
    loadedSpec = engine.modelSpec();
    const info = engine.info();
    warmUp();
    const metrics = engine.metrics();
    post(P.loaded(info, metrics));
  } catch (e) {
    engine = null;
    loadedSpec = null;
    report(e, 'loading the model');
  }
}

/** A fresh engine starts on the fastest kernel; keep the one the user chose, if it exists here. */
function keepChosenKernel() {
  if (chosenKernel === null) return;
  const info = engine.info();
  if (info.kernel !== chosenKernel && info.kernels.includes(chosenKernel)) engine.setKernel(chosenKernel);
}

// ---- kernel ----------------------------------------------------------------------------------
// The warm-up's budgets (see warmUp), ms. In V8's trace of the first load (load average ~15) the
// forward pass, attention and the tokenizer had tiered up within ~0.9 s of the warm-up's start,
// most of it the first pass; later warm-ups meet mostly optimized code.
const WARM_FIRST_MS = 800;
const WARM_MS = 300;
let warmedOnce = false; // a warm-up has run in this worker (its wasm is partly tiered up)

/**
 * Runs the loaded model on a throwaway input before the page may generate (wasm Engine.warmUp,
 * edgefit_engine::Engine::warm_up): passes of tokenize + a short prefill + a few decode steps in a
 * KV cache of their own (at least two), for WARM_FIRST_MS after this worker's first load and
 * WARM_MS after a later load, kernel or KV-format switch. Why: Chromium compiles wasm in tiers (Liftoff at once,
 * TurboFan in the background for the functions that turn out hot), and before this the first
 * run after the first load executed the forward pass, attention and the tokenizer as baseline
 * code (V8's --trace-wasm-compilation-times showed them tiering up during that run). What ran
 * is in the metrics (`warm_up`: passes and each pass's ms), which the comparison's note shows.
 * A failure here only costs that first run's speed.
 */
function warmUp() {
  const budget = warmedOnce ? WARM_MS : WARM_FIRST_MS;
  try {
    engine.warmUp(budget);
    warmedOnce = true;
  } catch (e) {
    if (isPanic(e)) throw e;
  }
}

async function setKernel(name) {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded: load one before choosing a kernel', false));
    return;
  }
  try {
    engine.setKernel(name);
    chosenKernel = name;
    warmUp();
    const info = engine.info();
    post(P.kernelSet(info));
  } catch (e) {
    report(e, 'switching the kernel');
  }
}

// ---- KV cache format -------------------------------------------------------------------------
/**
 * The estimator's bytes for the tokens the cache holds now (the wasm's kvBytes with the loaded
 * model's ModelSpec and the run's KV format), or null when they cannot be computed.
 */
function kvEstimate(m) {
  if (!loadedSpec || typeof m?.kv_format !== 'string' || !Number.isSafeInteger(m.kv_tokens)) return null;
  try {
    const v = wasm.kvBytes(loadedSpec, m.kv_format, m.kv_tokens);
    return Number.isFinite(v) && v >= 0 ? v : null;
  } catch (e) {
    if (isPanic(e)) throw e;
    return null;
  }
}

async function setKvFormat(name) {
  await ready;
  if (!wasm) return;
  if (!kvFormats.includes(name)) {
    post(P.error(`unknown KV format ${JSON.stringify(name)}: this build has ${kvFormats.join(', ')}`, false));
    return;
  }
  if (!engine) {
    // Kept for the next load.
    chosenKvFormat = name;
    post(P.kvFormatSet(name, null, null));
    return;
  }
  try {
    engine.setKvFormat(name);
    chosenKvFormat = name;
    // Another KV format runs other attention kernels.
    warmUp();
    const m = engine.metrics();
    post(P.kvFormatSet(name, m, kvEstimate(m)));
  } catch (e) {
    report(e, 'switching the KV format');
  }
}

// ---- generation ------------------------------------------------------------------------------
async function generate(p) {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded', false));
    return;
  }
  stopRequested = false;
  // The tokens go to the page in pieces of at most PIECE_MS of decoding (the first token at
  // once): text, latencies and metrics since the last piece. One message per token made both
  // threads work per token (here the metrics object and the estimator's KV bytes, there a
  // message to check and route), on the engine's own thread and beside it.
  let sentMs = 0;
  let steps = 0;
  let pendingText = '';
  let lastPieceMs = -Infinity;
  const postPiece = () => {
    const m = engine.metricsSince(sentMs);
    const newMs = m.token_ms;
    sentMs += newMs.length;
    if (pendingText || newMs.length) post(P.piece(pendingText, newMs, m, kvEstimate(m)));
    pendingText = '';
    lastPieceMs = performance.now();
    return m;
  };
  const postStopped = () => {
    postPiece();
    const m = engine.metrics();
    post(P.done('stopped', m, kvEstimate(m)));
  };
  try {
    engine.start(P.startOptions(p)); // {prompt, chat, maxTokens, temperature, topP, seed, keep?}
    post(P.started());
    // Let "generating…" paint before the prefill runs.
    await yieldToEventLoop();
    // The prefill, a chunk of the prompt per call: a long prompt reports its progress, and
    // Stop is honoured between chunks (what was fed stays in the cache for the next turn).
    for (;;) {
      if (stopRequested) return postStopped();
      const fed = engine.prefillChunk(); // a JS object {done, total}
      if (fed.done === fed.total) break;
      post(P.prefilling(fed.done, fed.total));
      await yieldToEventLoop();
    }
    for (;;) {
      if (stopRequested) return postStopped();
      if (faultAtStep !== null && steps >= faultAtStep) {
        faultAtStep = null;
        wasm.faultPanic(); // traps: reported as a crash below, as a real engine bug would be
      }
      steps += 1;
      const text = engine.step();
      if (text === undefined || text === null) {
        // Only what is new: the metrics (a JS object, no JSON) with the decode latencies since
        // the last piece, so a piece costs the same at token 4000 as at token 1 (the page
        // appends them); the cache's tokens and bytes (measured, and the estimator's) grow live.
        const m = postPiece();
        post(P.done(m.finish_reason === 'stop' ? 'stop' : 'length', m, kvEstimate(m)));
        return;
      }
      pendingText += text;
      if (performance.now() - lastPieceMs >= PIECE_MS) postPiece();
      await yieldToEventLoop();
    }
  } catch (e) {
    report(e, 'generating');
  }
}

// ---- pruning ---------------------------------------------------------------------------------
// Every prune starts from the model as loaded (the engine keeps it while a pruned one runs), so
// calibration statistics, collected once per (text, tokens, window), serve every later prune.
// Calibration runs one window per call, yielding between calls, so progress reaches the page
// and the worker stays responsive.
let calibratedFor = null; // JSON key of the calibration the engine holds, or null
const texts = new Map(); // url -> text (small: tens of kB)

async function fetchText(url) {
  if (texts.has(url)) return texts.get(url);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`could not fetch ${url}: HTTP ${res.status} ${res.statusText}`.trim());
  const t = await res.text();
  texts.set(url, t);
  return t;
}

async function calibrate(c) {
  const key = JSON.stringify([c.url, c.maxTokens, c.window]);
  if (calibratedFor === key && engine.calibrationTokens() > 0) return;
  calibratedFor = null;
  post(P.pruneProgress('fetching'));
  const text = await fetchText(c.url);
  const total = engine.calibrateBegin(text, c.maxTokens, c.window);
  let done = 0;
  post(P.pruneProgress('calibrating', 0, total));
  await yieldToEventLoop();
  while (done < total) {
    done = engine.calibrateStep(1);
    post(P.pruneProgress('calibrating', done, total));
    await yieldToEventLoop();
  }
  calibratedFor = key;
}

function modelChanged() {
  loadedSpec = engine.modelSpec();
  return [engine.info(), engine.metrics()];
}

async function runPrune(msg) {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded: load one before pruning', false));
    return;
  }
  try {
    if (msg.plan.importance === 'activation') await calibrate(msg.calibration);
    post(P.pruneProgress('pruning'));
    await yieldToEventLoop();
    const rep = engine.prune(msg.plan);
    const [info, metrics] = modelChanged();
    post(P.pruned(rep, info, metrics));
  } catch (e) {
    report(e, 'pruning');
  }
}

async function runRestore() {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded', false));
    return;
  }
  try {
    engine.restore();
    const [info, metrics] = modelChanged();
    post(P.restored(info, metrics));
  } catch (e) {
    report(e, 'restoring the model');
  }
}

async function runPerplexity(msg) {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded', false));
    return;
  }
  try {
    const text = await fetchText(msg.url);
    post(P.pruneProgress('evaluating'));
    await yieldToEventLoop();
    const rep = engine.perplexity(text, msg.maxTokens);
    post(P.perplexityResult(rep, engine.info().params));
  } catch (e) {
    report(e, 'measuring perplexity');
  }
}

async function runExport(msg) {
  await ready;
  if (!engine) {
    post(P.error('no model is loaded', false));
    return;
  }
  try {
    post(P.pruneProgress('exporting'));
    await yieldToEventLoop();
    const bytes = engine.exportGguf(msg.dtype);
    const info = engine.info();
    const name = P.exportFileName(info.name, info.params, engine.isPruned(), msg.dtype);
    self.postMessage(P.exported(name, bytes), [bytes.buffer]);
  } catch (e) {
    report(e, 'exporting the model');
  }
}

// ---- estimator -------------------------------------------------------------------------------
// Pure and fast (milliseconds), so it runs right here, also between two tokens of a generation.
const presetSpecs = new Map(); // preset id -> ModelSpec object
const devices = new Map(); // bundled device id -> DeviceProfile object
// The this-browser profile, measured once per kernel and thread count with the engine's own
// kernels (the kernel the loaded engine runs; the build's fastest without a model) on a pool of
// that many threads, then cached: `${kernel}@${threads}` -> a promise of {device: DeviceProfile
// object, measurements: BrowserMeasurements}. An estimate uses the set of the thread count its run
// uses (the deployment's threads, else the count the engine runs on); at N > 1 threads the
// 1-thread set is measured too, and the note shows both.
const browserProfiles = new Map();
let defaultKernel = ''; // the kernel a bench without a model measured (the build's fastest)

function presetSpec(id) {
  if (!presetSpecs.has(id)) presetSpecs.set(id, wasm.presetSpec(id));
  return presetSpecs.get(id);
}

function specFor(model) {
  switch (model.kind) {
    case 'preset':
      return presetSpec(model.id);
    case 'loaded':
      if (!engine) throw new Error('no model is loaded: load one, or pick a preset');
      return engine.modelSpec();
    case 'config':
      return wasm.specFromConfig(model.name, model.text);
  }
  throw new Error(`unknown model kind ${model.kind}`);
}

/** The kernel the engine runs ('' without a model: the bench then takes the build's fastest). */
function engineKernel() {
  if (!engine) return '';
  const k = engine.info().kernel;
  return typeof k === 'string' ? k : '';
}

/** The thread count the engine runs on (what set-threads chose; 1 on the single-threaded builds). */
function runningThreads() {
  if (engine) {
    const t = engine.metrics().threads;
    if (Number.isSafeInteger(t) && t >= 1) return t;
  }
  return build === 'threads' ? chosenThreads : 1;
}

/**
 * The threads an estimate of this tab measures on: the deployment's `threads` if it sets them,
 * else the count the engine runs on. Throws naming a count this tab cannot measure.
 */
function browserThreads(deployment) {
  const asked = deployment?.threads;
  if (asked === undefined || asked === null || asked === '') return runningThreads();
  const cores = Number.isSafeInteger(navigator.hardwareConcurrency) && navigator.hardwareConcurrency >= 1 ? navigator.hardwareConcurrency : 1;
  if (build !== 'threads' && asked !== 1) {
    throw new Error(`threads ${asked}: this tab runs the ${build ?? 'unstarted'} build on one thread, so "this browser tab" is measured on 1 thread only (the threaded build needs a cross-origin isolated page)`);
  }
  const e = P.checkThreads(asked, cores);
  if (e) throw new Error(`threads ${asked}: "this browser tab" is measured on the threads of this tab: ${e}`);
  return asked;
}

/**
 * The this-browser profile for the engine's kernel on `threads` threads: {device, measurements},
 * measured once. The map holds the measurement's promise from its start, so estimates that
 * arrive while it runs (the panel's and the comparison's, or a second pick) wait for that one
 * measurement instead of starting a second bench and a second pool beside it; a failed
 * measurement is forgotten, so the next estimate measures again.
 */
function thisBrowser(threads) {
  const kernel = engineKernel() || defaultKernel;
  const key = `${kernel}@${threads}`;
  if (!browserProfiles.has(key)) {
    const measuring = measureThisBrowser(kernel, threads);
    browserProfiles.set(key, measuring);
    measuring.catch(() => {
      if (browserProfiles.get(key) === measuring) browserProfiles.delete(key);
    });
  }
  return browserProfiles.get(key);
}

async function measureThisBrowser(kernel, threads) {
  // One probe at a time, each followed by a progress message (the page shows a bar). The
  // probes also run the engine's kernels and its forward pass, so Chromium has optimized
  // them (wasm is compiled in tiers) before a run the estimate is compared with. On the
  // threaded build the bench's own pool starts its Web Workers first (as setThreads does).
  const bench = new wasm.BrowserBench(kernel, threads);
  try {
    await awaitPoolStarts();
  } catch (e) {
    bench.free();
    throw e;
  }
  const total = bench.total();
  post(P.measuring(0, total));
  while (bench.step()) post(P.measuring(bench.done(), total));
  const measurements = bench.finish();
  post(P.measuring(total, total));
  const profile = { device: wasm.thisBrowserDevice(measurements), measurements };
  if (kernel === '') {
    // Without a model the build's fastest kernel was measured: keep it under its name too.
    defaultKernel = measurements.kernel;
    const named = `${defaultKernel}@${threads}`;
    if (!browserProfiles.has(named)) browserProfiles.set(named, Promise.resolve(profile));
  }
  return profile;
}

/** The measurements an answer shows: those of `threads`, and at N > 1 also the 1-thread set. */
async function browserMeasurements(threads) {
  const m = (await thisBrowser(threads)).measurements;
  if (threads === 1) return m;
  return { ...m, one_thread: (await thisBrowser(1)).measurements };
}

async function deviceFor(device, threads) {
  if (device.kind === 'this-browser') return (await thisBrowser(threads)).device;
  if (!devices.has(device.id)) devices.set(device.id, wasm.deviceProfile(device.id));
  return devices.get(device.id);
}

/**
 * The engine's last run against its estimate (edgefit_estimate::compare through the wasm):
 * {report, comparison: {deployment, rows}}. Throws without a model or a run to compare.
 */
function compareRun(spec, dev) {
  if (!engine) throw new Error('no model is loaded: load one and generate to compare');
  const metrics = engine.metrics();
  const deployment = wasm.comparisonDeployment(metrics, engine.info().weights?.stored ?? []);
  const report = wasm.estimate(spec, deployment, dev);
  const rows = wasm.comparisonRows(spec, report, metrics);
  return { report, comparison: { deployment, rows } };
}

let estimatesDone = 0;

async function runEstimate(msg) {
  await ready;
  await tablesReady;
  if (!wasm) return;
  const t0 = performance.now();
  try {
    let spec = specFor(msg.model);
    if (msg.prune !== undefined && msg.prune > 0) spec = wasm.prunedSpec(spec, msg.prune);
    // "compare" predicts the engine's last run, on the threads it ran with.
    const threads =
      msg.device.kind !== 'this-browser' ? 1 : msg.purpose === 'compare' && engine ? runningThreads() : browserThreads(msg.deployment);
    const d = await deviceFor(msg.device, threads);
    let rep;
    let comparison = null;
    if (msg.purpose === 'compare') {
      const c = compareRun(spec, d);
      rep = c.report;
      comparison = c.comparison;
    } else {
      rep = wasm.estimate(spec, msg.deployment, d);
    }
    const device = {
      id: d.id, name: d.name, units: Object.keys(d.units ?? {}), default_unit: d.default_unit,
      default_runtime: d.default_runtime ?? {},
    };
    const measured = msg.device.kind === 'this-browser' ? await browserMeasurements(threads) : null;
    // The first answer says how long the worker took and where the tables came from (the
    // page's note and its Performance measure "edgefit:first-estimate").
    const timing = estimatesDone++ === 0 ? { workerMs: performance.now() - t0, tables: tablesSource } : null;
    post(P.estimateResult(msg.id, msg.purpose, rep, device, measured, comparison, timing));
  } catch (e) {
    if (isPanic(e)) {
      report(e, 'estimating');
      return;
    }
    post(P.estimateError(msg.id, msg.purpose, P.errorMessage(e)));
  }
}

// ---- what fits -------------------------------------------------------------------------------
// The sizing solver (wasm fit, the function `edgefit fit` runs) over the models of a scope, with
// every other list and the base deployment left to the solver's defaults, as the CLI leaves them.

/** The FitRequest's models for `scope` (see protocol.js), as [{id, spec}]. */
function fitModels(scope) {
  const s = P.parseFitScope(scope);
  if (s.error) throw new Error(s.error);
  if (s.kind === 'loaded') {
    if (!engine) throw new Error('no model is loaded: load one, or pick presets');
    return [{ id: LOADED_ID, spec: engine.modelSpec() }];
  }
  if (s.kind === 'preset') return [{ id: s.value, spec: presetSpec(s.value) }];
  const all = wasm.presetIds().map((p) => ({ id: p.id, spec: presetSpec(p.id) }));
  const models = s.kind === 'family' ? all.filter((m) => m.spec.family === s.value) : all;
  if (models.length === 0) throw new Error(`no preset of family ${s.value}`);
  return models;
}

async function runFit(msg) {
  await ready;
  if (!wasm) return;
  try {
    const request = { models: fitModels(msg.scope), contexts: msg.context === null ? [] : [msg.context] };
    const dev = await deviceFor(msg.device, msg.device.kind === 'this-browser' ? runningThreads() : 1);
    // Model by model, each followed by a progress message (the page shows a bar with time left).
    const search = new wasm.FitSearch(request, dev);
    try {
      const total = search.models();
      post(P.fitProgress(msg.id, 0, total));
      while (search.step()) post(P.fitProgress(msg.id, search.modelsDone(), total));
      post(P.fitProgress(msg.id, total, total));
    } catch (e) {
      search.free(); // finish() frees it otherwise
      throw e;
    }
    const result = search.finish();
    post(P.fitResult(msg.id, result));
  } catch (e) {
    if (isPanic(e)) {
      report(e, 'fitting');
      return;
    }
    post(P.fitError(msg.id, P.errorMessage(e)));
  }
}

// ---- messages --------------------------------------------------------------------------------
self.onmessage = (ev) => {
  const msg = ev.data;
  const bad = P.validateToWorker(msg);
  if (bad) {
    post(P.error(`worker got a malformed message: ${bad}`, false));
    return;
  }
  if (msg.type === P.ToWorker.STOP) {
    stopRequested = true;
    return;
  }
  if (msg.type === P.ToWorker.INJECT_FAULT) {
    // Applies to the running generation too, so it is handled before the busy check.
    if (!faultsEnabled) post(P.error('fault injection is off (it needs faults=1 in the page address)', false));
    else faultAtStep = msg.step;
    return;
  }
  if (poisoned) {
    post(P.error('the engine is not usable; reload the page', true));
    return;
  }
  if (msg.type === P.ToWorker.ESTIMATE) {
    // Not a job: answered at once (or between two tokens of a running generation).
    runEstimate(msg);
    return;
  }
  if (msg.type === P.ToWorker.FIT) {
    // Pure like the estimator (about a second for every preset): answered at once too.
    runFit(msg);
    return;
  }
  if (busy) {
    if (msg.type === P.ToWorker.SET_THREADS) pendingThreads = msg.threads;
    else post(P.error(`busy: cannot ${msg.type} now`, false));
    return;
  }
  runJob(msg);
};

/** Runs one job (busy until it ends), then a set-threads that came meanwhile, if any. */
function runJob(msg) {
  busy = true;
  let job;
  switch (msg.type) {
    case P.ToWorker.LOAD_URL:
      job = load({ kind: 'url', url: msg.url }, msg.weights);
      break;
    case P.ToWorker.LOAD_FILE:
      job = load({ kind: 'file', file: msg.file }, msg.weights);
      break;
    case P.ToWorker.SET_KERNEL:
      job = setKernel(msg.name);
      break;
    case P.ToWorker.SET_KV_FORMAT:
      job = setKvFormat(msg.name);
      break;
    case P.ToWorker.SET_THREADS:
      job = setThreads(msg.threads);
      break;
    case P.ToWorker.GENERATE:
      job = generate(msg);
      break;
    case P.ToWorker.PRUNE:
      job = runPrune(msg);
      break;
    case P.ToWorker.RESTORE:
      job = runRestore();
      break;
    case P.ToWorker.PERPLEXITY:
      job = runPerplexity(msg);
      break;
    case P.ToWorker.EXPORT_GGUF:
      job = runExport(msg);
      break;
  }
  job
    .catch((e) => report(e, msg.type))
    .finally(() => {
      busy = false;
      if (pendingThreads !== null && !poisoned) {
        const threads = pendingThreads;
        pendingThreads = null;
        runJob(P.setThreads(threads));
      }
    });
}
