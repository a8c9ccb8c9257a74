// The threaded wasm build in Node, without a page: the engine on Node's main thread and its pool
// workers on worker_threads over the same shared memory (as web/worker.js and web/pool-worker.js
// do in a browser). Not part of `cargo xtask bench`: it separates what the engine's threads do
// from what a browser page around them costs (its drawing, its messages).
//
// Usage, after `cargo xtask build` (which writes build/site/pkg-threads/):
//   node tests/bench/run-node-threads.mjs            # 1 and 2 threads, 3 runs each
//   THREADS=1,2,4 RUNS=5 TOKENS=128 node tests/bench/run-node-threads.mjs
// Environment: PKG (default build/site/pkg-threads/), MODEL (the default GGUF), WEIGHTS (w4g32),
// THREADS, RUNS, TOKENS. Each run: tests/bench/prompt.txt without the chat template, TOKENS
// greedy tokens; prints one JSON line per run (the engine's own metrics).

import { readFileSync } from 'node:fs';
import { Worker, isMainThread, workerData, parentPort } from 'node:worker_threads';

const root = new URL('../../', import.meta.url);
const env = (k, d) => process.env[k] ?? d;
const pkg = new URL(env('PKG', 'build/site/pkg-threads/'), root);
const mod = await import(new URL('edgefit_wasm.js', pkg).href);

if (!isMainThread) {
  // A pool worker: the same module over the same memory, then the pool's worker loop.
  const { module, memory, ptr } = workerData;
  mod.initSync({ module, memory });
  parentPort.postMessage('started');
  mod.poolWorkerEntry(ptr);
} else {
  const module = new WebAssembly.Module(readFileSync(new URL('edgefit_wasm_bg.wasm', pkg)));
  mod.initSync({ module });
  let starts = [];
  globalThis.edgefitSpawnPoolWorker = (module, memory, ptr) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { module, memory, ptr } });
    starts.push(new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    }));
  };
  const model = new URL(env('MODEL', 'models/smollm2-135m-instruct-q4_1.gguf'), root);
  const engine = mod.Engine.loadGguf(new Uint8Array(readFileSync(model)), env('WEIGHTS', 'w4g32'));
  const prompt = readFileSync(new URL('tests/bench/prompt.txt', root), 'utf8').trimEnd();
  const tokens = Number(env('TOKENS', '128'));
  for (const threads of env('THREADS', '1,2').split(',').map(Number)) {
    engine.setThreads(threads);
    await Promise.all(starts); // the workers start asynchronously: wait before a region needs them
    starts = [];
    for (let run = 0; run < Number(env('RUNS', '3')); run++) {
      engine.start({ prompt, chat: false, maxTokens: tokens, temperature: 0 });
      for (let fed = engine.prefillChunk(); fed.done < fed.total; fed = engine.prefillChunk());
      while (engine.step() != null);
      const m = engine.metrics();
      console.log(JSON.stringify({ threads: m.threads, run, prefill_tok_s: +m.prefill_tok_s.toFixed(1), decode_tok_s: +m.decode_tok_s.toFixed(1), generated: m.generated_tokens }));
    }
  }
  process.exit(0);
}
