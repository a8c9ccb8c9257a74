// edgefit guided tour: the pure part (no DOM, no wasm), unit-tested in
// tests/web/guide-view.test.mjs. The tour walks through the domain's ideas with the live numbers
// of the estimator panel: each step names the scenarios it sets (through the panel's
// applyScenario), and `buildStep` turns the reports those scenarios get into the step's text and
// its numbers. Every number is a string taken from a report (the same strings the panel shows,
// via estimate-view.js's summaryCells) or derived from one here with its own formula; nothing is
// hard-coded. A missing field gives PLACEHOLDER, never NaN. guide-panel.js renders it.

import * as V from './estimate-view.js';

/** What a number the report does not hold reads as. */
export const PLACEHOLDER = 'n/a';

/**
 * The scenario every step starts from (estimate-panel.js's getScenario shape): a 1B model, the
 * class of the field report's golden-four run, on the report's phone, with w4a16 weights.
 */
export const GUIDE_BASE = Object.freeze({
  ...V.DEFAULT_KNOBS,
  device: 'snapdragon-8-gen3',
  model: 'llama-3.2-1b',
  prune: '0',
});

/**
 * The steps in order. `runs`: the settings the step estimates in turn, each {label, set} with
 * `set` applied over GUIDE_BASE (the last one stays on the panel); `highlight`: ids of the page
 * parts outlined while the step shows (a knob's id outlines its label); `scroll`: the id scrolled
 * into view.
 */
export const STEPS = Object.freeze([
  {
    id: 'golden-four',
    title: 'The golden four on a phone',
    runs: [{ label: 'w4g32', set: {} }],
    highlight: ['device-picker', 'verdicts'],
    scroll: 'estimate-h',
  },
  {
    id: 'bytes-per-token',
    title: 'Bytes per token: why decode speed is set by memory bandwidth',
    runs: [{ label: 'w4g32', set: {} }],
    highlight: ['est-numbers'],
    scroll: 'est-numbers',
  },
  {
    id: 'roofline',
    title: 'The roofline: decode is bandwidth-bound, prefill compute-bound',
    runs: [{ label: 'w4g32', set: {} }],
    highlight: ['roofline-chart'],
    scroll: 'roofline-chart',
  },
  {
    id: 'weight-formats',
    title: 'Weight formats: f16 against 4-bit (w4a16)',
    runs: [
      { label: 'f16', set: { weights: 'f16' } },
      { label: 'w4g32', set: { weights: 'w4g32' } },
    ],
    highlight: ['k-weights', 'est-numbers'],
    scroll: 'est-knobs',
  },
  {
    id: 'kv-cache',
    title: 'The KV cache at long context',
    runs: [
      { label: 'f16', set: { context: '8192', kv: 'f16' } },
      { label: 'int8', set: { context: '8192', kv: 'int8' } },
      { label: 'kivi4', set: { context: '8192', kv: 'kivi4' } },
    ],
    highlight: ['k-kv', 'k-context', 'mem-chart'],
    scroll: 'est-knobs',
  },
  {
    id: 'pruning',
    title: 'Structured pruning (TransAct-style)',
    runs: [
      { label: 'not pruned', set: { prune: '0' } },
      { label: 'pruned 30%', set: { prune: '0.3' } },
    ],
    highlight: ['k-prune', 'est-numbers'],
    scroll: 'est-knobs',
  },
  {
    id: 'heat',
    title: 'Heat: flat out against paced',
    runs: [
      { label: 'flat-out', set: { policy: 'flat-out' } },
      { label: 'paced', set: { policy: 'paced' } },
    ],
    highlight: ['k-policy', 'thermal-chart'],
    scroll: 'thermal-chart',
  },
  {
    id: 'what-fits',
    title: 'What fits on this device?',
    runs: [{ label: 'w4g32', set: {} }],
    highlight: ['fit-panel'],
    scroll: 'fit-panel',
  },
]);

/** The full scenarios a step applies, in order: [{label, scenario}]. */
export function stepScenarios(step) {
  return (step?.runs ?? []).map((r) => ({ label: r.label, scenario: { ...GUIDE_BASE, ...r.set } }));
}

