//! ggml's block formats held as their own bytes ([`GgmlMatrix`]): Q5_0, Q5_1 (blocks of 32)
//! and the K-quants Q4_K, Q5_K, Q6_K (super-blocks of 256), so a GGUF tensor in one of them is
//! multiplied as stored, without re-rounding.
//!
//! # Held bytes
//! A matrix holds exactly the tensor's GGUF bytes: `rows` rows of `cols / V` blocks of `B`
//! bytes each, row-major, in ggml's block layout (`ggml-common.h`), so [`GgmlMatrix::bytes`] is
//! `rows · cols / V · B`:
//!
//! | format | V | B | block layout (little-endian) | weight `j` of a block |
//! |---|---|---|---|---|
//! | `q5_0` | 32 | 22 | `d: f16, qh: u32, qs: [u8; 16]` | `(q_j − 16) · d` |
//! | `q5_1` | 32 | 24 | `d: f16, m: f16, qh: u32, qs: [u8; 16]` | `q_j · d + m` |
//! | `q4_k` | 256 | 144 | `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]` | `(d·sc_s) · q_j − dmin·m_s` |
//! | `q5_k` | 256 | 176 | `d, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128]` | as q4_k, 5-bit `q_j` |
//! | `q6_k` | 256 | 210 | `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16` | `(d·sc_u) · (q_j − 32)` |
//!
//! - Q5_0 / Q5_1: `q_j = lo_j | h_j << 4` with `lo_j` the low nibble of `qs[j]` for `j < 16`
//!   and the high nibble of `qs[j − 16]` otherwise (Q4_0's order), and `h_j` bit `j` of `qh`.
//! - Q4_K / Q5_K: 8 sub-blocks `s` of 32. The 64 values `64i..64i+64` come from `qs[32i..32i+32]`:
//!   low nibbles are sub-block `2i`, high nibbles sub-block `2i+1`; Q5_K adds bit `s` of
//!   `qh[l]` as bit 4 of value `l` of sub-block `s`. The 6-bit scale `sc_s` and minimum `m_s`
//!   are packed in `scales` (ggml's `get_scale_min_k4`): for `s < 4`, `sc = scales[s] & 63`,
//!   `m = scales[s+4] & 63`; else `sc = (scales[s+4] & 15) | (scales[s−4] >> 6) << 4`,
//!   `m = (scales[s+4] >> 4) | (scales[s] >> 6) << 4`.
//! - Q6_K: 16 units `u` of 16 with an int8 scale `scales[u]`. In each half `h` of 128 values,
//!   value `128h + 32k + l` (`k < 4`, `l < 32`) has its low 4 bits in `ql[64h + l + 32(k & 1)]`
//!   (low nibble for `k < 2`, high for `k ≥ 2`) and its top 2 bits at bit `2k` of `qh[32h + l]`.
//!
//! # Dequantization
//! Bit-for-bit ggml's `dequantize_row_*` (`ggml-quants.c`), unfused f32 arithmetic: with the
//! fp16 fields widened exactly, `d1 = d · sc` and `m1 = dmin · m` in f32, a K-quant weight is
//! `d1 · q − m1`, a Q6_K weight `(d · sc) · (q − 32)`, a Q5_1 weight `q · d + m`.
//!
//! # Products
//! Every kernel decodes a row into its small integer weights (`i8`, in index order: Q4_K
//! 0..=15, Q5_K and Q5_1 0..=31, Q5_0 −16..=15, Q6_K −32..=31), one f32 factor `a_u` per
//! unit of `U` values (`U` = 16 for Q6_K's scales, 32 otherwise: `d·sc`, or `d`) and, for the
//! formats with a minimum, one f32 `c_b` per 32 (`−dmin·m`, or `m`), so that a weight is
//! `a_u · q + c_b` exactly as dequantized. With the [`ActQ16`] activations (`x ≈ sx_b · xq`,
//! blocks of 32 aligned with the units):
//!
//! `y[t][r] = Σ_b sx[t][b] · (Σ_{u ⊂ b} a_u · Σ_{j ∈ u} q_j · xq_j + c_b · Σ_{j ∈ b} xq_j)`
//!
//! The integer sums are exact in i32 (at most 32 · 32 · 32767 in magnitude); the kernels differ
//! from this reference only by the f32 rounding of the per-unit terms and of their sum.
//!
//! The scalar reference ([`GgmlMatrix::matmul_scalar`]) and the portable kernel decode one row
//! at a time. The AVX2 and simd128 kernels decode 4 rows at a time, 256 values (one K-quant
//! super-block, eight Q5 blocks) per step, into a small scratch that stays in L1, and run every
//! token over it (`crate::arch`'s `GgmlTile`); the decode is shared Rust compiled for the
//! target's features, the products are the ISA's int16 dot products (`vpmaddwd`,
//! `i32x4.dot_i16x8_s`) reduced across the 4 rows. The held bytes stay exactly the GGUF ones:
//! nothing is repacked.
//! For one token (decode, m = 1) the AVX2 kernel skips the scratch for Q5_0, Q4_K and Q6_K,
//! and the simd128 kernel for Q5_0 and Q4_K: they split the block bytes into weights in
//! registers (nibble masks and shifts; Q5_0's fifth bit tested per lane against `qh`, Q6_K's
//! top 2 bits shifted out of `qh`), with the same per-unit sums and f32 operations as the tile
//! path, so the results are bit-identical to it (`arch::x86`, `arch::simd128`; the tests
//! compare the two paths bit for bit).
//!
//! # For loaders
//! [`GgmlMatrix::from_ggml`] (or `from_q5_0` / `from_q5_1` / `from_q4_k` / `from_q5_k` /
//! `from_q6_k`, or [`GgmlMatrix::from_ggml_vec`] to hand over an owned buffer) takes a GGUF
//! tensor's data with `rows` = the tensor's outer dimension (ne\[1\], output features) and
//! `cols` = its inner one (ne\[0\]); wrap it in [`crate::Matrix::Ggml`]. Errors:
//! [`KernelError::Shape`] (no values, `cols` not a multiple of the block, overflow),
//! [`KernelError::DataLength`] (wrong byte count), [`KernelError::NotFinite`] (a NaN or
//! infinite fp16 scale or minimum, naming the field and the block index).

