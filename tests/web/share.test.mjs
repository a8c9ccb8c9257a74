// Unit tests for web/share.js (pure: no DOM, no wasm). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../../web/share.js';

const full = () => ({
  estimate: {
    device: 'snapdragon-8-gen3',
    model: 'llama-3.2-1b',
    weights: 'q4_k',
    compute: 'f16',
    kv: 'int4g32',
    context: 8192,
    prompt_tokens: 512,
    gen_tokens: 256,
    unit: 'gpu',
    policy: 'paced',
    minutes: 7.5,
    prune: 0.25,
    runtime: 'mlc',
    threads: 6,
  },
  engine: { weights: 'q8_0', kv: 'f16', threads: 2 },
  generation: {
    prompt: 'Say <b>markup</b> & "quotes" = 100% ✓ — Grüße, 東京, 🚀\nsecond line\t#x=1&y',
    chat: true,
    keep: false,
    maxTokens: 64,
    temperature: 0.7,
    topP: 0.95,
    seed: 4294967295,
  },
  pruning: { mlp: 0.3, heads: 0.25, qk: 0.5, v: 0, layers: 3, method: 'magnitude', allocation: 'global' },
  loaded: {
    name: 'my model (v2) #1 & co.gguf',
    arch: 'llama',
    params: 134515008,
    layers: 30,
    hidden: 576,
    heads: 9,
    kv_heads: 3,
    head_dim: 64,
    ffn: 1536,
    vocab: 49152,
    context: 8192,
  },
  config: { name: 'config-qwen.json' },
});

const decodeOk = (f) => {
  const r = S.decodeScenario(f);
  assert.equal(r.error, undefined, `decoding ${f.slice(0, 200)}: ${r.error}`);
  return r.scenario;
};

/** The error for a full link with `key`'s value replaced by the raw (already encoded) `raw`. */
function errorWith(key, raw) {
  const f = S.encodeScenario(full());
  const re = new RegExp(`([#&])${key}=[^&]*`);
  assert.match(f, re, `${key} is in the link`);
  const bad = f.replace(re, `$1${key}=${raw}`);
  const r = S.decodeScenario(bad);
  assert.equal(r.scenario, undefined, `${key}=${raw} must be refused`);
  return r.error;
}

test('round trip: every field comes back equal, in types', () => {
  const f = S.encodeScenario(full());
  assert.ok(f.startsWith('#v=1&'), f);
  assert.deepEqual(decodeOk(f), full());
  // Without the leading '#', too.
  assert.deepEqual(decodeOk(f.slice(1)), full());
  // Encoding the decoded scenario gives the same link (one canonical form).
  assert.equal(S.encodeScenario(decodeOk(f)), f);
});