/** "3 / 8" */
export function stepCount(index, total = STEPS.length) {
  return `${index + 1} / ${total}`;
}

// ---- numbers ----------------------------------------------------------------------------------

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const fin = (v) => typeof v === 'number' && Number.isFinite(v);

/** `v` with `d` decimals, or PLACEHOLDER. */
export function fmt(v, d = 2) {
  return fin(v) ? v.toFixed(d) : PLACEHOLDER;
}

/** Bytes as a whole number, or PLACEHOLDER. */
const bytes = (v) => (fin(v) ? String(Math.round(v)) : PLACEHOLDER);
/** Bytes for humans ("663.2 MiB"), or PLACEHOLDER. */
const human = (v) => (fin(v) ? V.formatBinary(v) : PLACEHOLDER);
/** a / b as "3.54×", or PLACEHOLDER. */
export function ratio(a, b) {
  return fin(a) && fin(b) && b !== 0 ? `${(a / b).toFixed(2)}×` : PLACEHOLDER;
}
/** The change from a to b in percent ("−28.5%"), or PLACEHOLDER. */
export function change(a, b) {
  if (!fin(a) || !fin(b) || a === 0) return PLACEHOLDER;
  const p = ((b - a) / Math.abs(a)) * 100;
  return `${p > 0 ? '+' : p < 0 ? '\u2212' : ''}${Math.abs(p).toFixed(1)}%`;
}

/**
 * One of the panel's numbers (a summaryCells id) of `report`, as the guide cites it:
 * {id, key, label, value, unit, text, explain}. `value` is the panel's own string (PLACEHOLDER
 * when the report lacks it); `text` adds unit and human form; `explain` the report's formula.
 */
export function cell(report, id) {
  const c = V.summaryCells(report).find((x) => x.id === id);
  if (!c) return { id, key: id, label: id, value: PLACEHOLDER, unit: '', text: PLACEHOLDER, explain: null };
  const value = c.value === '' ? PLACEHOLDER : c.value;
  const parts = [value];
  if (c.unit && value !== PLACEHOLDER) parts.push(c.unit);
  if (c.human && value !== PLACEHOLDER) parts.push(`(${c.human})`);
  return { id, key: c.explain, label: c.label, value, unit: c.unit, text: parts.join(' '), explain: V.explanation(report, c.explain) };
}

/** A derived number as an item: {id, key, label, value, unit, text, explain}. */
function derived(id, label, value, unit, explain) {
  const v = value ?? PLACEHOLDER;
  return { id, key: `guide.${id}`, label, value: v, unit, text: v === PLACEHOLDER || !unit ? v : `${v} ${unit}`, explain };
}

/** A verdict of `report` as an item (its formula from report.explain["verdict.<name>"]). */
export function verdictItem(report, name, label) {
  const v = report?.verdict?.[name];
  const value = v === 'pass' || v === 'fail' ? v : PLACEHOLDER;
  return { id: `verdict-${name}`, key: `verdict.${name}`, label: `${label} verdict`, value, unit: '', text: value, explain: V.explanation(report, `verdict.${name}`) };
}

/**
 * The bandwidth bound of decode: every weight is read once per generated token, so one token
 * takes at least weights bytes / bandwidth. {bytes, bandwidth_gbs, ms, tok_s, explain}, or null
 * when the report lacks either number.
 */
export function bandwidthBound(report) {
  const b = report?.memory?.weights_bytes;
  const bw = report?.latency?.bandwidth_gbs;
  if (!fin(b) || !fin(bw) || b <= 0 || bw <= 0) return null;
  const s = b / (bw * 1e9);
  return {
    bytes: b,
    bandwidth_gbs: bw,
    ms: s * 1e3,
    tok_s: 1 / s,
    explain: {
      formula: 't_token ≥ weight bytes / bandwidth; tok/s ≤ bandwidth / weight bytes',
      values: `${Math.round(b)} B / (${bw.toFixed(2)} × 10⁹ B/s)`,
      result: `${(s * 1e3).toFixed(2)} ms per token, at most ${(1 / s).toFixed(2)} tok/s`,
      note: 'weights only: the KV cache read and per-op overheads come on top (the estimator counts them)',
    },
  };
}

