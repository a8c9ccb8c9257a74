// edgefit's cross-origin isolation for hosts that cannot set headers (GitHub Pages, a plain
// `python3 -m http.server`): the threaded wasm build needs SharedArrayBuffer, which browsers give
// only to a cross-origin isolated page, i.e. one served with
//   Cross-Origin-Opener-Policy: same-origin
//   Cross-Origin-Embedder-Policy: require-corp
// (`credentialless` would do for Chromium and Firefox but Safari does not implement it).
//
// This one file has two roles.
// - In the page (a classic <script> first in index.html's <head>): when the page is not isolated
//   and service workers are available (a secure context: https or localhost), it registers this
//   file as the site's service worker and reloads once it controls the page, since a page's
//   headers are fixed when it loads. A reload happens at most once per tab session
//   (sessionStorage): if the page is still not isolated after it (the browser refuses), it
//   stays on the single-threaded build instead of reloading in a loop. A page already isolated
//   by real headers (`cargo xtask serve`) registers nothing.
// - As the service worker: it answers every request of its scope with the network's response
//   plus the two headers (and Cross-Origin-Resource-Policy, so same-origin resources pass COEP).

/* global self, window, document, navigator, sessionStorage */
if (typeof window === 'undefined') {
  // ---- service worker ----
  self.addEventListener('install', () => self.skipWaiting());
  self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
  self.addEventListener('fetch', (e) => {
    const r = e.request;
    // Chromium asks for this on devtools reloads; a cross-origin one would throw.
    if (r.cache === 'only-if-cached' && r.mode !== 'same-origin') return;
    e.respondWith(
      fetch(r).then((res) => {
        if (res.status === 0) return res; // opaque: cannot be rewritten
        const headers = new Headers(res.headers);
        headers.set('Cross-Origin-Opener-Policy', 'same-origin');
        headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
        if (!headers.has('Cross-Origin-Resource-Policy')) headers.set('Cross-Origin-Resource-Policy', 'same-origin');
        return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
      }),
    );
  });
} else {
  // ---- page ----
  const KEY = 'edgefit-coi-reloaded';
  if (window.crossOriginIsolated) {
    sessionStorage.removeItem(KEY);
  } else if (!window.isSecureContext || !('serviceWorker' in navigator)) {
    console.info('edgefit: not cross-origin isolated and no service worker here (needs https or localhost): single-threaded build');
  } else {
    const reloadOnce = () => {
      if (sessionStorage.getItem(KEY)) {
        console.warn('edgefit: still not cross-origin isolated after the service worker reload: single-threaded build');
        return;
      }
      sessionStorage.setItem(KEY, '1');
      window.location.reload();
    };
    navigator.serviceWorker.register(document.currentScript.src).then(
      (reg) => {
        // No registration: service workers are blocked here (a browser setting, a test harness).
        if (!reg) return;
        if (navigator.serviceWorker.controller) reloadOnce(); // controlled, yet not isolated: stale page
        else navigator.serviceWorker.addEventListener('controllerchange', reloadOnce, { once: true });
        reg.update?.();
      },
      (e) => console.warn(`edgefit: the cross-origin isolation service worker did not register: ${e?.message ?? e}`),
    );
  }
}
