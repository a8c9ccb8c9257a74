//! A GGUF file is untrusted input: the caps on what a header may declare, the prescan that
//! walks the header once before candle parses it ([`prescan`]), and the check that every
//! tensor's byte range lies inside the file without overlapping another.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;

use crate::error::{EngineError, Result};
use crate::weights::Source;

use super::candle_msg;

/// Caps on what a GGUF header may declare. Far above any model a phone or a browser tab holds
/// (a 512-layer model has under 5 000 tensors; the largest vocabularies, ~256k tokens, have as
/// many merges), they bound the work and memory the header parse can be made to do: candle
/// keeps every array element as a 32-byte value, so an uncapped array of one-byte elements
/// would cost 32 times its size in the file.
pub const MAX_TENSORS: u64 = 1 << 16;
/// Most metadata entries.
pub const MAX_METADATA: u64 = 1 << 16;
/// Longest metadata key, in bytes.
pub const MAX_KEY_LEN: u64 = 1 << 16;
/// Most elements in one metadata array.
pub const MAX_ARRAY_LEN: u64 = 1 << 24;
/// Largest `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 16;
/// Deepest nesting of arrays in arrays.
const MAX_DEPTH: usize = 4;

/// ggml types candle-core does not parse and this loader reads itself: candle's header parse is
/// shown each such tensor as a type with the same block size ([`OwnType::stand_in`]), and the
/// loader reads its blocks ([`super::tensor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OwnType {
    /// Type 20: blocks of 32 values, an f16 scale and 16 bytes of 4-bit indices into a fixed
    /// table of 16 integers (`kvalues_iq4nl`): 18 bytes, as Q4_0's.
    Iq4Nl,
    /// Type 23: super-blocks of 256 values, an f16 scale, 6-bit scales of the eight 32-value
    /// sub-blocks and the same 4-bit table indices: 136 bytes.
    Iq4Xs,
}

impl OwnType {
    fn from_id(ty: u32) -> Option<Self> {
        match ty {
            20 => Some(OwnType::Iq4Nl),
            23 => Some(OwnType::Iq4Xs),
            _ => None,
        }
    }

    /// The type id candle is shown: Q4_0 (blocks of 32) for IQ4_NL, Q4_K (256) for IQ4_XS.
    fn stand_in(self) -> u32 {
        match self {
            OwnType::Iq4Nl => 2,
            OwnType::Iq4Xs => 12,
        }
    }

    /// Values and bytes per block.
    pub(super) fn block(self) -> (u64, u64) {
        match self {
            OwnType::Iq4Nl => (32, 18),
            OwnType::Iq4Xs => (256, 136),
        }
    }

    /// The lower-case ggml type name.
    pub(super) fn name(self) -> &'static str {
        match self {
            OwnType::Iq4Nl => "iq4_nl",
            OwnType::Iq4Xs => "iq4_xs",
        }
    }

    /// The bytes of `elems` values of this type in tensor `name`.
    pub(super) fn byte_len(self, name: &str, elems: u64) -> Result<u64> {
        let (block, bytes) = self.block();
        blocks_len(name, self.name(), block, bytes, elems)
    }

    /// What the loader holds a tensor of this type as: IQ4_NL as Q8_0 blocks, IQ4_XS converted
    /// like the other types the kernels do not run.
    pub(super) fn source(self) -> Source {
        match self {
            OwnType::Iq4Nl => Source::Q8_0,
            OwnType::Iq4Xs => Source::Other(self.name()),
        }
    }
}

/// A GGUF header as read ([`read_content`]).
pub(super) struct Header {
    /// candle's parse (a tensor of an [`OwnType`] listed with its stand-in type).
    pub content: Content,
    /// The file's length in bytes.
    pub file_len: u64,
    /// The tensors of the types this loader reads itself.
    pub own: HashMap<String, OwnType>,
}