/** The share of the bandwidth ceiling the estimator's decode reaches, in percent, or null. */
export function ceilingShare(report) {
  const bound = bandwidthBound(report);
  const d = report?.latency?.decode_tok_s;
  return bound && fin(d) ? (d / bound.tok_s) * 100 : null;
}

const MATRIX_OP = /_proj$|^lm_head$|^qkv|^gate_up/;

/** Summary of one phase's ops (layers[0].prefill or .decode) for the roofline step. */
function phase(ops) {
  const ok = (Array.isArray(ops) ? ops : []).filter((o) => isObject(o) && fin(o.intensity));
  let matrix = ok.filter((o) => MATRIX_OP.test(String(o.op)));
  if (matrix.length === 0) matrix = ok.filter((o) => fin(o.weight_bytes) && o.weight_bytes > 0);
  const count = (b) => ok.filter((o) => o.bound === b).length;
  // The op that takes the longest: the one the phase's time is mostly made of.
  const heaviest = matrix.reduce((a, o) => (a === null || (o.time_us ?? 0) > (a.time_us ?? 0) ? o : a), null);
  const ints = matrix.map((o) => o.intensity);
  return {
    ops: ok.length,
    memory: count('memory'),
    compute: count('compute'),
    overhead: count('overhead'),
    min: ints.length ? Math.min(...ints) : null,
    max: ints.length ? Math.max(...ints) : null,
    heaviest,
  };
}

/** The explanation of one op's arithmetic intensity, or null. */
function intensityExplain(o, ridge) {
  if (!isObject(o)) return null;
  const moved = (o.weight_bytes ?? 0) + (o.kv_bytes ?? 0) + (o.act_bytes ?? 0);
  return {
    formula: 'intensity = FLOPs / (weight + KV + activation bytes)',
    values: `${Math.round(o.flops ?? 0)} / (${Math.round(o.weight_bytes ?? 0)} + ${Math.round(o.kv_bytes ?? 0)} + ${Math.round(o.act_bytes ?? 0)}) = ${Math.round(o.flops ?? 0)} / ${Math.round(moved)}`,
    result: `${fmt(o.intensity, 2)} FLOP/byte (${o.bound ?? PLACEHOLDER}-bound${fin(ridge) ? `; ridge ${ridge.toFixed(2)}` : ''})`,
    note: `one layer's ${o.op}`,
  };
}

/**
 * The roofline in numbers: {ridge, compute_gflops, bandwidth_gbs, decode, prefill, ridgeExplain}
 * where decode/prefill are {ops, memory, compute, overhead, min, max, heaviest} over layer 0.
 */
export function rooflineSummary(report) {
  const lat = report?.latency ?? {};
  const compute = fin(lat.effective_gflops) && lat.effective_gflops > 0 ? lat.effective_gflops : lat.peak_gflops;
  const bw = lat.bandwidth_gbs;
  const ridge = fin(lat.ridge_intensity) ? lat.ridge_intensity : fin(compute) && fin(bw) && bw > 0 ? compute / bw : null;
  const layer = Array.isArray(report?.layers) ? report.layers[0] : null;
  return {
    ridge,
    compute_gflops: fin(compute) ? compute : null,
    bandwidth_gbs: fin(bw) ? bw : null,
    decode: phase(layer?.decode),
    prefill: phase(layer?.prefill),
    ridgeExplain: {
      formula: 'ridge = attainable compute / bandwidth (FLOP/byte where the two roofs meet)',
      values: `${fmt(compute, 1)} GFLOP/s / ${fmt(bw, 2)} GB/s`,
      result: `${fmt(ridge, 2)} FLOP/byte`,
      note: 'an op left of the ridge is limited by bytes moved, right of it by arithmetic',
    },
  };
}

const throttleText = (report) => {
  const t = report?.thermal;
  if (!isObject(t) || !('time_to_throttle_s' in t)) return PLACEHOLDER;
  return t.time_to_throttle_s == null ? 'never throttles within the run' : fin(t.time_to_throttle_s) ? `throttles after ${t.time_to_throttle_s.toFixed(0)} s` : PLACEHOLDER;
};

const name = (snap) => ({ model: snap?.modelName || PLACEHOLDER, device: snap?.deviceName || PLACEHOLDER });