use half::f16;

use crate::act::ActQ16;
use crate::error::{KernelError, Result};
use crate::layout::BLOCK;
use crate::quant::check_product;

/// Which ggml block format a [`GgmlMatrix`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlFormat {
    /// `block_q5_0`: 32 weights in 22 bytes, `w = (q − 16) · d`.
    Q5_0,
    /// `block_q5_1`: 32 weights in 24 bytes, `w = q · d + m`.
    Q5_1,
    /// `block_q4_K`: 256 weights in 144 bytes, 8 sub-blocks with 6-bit scales and minimums.
    Q4K,
    /// `block_q5_K`: 256 weights in 176 bytes, Q4_K with a fifth bit per weight.
    Q5K,
    /// `block_q6_K`: 256 weights in 210 bytes, 16 sub-blocks of 16 with int8 scales.
    Q6K,
}

impl GgmlFormat {
    /// Every format, in the order of the module docs.
    pub const ALL: [GgmlFormat; 5] = [
        GgmlFormat::Q5_0,
        GgmlFormat::Q5_1,
        GgmlFormat::Q4K,
        GgmlFormat::Q5K,
        GgmlFormat::Q6K,
    ];

    /// The `edgefit_estimate` weight-format name (and the lower-case ggml type name).
    pub fn name(self) -> &'static str {
        match self {
            GgmlFormat::Q5_0 => "q5_0",
            GgmlFormat::Q5_1 => "q5_1",
            GgmlFormat::Q4K => "q4_k",
            GgmlFormat::Q5K => "q5_k",
            GgmlFormat::Q6K => "q6_k",
        }
    }

    /// Weights per block (`V`): 32, or 256 for the K-quants.
    pub fn block_values(self) -> usize {
        match self {
            GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => 32,
            _ => 256,
        }
    }

    /// Bytes per block (`B`): ggml's `sizeof(block_*)`.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlFormat::Q5_0 => 22,
            GgmlFormat::Q5_1 => 24,
            GgmlFormat::Q4K => 144,
            GgmlFormat::Q5K => 176,
            GgmlFormat::Q6K => 210,
        }
    }

    /// Values per scale unit in the products: 16 for Q6_K, 32 otherwise.
    pub(crate) fn unit(self) -> usize {
        if self == GgmlFormat::Q6K {
            16
        } else {
            32
        }
    }

    /// Whether weights carry an additive per-32 term (`c_b`): Q5_1, Q4_K, Q5_K.
    pub(crate) fn has_min(self) -> bool {
        matches!(self, GgmlFormat::Q5_1 | GgmlFormat::Q4K | GgmlFormat::Q5K)
    }

    /// Byte offsets of the block's fp16 fields that must be finite, with their names.
    fn f16_fields(self) -> &'static [(usize, &'static str)] {
        match self {
            GgmlFormat::Q5_0 => &[(0, "q5_0 block scale d")],
            GgmlFormat::Q5_1 => &[(0, "q5_1 block scale d"), (2, "q5_1 block minimum m")],
            GgmlFormat::Q4K => &[
                (0, "q4_k super-block scale d"),
                (2, "q4_k super-block minimum scale dmin"),
            ],
            GgmlFormat::Q5K => &[
                (0, "q5_k super-block scale d"),
                (2, "q5_k super-block minimum scale dmin"),
            ],
            GgmlFormat::Q6K => &[(208, "q6_k super-block scale d")],
        }
    }
}