/// Prescans, parses (candle) and checks the tensor layout of a GGUF file from its start.
/// candle-core does not parse IQ4_NL and IQ4_XS ([`OwnType`]): IQ4_XS files, IQ4_NL files, and
/// the IQ4_NL tensors llama.cpp's quantizer writes in i-quant files for rows that are not a
/// multiple of 256 (`src/llama-quant.cpp`; SmolLM2's 576, Qwen2.5-0.5B's 896, Gemma 3 270M's
/// 640); candle reads such a header with each of those tensors' types shown as its stand-in.
pub(super) fn read_content<R: Read + Seek>(reader: &mut R) -> Result<Header> {
    let io = |e: std::io::Error| EngineError::Format(format!("reading the GGUF header: {e}"));
    let file_len = reader.seek(SeekFrom::End(0)).map_err(io)?;
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let found = scan(reader, file_len)?;
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let parsed = if found.is_empty() {
        Content::read(reader)
    } else {
        let patches = found.iter().map(|(_, at, t)| (*at, t.stand_in())).collect();
        Content::read(&mut StandIn {
            inner: reader,
            pos: 0,
            patches,
        })
    };
    let content =
        parsed.map_err(|e| EngineError::Format(format!("GGUF header: {}", candle_msg(&e))))?;
    let own: HashMap<String, OwnType> = found.into_iter().map(|(n, _, t)| (n, t)).collect();
    check_layout(&content, file_len, &own)?;
    Ok(Header {
        content,
        file_len,
        own,
    })
}

/// A reader that shows the 4-byte little-endian type field at each patch's byte offset in the
/// file as the patch's type id.
struct StandIn<'a, R> {
    inner: &'a mut R,
    pos: u64,
    patches: Vec<(u64, u32)>,
}

impl<R: Read> Read for StandIn<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let (start, end) = (self.pos, self.pos + n as u64);
        for &(at, ty) in &self.patches {
            for (i, b) in ty.to_le_bytes().into_iter().enumerate() {
                let p = at + i as u64;
                if (start..end).contains(&p) {
                    buf[(p - start) as usize] = b;
                }
            }
        }
        self.pos = end;
        Ok(n)
    }
}

impl<R: Seek> Seek for StandIn<'_, R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// Reads the header's fields in order, keeping only a small buffer, and refuses what candle's
/// parser would panic on or over-allocate for (see `read_content`).
pub fn prescan<R: Read + Seek>(reader: &mut R, file_len: u64) -> Result<()> {
    scan(reader, file_len).map(|_| ())
}

/// [`prescan`], returning the tensors of an [`OwnType`] with the byte offset of each one's type
/// field.
fn scan<R: Read + Seek>(reader: &mut R, file_len: u64) -> Result<Vec<(String, u64, OwnType)>> {
    let mut s = Scan {
        r: reader,
        pos: 0,
        len: file_len,
        buf: Vec::new(),
    };
    if file_len < 4 {
        return Err(EngineError::Format(format!(
            "the file is {file_len} bytes, too short for a GGUF header"
        )));
    }
    let magic = s.take(4, "magic")?;
    if magic != b"GGUF" {
        return Err(EngineError::Format(format!(
            "the file starts with {magic:02x?}, not the GGUF magic `GGUF`"
        )));
    }
    let version = s.u32("version")?;
    if !(version == 2 || version == 3) {
        return Err(EngineError::Unsupported(format!(
            "GGUF version {version} (supported: 2, 3)"
        )));
    }
    let tensors = s.u64("tensor count")?;
    if tensors > MAX_TENSORS {
        return Err(EngineError::Format(format!(
            "GGUF header declares {tensors} tensors (at most {MAX_TENSORS})"
        )));
    }
    let entries = s.u64("metadata count")?;
    if entries > MAX_METADATA {
        return Err(EngineError::Format(format!(
            "GGUF header declares {entries} metadata entries (at most {MAX_METADATA})"
        )));
    }
    for i in 0..entries {
        let key = s.string("metadata key length", "metadata key", |n| {
            format!("GGUF metadata entry {i}: key of {n} bytes (at most {MAX_KEY_LEN})")
        })?;
        let ty = s.u32("metadata value type")?;
        if key == "general.alignment" {
            let bytes = match ty {
                0 | 1 => 1,
                2 | 3 => 2,
                4 | 5 => 4,
                _ => {
                    return Err(EngineError::metadata(
                        &key,
                        format!("has value type {ty}; expected an integer of 32 bits or fewer"),
                    ))
                }
            };
            let raw = s.take(bytes, &key)?;
            let mut le = [0u8; 8];
            le[..raw.len()].copy_from_slice(raw);
            let mut v = i64::from_le_bytes(le);
            if ty % 2 == 1 {
                // Signed: sign-extend from `bytes` bytes.
                let shift = 64 - 8 * bytes as u32;
                v = (v << shift) >> shift;
            }
            if !(v > 0 && (v as u64).is_power_of_two() && v as u64 <= MAX_ALIGNMENT) {
                return Err(EngineError::metadata(
                    &key,
                    format!("{v} is not a power of two from 1 to {MAX_ALIGNMENT}"),
                ));
            }
        } else {
            s.skip_value(&key, ty, 0)?;
        }
    }
    // The tensor infos: name, dimension count, dimensions, ggml type, offset. A file cut inside
    // them is named here (candle would only say that it failed to fill a buffer).
    let mut own = Vec::new();
    for i in 0..tensors {
        let name = s.string("tensor name length", "tensor name", |n| {
            format!("GGUF tensor info {i}: name of {n} bytes (at most {MAX_KEY_LEN})")
        })?;
        let dims = s.u32(&format!("tensor `{name}` dimension count"))?;
        if dims > MAX_TENSOR_DIMS {
            return Err(EngineError::Format(format!(
                "GGUF header: tensor `{name}` has {dims} dimensions (at most {MAX_TENSOR_DIMS})"
            )));
        }
        s.skip(u64::from(dims) * 8, &format!("tensor `{name}` dimensions"))?;
        let at = s.pos;
        let ty = s.u32(&format!("tensor `{name}` type"))?;
        s.skip(8, &format!("tensor `{name}` offset"))?;
        match OwnType::from_id(ty) {
            Some(t) => own.push((name, at, t)),
            None => check_tensor_type(&name, ty)?,
        }
    }
    Ok(own)
}

