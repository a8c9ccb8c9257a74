// edgefit pool worker: one thread of the threaded wasm build's pool (edgefit_kernels::pool).
//
// worker.js starts it when the wasm's pool asks for a thread (edgefitSpawnPoolWorker) and posts
// {dir, module, memory, ptr}: the threaded build's directory, its compiled WebAssembly.Module,
// its shared WebAssembly.Memory and the pool's boxed closure. This worker instantiates the same
// module over the same memory (wasm-bindgen gives the instance its own stack and thread-local
// storage), says it started, and runs the closure: the pool's worker loop, which parks on
// memory.atomic.wait32 between regions (allowed in a worker) and returns when the pool is dropped
// (a new model, or a new thread count). Then it frees its stack and TLS and closes.
//
// If the closure throws after the start (the wasm trapped: a panic aborts on wasm32, or an engine
// bug), the engine's thread may be inside a parallel region waiting for this worker, which will
// never acknowledge it. So the worker tells the pool through the same instance (poolWorkerLost:
// atomics only, no allocation or lock), and the region ends: the engine's forward pass returns an
// error naming the lost thread, which the page shows, and refuses parallel work on this pool until
// the model is loaded again or another thread count is chosen. The trap's own message (and the
// panic's, from the panic hook) goes to the console. The trapped instance's stack and TLS are not
// freed (its state is unknown); the worker closes.

self.onmessage = async ({ data }) => {
  self.onmessage = null;
  const { dir, module, memory, ptr } = data ?? {};
  let mod = null;
  let exports = null;
  let started = false;
  try {
    mod = await import(`${dir}edgefit_wasm.js`);
    exports = await mod.default({ module_or_path: module, memory });
    self.postMessage({ started: true });
    started = true;
    mod.poolWorkerEntry(ptr);
  } catch (e) {
    if (!started) {
      self.postMessage({ error: String(e?.message ?? e) });
    } else {
      console.error('edgefit pool worker stopped inside the engine:', e);
      let reported = false;
      try {
        reported = mod.poolWorkerLost() === true;
      } catch (e2) {
        console.error('edgefit pool worker: reporting the stop failed too:', e2);
      }
      if (!reported) console.error('edgefit pool worker: the engine may wait for this worker forever');
      self.close();
      return;
    }
  }
  try {
    exports?.__wbindgen_thread_destroy?.();
  } finally {
    self.close();
  }
};
