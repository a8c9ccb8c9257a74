// edgefit pool worker: one thread of the threaded wasm build's pool (edgefit_kernels::pool).
//
// worker.js starts it when the wasm's pool asks for a thread (edgefitSpawnPoolWorker) and posts
// {dir, module, memory, ptr}: the threaded build's directory, its compiled WebAssembly.Module,
// its shared WebAssembly.Memory and the pool's boxed closure. This worker instantiates the same
// module over the same memory (wasm-bindgen gives the instance its own stack and thread-local
// storage), says it started, and runs the closure: the pool's worker loop, which parks on
// memory.atomic.wait32 between regions (allowed in a worker) and returns when the pool is dropped
// (a new model, or a new thread count). Then it frees its stack and TLS and closes.

self.onmessage = async ({ data }) => {
  self.onmessage = null;
  const { dir, module, memory, ptr } = data ?? {};
  let exports = null;
  try {
    const mod = await import(`${dir}edgefit_wasm.js`);
    exports = await mod.default({ module_or_path: module, memory });
    self.postMessage({ started: true });
    mod.poolWorkerEntry(ptr);
  } catch (e) {
    self.postMessage({ error: String(e?.message ?? e) });
  }
  try {
    exports?.__wbindgen_thread_destroy?.();
  } finally {
    self.close();
  }
};
