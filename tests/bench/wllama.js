// The wllama peer of `cargo xtask bench e2e`: llama.cpp in wasm, no WebGPU, on the same GGUF the
// edgefit page loads, at `threads` threads. `window.runWllama` loads the model from a fetched
// Blob and runs one greedy completion; speeds are llama.cpp's own timings. wllama 3.13 has one
// wasm (esm/wasm/wllama.wasm) for both: it starts `n_threads` pthreads over a shared memory
// when the page is cross-origin isolated and n_threads > 1 (src/wllama.ts, loadModel), else one
// thread; `threads` and `multithread` in the result are its own getNumThreads() and
// isMultithread().

import { Wllama } from './wllama/index.js';

window.wllamaReady = true;

window.runWllama = async ({ model, prompt, tokens, threads = 1 }) => {
  const wasm = new URL('./wllama/wasm/wllama.wasm', location.href).href;
  const wllama = new Wllama({ default: wasm, 'wllama.wasm': wasm }, { suppressNativeLog: true });
  // Compat mode (Safari only) would fetch a worker from a CDN: never here.
  wllama.setCompat(null);
  const blob = await (await fetch(model)).blob();
  const t0 = performance.now();
  await wllama.loadModel([blob], { n_threads: threads, n_ctx: 512, n_batch: 512, n_gpu_layers: 0 });
  const loadMs = performance.now() - t0;
  const res = await wllama.createCompletion({ prompt, max_tokens: tokens, temperature: 0 });
  const t = res.timings ?? {};
  const out = {
    load_ms: loadMs,
    prompt_tokens: t.prompt_n,
    generated_tokens: t.predicted_n,
    prefill_tok_s: t.prompt_per_second,
    decode_tok_s: t.predicted_per_second,
    threads: wllama.getNumThreads(),
    multithread: wllama.isMultithread(),
    text: res.choices?.[0]?.text ?? '',
  };
  await wllama.exit();
  return out;
};
