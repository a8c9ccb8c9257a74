// Hostile GGUF files for hostile.test.mjs (not a test file itself): a minimal reader of a GGUF
// header (metadata and tensor infos, with the byte offset of every value) and crafted variants
// of a real model's bytes. Only what the tests need: it reads GGUF v2/v3 little-endian headers.

const TYPE_SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;

/**
 * Parses the header of `buf` (a Buffer holding at least the whole header): version, counts,
 * `kv` (key -> {type, offset of the value, and for arrays: itemType, count, countOffset}),
 * `tensors` ([{name, nDims, dimsOffset, dims, type, offset}]) and `headerEnd` (the byte after the
 * last tensor info).
 */
export function parseHeader(buf) {
  let pos = 0;
  const u32 = () => {
    const v = buf.readUInt32LE(pos);
    pos += 4;
    return v;
  };
  const u64 = () => {
    const v = buf.readBigUInt64LE(pos);
    pos += 8;
    return Number(v);
  };
  const str = () => {
    const n = u64();
    const s = buf.toString('utf8', pos, pos + n);
    pos += n;
    return s;
  };
  const skipValue = (type) => {
    if (type === STRING) str();
    else if (type === ARRAY) {
      const item = u32();
      const n = u64();
      for (let i = 0; i < n; i++) skipValue(item);
    } else if (TYPE_SIZES[type] !== undefined) pos += TYPE_SIZES[type];
    else throw new Error(`gguf-craft: unknown value type ${type} at ${pos}`);
  };
  const magic = buf.toString('latin1', 0, 4);
  if (magic !== 'GGUF') throw new Error(`gguf-craft: not a GGUF file (magic ${JSON.stringify(magic)})`);
  pos = 4;
  const version = u32();
  const tensorCount = u64();
  const kvCount = u64();
  const kv = new Map();
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    const type = u32();
    const entry = { type, offset: pos };
    if (type === ARRAY) {
      entry.itemType = buf.readUInt32LE(pos);
      entry.countOffset = pos + 4;
      entry.count = Number(buf.readBigUInt64LE(pos + 4));
    }
    skipValue(type);
    kv.set(key, entry);
  }
  const tensors = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = str();
    const nDims = u32();
    const dimsOffset = pos;
    const dims = [];
    for (let d = 0; d < nDims; d++) dims.push(u64());
    const type = u32();
    const offset = u64();
    tensors.push({ name, nDims, dimsOffset, dims, type, offset });
  }
  return { version, tensorCount, kvCount, kv, tensors, headerEnd: pos };
}

/** A copy of `buf` with the u32 value of metadata key `key` set to `value`. */
export function withU32(buf, header, key, value) {
  const e = header.kv.get(key);
  if (!e) throw new Error(`gguf-craft: no metadata key ${key}`);
  if (e.type !== 4 && e.type !== 5) throw new Error(`gguf-craft: ${key} has type ${e.type}, not a 32-bit integer`);
  const out = Buffer.from(buf);
  out.writeUInt32LE(value, e.offset);
  return out;
}

/** A copy of `buf` with dimension `d` of tensor `name` set to `value`. */
export function withTensorDim(buf, header, name, d, value) {
  const t = header.tensors.find((x) => x.name === name);
  if (!t) throw new Error(`gguf-craft: no tensor ${name}`);
  const out = Buffer.from(buf);
  out.writeBigUInt64LE(BigInt(value), t.dimsOffset + 8 * d);
  return out;
}

/** A copy of `buf` with the element count of array key `key` set to `count`. */
export function withArrayCount(buf, header, key, count) {
  const e = header.kv.get(key);
  if (!e || e.type !== ARRAY) throw new Error(`gguf-craft: no array key ${key}`);
  const out = Buffer.from(buf);
  out.writeBigUInt64LE(BigInt(count), e.countOffset);
  return out;
}