/// A `rows × cols` weight matrix held as ggml blocks (see the module docs).
#[derive(Debug, Clone)]
pub struct GgmlMatrix {
    format: GgmlFormat,
    rows: usize,
    cols: usize,
    /// The GGUF tensor bytes: `rows × cols / V` blocks, row-major.
    pub(crate) data: Vec<u8>,
}

/// The fp16 at byte `at`, widened exactly: the branch-free conversion of
/// [`crate::layout::f16_bits_to_f32`] for finite halves (the constructor refuses the others;
/// `half`'s own conversion, a run-time feature check and a call per value, was the largest cost
/// of decoding a Q5_1 block).
#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    crate::layout::f16_bits_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// `ggml`'s `get_scale_min_k4`: the 6-bit scale and minimum of sub-block `s` (see the docs).
#[inline(always)]
pub(crate) fn scale_min_k4(s: usize, q: &[u8; 12]) -> (u8, u8) {
    if s < 4 {
        (q[s] & 63, q[s + 4] & 63)
    } else {
        (
            (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4),
            (q[s + 4] >> 4) | ((q[s] >> 6) << 4),
        )
    }
}

/// Bytes `i` of entry `b` = `one` if bit `i` of `b` is set, else `zero`: spreads 8 bits of a
/// Q5 `qh` into 8 bytes in one lookup.
const fn spread_table(one: u8, zero: u8) -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < 8 {
            let v = if (b >> i) & 1 == 1 { one } else { zero };
            t[b] |= (v as u64) << (8 * i);
            i += 1;
        }
        b += 1;
    }
    t
}

/// Q5_0: `lo | 0xF0` is `lo − 16` as an i8, `lo | 0` is `(lo + 16) − 16`.
static Q5_0_HIGH: [u64; 256] = spread_table(0x00, 0xF0);
/// Q5_1: bit 4 set where the high bit is.
static Q5_1_HIGH: [u64; 256] = spread_table(0x10, 0x00);

#[inline(always)]
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Decodes one Q5_0/Q5_1 block (`qh` at 2 or 4) into 32 integer weights, 8 bytes at a time.
#[inline(always)]
fn decode_q5(blk: &[u8], at: usize, table: &[u64; 256], q: &mut [i8]) {
    const M: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    let qh = [blk[at], blk[at + 1], blk[at + 2], blk[at + 3]];
    let (w0, w1) = (u64_at(blk, at + 4), u64_at(blk, at + 12));
    let words = [
        (w0 & M) | table[usize::from(qh[0])],
        (w1 & M) | table[usize::from(qh[1])],
        ((w0 >> 4) & M) | table[usize::from(qh[2])],
        ((w1 >> 4) & M) | table[usize::from(qh[3])],
    ];
    for (i, w) in words.iter().enumerate() {
        for (j, b) in w.to_le_bytes().iter().enumerate() {
            q[8 * i + j] = *b as i8;
        }
    }
}