/// The ggml tensor types a file may hold here: those candle-core parses (F32, F16, BF16, the
/// 4/5/8-bit blocks and the K-quants) and IQ4_NL and IQ4_XS ([`OwnType`]). The others (the
/// other i-quants, the ternary TQ
/// types, MXFP4, plain integers, F64) are refused naming the tensor and the type, which
/// candle would only report as "unknown dtype for tensor <type id>".
fn check_tensor_type(name: &str, ty: u32) -> Result<()> {
    const READ: [u32; 15] = [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30];
    if READ.contains(&ty) {
        return Ok(());
    }
    // ggml's type ids (ggml.h `enum ggml_type`); 4, 5 and 31..=33, 36..=38 are retired.
    let known = match ty {
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => "",
    };
    let what = if known.is_empty() {
        format!("ggml type {ty}, which is not a tensor type this reader knows")
    } else {
        format!("ggml type {known} (type {ty}), which edgefit does not read")
    };
    Err(EngineError::Format(format!(
        "GGUF header: tensor `{name}` has {what}; edgefit reads F32, F16, BF16, Q4_0, Q4_1, \
         Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS and the K-quants Q2_K..Q6_K (re-quantize the file with llama.cpp's \
         llama-quantize, e.g. to Q4_K_M)"
    )))
}

/// Dimensions a GGUF tensor may have (candle's limit too).
const MAX_TENSOR_DIMS: u32 = 4;

/// A reading position in a GGUF header, with the file's length for bounds checks.
struct Scan<'a, R> {
    r: &'a mut R,
    pos: u64,
    len: u64,
    buf: Vec<u8>,
}

