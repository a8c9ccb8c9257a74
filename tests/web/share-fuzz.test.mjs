// Fuzz test for web/share.js's link parser (pure: no DOM, no wasm). Run: node --test tests/web/
//
// A seeded PRNG mutates valid links (random characters and bytes, huge and odd numbers,
// percent-encoding good and bad, prototype keys such as __proto__ and constructor, very long
// strings, repeated keys, truncation, splices of two links) for a fixed number of iterations.
// Every result must be either {scenario} — only known sections and fields, each value one its
// field's parser accepts, and re-encoding it gives a link that decodes to the same scenario — or
// {error} with a one-line sentence; decodeScenario must never throw, never take long on one
// link, and never touch Object.prototype. A failure names the seed, the iteration and the link.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../../web/share.js';

const SEED = Number(process.env.EDGEFIT_SHARE_FUZZ_SEED ?? 20261130);
const ITERATIONS = Number(process.env.EDGEFIT_SHARE_FUZZ_ITERATIONS ?? 10000);
/** One decode must take less than this (ms): a regular expression that backtracks
 * catastrophically on a crafted value would blow it by orders of magnitude. */
const SLOW_MS = 250;

/** mulberry32: a small seeded PRNG, enough to make the mutations reproducible. */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (list) => list[int(list.length)];
  return { next, int, pick };
}

const BASES = [
  {
    estimate: {
      device: 'snapdragon-8-gen3', model: 'llama-3.2-1b', weights: 'q4_k', kv: 'int4g32', context: 8192,
      prompt_tokens: 512, gen_tokens: 256, unit: 'gpu', policy: 'paced', minutes: 7.5, prune: 0.25,
    },
    engine: { weights: 'q8_0', kv: 'f16' },
    generation: { prompt: 'Say <b>hi</b> & "x" = 100% ✓ 東京 🚀\nline\t#a=1&b', chat: true, keep: false, maxTokens: 64, temperature: 0.7, topP: 0.95, seed: 4294967295 },
    pruning: { mlp: 0.3, heads: 0.25, qk: 0.5, v: 0, layers: 3, method: 'magnitude', allocation: 'global' },
    loaded: { name: 'my model (v2) #1 & co.gguf', arch: 'llama', params: 134515008, layers: 30, hidden: 576, heads: 9, kv_heads: 3, head_dim: 64, ffn: 1536, vocab: 49152, context: 8192 },
    config: { name: 'config-qwen.json' },
  },
  { estimate: { device: 'apple-m2', model: '@loaded' }, loaded: { name: 'x.gguf' } },
  { generation: { prompt: 'hello', maxTokens: 8 } },
  { estimate: { model: '@config', context: 1 }, config: { name: 'config.json' } },
].map((s) => S.encodeScenario(s));

const KEYS = S.FIELDS.map((f) => f[0]);
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', 'valueOf', '__defineGetter__', 'isPrototypeOf'];
const ODD_NUMBERS = [
  '0', '-0', '-1', '1e308', '1e309', '1e-400', '9'.repeat(17), '9007199254740993', '4294967296', 'NaN', 'Infinity',
  '-Infinity', '0x10', '0b1', '1_000', '1.', '.5', '1e', '1e+5', '0.1e1', ' 1', '1 ', '1.0000000000000000000001',
  `1${'0'.repeat(400)}`, '1'.repeat(5000),
];
const ODD_TEXT = [
  '%', '%2', '%zz', '%E0%80', '%C0%AF', '%ED%A0%80', '%00', '%0A', '%25', '%2525', '%26', '%3D', '%23', '&', '=', '#',
  '\u0000', '\u001f', '\u007f', '\u2028', '\ud800', '\udfff', '😀', '<script>alert(1)</script>', '${1}', '`', '"', "'",
  '\\', '/', '?', '+', ' ', 'javascript:alert(1)',
];

/** Characters for random runs: printable ASCII, link syntax, %, controls, lone surrogates, astral. */
function randomChar(r) {
  switch (r.int(6)) {
    case 0: return String.fromCharCode(32 + r.int(95));
    case 1: return r.pick(['&', '=', '%', '#', '+']);
    case 2: return String.fromCharCode(r.int(32));
    case 3: return String.fromCharCode(0xd800 + r.int(0x800));
    case 4: return String.fromCodePoint(0x80 + r.int(0x10ff80 - 0x80) & 0x10ffff);
    default: return `%${r.int(256).toString(16).padStart(2, '0')}`;
  }
}

function randomRun(r, n) {
  let s = '';
  for (let i = 0; i < n; i++) s += randomChar(r);
  return s;
}

/** encodeURIComponent, with lone surrogates (which it refuses) written as %-escaped UTF-16. */
function encodeLoose(s) {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...s].map((c) => {
      try {
        return encodeURIComponent(c);
      } catch {
        return `%${c.charCodeAt(0).toString(16)}`;
      }
    }).join('');
  }
}

