// The thread picker and the footer's build line. The threaded build (cross-origin isolated pages
// only) runs the engine on 1 … cores threads (navigator.hardwareConcurrency), half the cores by
// default as wllama does; `?threads=N` in the address asks for N. A count outside 1 … cores,
// from the address or the picker, is refused with a message and the page keeps the count it
// runs. DOM only; the counts and checks are model-view.js's.

import * as P from './protocol.js';
import * as MV from './model-view.js';

/**
 * `el`: the page's elements (threadPicker, version); `page`: {dispatch, isBusy, setStatus,
 * showError, clearError, render}; `client`: the engine client. Returns the thread record the
 * page and the share controller read (`threads`: {cores, wanted, running, build, version}) and
 * the worker's messages it takes.
 */
export function createThreadsControl({ el, page, client }) {
  const cores = Number.isSafeInteger(navigator.hardwareConcurrency) && navigator.hardwareConcurrency >= 1 ? Math.min(navigator.hardwareConcurrency, P.MAX_THREADS) : 1;
  const start = MV.initialThreads(new URLSearchParams(location.search).get('threads'), cores);
  if (start.error) queueMicrotask(() => page.showError(start.error));
  const threads = {
    cores,
    wanted: start.threads, // what the page asks the threaded build for
    running: 1, // what the worker said it runs
    build: null,
    version: null,
  };

  function render() {
    const shown = threads.build === 'threads' ? threads.running : 1;
    el.threadPicker.replaceChildren(
      ...MV.threadCounts(threads.build, threads.cores).map((n) => {
        const o = document.createElement('option');
        o.value = String(n);
        o.textContent = String(n);
        return o;
      }),
    );
    el.threadPicker.value = String(shown);
    el.threadPicker.title = threads.build === 'threads'
      ? `Threads the engine runs on (this browser reports ${threads.cores} cores; the default is half of them)`
      : 'One thread: the threaded build needs a cross-origin isolated page';
    if (threads.build) {
      el.version.textContent = `edgefit-wasm ${threads.version} · ${P.describeBuild(threads.build, shown)}`;
      el.version.dataset.build = threads.build;
      el.version.dataset.threads = String(shown);
    }
  }

  el.threadPicker.addEventListener('change', () => {
    const r = MV.parseThreadCount(el.threadPicker.value, threads.cores);
    if (r.error || threads.build !== 'threads' || page.isBusy()) {
      if (r.error) page.showError(`thread count refused: ${r.error}`);
      render();
      return;
    }
    const n = r.threads;
    if (n === threads.running) return;
    if (!page.dispatch('switch')) return;
    page.clearError();
    threads.wanted = n;
    page.setStatus(`switching to ${n} thread${n === 1 ? '' : 's'}…`);
    page.render();
    client.send(P.setThreads(n, threads.cores));
  });

  client.on(P.FromWorker.BOOTED, (msg) => {
    threads.version = msg.version;
    threads.build = msg.build;
    threads.running = 1;
    render();
    // The threaded build starts on one thread: ask for the chosen count (applied to every model
    // this worker loads).
    if (msg.build === 'threads' && threads.wanted !== 1) client.send(P.setThreads(threads.wanted, threads.cores));
    page.render();
  });
  client.on(P.FromWorker.THREADS_SET, (msg) => {
    threads.running = msg.threads;
    render();
    if (page.state.phase === 'switching') {
      page.dispatch('threads-set');
      page.setStatus(page.state.modelLoaded ? 'ready' : 'no model loaded');
    }
    page.render();
  });

  return { threads, render };
}