// ---- steps ------------------------------------------------------------------------------------

/**
 * The text and numbers of step `id` from the snapshots of its runs (estimate-panel.js's
 * snapshot(), one per run, in order): {title, paragraphs: [string], groups: [{title, items}]}
 * where items are `cell`-shaped. Missing snapshots or fields give PLACEHOLDER.
 */
export function buildStep(id, snaps) {
  const step = STEPS.find((s) => s.id === id);
  if (!step) throw new Error(`no guide step ${JSON.stringify(id)}`);
  const list = Array.isArray(snaps) ? snaps : [];
  const reports = step.runs.map((_, i) => list[i]?.report ?? null);
  const out = BUILDERS[id](reports, list, step);
  return { title: step.title, ...out };
}

const BUILDERS = {
  'golden-four'([r], [snap]) {
    const { model, device } = name(snap);
    const lat = r?.latency ?? {};
    const th = r?.verdict?.thresholds ?? r?.deployment?.thresholds ?? {};
    const total = cell(r, 'est-total-bytes');
    const ttft = cell(r, 'est-ttft-ms');
    const sus = cell(r, 'est-sustained-tps');
    const rise = cell(r, 'est-temp-rise');
    const v = (k) => r?.verdict?.[k] ?? PLACEHOLDER;
    return {
      paragraphs: [
        `The estimator now shows ${model} on the ${device}: ${fmt(lat.bandwidth_gbs)} GB/s of memory bandwidth, ` +
          `${fmt(lat.peak_gflops, 0)} GFLOP/s peak on the ${typeof lat.unit === 'string' ? lat.unit.toUpperCase() : PLACEHOLDER}, ${human(r?.memory?.usable_bytes)} of memory one app may use. ` +
          'A phone has a fraction of a datacenter GPU’s bandwidth, memory and power (about 7 W), and it heats up.',
        'A deployment passes when all four of the “golden four” hold: ' +
          `peak memory ≤ ${human(th.peak_memory_bytes)} (here ${total.text}: ${v('memory')}), ` +
          `time to first token < ${fmt(th.ttft_ms, 0)} ms (here ${ttft.text}: ${v('ttft')}), ` +
          `sustained decode ≥ ${fmt(th.sustained_tok_s, 0)} tok/s (here ${sus.text}: ${v('sustained')}), ` +
          `temperature rise < ${fmt(th.temp_rise_c, 0)} °C (here ${rise.text}: ${v('temperature')}).`,
        'Open any number (here or in the panel) to see its formula with the values put in.',
      ],
      groups: [
        { title: 'The four numbers', items: [total, ttft, sus, rise] },
        {
          title: 'The verdicts',
          items: [verdictItem(r, 'memory', 'Memory'), verdictItem(r, 'ttft', 'TTFT'), verdictItem(r, 'sustained', 'Sustained'), verdictItem(r, 'temperature', 'Temperature')],
        },
      ],
    };
  },

  'bytes-per-token'([r]) {
    const w = cell(r, 'est-weights-bytes');
    const dec = cell(r, 'est-decode-tps');
    const bound = bandwidthBound(r);
    const share = ceilingShare(r);
    const step = r?.latency?.decode_bytes_per_step;
    const decEx = V.explanation(r, 'latency.decode_tok_s');
    return {
      paragraphs: [
        `Each generated token runs every layer once, so decode reads every weight once per token: ${w.text} of ` +
          `${r?.deployment?.weights ?? PLACEHOLDER} weights here.`,
        `At ${fmt(r?.latency?.bandwidth_gbs)} GB/s that alone takes at least ${fmt(bound?.ms)} ms per token: ` +
          `decode can never beat ${fmt(bound?.tok_s)} tok/s on this device, however fast its arithmetic.`,
        `The estimator’s decode: ${dec.text}, ${fmt(share, 0)}% of that ceiling. Its first step moves ${bytes(step)} bytes ` +
          '(weights, the KV cache read, activations) and every op has a fixed cost on top.',
        'So bytes per token is the lever: smaller weight formats, pruning and a smaller KV cache all make decode faster.',
      ],
      groups: [
        {
          title: 'Per token',
          items: [
            w,
            derived('bound-ms', 'Bandwidth bound per token', bound ? fmt(bound.ms) : null, 'ms', bound?.explain ?? null),
            derived('bound-tps', 'Bandwidth ceiling', bound ? fmt(bound.tok_s) : null, 'tok/s', bound?.explain ?? null),
            derived('step-bytes', 'Bytes moved per decode step', fin(step) ? bytes(step) : null, 'bytes', decEx
              ? { formula: 'Σ ops of the first decode step (weight + KV + activation bytes)', values: decEx.values, result: `${bytes(step)} B`, note: decEx.note }
              : null),
            dec,
          ],
        },
      ],
    };
  },

  roofline([r]) {
    const s = rooflineSummary(r);
    const P = r?.deployment?.prompt_tokens;
    const pre = cell(r, 'est-prefill-tps');
    const dec = cell(r, 'est-decode-tps');
    const range = (p) => (p.min === null ? PLACEHOLDER : p.min === p.max ? fmt(p.min) : `${fmt(p.min)}–${fmt(p.max)}`);
    const dh = s.decode.heaviest;
    const ph = s.prefill.heaviest;
    return {
      paragraphs: [
        `Arithmetic intensity is FLOPs per byte moved. The ridge point of this device is ${fmt(s.ridge)} FLOP/byte ` +
          `(${fmt(s.compute_gflops, 0)} GFLOP/s attainable ÷ ${fmt(s.bandwidth_gbs)} GB/s): ops left of it wait on memory, ops right of it on arithmetic.`,
        'Decode multiplies one token’s vector by each weight matrix, about 2 FLOPs for each weight read, so its matrix ops sit at ' +
          `${range(s.decode)} FLOP/byte, far left of the ridge: ${s.decode.memory} of its ${s.decode.ops} ops are memory-bound ` +
          `(${s.decode.overhead} more are so small that their fixed cost dominates). Decode is bandwidth-bound.`,
        `Prefill multiplies all ${P ?? PLACEHOLDER} prompt tokens at once, reusing each weight it reads for every token: its matrix ops reach ` +
          `${range(s.prefill)} FLOP/byte and ${s.prefill.compute} of its ${s.prefill.ops} ops are compute-bound. ` +
          `Hence prefill at ${pre.text} against decode at ${dec.text}.`,
        'The roofline chart (outlined) plots one layer’s ops: prefill in blue, decode in orange, the ridge dashed.',
      ],
      groups: [
        {
          title: 'One layer',
          items: [
            derived('ridge', 'Ridge point', s.ridge === null ? null : fmt(s.ridge), 'FLOP/byte', s.ridgeExplain),
            derived('decode-intensity', `Decode ${dh?.op ?? 'op'} intensity`, dh ? fmt(dh.intensity) : null, 'FLOP/byte', intensityExplain(dh, s.ridge)),
            derived('prefill-intensity', `Prefill ${ph?.op ?? 'op'} intensity`, ph ? fmt(ph.intensity) : null, 'FLOP/byte', intensityExplain(ph, s.ridge)),
            pre,
            dec,
          ],
        },
      ],
    };
  },

  'weight-formats'([a, b], _snaps, step) {
    const [la, lb] = step.runs.map((x) => x.label);
    const wa = cell(a, 'est-weights-bytes');
    const wb = cell(b, 'est-weights-bytes');
    const da = cell(a, 'est-decode-tps');
    const db = cell(b, 'est-decode-tps');
    const ba = bandwidthBound(a);
    const bb = bandwidthBound(b);
    const bits = (r) => fmt(r?.memory?.weights_bits_per_param);
    const item = (r, bound, label) => [
      cell(r, 'est-weights-bytes'),
      derived(`bits-${label}`, 'Bits per parameter', fin(r?.memory?.weights_bits_per_param) ? bits(r) : null, 'bits',
        V.explanation(r, 'memory.weights_bytes')),
      derived(`bound-${label}`, 'Bandwidth ceiling', bound ? fmt(bound.tok_s) : null, 'tok/s', bound?.explain ?? null),
      cell(r, 'est-decode-tps'),
      cell(r, 'est-sustained-tps'),
    ];
    return {
      paragraphs: [
        `The same model with ${la} weights (${bits(a)} bits a parameter), then ${lb} (4-bit weights with one f16 scale per group of 32: ${bits(b)} bits). ` +
          'Activations stay 16-bit (w4a16): they are small and sensitive to error, the weights are most of the bytes.',
        `Weights: ${wa.text} → ${wb.text}, ${ratio(a?.memory?.weights_bytes, b?.memory?.weights_bytes)} fewer bytes per token. ` +
          `Decode: ${da.text} → ${db.text} (${ratio(b?.latency?.decode_tok_s, a?.latency?.decode_tok_s)}), as the bandwidth ceiling moves from ` +
          `${fmt(ba?.tok_s)} to ${fmt(bb?.tok_s)} tok/s. Sustained verdict: ${a?.verdict?.sustained ?? PLACEHOLDER} → ${b?.verdict?.sustained ?? PLACEHOLDER}.`,
        `The panel now shows ${lb}. Symmetric int4 groups are what phone NPUs run natively; quantize after pruning, on realistic prompts.`,
      ],
      groups: [
        { title: la, items: item(a, ba, la) },
        { title: lb, items: item(b, bb, lb) },
      ],
    };
  },

  'kv-cache'(rs, _snaps, step) {
    const labels = step.runs.map((x) => x.label);
    const ctx = rs.find((r) => r)?.deployment?.context;
    const kv = rs.map((r) => cell(r, 'est-kv-bytes'));
    const per = rs.map((r) => cell(r, 'est-kv-per-token'));
    const tot = rs.map((r) => cell(r, 'est-total-bytes'));
    const dec = rs.map((r) => cell(r, 'est-decode-tps'));
    const ofWeights = (r) => (fin(r?.memory?.kv_bytes) && fin(r?.memory?.weights_bytes) && r.memory.weights_bytes > 0
      ? fmt((r.memory.kv_bytes / r.memory.weights_bytes) * 100, 0) : PLACEHOLDER);
    const arrow = (xs, f) => xs.map((x, i) => `${labels[i]} ${f(x)}`).join(' → ');
    return {
      paragraphs: [
        `A long conversation: a context of ${ctx ?? PLACEHOLDER} tokens. The KV cache keeps K and V of every layer for every token: ` +
          `in ${labels[0]} ${per[0].text} per token, ${kv[0].text} for the full context, ${ofWeights(rs[0])}% of the weights.`,
        `Smaller elements: ${labels.slice(1).map((l, i) => `${l} ${per[i + 1].text} per token, ${kv[i + 1].text} in all`).join('; ')}. ` +
          'The hybrid idea: K tolerates int8 (softmax smooths its errors), V errors go straight to the output.',
        `Total memory: ${arrow(tot, (c) => c.text)}. Decode, which reads the cache every token: ${arrow(dec, (c) => c.value)} tok/s.`,
        'The cache grows linearly with context and across turns of a chat, so long contexts run out of memory even where the weights fit. ' +
          'The memory bar (outlined) shows the cache next to the weights.',
      ],
      groups: rs.map((r, i) => ({ title: `KV ${labels[i]}`, items: [per[i], kv[i], tot[i], dec[i]] })),
    };
  },

  pruning([a, b], snaps, step) {
    const level = Number(step.runs[1].set.prune);
    const pct = Number.isFinite(level) ? `${Math.round(level * 100)}%` : PLACEHOLDER;
    const pa = cell(a, 'est-params');
    const pb = cell(b, 'est-params');
    const wa = cell(a, 'est-weights-bytes');
    const wb = cell(b, 'est-weights-bytes');
    const ka = cell(a, 'est-kv-per-token');
    const kb = cell(b, 'est-kv-per-token');
    const da = cell(a, 'est-decode-tps');
    const db = cell(b, 'est-decode-tps');
    const ta = cell(a, 'est-ttft-ms');
    const tb = cell(b, 'est-ttft-ms');
    const p = (r) => r?.model?.params?.total;
    return {
      paragraphs: [
        'Structured pruning removes whole units, so the matrices stay dense and every device runs them faster (unstructured zeros only shrink the file). ' +
          `TransAct-style, each layer keeps its depth, heads and hidden size and loses ${pct} of its MLP channels and of each head’s Q/K and V dimensions.`,
        `Parameters: ${pa.text} → ${pb.text} (${change(p(a), p(b))}; the embedding is not pruned). Weights: ${wa.text} → ${wb.text}. ` +
          `KV per token: ${ka.text} → ${kb.text} (${change(a?.memory?.kv_bytes_per_token, b?.memory?.kv_bytes_per_token)}).`,
        `Speed: decode ${da.text} → ${db.text}; time to first token ${ta.text} → ${tb.text}.`,
        'The estimate assumes the pruned model still works; without retraining it loses accuracy (the Pruning panel on the right measures perplexity).',
      ],
      groups: [
        { title: step.runs[0].label, items: [pa, wa, ka, da, ta] },
        { title: step.runs[1].label, items: [pb, wb, kb, db, tb] },
      ],
    };
  },

  heat([a, b], snaps, step) {
    const [la, lb] = step.runs.map((x) => x.label);
    const minutes = (r) => (fin(r?.thermal?.duration_s) ? fmt(r.thermal.duration_s / 60, 0) : PLACEHOLDER);
    const sa = cell(a, 'est-sustained-tps');
    const sb = cell(b, 'est-sustained-tps');
    const ra = cell(a, 'est-temp-rise');
    const rb = cell(b, 'est-temp-rise');
    const ha = cell(a, 'est-throttle-s');
    const hb = cell(b, 'est-throttle-s');
    const dep = b?.deployment ?? {};
    const sus = (r) => r?.thermal?.sustained_tok_s;
    const cmp = fin(sus(a)) && fin(sus(b))
      ? (sus(b) >= sus(a) ? `higher sustained speed here (${change(sus(a), sus(b))})` : `a lower sustained speed here (${change(sus(a), sus(b))}) for a cooler phone`)
      : `a sustained speed of ${PLACEHOLDER}`;
    return {
      paragraphs: [
        'A phone has no fan and a power wall of about 7 W. The thermal model heats the die and the body while the model generates; ' +
          'when the die reaches its trip point the governor lowers the clock, and tokens/s drop.',
        `With the ${la} policy, for ${minutes(a)} minutes: decode starts at ${fmt(a?.thermal?.initial_tok_s)} tok/s, ${throttleText(a)}, ` +
          `sustains ${sa.text}; the body warms by ${ra.text}.`,
        `With the ${lb} policy (work in chunks of ${fmt(dep.pacing_work_ms, 0)} ms with ${fmt(dep.pacing_idle_ms, 0)} ms idle between): decode starts at ` +
          `${fmt(b?.thermal?.initial_tok_s)} tok/s, ${throttleText(b)}, sustains ${sb.text}; the body warms by ${rb.text}.`,
        `Pacing gives ${cmp}. The thermal chart (outlined) shows the ${lb} run: die and body °C and tok/s over time.`,
      ],
      groups: [
        { title: la, items: [sa, ra, ha] },
        { title: lb, items: [sb, rb, hb] },
      ],
    };
  },

  'what-fits'([r], [snap]) {
    const { model, device } = name(snap);
    const v = (k) => r?.verdict?.[k] ?? PLACEHOLDER;
    const total = cell(r, 'est-total-bytes');
    const ttft = cell(r, 'est-ttft-ms');
    const sus = cell(r, 'est-sustained-tps');
    const rise = cell(r, 'est-temp-rise');
    return {
      paragraphs: [
        `Back to ${model} on the ${device} with ${r?.deployment?.weights ?? PLACEHOLDER} weights: ` +
          `memory ${total.text} (${v('memory')}), time to first token ${ttft.text} (${v('ttft')}), ` +
          `sustained ${sus.text} (${v('sustained')}), temperature rise ${rise.text} (${v('temperature')}).`,
        '“What fits on this device?” (outlined, above) searches every model × weight format × KV format × pruning level × context ' +
          'with this estimator and keeps what passes all four; opening one of its rows shows it here.',
        'Closing the tour puts your own settings back.',
      ],
      groups: [{ title: 'The golden four', items: [total, ttft, sus, rise] }],
    };
  },
};