impl<R: Read + Seek> Scan<'_, R> {
    fn short(&self, n: u64, what: &str) -> EngineError {
        EngineError::Format(format!(
            "GGUF header: {what} at byte {} needs {n} bytes but the file ends at byte {}",
            self.pos, self.len
        ))
    }

    /// Reads `n` bytes (small ones only; see [`Scan::skip`]).
    fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        if self.len.saturating_sub(self.pos) < n || n > MAX_KEY_LEN {
            return Err(self.short(n, what));
        }
        self.buf.resize(n as usize, 0);
        self.r
            .read_exact(&mut self.buf)
            .map_err(|e| EngineError::Format(format!("GGUF header: reading {what}: {e}")))?;
        self.pos += n;
        Ok(&self.buf)
    }

    /// Moves past `n` bytes: read through a small buffer (a seek would drop a `BufReader`'s
    /// buffer, and a vocabulary has ~50k short strings), seek when long.
    fn skip(&mut self, n: u64, what: &str) -> Result<()> {
        if self.len.saturating_sub(self.pos) < n {
            return Err(self.short(n, what));
        }
        if n <= 4096 {
            self.take(n, what)?;
            return Ok(());
        }
        let to = self.pos + n;
        self.r
            .seek(SeekFrom::Start(to))
            .map_err(|e| EngineError::Format(format!("GGUF header: skipping {what}: {e}")))?;
        self.pos = to;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-prefixed string (a key or a tensor name) of at most [`MAX_KEY_LEN`] bytes;
    /// `too_long(n)` words the error for a longer one.
    fn string(
        &mut self,
        len_what: &str,
        what: &str,
        too_long: impl FnOnce(u64) -> String,
    ) -> Result<String> {
        let n = self.u64(len_what)?;
        if n > MAX_KEY_LEN {
            return Err(EngineError::Format(too_long(n)));
        }
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    /// Moves past one value of GGUF type `ty` belonging to `key`.
    fn skip_value(&mut self, key: &str, ty: u32, depth: usize) -> Result<()> {
        match scalar_size(ty) {
            Some(n) => return self.skip(n, key),
            None if ty == 8 => {
                let n = self.u64(key)?;
                return self.skip(n, key);
            }
            None if ty == 9 => {}
            None => {
                return Err(EngineError::metadata(
                    key,
                    format!("value type {ty} is not a GGUF type"),
                ))
            }
        }
        if depth >= MAX_DEPTH {
            return Err(EngineError::metadata(
                key,
                format!("arrays nested more than {MAX_DEPTH} deep"),
            ));
        }
        let elem = self.u32(key)?;
        let n = self.u64(key)?;
        if n > MAX_ARRAY_LEN {
            return Err(EngineError::metadata(
                key,
                format!("array of {n} elements (at most {MAX_ARRAY_LEN})"),
            ));
        }
        match scalar_size(elem) {
            Some(size) => self.skip(n * size, key),
            None => {
                // Strings and arrays: each at least an 8-byte length.
                if self.len.saturating_sub(self.pos) / 8 < n {
                    return Err(self.short(n * 8, key));
                }
                (0..n).try_for_each(|_| self.skip_value(key, elem, depth + 1))
            }
        }
    }
}

/// Size of a GGUF scalar type, `None` for strings, arrays and unknown types.
fn scalar_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// Bytes of `elems` values of `dtype` (whole blocks only), with checked arithmetic.
pub(super) fn byte_len(name: &str, dtype: GgmlDType, elems: u64) -> Result<u64> {
    let what = format!("{dtype:?}");
    blocks_len(
        name,
        &what,
        dtype.block_size() as u64,
        dtype.type_size() as u64,
        elems,
    )
}

/// The bytes of `elems` values in blocks of `block` values of `bytes` bytes each (type `what`),
/// with checked arithmetic.
fn blocks_len(name: &str, what: &str, block: u64, bytes: u64, elems: u64) -> Result<u64> {
    if !elems.is_multiple_of(block) {
        return Err(EngineError::tensor(
            name,
            format!("{elems} values is not a whole number of {what} blocks of {block}"),
        ));
    }
    (elems / block).checked_mul(bytes).ok_or_else(|| {
        EngineError::tensor(
            name,
            format!("{elems} values of {what}: the size overflows"),
        )
    })
}

/// Every tensor's bytes, computed with checked arithmetic, lie inside the file and overlap no
/// other tensor's.
fn check_layout(content: &Content, file_len: u64, own: &HashMap<String, OwnType>) -> Result<()> {
    let mut infos: Vec<_> = content.tensor_infos.iter().collect();
    infos.sort_by_key(|(name, info)| (info.offset, name.as_str()));
    let mut spans: Vec<(u64, u64, &str)> = Vec::with_capacity(infos.len());
    for (name, info) in infos {
        let dims = info.shape.dims();
        let elems = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| {
                EngineError::tensor(name, format!("dims {dims:?} multiply past 2^64"))
            })?;
        let len = match own.get(name) {
            Some(t) => t.byte_len(name, elems)?,
            None => byte_len(name, info.ggml_dtype, elems)?,
        };
        let start = content.tensor_data_offset.checked_add(info.offset);
        match start.and_then(|s| s.checked_add(len).map(|e| (s, e))) {
            Some((start, end)) if end <= file_len => spans.push((start, end, name)),
            _ => {
                return Err(EngineError::tensor(
                    name,
                    format!(
                    "{len} bytes at offset {} + {} run past the end of the file ({file_len} bytes)",
                    content.tensor_data_offset, info.offset
                ),
                ))
            }
        }
    }
    spans.sort();
    let mut last: Option<(u64, u64, &str)> = None;
    for span in spans {
        if span.0 == span.1 {
            continue;
        }
        if let Some(prev) = last {
            if span.0 < prev.1 {
                return Err(EngineError::tensor(
                    span.2,
                    format!(
                        "bytes {}..{} overlap tensor `{}` at {}..{}",
                        span.0, span.1, prev.2, prev.0, prev.1
                    ),
                ));
            }
        }
        if last.is_none_or(|prev| span.1 > prev.1) {
            last = Some(span);
        }
    }
    Ok(())
}
