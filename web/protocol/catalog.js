// The page's fixed lists and limits: what the engine and the estimator accept, mirrored from the
// Rust side so the page can fill its pickers and check a request before the wasm has compiled.
// Drift tests against the built wasm: WEIGHT_FORMATS vs weightFormats()
// (tests/web/formats.test.mjs), KV_FORMAT_LABELS vs kvFormats() (tests/web/kv-formats.test.mjs).
// FIT_FAMILIES, FIT_CONTEXTS, FIT_MAX_PRUNE and MAX_THREADS (and estimate-view.js MAX_THREADS)
// against the Rust values: crates/wasm/tests/page_constants.rs (a native cargo test, no build).
// The metric / info key lists have none yet (a wrong one shows as a malformed-message error).
// Pure ES module: no DOM, no wasm.

/** The context lengths the fit panel offers (the solver's defaults, as `edgefit fit` uses them). */
export const FIT_CONTEXTS = Object.freeze([1024, 2048, 4096, 8192]);
/** The model families of the bundled presets (the estimator's Family names, in its order). */
export const FIT_FAMILIES = Object.freeze(['llama', 'mistral', 'qwen2', 'qwen3', 'gemma', 'gemma2', 'gemma3', 'phi3']);
/** The highest TransAct pruning level the estimator takes (MLP, Q/K and V dims each lose it). */
export const FIT_MAX_PRUNE = 0.9;
/** The verdicts a configuration can fail, as FitResult.failed names them. */
export const FIT_FAIL_KEYS = Object.freeze(['memory', 'ttft', 'sustained', 'temperature', 'invalid']);

/** The largest fraction the page lets a pruning ratio remove. */
export const PRUNE_MAX_RATIO = 0.9;
/** The ratio knobs of a PrunePlan, in the order the page shows them. */
export const PRUNE_RATIO_KEYS = Object.freeze(['heads', 'kv_heads', 'qk_dims', 'v_dims', 'mlp']);
export const PRUNE_IMPORTANCE = Object.freeze(['activation', 'magnitude']);
export const PRUNE_ALLOCATION = Object.freeze(['uniform', 'global']);
export const PRUNE_STAGES = Object.freeze(['fetching', 'calibrating', 'pruning', 'exporting', 'evaluating']);
export const GGUF_DTYPES = Object.freeze(['q8_0', 'f16', 'f32']);
/** Where the site serves the texts (see README: `cargo xtask build` places them). */
export const CALIBRATION_URL = 'models/calibration.txt';
export const EVAL_URL = 'data/constitution.txt';
/** Calibration defaults: tokens of the text and tokens per window (a fresh cache each). */
export const CALIBRATION = Object.freeze({ maxTokens: 1024, window: 256 });
/** Perplexity on the first this many tokens of the evaluation text. */
export const EVAL_TOKENS = 256;

/**
 * The weight formats `Engine.loadGguf` takes, default first: the same list, in the same order, as
 * the wasm's `weightFormats()` (tests/web/formats.test.mjs checks the two agree). Kept here, not
 * asked of the worker, so the picker is filled and a load request validated before the wasm has
 * even compiled, by the same pure code on both sides.
 */
export const WEIGHT_FORMATS = Object.freeze(['auto', 'w4g32', 'w4g64', 'w4g128', 'q8_0', 'f16', 'f32']);
export const DEFAULT_WEIGHTS = WEIGHT_FORMATS[0];

/** What each format is, for the picker. */
export const WEIGHT_FORMAT_LABELS = Object.freeze({
  auto: 'auto · the file\'s own formats',
  w4g32: 'w4g32 · 4-bit, groups of 32',
  w4g64: 'w4g64 · 4-bit, groups of 64',
  w4g128: 'w4g128 · 4-bit, groups of 128',
  q8_0: 'q8_0 · 8-bit, groups of 32',
  f16: 'f16',
  f32: 'f32',
});