/// Decodes one Q4_K (`HIGH` false) or Q5_K block: 256 weights, 8 scales `d·sc`, 8 additive
/// terms `−dmin·m`.
#[inline(always)]
fn decode_k45<const HIGH: bool>(blk: &[u8], q: &mut [i8], a: &mut [f32], c: &mut [f32]) {
    let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
    let mut sc = [0u8; 12];
    sc.copy_from_slice(&blk[4..16]);
    for s in 0..8 {
        let (scale, min) = scale_min_k4(s, &sc);
        a[s] = d * f32::from(scale);
        c[s] = -(dmin * f32::from(min));
    }
    let qs_at = if HIGH { 48 } else { 16 };
    for i in 0..4 {
        let qs: &[u8; 32] = blk[qs_at + 32 * i..qs_at + 32 * i + 32]
            .try_into()
            .unwrap_or(&[0; 32]); // always 32 bytes
        let qh: &[u8; 32] = blk[16..48].try_into().unwrap_or(&[0; 32]);
        let out = &mut q[64 * i..64 * i + 64];
        for l in 0..32 {
            let (mut lo, mut hi) = (qs[l] & 0xF, qs[l] >> 4);
            if HIGH {
                lo |= ((qh[l] >> (2 * i)) & 1) << 4;
                hi |= ((qh[l] >> (2 * i + 1)) & 1) << 4;
            }
            out[l] = lo as i8;
            out[32 + l] = hi as i8;
        }
    }
}

