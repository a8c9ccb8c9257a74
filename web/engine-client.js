// The page's end of the engine worker: spawns worker.js, respawns it after a crash, validates
// every message it sends (protocol.js validateFromWorker) and hands each to the subscribers of
// its type. DOM-free apart from the Worker itself; main.js wires it to the panels.
//
// A worker is fatal when its message is malformed, when it reports {type: 'error', fatal: true}
// (a panicked wasm instance cannot be reused), or when it fails to start or to post. Then it is
// terminated and, if its wasm had booted, replaced by a fresh one; if the wasm never started in
// it, the next send retries instead, so a broken build does not respawn in a loop. `onFatal`
// (message, hadBooted) tells the page, which resets what the dead worker held.

import * as P from './protocol.js';

/**
 * `workerUrl()`: the worker script's URL (with the page's parameters); `onFatal(message,
 * hadBooted)`. Returns {send, on, ensure}: `on(type, handler)` subscribes to a worker -> page
 * message type (handlers run in the order they subscribed), `send(msg)` posts to the worker
 * (spawning it first if needed).
 */
export function createEngineClient({ workerUrl, onFatal }) {
  let worker = null;
  const booted = new WeakSet(); // workers whose wasm initialised
  const handlers = new Map(); // type -> [handler]

  function spawn() {
    const w = new Worker(workerUrl(), { type: 'module', name: 'edgefit-engine' });
    w.onmessage = (ev) => receive(w, ev.data);
    w.onerror = (ev) => {
      ev.preventDefault();
      fatal(w, `the engine worker failed: ${ev.message || 'could not start worker.js'}`);
    };
    w.onmessageerror = () => fatal(w, 'the engine worker sent a message that could not be read');
    return w;
  }

  function fatal(w, message) {
    if (w !== worker) return; // a worker already dropped
    const hadBooted = booted.has(w);
    w.terminate();
    worker = hadBooted ? spawn() : null;
    onFatal(message, hadBooted);
  }

  function receive(w, msg) {
    if (w !== worker) return; // a message from a worker we already dropped
    const bad = P.validateFromWorker(msg);
    if (bad) {
      fatal(w, `the engine worker sent a malformed message: ${bad}`);
      return;
    }
    if (msg.type === P.FromWorker.BOOTED) booted.add(w);
    if (msg.type === P.FromWorker.ERROR && msg.fatal) {
      fatal(w, msg.message);
      return;
    }
    for (const h of handlers.get(msg.type) ?? []) h(msg);
  }

  function ensure() {
    if (!worker) worker = spawn();
    return worker;
  }

  return {
    ensure,
    send(msg) {
      ensure().postMessage(msg);
    },
    on(type, handler) {
      if (!Object.values(P.FromWorker).includes(type)) throw new TypeError(`engine-client: no message type ${JSON.stringify(type)}`);
      if (!handlers.has(type)) handlers.set(type, []);
      handlers.get(type).push(handler);
    },
  };
}
