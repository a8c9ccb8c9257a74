// Shared by faults/soak/security e2e files (not a test file itself): a test-only init script that
// wraps the page's Worker so the test sees what the page sends to the engine worker and the
// metrics the worker reports, without any hook in the page itself.
//   window.__tap.sent      the type of every message the page posted to a worker, in order
//   window.__tap.done      the metrics of every `done` message
//   window.__tap.last      the metrics of the latest message that carried metrics
//   window.__tap.errors    the text of every `error` message ({message, fatal})
//   window.__tap.workers   how many workers the page created
//   window.__tap.received  [type, performance.now()] of every started / prefilling / piece / done message
//   window.__tap.tokenMs   every per-token decode time the pieces carried, in order
//   window.__tap.pieces    per piece: {tokens (its decode times), generated, rate} (rate: its metrics' decode_tok_s)

/** Installs the tap on `page` (call before the navigation, e.g. from openPage's onPage). */
export async function tapWorkers(page) {
  await page.addInitScript(() => {
    const Native = window.Worker;
    const tap = { sent: [], done: [], last: null, errors: [], workers: 0, received: [], tokenMs: [], pieces: [] };
    window.__tap = tap;
    window.Worker = class TappedWorker extends Native {
      constructor(...args) {
        super(...args);
        tap.workers += 1;
        this.addEventListener('message', (ev) => {
          const m = ev.data;
          if (m === null || typeof m !== 'object') return;
          if (m.metrics) tap.last = m.metrics;
          if (m.type === 'done') tap.done.push(m.metrics);
          if (['started', 'prefilling', 'piece', 'done'].includes(m.type)) tap.received.push([m.type, performance.now()]);
          if (m.type === 'piece' && Array.isArray(m.tokenMs)) tap.tokenMs.push(...m.tokenMs);
          if (m.type === 'piece') tap.pieces.push({ tokens: m.tokenMs?.length ?? 0, generated: m.metrics?.generated_tokens, rate: m.metrics?.decode_tok_s });
          if (m.type === 'error') tap.errors.push({ message: m.message, fatal: m.fatal });
        });
      }

      postMessage(msg, ...rest) {
        tap.sent.push(msg?.type);
        return super.postMessage(msg, ...rest);
      }
    };
  });
}

/** How many messages of `type` the page has sent to its workers. */
export const sentCount = (page, type) => page.evaluate((t) => window.__tap.sent.filter((x) => x === t).length, type);