/// Decodes one Q6_K block: 256 weights `q − 32`, 16 scales `d·sc`.
#[inline(always)]
fn decode_q6k(blk: &[u8], q: &mut [i8], a: &mut [f32]) {
    let d = f16_at(blk, 208);
    for (u, a) in a.iter_mut().enumerate().take(16) {
        *a = d * f32::from(blk[192 + u] as i8);
    }
    for h in 0..2 {
        let ql: &[u8; 64] = blk[64 * h..64 * h + 64].try_into().unwrap_or(&[0; 64]);
        let qh: &[u8; 32] = blk[128 + 32 * h..128 + 32 * h + 32]
            .try_into()
            .unwrap_or(&[0; 32]);
        let out = &mut q[128 * h..128 * h + 128];
        for l in 0..32 {
            let v = [
                (ql[l] & 0xF) | ((qh[l] & 3) << 4),
                (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
            ];
            for (k, v) in v.iter().enumerate() {
                out[32 * k + l] = (*v as i8).wrapping_sub(32);
            }
        }
    }
}

impl GgmlMatrix {
    /// Takes ggml blocks of `format` for a `rows × cols` matrix (the GGUF tensor data, rows of
    /// `cols` values): `cols` must be a multiple of the block size (32, or 256 for the
    /// K-quants), `data` exactly `rows · cols / V · B` bytes, and every fp16 scale and minimum
    /// finite. The bytes are kept as they are.
    pub fn from_ggml(format: GgmlFormat, data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::check(format, data, rows, cols)?;
        Ok(GgmlMatrix {
            format,
            rows,
            cols,
            data: data.to_vec(),
        })
    }

    /// [`GgmlMatrix::from_ggml`] taking the bytes by value (no copy: a loader that already
    /// owns the tensor's bytes does not hold them twice). The same checks and errors.
    pub fn from_ggml_vec(
        format: GgmlFormat,
        data: Vec<u8>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        Self::check(format, &data, rows, cols)?;
        Ok(GgmlMatrix {
            format,
            rows,
            cols,
            data,
        })
    }

    /// The checks of [`GgmlMatrix::from_ggml`].
    fn check(format: GgmlFormat, data: &[u8], rows: usize, cols: usize) -> Result<()> {
        let what = format.name();
        if rows == 0 || cols == 0 {
            return Err(KernelError::Shape {
                what,
                detail: format!("{rows}×{cols} has no values"),
            });
        }
        let v = format.block_values();
        if !cols.is_multiple_of(v) {
            return Err(KernelError::Shape {
                what,
                detail: format!("{cols} columns is not a multiple of {v} (the block size)"),
            });
        }
        let bb = format.block_bytes();
        let expected = rows
            .checked_mul(cols / v)
            .and_then(|n| n.checked_mul(bb))
            .ok_or(KernelError::Shape {
                what,
                detail: format!("{rows}×{cols} overflows"),
            })?;
        if data.len() != expected {
            return Err(KernelError::DataLength {
                format: what,
                rows,
                cols,
                got: data.len(),
                expected,
            });
        }
        for (index, blk) in data.chunks_exact(bb).enumerate() {
            for &(at, field) in format.f16_fields() {
                let value = f16::from_le_bytes([blk[at], blk[at + 1]]).to_f32();
                if !value.is_finite() {
                    return Err(KernelError::NotFinite {
                        what: field,
                        index,
                        value,
                    });
                }
            }
        }
        Ok(())
    }

    /// [`GgmlMatrix::from_ggml`] for `block_q5_0` data.
    pub fn from_q5_0(data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::from_ggml(GgmlFormat::Q5_0, data, rows, cols)
    }

    /// [`GgmlMatrix::from_ggml`] for `block_q5_1` data.
    pub fn from_q5_1(data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::from_ggml(GgmlFormat::Q5_1, data, rows, cols)
    }

    /// [`GgmlMatrix::from_ggml`] for `block_q4_K` data.
    pub fn from_q4_k(data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::from_ggml(GgmlFormat::Q4K, data, rows, cols)
    }

    /// [`GgmlMatrix::from_ggml`] for `block_q5_K` data.
    pub fn from_q5_k(data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::from_ggml(GgmlFormat::Q5K, data, rows, cols)
    }

    /// [`GgmlMatrix::from_ggml`] for `block_q6_K` data.
    pub fn from_q6_k(data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        Self::from_ggml(GgmlFormat::Q6K, data, rows, cols)
    }

    pub fn format(&self) -> GgmlFormat {
        self.format
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The held bytes, exactly the GGUF tensor data.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Bytes held: `rows · cols / V · B` (see the module docs), the GGUF tensor's size and
    /// `edgefit_estimate`'s byte count for the format.
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64
    }

    /// The `edgefit_estimate` weight-format name: `q5_0`, `q5_1`, `q4_k`, `q5_k` or `q6_k`.
    pub fn format_name(&self) -> &'static str {
        self.format.name()
    }

    /// Bytes of one row of blocks.
    pub(crate) fn row_bytes(&self) -> usize {
        self.cols / self.format.block_values() * self.format.block_bytes()
    }

    /// Decodes row `r` into its integer weights `q` (`cols`), per-unit factors `a`
    /// (`cols / unit`) and, for formats with a minimum, per-32 terms `c` (`cols / 32`; left
    /// alone otherwise): see the module docs.
    #[inline(always)]
    pub(crate) fn decode_row(&self, r: usize, q: &mut [i8], a: &mut [f32], c: &mut [f32]) {
        self.decode_blocks(r, 0, self.cols / self.format.block_values(), q, a, c);
    }

    /// [`GgmlMatrix::decode_row`] for blocks `b0..b0 + nb` of row `r` only (blocks of the
    /// format: 32 or 256 values), written from the start of `q`, `a` and `c`.
    #[inline(always)]
    pub(crate) fn decode_blocks(
        &self,
        r: usize,
        b0: usize,
        nb: usize,
        q: &mut [i8],
        a: &mut [f32],
        c: &mut [f32],
    ) {
        let bb = self.format.block_bytes();
        let at = r * self.row_bytes() + b0 * bb;
        let bytes = &self.data[at..at + nb * bb];
        match self.format {
            GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => {
                let asym = self.format == GgmlFormat::Q5_1;
                let table = if asym { &Q5_1_HIGH } else { &Q5_0_HIGH };
                let qh_at = if asym { 4 } else { 2 };
                for (b, (blk, q)) in bytes
                    .chunks_exact(bb)
                    .zip(q.chunks_exact_mut(BLOCK))
                    .enumerate()
                {
                    decode_q5(blk, qh_at, table, q);
                    a[b] = f16_at(blk, 0);
                    if asym {
                        c[b] = f16_at(blk, 2);
                    }
                }
            }
            GgmlFormat::Q4K | GgmlFormat::Q5K => {
                let high = self.format == GgmlFormat::Q5K;
                for (i, blk) in bytes.chunks_exact(bb).enumerate() {
                    let (q, a, c) = (
                        &mut q[256 * i..256 * i + 256],
                        &mut a[8 * i..8 * i + 8],
                        &mut c[8 * i..8 * i + 8],
                    );
                    if high {
                        decode_k45::<true>(blk, q, a, c);
                    } else {
                        decode_k45::<false>(blk, q, a, c);
                    }
                }
            }
            GgmlFormat::Q6K => {
                for (i, blk) in bytes.chunks_exact(bb).enumerate() {
                    decode_q6k(
                        blk,
                        &mut q[256 * i..256 * i + 256],
                        &mut a[16 * i..16 * i + 16],
                    );
                }
            }
        }
    }

    /// Scratch buffers for [`GgmlMatrix::decode_row`]: `(q, a, c)`.
    pub(crate) fn row_scratch(&self) -> (Vec<i8>, Vec<f32>, Vec<f32>) {
        (
            vec![0; self.cols],
            vec![0.0; self.cols / self.format.unit()],
            vec![0.0; self.cols / BLOCK],
        )
    }

    /// Writes the dequantized row `r` (`cols` values) into `out`: bit-for-bit ggml's
    /// `dequantize_row_*` (see the module docs).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (mut q, mut a, mut c) = self.row_scratch();
        self.decode_row(r, &mut q, &mut a, &mut c);
        let u = self.format.unit();
        let min = self.format.has_min();
        for (i, (o, &q)) in out.iter_mut().zip(&q).enumerate() {
            let v = a[i / u] * f32::from(q);
            // Formats without a minimum add nothing (not even +0, which would turn −0 into +0).
            *o = if min { v + c[i / BLOCK] } else { v };
        }
    }

    /// All weights as row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(r, row);
        }
        out
    }

    /// Reference kernel: `out[t][r] = x[t] · w[r]` by the formula of the module docs, in index
    /// order. `out` has `x.rows() × rows` values.
    pub fn matmul_scalar(&self, x: &ActQ16, out: &mut [f32]) {
        check_product(self.format.name(), self.rows, self.cols, x, out);
        self.matmul_scalar_rows(x, 0..self.rows, out);
    }

    /// [`GgmlMatrix::matmul_scalar`] for output rows `rows` only: `out` is `x.rows() ×
    /// rows.len()`, token-major.
    pub(crate) fn matmul_scalar_rows(
        &self,
        x: &ActQ16,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) {
        let (mut q, mut a, mut c) = self.row_scratch();
        let u = self.format.unit();
        let xb = x.blocks();
        let (lo, len) = (rows.start, rows.len());
        for r in rows {
            self.decode_row(r, &mut q, &mut a, &mut c);
            for t in 0..x.rows() {
                let mut acc = 0.0f32;
                for b in 0..xb {
                    let xq = &x.q[(t * xb + b) * BLOCK..(t * xb + b + 1) * BLOCK];
                    let mut term = 0.0f32;
                    for h in 0..BLOCK / u {
                        let mut isum = 0i32;
                        for j in h * u..(h + 1) * u {
                            isum += i32::from(q[b * BLOCK + j]) * i32::from(xq[j]);
                        }
                        term += a[b * BLOCK / u + h] * isum as f32;
                    }
                    if self.format.has_min() {
                        term += c[b] * x.sums[t * xb + b] as f32;
                    }
                    acc += x.scales[t * xb + b] * term;
                }
                out[t * len + r - lo] = acc;
            }
        }
    }
}
