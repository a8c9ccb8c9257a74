// The built wasm's checkGgufHeader (edgefit_engine::gguf::check_header) on the default model's
// first bytes: ok from a prefix holding the header, "need_more" from a shorter one, refused for
// an unsupported architecture or a file that is not GGUF, before the rest of the file is read.
// Needs the built site and the model ($EDGEFIT_SITE_DIR, as formats.test.mjs); skipped with a
// note without them when run by hand, a failure under `cargo xtask test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, openSync, readSync, closeSync, statSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const SITE = process.env.EDGEFIT_SITE_DIR || path.join(process.env.EDGEFIT_BUILD_DIR || 'build', 'site');
const JS = path.resolve(SITE, 'pkg/edgefit_wasm.js');
const WASM = path.resolve(SITE, 'pkg/edgefit_wasm_bg.wasm');
const MODEL = path.resolve(SITE, 'models/smollm2-135m-instruct-q4_1.gguf');
const built = existsSync(JS) && existsSync(WASM) && existsSync(MODEL);
const skip = !built && !process.env.EDGEFIT_URL ? `no built site with the model at ${SITE}` : false;

function head(n) {
  const fd = openSync(MODEL, 'r');
  const buf = Buffer.alloc(n);
  readSync(fd, buf, 0, n, 0);
  closeSync(fd);
  return buf;
}

test('checkGgufHeader: ok, need_more, refused, from the first bytes only', { skip }, async () => {
  assert.ok(built, `the built site or the model is missing at ${SITE}`);
  const mod = await import(pathToFileURL(JS).href);
  mod.initSync({ module: readFileSync(WASM) });
  const size = statSync(MODEL).size;
  const check = (bytes, len = size) => mod.checkGgufHeader(new Uint8Array(bytes), len);
  const ok = check(head(8 << 20));
  assert.equal(ok.status, 'ok', JSON.stringify(ok));
  assert.equal(ok.arch, 'llama');
  assert.ok(ok.tensors > 100);
  assert.deepEqual(check(head(1024)), { status: 'need_more' }, 'the header runs past 1 KiB');
  // The same header claiming a shorter file: its tensors would run past the end.
  const short = check(head(8 << 20), 10 << 20);
  assert.equal(short.status, 'refused');
  assert.match(short.message, /past the end of the file/);
  const mamba = head(8 << 20);
  const at = mamba.indexOf('general.architecture');
  mamba.write('mamba', at + 'general.architecture'.length + 4 + 8, 'latin1'); // key, u32 type, u64 length
  const refused = check(mamba);
  assert.equal(refused.status, 'refused');
  assert.match(refused.message, /architecture `mamba`/);
  const text = check(Buffer.from('not a model at all'), 18);
  assert.equal(text.status, 'refused');
  assert.match(text.message, /GGUF magic/);
  assert.throws(() => mod.checkGgufHeader(new Uint8Array(4), -1), /fileLen/);
});