const parts = (link) => link.replace(/^#/, '').split('&');
const join = (ps, hash) => `${hash ? '#' : ''}${ps.join('&')}`;

/** One mutation of `link`. */
function mutate(r, link) {
  const ps = parts(link);
  const i = r.int(ps.length);
  const key = (p) => p.slice(0, Math.max(0, p.indexOf('=')));
  switch (r.int(14)) {
    case 0: { // random characters at a random place
      const at = r.int(link.length + 1);
      return link.slice(0, at) + randomRun(r, 1 + r.int(8)) + link.slice(at);
    }
    case 1: { // overwrite characters
      const at = r.int(link.length + 1);
      const n = 1 + r.int(4);
      return link.slice(0, at) + randomRun(r, n) + link.slice(at + n);
    }
    case 2: // a field's value becomes an odd number
      ps[i] = `${key(ps[i]) || r.pick(KEYS)}=${r.pick(ODD_NUMBERS)}`;
      return join(ps, true);
    case 3: // a field's value becomes odd text (raw: bad percent-encoding included)
      ps[i] = `${key(ps[i]) || r.pick(KEYS)}=${r.pick(ODD_TEXT)}${r.next() < 0.5 ? r.pick(ODD_TEXT) : ''}`;
      return join(ps, true);
    case 4: // a prototype key, with or without a value
      ps.splice(r.int(ps.length + 1), 0, `${r.pick(PROTO_KEYS)}${r.next() < 0.8 ? `=${r.pick(['1', '{}', 'x', '', '%7B%7D'])}` : ''}`);
      return join(ps, true);
    case 5: { // a prototype key encoded, or as a value
      const k = r.pick(PROTO_KEYS);
      ps.splice(r.int(ps.length + 1), 0, r.next() < 0.5 ? `${encodeLoose(k).replace(/_/g, '%5F')}=1` : `${r.pick(KEYS)}=${k}`);
      return join(ps, true);
    }
    case 6: { // a very long value (around the length cap)
      const n = r.pick([1000, 4001, 20000, S.MAX_FRAGMENT_CHARS - link.length, S.MAX_FRAGMENT_CHARS + 1, 200000]);
      const ch = r.pick(['a', '9', '%F0%9F%98%80', '😀', '&', '%']);
      ps[i] = `${key(ps[i]) || 'prompt'}=${ch.repeat(Math.max(1, Math.floor(n / ch.length)))}`;
      return join(ps, true);
    }
    case 7: // a repeated key
      ps.splice(r.int(ps.length + 1), 0, ps[i]);
      return join(ps, true);
    case 8: // truncated
      return link.slice(0, r.int(link.length + 1));
    case 9: // percent-encode (again) a whole part or the whole link
      if (r.next() < 0.5) ps[i] = encodeLoose(ps[i]);
      else return encodeLoose(link);
      return join(ps, true);
    case 10: // values swapped between two keys
    {
      const j = r.int(ps.length);
      const [a, b] = [ps[i].indexOf('='), ps[j].indexOf('=')];
      if (a < 0 || b < 0) return link;
      const va = ps[i].slice(a + 1);
      ps[i] = ps[i].slice(0, a + 1) + ps[j].slice(b + 1);
      ps[j] = ps[j].slice(0, b + 1) + va;
      return join(ps, true);
    }
    case 11: // parts dropped, emptied or doubled separators
      if (r.next() < 0.5) ps.splice(i, 1 + r.int(3));
      else ps.splice(i, 0, '');
      return join(ps, r.next() < 0.9);
    case 12: // two links spliced
    {
      const other = r.pick(BASES);
      return link.slice(0, r.int(link.length + 1)) + other.slice(r.int(other.length + 1));
    }
    default: // the version changed
      ps[0] = r.pick(['v=2', 'v=0', 'v=1.0', 'v=01', 'v=', 'v', 'V=1', 'v=1%00', 'v=%31']);
      return join(ps, true);
  }
}

const SECTION_OF = new Map(S.FIELDS.map(([key, sec, prop, parser]) => [`${sec}.${prop}`, { key, parser }]));

/** Raw link text of a decoded value, as the encoder writes it. */
function rawOf(v) {
  if (typeof v === 'boolean') return v ? '1' : '0';
  return String(v);
}

function checkScenario(scenario, where) {
  assert.equal(Object.getPrototypeOf(scenario), Object.prototype, `${where}: a plain object`);
  for (const sec of Object.keys(scenario)) {
    assert.ok(S.SECTIONS.includes(sec), `${where}: unknown section ${sec}`);
    for (const prop of Object.keys(scenario[sec])) {
      const f = SECTION_OF.get(`${sec}.${prop}`);
      assert.ok(f, `${where}: unknown field ${sec}.${prop}`);
      const v = scenario[sec][prop];
      assert.ok(['string', 'number', 'boolean'].includes(typeof v), `${where}: ${f.key} is a ${typeof v}`);
      if (typeof v === 'number') assert.ok(Number.isFinite(v), `${where}: ${f.key} = ${v}`);
      assert.ok(f.parser.parse(rawOf(v)), `${where}: ${f.key} = ${JSON.stringify(v)} is not a value its parser accepts`);
    }
  }
  // What was read is what a page could write: it re-encodes, and reads back the same.
  let again;
  try {
    again = S.encodeScenario(scenario);
  } catch (e) {
    assert.fail(`${where}: a decoded scenario does not re-encode: ${e.message}`);
  }
  assert.deepEqual(S.decodeScenario(again), { scenario }, `${where}: decode(encode(scenario)) differs`);
}

test('share links: mutated links give a valid scenario or a clear error, never a throw or a hang', () => {
  const r = rng(SEED);
  const protoKeys = Object.getOwnPropertyNames(Object.prototype).sort();
  const counts = { scenario: 0, error: 0 };
  const errors = new Map();
  let slowest = 0;
  let longest = 0;
  let link = r.pick(BASES);
  for (let it = 0; it < ITERATIONS; it++) {
    // Mostly stack mutations on the previous link (deep damage), sometimes start again.
    if (r.next() < 0.5) link = r.pick(BASES);
    const n = 1 + r.int(2);
    for (let k = 0; k < n; k++) link = mutate(r, link);
    if (link.length > 4 * S.MAX_FRAGMENT_CHARS) link = link.slice(0, 4 * S.MAX_FRAGMENT_CHARS);
    longest = Math.max(longest, link.length);
    const where = `seed ${SEED}, iteration ${it}, link ${JSON.stringify(link.slice(0, 300))}${link.length > 300 ? `… (${link.length} chars)` : ''}`;
    const t0 = performance.now();
    let result;
    try {
      result = S.decodeScenario(link);
      S.hasScenario(link);
    } catch (e) {
      assert.fail(`${where}: decodeScenario threw ${e && e.stack}`);
    }
    const ms = performance.now() - t0;
    slowest = Math.max(slowest, ms);
    assert.ok(ms < SLOW_MS, `${where}: one decode took ${ms.toFixed(1)} ms`);
    assert.ok(result && typeof result === 'object', `${where}: no result object`);
    const keys = Object.keys(result);
    assert.equal(keys.length, 1, `${where}: result has ${keys.join(', ')}`);
    if (keys[0] === 'error') {
      const e = result.error;
      assert.equal(typeof e, 'string', where);
      assert.ok(e.length > 0 && e.length <= 400, `${where}: error of ${e.length} characters`);
      assert.ok(!/[\n\r]/.test(e), `${where}: error is not one line: ${e}`);
      counts.error += 1;
      const kind = e.replace(/".*$/s, '').replace(/\d+/g, 'N').slice(0, 50);
      errors.set(kind, (errors.get(kind) ?? 0) + 1);
    } else {
      assert.equal(keys[0], 'scenario', where);
      checkScenario(result.scenario, where);
      counts.scenario += 1;
    }
    if (it % 500 === 0) {
      assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), protoKeys, `${where}: Object.prototype changed`);
      assert.equal({}.polluted, undefined);
    }
  }
  assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), protoKeys, 'Object.prototype changed');
  // The mutations must reach both outcomes, or this test checks only one path.
  assert.ok(counts.scenario > ITERATIONS / 50, `only ${counts.scenario} valid scenarios: the mutations are too destructive`);
  assert.ok(counts.error > ITERATIONS / 2, `only ${counts.error} errors: the mutations are too mild`);
  console.log(
    `share-fuzz: ${ITERATIONS} iterations (seed ${SEED}): ${counts.scenario} valid scenarios, ${counts.error} clear errors `
    + `(${errors.size} kinds), 0 throws; slowest decode ${slowest.toFixed(1)} ms, longest link ${longest} characters`,
  );
});

// Regression (found by the test above): a raw lone surrogate in a text field passed through
// decodeURIComponent and the text check, so the link decoded, but the page could not write it
// again (encodeURIComponent throws URIError on a lone surrogate).
test('share links: a lone surrogate in a prompt or file name is refused, not decoded into an unshareable scenario', () => {
  for (const [key, raw] of [['prompt', 'a\ud800b'], ['prompt', '\udc00'], ['loaded_file', 'x\udbff.gguf'], ['config_file', '\udfffc.json']]) {
    const r = S.decodeScenario(`#v=1&${key}=${raw}`);
    assert.equal(r.scenario, undefined, `${key} with a lone surrogate must be refused`);
    assert.match(r.error, new RegExp(`the link's ${key} must be`));
  }
  // A proper pair (an astral character) is still fine, raw or percent-encoded.
  for (const raw of ['\ud83d\ude00', '%F0%9F%98%80']) {
    const r = S.decodeScenario(`#v=1&prompt=${raw}`);
    assert.equal(r.error, undefined, r.error);
    assert.equal(r.scenario.generation.prompt, '😀');
    assert.equal(S.decodeScenario(S.encodeScenario(r.scenario)).scenario.generation.prompt, '😀');
  }
});
