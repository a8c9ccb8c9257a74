// Share links (share.js encodes and decodes them): the Share button, and a link's scenario
// applied to the page once the worker's catalog has filled the pickers. DOM only.

import * as P from './protocol.js';
import * as S from './share.js';
import * as V from './estimate-view.js';

const $ = (id) => document.getElementById(id);

/**
 * `el`: the page's elements; `page`: {state, isBusy, render}; `model`: the page's model record
 * (info, source, weights, kvFormats, kvFormat, defaultModel); `threads`: the page's thread
 * record (cores, wanted, running, build); `estimator`: the estimate panel; `prune`: the pruning
 * panel. Returns {catalogReady, takeKeepEstimateKv, clearKeepEstimateKv}.
 */
export function createShareController({ el, page, model, threads, estimator, prune }) {
  // A link's scenario waits in `pending` until the worker's catalog has filled the pickers, then is
  // applied all or nothing. `keepEstimateKv`: the link set the engine's KV format, whose answer must
  // not move the estimator's KV knob (which the link set too).
  const share = { pending: null, keepEstimateKv: false };

  /** The name of the file the loaded model came from (the URL's last segment for a download). */
  function sourceName(source) {
    if (!source) return 'model';
    if (source.kind === 'file') return source.file?.name || 'model';
    try {
      return decodeURIComponent(new URL(source.url).pathname.split('/').pop()) || 'model';
    } catch {
      return 'model';
    }
  }

  /** The page's whole scenario, as share.js encodes it (raw input strings: it checks them). */
  function currentScenario() {
    const estimate = estimator.getScenario();
    const s = {
      estimate,
      engine: { weights: model.weights, kv: model.kvFormat ?? undefined, threads: threads.build === 'threads' ? String(threads.running) : undefined },
      generation: {
        prompt: el.prompt.value,
        chat: el.chat.checked,
        keep: el.keepContext.checked,
        maxTokens: el.maxTokens.value,
        temperature: el.temperature.value,
        topP: el.topP.value,
        seed: el.seed.value,
      },
      pruning: prune.formValues(),
    };
    if (page.state.modelLoaded && model.info) s.loaded = S.loadedSection(sourceName(model.source), model.info);
    if (estimate.model === V.CONFIG_MODEL) {
      s.config = { name: $('preset-picker').selectedOptions[0]?.dataset.file || 'config.json' };
    }
    return s;
  }

  function showShareError(message) {
    el.shareError.textContent = message;
    el.shareError.hidden = false;
  }

  function clearShareError() {
    el.shareError.hidden = true;
    el.shareError.textContent = '';
  }

  el.shareLink.addEventListener('click', async () => {
    clearShareError();
    let fragment;
    try {
      fragment = S.encodeScenario(currentScenario());
    } catch (e) {
      showShareError(`No link made: ${P.errorMessage(e)}.`);
      return;
    }
    const url = new URL(location.href);
    url.hash = fragment;
    history.replaceState(history.state, '', url.href); // no reload, no hashchange
    el.shareUrl.value = url.href;
    el.shareStatus.textContent = '';
    try {
      await navigator.clipboard.writeText(url.href);
      el.shareStatus.textContent = 'copied';
    } catch {
      el.shareStatus.textContent = 'select the link and copy it';
    }
    // A local file's name is the user's: say that the link carries it (never its bytes).
    if (page.state.modelLoaded && model.source?.kind === 'file') {
      el.shareStatus.textContent += ` · the link names your file “${sourceName(model.source)}” and its shape (no model data)`;
    }
    el.shareUrl.select();
  });

  /**
   * Reads location.hash: a link waits for the catalog, then its good fields are applied and every
   * bad one is listed; a link that cannot be read at all is reported and the settings kept.
   */
  function readLink() {
    if (!S.hasScenario(location.hash)) return;
    const { scenario, errors, error } = S.decodeScenarioParts(location.hash);
    if (error) {
      share.pending = null;
      showShareError(`This link cannot be opened: ${error}. The page keeps its settings.`);
      return;
    }
    share.pending = { scenario, errors };
    applyPendingLink();
  }

  function applyPendingLink() {
    if (!share.pending || model.kvFormats.length === 0) return; // the catalog is not there yet
    const { scenario, errors } = share.pending;
    share.pending = null;
    const { fatal, skipped } = applyLink(scenario);
    const all = [...errors, ...skipped];
    if (fatal) showShareError(`This link cannot be opened: ${fatal}. The page keeps its settings.`);
    else if (all.length) showShareError(`Part of this link was not applied (the rest was): ${all.join('; ')}.`);
    else clearShareError();
  }

  /**
   * Applies a decoded scenario: the fields the page cannot use are left out and listed, the rest
   * applied. Returns {fatal} (nothing applied) or {skipped: [sentences]}.
   */
  function applyLink(s) {
    if (page.isBusy()) return { fatal: 'the engine is busy; open the link again when it is done', skipped: [] };
    const skipped = [];
    const engine = { ...(s.engine ?? {}) };
    if (engine.kv !== undefined && !model.kvFormats.includes(engine.kv)) {
      skipped.push(`the link's engine KV format ${JSON.stringify(engine.kv)} is not one this build has`);
      delete engine.kv;
    }
    const panelError = estimator.applyScenario(s.estimate ?? {});
    if (panelError) skipped.push(panelError);

    const g = s.generation ?? {};
    if (g.prompt !== undefined) el.prompt.value = g.prompt; // a value: text, never markup
    if (g.chat !== undefined) el.chat.checked = g.chat;
    if (g.keep !== undefined) el.keepContext.checked = g.keep;
    for (const [k, input] of [['maxTokens', el.maxTokens], ['temperature', el.temperature], ['topP', el.topP], ['seed', el.seed]]) {
      if (g[k] !== undefined) input.value = String(g[k]);
    }

    // The pruning panel's inputs only: pruning needs a model and runs when the user presses Prune.
    prune.applyValues(s.pruning ?? {});

    const notes = [];
    if (engine.weights !== undefined && engine.weights !== model.weights) {
      if (page.state.modelLoaded) {
        notes.push(`The link's engine weights are ${engine.weights}; the loaded model keeps ${model.weights} (pick ${engine.weights} under Weights to reload it).`);
      } else {
        model.weights = engine.weights;
        el.weightsFormat.value = engine.weights;
      }
    }
    let switching = false;
    if (engine.kv !== undefined && engine.kv !== model.kvFormat) {
      share.keepEstimateKv = true;
      el.kvFormat.value = engine.kv;
      el.kvFormat.dispatchEvent(new Event('change')); // as if picked: the engine switches
      switching = true;
    }
    if (engine.threads !== undefined) {
      const e = P.checkThreads(engine.threads, threads.cores);
      if (e) {
        notes.push(`The link's engine thread count is refused (${e}); the page runs ${threads.running}.`);
      } else if (threads.build !== 'threads') {
        if (engine.threads !== 1) notes.push(`The link asks for ${engine.threads} engine threads; this page runs one (the threaded build needs a cross-origin isolated page).`);
      } else if (engine.threads !== threads.running) {
        threads.wanted = engine.threads;
        if (switching) {
          notes.push(`The link asks for ${engine.threads} engine threads: pick ${engine.threads} under Threads once the KV cache has switched.`);
        } else {
          el.threadPicker.value = String(engine.threads);
          el.threadPicker.dispatchEvent(new Event('change')); // as if picked
        }
      }
    }
    if (s.loaded) {
      notes.push(`The link was made with ${S.describeLoaded(s.loaded)} loaded. Links carry no model data: ` +
        'load that file by hand (Model, above) to run it here' +
        (s.estimate?.model === V.LOADED_MODEL ? ', then pick “loaded: …” as the estimate’s model.' : '.'));
    }
    if (s.config) {
      notes.push(`The link's estimate used a config.json (${s.config.name}); drop it by hand on “or drop a config.json” to estimate that model.`);
    }
    el.shareNote.textContent = notes.join(' ');
    el.shareNote.hidden = notes.length === 0;
    // The default model needs no file: offer to load it from here.
    const defaultName = P.DEFAULT_MODEL_FILE;
    if (s.loaded?.name === defaultName && model.defaultModel !== false && !page.state.modelLoaded) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'Load default model';
      b.setAttribute('data-testid', 'share-load-default');
      b.addEventListener('click', () => {
        b.remove();
        el.loadDefault.click();
      });
      el.shareNote.append(' ', b);
    }
    page.render();
    return { fatal: null, skipped };
  }

  window.addEventListener('hashchange', readLink);
  readLink();

  return {
    /** The catalog filled the pickers: a link waiting for it is applied now. */
    catalogReady: applyPendingLink,
    /**
     * Whether the KV format switch that just ended came from a link (which set the estimator's
     * KV knob too, so it must not follow the engine's); reading it clears it.
     */
    takeKeepEstimateKv() {
      const keep = share.keepEstimateKv;
      share.keepEstimateKv = false;
      return keep;
    },
    clearKeepEstimateKv() {
      share.keepEstimateKv = false;
    },
  };
}