test('the link is readable key=value and carries the table in order', () => {
  const f = S.encodeScenario(full());
  const keys = f.slice(1).split('&').map((p) => p.split('=')[0]);
  assert.equal(keys[0], 'v');
  const order = S.FIELDS.map((x) => x[0]);
  assert.deepEqual(keys.slice(1), order.filter((k) => keys.includes(k)));
  assert.match(f, /&device=snapdragon-8-gen3&model=llama-3\.2-1b&weights=q4_k&compute=f16&kv=int4g32&context=8192&/);
  // The prompt's '&', '=', '#' and markup are encoded, so they cannot end or fake a field.
  const prompt = f.match(/&prompt=([^&]*)/)[1];
  assert.doesNotMatch(prompt, /[<>#=&\s]/);
});

test('a partial scenario round-trips with only its sections', () => {
  const s = { estimate: { device: 'raspberry-pi-5', context: 1, unit: '' }, generation: { prompt: '' } };
  const back = decodeOk(S.encodeScenario(s));
  assert.deepEqual(back, s);
  assert.deepEqual(decodeOk('#v=1'), {});
});

test('numbers from the page inputs (strings) encode like numbers', () => {
  const s = { estimate: { context: '4096', minutes: '15', prune: '0.1' }, generation: { temperature: '0', topP: '1' } };
  assert.deepEqual(decodeOk(S.encodeScenario(s)), {
    estimate: { context: 4096, minutes: 15, prune: 0.1 },
    generation: { temperature: 0, topP: 1 },
  });
  // Float noise and tiny values stay plain decimals that read back.
  const t = { generation: { temperature: 0.1 + 0.2, topP: 1e-7 } };
  assert.deepEqual(decodeOk(S.encodeScenario(t)), t);
});

test('every field: a bad value is refused with the field and the value named', () => {
  const bad = {
    device: ['Snapdragon', 'a b', '', '../etc', 'x'.repeat(65)],
    model: ['@evil', 'Llama', ''],
    weights: ['iq4_xs', 'W4G32', ''],
    compute: ['fp16', 'F16', 'int4'],
    kv: ['int3', ''],
    context: ['0', '2097153', '-1', '1.5', '1e3', '0x10', ' 2048', ''],
    prompt_tokens: ['-1', '2097153', 'x'],
    gen_tokens: ['-5', 'NaN'],
    unit: ['tpu', 'CPU'],
    policy: ['fast'],
    minutes: ['0', '0.05', '1441', 'Infinity', '-3', 'abc'],
    prune: ['0.95', '-0.1', '1'],
    runtime: ['tvm', 'LLAMACPP', 'llama.cpp'],
    threads: ['0', '257', '1.5', '-2', 'four'],
    engine_weights: ['bf16', 'q4_k'],
    engine_kv: ['f64'],
    engine_threads: ['0', '257', '2.5', 'two', '-1'],
    chat: ['true', '2', ''],
    keep: ['yes'],
    max_tokens: ['0', '4097', '3.5'],
    temperature: ['5.5', '-1'],
    top_p: ['0', '1.01'],
    seed: ['4294967296', '-1', '1.5'],
    prune_mlp: ['0.91', 'half'],
    prune_heads: ['2'],
    prune_qk: ['-0'],
    prune_v: ['0.9000001'],
    prune_layers: ['1025', '-1', '2.5'],
    prune_method: ['random'],
    prune_allocation: ['local'],
    loaded_file: ['a%0Ab', 'x'.repeat(201)],
    loaded_arch: ['Llama'],
    loaded_params: ['-1', '1e6'],
    loaded_layers: ['0', '4097'],
    loaded_hidden: ['0'],
    loaded_heads: ['x'],
    loaded_kv_heads: ['0'],
    loaded_head_dim: ['0'],
    loaded_ffn: ['0'],
    loaded_vocab: ['0'],
    loaded_context: ['0'],
    config_file: ['%07bell'],
  };
  // Every field in the table has cases here.
  assert.deepEqual(Object.keys(bad).sort(), S.FIELDS.map((f) => f[0]).filter((k) => k !== 'prompt').sort());
  for (const [key, values] of Object.entries(bad)) {
    for (const raw of values) {
      const err = errorWith(key, raw);
      assert.ok(err.includes(key), `the error names ${key}: ${err}`);
      const shown = decodeURIComponent(raw);
      assert.ok(err.includes(JSON.stringify(shown.length > 60 ? `${shown.slice(0, 60)}…` : shown)), `the error shows the value ${raw}: ${err}`);
    }
  }
});

test('prompt text: up to 4000 characters (code points), no control characters', () => {
  const max = '東'.repeat(S.MAX_PROMPT_CHARS);
  assert.equal(decodeOk(S.encodeScenario({ generation: { prompt: max } })).generation.prompt, max);
  const astral = '🚀'.repeat(S.MAX_PROMPT_CHARS); // 8000 UTF-16 units, 4000 characters
  assert.equal(decodeOk(S.encodeScenario({ generation: { prompt: astral } })).generation.prompt, astral);
  const err = errorWith('prompt', encodeURIComponent('a'.repeat(S.MAX_PROMPT_CHARS + 1)));
  assert.match(err, /prompt must be text without control characters of at most 4000 characters, got "a{60}…"/);
  assert.match(errorWith('prompt', 'a%00b'), /prompt/);
  assert.match(errorWith('prompt', 'a%1Bb'), /prompt/);
  assert.throws(() => S.encodeScenario({ generation: { prompt: 'x'.repeat(4001) } }), /prompt/);
});

test('the longest valid scenario fits the length cap', () => {
  const s = full();
  s.generation.prompt = '🚀'.repeat(S.MAX_PROMPT_CHARS); // 4 UTF-8 bytes: 12 characters each
  s.loaded.name = '🚀'.repeat(S.MAX_NAME_CHARS);
  s.config.name = '🚀'.repeat(S.MAX_NAME_CHARS);
  const f = S.encodeScenario(s);
  assert.ok(f.length <= S.MAX_FRAGMENT_CHARS, `${f.length}`);
  assert.deepEqual(decodeOk(f), s);
});

test('oversized, empty, truncated and garbage fragments give a clear error', () => {
  const cases = [
    [`#v=1&prompt=${'a'.repeat(S.MAX_FRAGMENT_CHARS)}`, /too long: \d+ characters after #, at most 65536/],
    ['#', /no scenario/],
    ['', /no scenario/],
    [null, /no scenario/],
    ['#garbage', /"garbage" is not key=value/],
    ['#v=1&devi', /"devi" is not key=value/],
    ['#v=1&prompt=%E2%9C', /prompt has a bad percent-encoding "%E2%9C"/],
    ['#v=1&prompt=%', /bad percent-encoding/],
    ['#%%%%', /not key=value/],
    ['#device=pixel-8', /no version/],
    ['#v=1&context=20&context=30', /repeats the field context/],
    ['#v=1&&context=2', /"" is not key=value/],
    ['#v=1&loaded_layers=30', /loaded model without its file name \(loaded_file\)/],
    ['#v=1&config_file=', /config_file/], // an empty name is fine as text, but…
  ];
  for (const [f, re] of cases.slice(0, -1)) {
    const r = S.decodeScenario(f);
    assert.equal(r.scenario, undefined, `refused: ${f && f.slice(0, 40)}`);
    assert.match(r.error, re, String(f).slice(0, 40));
  }
  // An empty config file name reads (it is text), and a truncated full link still reads or fails
  // with an error, never throws.
  assert.deepEqual(decodeOk('#v=1&config_file='), { config: { name: '' } });
  const f = S.encodeScenario(full());
  for (let n = 0; n <= f.length; n += 7) {
    const r = S.decodeScenario(f.slice(0, n));
    assert.ok(('scenario' in r) !== ('error' in r), `cut at ${n}: one of scenario / error`);
  }
});

test('unknown version and unknown fields are refused', () => {
  assert.match(S.decodeScenario('#v=2&context=2').error, /version "2" is not one this page reads \(it reads v=1\)/);
  assert.match(S.decodeScenario('#v=01').error, /version "01"/);
  assert.match(S.decodeScenario('#v=1&colour=red').error, /unknown field "colour"/);
  assert.match(S.decodeScenario('#v=1&Device=pixel').error, /unknown field "Device"/);
});

test('prototype keys are refused and pollute nothing', () => {
  for (const key of ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', '__proto__%5Bx%5D']) {
    const r = S.decodeScenario(`#v=1&${key}=1&context=2`);
    assert.equal(r.scenario, undefined, key);
    assert.match(r.error, /unknown field/, key);
  }
  assert.equal({}.x, undefined);
  assert.equal(Object.prototype.polluted, undefined);
  // Values that look like prototype names are just (invalid or valid) values.
  assert.match(S.decodeScenario('#v=1&device=__proto__').error, /device must be a short id/);
  const r = decodeOk('#v=1&loaded_file=__proto__');
  assert.equal(Object.getPrototypeOf(r.loaded), Object.prototype);
  assert.equal(r.loaded.name, '__proto__');
  // The encoder refuses unknown sections and properties (also __proto__ as an own key).
  assert.throws(() => S.encodeScenario({ estimate: { colour: 'red' } }), /scenario\.estimate\.colour is not a shareable setting/);
  assert.throws(() => S.encodeScenario({ extra: {} }), /scenario\.extra is not a shareable section/);
  assert.throws(() => S.encodeScenario(JSON.parse('{"__proto__": {"x": 1}}')), /__proto__/);
  assert.throws(() => S.encodeScenario({ estimate: JSON.parse('{"__proto__": "x"}') }), /__proto__/);
});

test('the encoder refuses what the decoder would refuse, naming it', () => {
  assert.throws(() => S.encodeScenario({ estimate: { context: '0' } }), /context "0": it must be a whole number from 1 to 2097152/);
  assert.throws(() => S.encodeScenario({ estimate: { context: '' } }), /context ""/);
  assert.throws(() => S.encodeScenario({ estimate: { device: 'Pixel 8' } }), /device "Pixel 8"/);
  assert.throws(() => S.encodeScenario({ generation: { topP: 0 } }), /top_p "0"/);
  assert.throws(() => S.encodeScenario('x'), /must be an object/);
  // Absent values are left out.
  assert.equal(S.encodeScenario({ estimate: { device: undefined, model: null } }), '#v=1');
});

test('the source never evaluates code', async () => {
  const { readFile } = await import('node:fs/promises');
  const src = await readFile(new URL('../../web/share.js', import.meta.url), 'utf8');
  const code = src.replace(/\/\/.*$/gm, '');
  assert.doesNotMatch(code, /\beval\s*\(|new\s+Function|\bFunction\s*\(|JSON\.parse/);
});

test('loaded section and its description', () => {
  const info = { arch: 'llama', params: 134515008, n_layers: 30, hidden: 576, n_heads: 9, n_kv_heads: 3, head_dim: 64, ffn: 1536, vocab: 49152, context_length: 8192, name: 'ignored' };
  const l = S.loadedSection('smollm2.gguf', info);
  assert.deepEqual(l, { name: 'smollm2.gguf', arch: 'llama', params: 134515008, layers: 30, hidden: 576, heads: 9, kv_heads: 3, head_dim: 64, ffn: 1536, vocab: 49152, context: 8192 });
  assert.deepEqual(decodeOk(S.encodeScenario({ loaded: l })).loaded, l);
  assert.equal(S.describeLoaded(l), 'smollm2.gguf (llama, 135 M parameters, 30 layers, hidden 576, 9 heads (3 KV), head dim 64, FFN 1536, vocabulary 49152, context 8192)');
  // Out-of-range shape values are left out rather than making the link unshareable.
  assert.deepEqual(S.loadedSection('x.gguf', { arch: 'Weird Arch', n_layers: 0 }), { name: 'x.gguf' });
  assert.equal(S.loadedSection('a'.repeat(300), null).name.length, S.MAX_NAME_CHARS);
});

test('hasScenario', () => {
  assert.equal(S.hasScenario(''), false);
  assert.equal(S.hasScenario('#'), false);
  assert.equal(S.hasScenario('#v=1'), true);
  assert.equal(S.hasScenario(undefined), false);
});

test('decodeScenarioParts keeps the good fields and lists every bad one', () => {
  const r = S.decodeScenarioParts('#v=1&context=4096&device=Bad%20Name&colour=red&context=5&threads=999&loaded_arch=llama');
  assert.deepEqual(r.scenario, { estimate: { context: 4096 } });
  assert.deepEqual(r.errors, [
    'the link has an unknown field "colour"',
    'the link repeats the field context',
    'the link\'s device must be a short id of a-z, 0-9, "." and "-", got "Bad Name"',
    'the link\'s threads must be a whole number from 1 to 256, or empty for the default, got "999"',
    'the link describes a loaded model without its file name (loaded_file)',
  ]);
  assert.match(S.decodeScenarioParts('#v=2&context=1').error, /version "2"/);
  assert.equal(S.decodeScenario('#v=1&context=4096&colour=red').error, 'the link has an unknown field "colour"', 'the strict reading still names the first');
});