/** What each KV format is, for the picker (a format missing here is shown by its id). */
export const KV_FORMAT_LABELS = Object.freeze({
  f32: 'f32',
  f16: 'f16',
  k8v16: 'k8v16 · 8-bit K, f16 V',
  int8: 'int8 · 8-bit K and V',
  int4g32: 'int4g32 · 4-bit, groups of 32',
  kivi4: 'kivi4 · 4-bit KIVI + f16 residual',
});

/** The engine's error when a turn does not fit the model's context starts with this. */
export const CONTEXT_FULL_PREFIX = 'context full';

/** True when `message` is the engine's "context full" error. */
export function isContextFull(message) {
  return typeof message === 'string' && message.startsWith(CONTEXT_FULL_PREFIX);
}

export const ESTIMATE_PURPOSES = Object.freeze(['panel', 'compare']);

export const FINISH_REASONS = Object.freeze(['stop', 'length', 'stopped']);

/**
 * The fields of the options object the wasm's `Engine.start` takes (`edgefit_wasm::START_FIELDS`,
 * checked by crates/wasm/tests/page_constants.rs): the generate message's fields without `type`.
 */
export const START_OPTION_KEYS = Object.freeze(['prompt', 'chat', 'maxTokens', 'temperature', 'topP', 'seed', 'keep']);

/** Bounds the page enforces before a generation is sent to the worker. */
export const LIMITS = Object.freeze({
  maxTokens: { min: 1, max: 4096 },
  temperature: { min: 0, max: 5 },
  topP: { min: 0, max: 1 }, // exclusive of 0: topP must be > 0
  seed: { min: 0, max: 2 ** 32 - 1 },
});

/** Metric keys from `Engine.metrics()` that are names: the weights, embedding and kernel used. */
export const METRIC_NAME_KEYS = Object.freeze(['weights', 'embedding', 'kernel']);

/**
 * Metric keys of the KV cache and the conversation: non-negative integers when present (an
 * older engine leaves them out, so they are optional).
 */
export const KV_METRIC_KEYS = Object.freeze(['kv_tokens', 'kv_reserved_bytes', 'reused_tokens', 'kv_limit']);

/**
 * Optional metric keys of memory: `heap_bytes`, the heap in use as the wasm build's allocator
 * counts it (it falls when memory is freed; `peak_bytes`, the linear memory's size, never does).
 * A non-negative integer when present; the CLI's engine leaves it out.
 */
export const MEMORY_METRIC_KEYS = Object.freeze(['heap_bytes']);

/** Metric keys from `Engine.metrics()` that are plain numbers (token_ms and finish_reason aside). */
export const METRIC_KEYS = Object.freeze([
  'load_ms',
  'prompt_tokens',
  'generated_tokens',
  'ttft_ms',
  'prefill_tok_s',
  'decode_tok_s',
  'weights_bytes',
  'kv_bytes',
  'peak_bytes',
]);

/** Keys of `Engine.info()` the page shows. */
export const INFO_KEYS = Object.freeze([
  'name',
  'arch',
  'n_layers',
  'hidden',
  'n_heads',
  'n_kv_heads',
  'head_dim',
  'ffn',
  'vocab',
  'context_length',
  'params',
  'weights_bytes',
  'weights',
  'kernel',
  'kernels',
  'chat_template',
]);

/** The most threads any request may name (the wasm's maxThreads(), edgefit_kernels MAX_THREADS). */
export const MAX_THREADS = 256;

/**
 * The page's default thread count for `cores` (navigator.hardwareConcurrency): half of them,
 * as wllama does (the other half keeps the page and the system responsive), at least 1.
 */
export function defaultThreads(cores) {
  return Number.isSafeInteger(cores) && cores >= 2 ? Math.floor(cores / 2) : 1;
}

/** The default model's file name (the worker caches only it, the page offers to forget it). */
export const DEFAULT_MODEL_FILE = 'smollm2-135m-instruct-q4_1.gguf';
