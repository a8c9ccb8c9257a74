//! Kernel dispatch: the one place that picks an implementation for a [`Kernel`] and the only
//! place with a `cfg(target_arch)`. Each ISA lives in its own module:
//!
//! - [`portable`]: plain Rust that the compiler vectorises; runs on every target.
//! - `simd128`: `core::arch::wasm32` SIMD128 (compiled only for wasm32 with `+simd128`).
//! - `x86`: AVX2 + FMA + F16C (x86_64 only; called only after run-time detection).
//!
//! The integer kernels (w4, int8) all compute the same exact i32 sums per block of 32 as the
//! scalar reference ([`crate::quant`]), so they differ from it only by f32 rounding of the
//! per-block terms. The SIMD ones read the int16 activations reordered into the order the
//! unpacked weights come out in (see each module): [`ArchPrep`] builds that once per input
//! (O(m·k) against O(m·n·k) work) for every matrix and row range that reads it.
//!
//! The matrix products compute a range of output rows (`*_rows`), written token-major into a
//! `m × rows.len()` block: a range that starts on a multiple of [`crate::matrix::ROW_SPLIT`]
//! runs exactly the tile passes the whole matrix would run over those rows, so splitting a
//! product into such ranges (across threads) gives the same bits as one call.
//!
//! The attention kernels ([`crate::attn`], `attn_*` here) read one KV head vector per call;
//! their dispatchers resolve the kernel again, so an unavailable one runs [`Kernel::best`].

pub(crate) mod portable;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) mod simd128;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod attn_tests;
#[cfg(test)]
mod ggml_tests;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;

use std::ops::Range;

use half::f16;

use crate::act::ActQ16;
use crate::ggml::GgmlMatrix;
use crate::layout::{I4_GROUP, I4_GROUP_BYTES, ROW_TILE};
use crate::quant::{F16Matrix, Q8Matrix, W4Matrix};
use crate::Kernel;

/// Activations prepared once per input for whichever kernels will read it: built by
/// [`ArchPrep::fill`] for the matrices about to run (before any row range is computed, so every
/// thread reads the same preparation), then read-only. Buffers are reused from input to input.
#[derive(Debug, Default)]
pub(crate) struct ArchPrep {
    #[cfg(target_arch = "x86_64")]
    x86: [x86::Prep; 2],
    /// Whether `x86[0]` (w4 order) and `x86[1]` (int8 order) hold the current input.
    #[cfg(target_arch = "x86_64")]
    x86_ok: [bool; 2],
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    simd: simd128::Prep,
    /// ggml factors for units of 16 (`[0]`) and 32 (`[1]`) values.
    ggml: [GgmlPrep; 2],
    ggml_ok: [bool; 2],
}

impl ArchPrep {
    /// Forgets the previous input (its buffers stay allocated).
    pub(crate) fn reset(&mut self) {
        #[cfg(target_arch = "x86_64")]
        {
            self.x86_ok = [false; 2];
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        self.simd.reset();
        self.ggml_ok = [false; 2];
    }

    /// Whether [`ArchPrep::fill`] ran for `need` on `kernel` since the last reset: the SIMD
    /// kernels read these buffers through raw pointers, so a product must never run without it.
    pub(crate) fn ready(&self, kernel: Kernel, need: PrepFor) -> bool {
        match (kernel, need) {
            (Kernel::Avx2 | Kernel::Simd128, PrepFor::Ggml { unit }) => {
                self.ggml_ok[usize::from(unit == 32)]
            }
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2, PrepFor::W4 { .. }) => self.x86_ok[0],
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2, PrepFor::Q8) => self.x86_ok[1],
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            (Kernel::Simd128, PrepFor::W4 { symmetric }) => self.simd.ready(symmetric),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            (Kernel::Simd128, PrepFor::Q8) => self.simd.ready(true),
            _ => true,
        }
    }

    /// Prepares `x` for a matrix needing `need` on `kernel` (already resolved), unless done for
    /// this input.
    pub(crate) fn fill(&mut self, kernel: Kernel, need: PrepFor, x: &ActQ16) {
        if let PrepFor::Ggml { unit } = need {
            if matches!(kernel, Kernel::Avx2 | Kernel::Simd128) {
                let i = usize::from(unit == 32);
                if !self.ggml_ok[i] {
                    self.ggml[i].fill(unit, x);
                    self.ggml_ok[i] = true;
                }
            }
            return;
        }
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                let (i, order) = match need {
                    PrepFor::W4 { .. } => (0, x86::Order::W4),
                    PrepFor::Q8 => (1, x86::Order::Q8),
                    _ => return,
                };
                if !self.x86_ok[i] {
                    self.x86[i].fill(x, order);
                    self.x86_ok[i] = true;
                }
            }
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Kernel::Simd128 => match need {
                PrepFor::W4 { symmetric } => self.simd.fill(x, symmetric),
                PrepFor::Q8 => self.simd.fill(x, true),
                _ => {}
            },
            _ => {}
        }
    }
}

/// What a matrix's SIMD kernels read from an [`ArchPrep`]: its format's activation order
/// (w4 symmetric or asymmetric, int8) or ggml unit, `None` for f16/f32 (given by
/// [`crate::Matrix`], so this module needs no matrix type of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrepFor {
    W4 { symmetric: bool },
    Q8,
    Ggml { unit: usize },
    None,
}

/// Rows `rows` of `out[t][r] = x[t] · w[r]` for a ggml block matrix (see
/// [`GgmlMatrix::matmul_scalar`]); `out` is `m × rows.len()`. `kernel` is resolved and `p`
/// filled for `w`.
pub(crate) fn ggml_rows(
    kernel: Kernel,
    w: &GgmlMatrix,
    x: &ActQ16,
    p: &ArchPrep,
    rows: Range<usize>,
    out: &mut [f32],
) {
    #[cfg(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    ))]
    let xp = &p.ggml[usize::from(w.format().unit() == 32)];
    let _ = p;
    match kernel {
        Kernel::Scalar => w.matmul_scalar_rows(x, rows, out),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::ggml_matmul_rows(w, x, xp, rows, out),
        // SAFETY: `kernel` was resolved: Avx2 only when AVX2, FMA and F16C were detected.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::ggml_matmul_rows(w, x, xp, rows, out) },
        _ => portable::ggml_matmul_rows(w, x, rows, out),
    }
}

/// Rows `rows` of a ggml product on `kernel` (Avx2 or Simd128, available) through its decoded
/// tile whatever the number of tokens, or `None` for a kernel without one: the twin the tests
/// compare the direct decode (one token) with, bit for bit.
#[cfg(test)]
pub(crate) fn ggml_rows_tiled(
    kernel: Kernel,
    w: &GgmlMatrix,
    x: &ActQ16,
    rows: Range<usize>,
) -> Option<Vec<f32>> {
    let mut p = GgmlPrep::default();
    p.fill(w.format().unit(), x);
    let mut out = vec![f32::NAN; x.rows() * rows.len()];
    match kernel {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::ggml_matmul_rows_tiled(w, x, &p, rows, &mut out),
        // SAFETY: checked just above that AVX2, FMA and F16C are there.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if Kernel::Avx2.is_available() => unsafe {
            x86::ggml_matmul_rows_tiled(w, x, &p, rows, &mut out)
        },
        _ => return None,
    }
    Some(out)
}

/// Whether one token of `format` runs `kernel`'s direct decode (block bytes to weights in
/// registers) rather than its decoded tile.
#[cfg(test)]
pub(crate) fn ggml_direct(kernel: Kernel, format: crate::ggml::GgmlFormat) -> bool {
    let _ = format;
    match kernel {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::ggml_direct(format),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => x86::ggml_direct(format),
        _ => false,
    }
}

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
/// Four rows of a [`GgmlMatrix`] decoded for the SIMD kernels, a chunk of columns at a time
/// (rows past the end repeat the last row; their results are dropped): the integer weights of
/// each row (`4 ×` chunk i8, row after row), and the per-unit factors `a` and per-32 terms `c`
/// interleaved `[unit][4 rows]`, so the 4 rows' factors of one unit are one 128-bit load lining
/// up with the 4 rows' sums. Each chunk is decoded once and serves every token; chunks of
/// [`GGML_CHUNK`] values keep the decoded weights in L1 (whole 4096-value rows did not: 16 KB
/// of weights beside the activations and factors).
pub(crate) struct GgmlTile {
    pub(crate) q: Vec<i8>,
    pub(crate) a: Vec<f32>,
    pub(crate) c: Vec<f32>,
    row_a: Vec<f32>,
    row_c: Vec<f32>,
}

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
/// Values per decoded chunk of a [`GgmlTile`]: one K-quant super-block, eight Q5 blocks.
pub(crate) const GGML_CHUNK: usize = 256;

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
impl GgmlTile {
    pub(crate) fn new() -> GgmlTile {
        GgmlTile {
            q: vec![0; ROW_TILE * GGML_CHUNK],
            a: vec![0.0; ROW_TILE * GGML_CHUNK / 16],
            c: vec![0.0; ROW_TILE * GGML_CHUNK / 32],
            row_a: vec![0.0; GGML_CHUNK / 16],
            row_c: vec![0.0; GGML_CHUNK / 32],
        }
    }

    /// The chunks of a row of `w`: `(first format block, blocks)`, covering every block once.
    pub(crate) fn chunks(w: &GgmlMatrix) -> impl Iterator<Item = (usize, usize)> {
        let per = GGML_CHUNK / w.format().block_values();
        let blocks = w.cols() / w.format().block_values();
        (0..blocks)
            .step_by(per)
            .map(move |b0| (b0, per.min(blocks - b0)))
    }

    /// Decodes format blocks `b0..b0 + nb` (at most [`GGML_CHUNK`] values) of rows
    /// `r0..r0 + 4` (clamped to the last row). Before each row it asks for the same bytes of
    /// the next tile (a software prefetch where the target has one).
    #[inline(always)]
    pub(crate) fn load(&mut self, w: &GgmlMatrix, r0: usize, b0: usize, nb: usize) {
        let f = w.format();
        let len = nb * f.block_values();
        let (units, blocks) = (len / f.unit(), len / crate::layout::BLOCK);
        let min = f.has_min();
        let (rb, bb) = (w.row_bytes(), f.block_bytes());
        for j in 0..ROW_TILE {
            let r = (r0 + j).min(w.rows() - 1);
            if r0 + ROW_TILE + j < w.rows() {
                let at = (r0 + ROW_TILE + j) * rb + b0 * bb;
                for line in w.data[at..at + nb * bb].chunks(64) {
                    prefetch(line.as_ptr());
                }
            }
            w.decode_blocks(
                r,
                b0,
                nb,
                &mut self.q[j * len..(j + 1) * len],
                &mut self.row_a[..units],
                &mut self.row_c[..blocks],
            );
            for (u, &a) in self.row_a[..units].iter().enumerate() {
                self.a[u * ROW_TILE + j] = a;
            }
            if min {
                for (b, &c) in self.row_c[..blocks].iter().enumerate() {
                    self.c[b * ROW_TILE + j] = c;
                }
            }
        }
    }
}

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
/// A hint to fetch the cache line at `p` (x86_64 `prefetcht0`; nothing elsewhere: wasm has no
/// prefetch instruction).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64; a prefetch never faults, `p` is inside a live slice anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Per-token activation factors for the ggml SIMD kernels, each splatted to 4 lanes so they
/// line up with a tile's `[unit][4 rows]` factors: `sx[t][u]` the activation scale of unit
/// `u`'s block, `xs[t][b] = sx · Σ xq` of block `b` (for the minimum term).
///
/// For simd128's direct decode (one token) it also holds that token's int16 activations in
/// the `[A B C D]` order of each block of 32 (`A` = positions 0, 2, .., 14, `B` = 1, 3, .., 15,
/// `C` = 16, 18, .., 30, `D` = 17, 19, .., 31: the order 16-bit nibble masks and shifts give
/// the weights in, `arch::simd128`).
#[derive(Debug, Default)]
pub(crate) struct GgmlPrep {
    /// Units per row (`cols / unit`).
    pub(crate) units: usize,
    pub(crate) sx: Vec<f32>,
    pub(crate) xs: Vec<f32>,
    /// Token 0's activations in `[A B C D]` order per block (when `x` has one row and the
    /// units are 32 values).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub(crate) abcd: Vec<i16>,
}

impl GgmlPrep {
    /// Fills the factors of `x` for formats with units of `unit` values (reusing the buffers).
    pub(crate) fn fill(&mut self, unit: usize, x: &ActQ16) {
        let per = crate::layout::BLOCK / unit;
        self.units = x.blocks() * per;
        self.sx.clear();
        self.xs.clear();
        for (&sx, &sum) in x.scales.iter().zip(&x.sums) {
            self.sx.extend(std::iter::repeat_n(sx, per * ROW_TILE));
            self.xs
                .extend(std::iter::repeat_n(sx * sum as f32, ROW_TILE));
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            self.abcd.clear();
            // Read by the units-of-32 formats' direct decode only (Q5_0, Q4_K).
            if x.rows() == 1 && unit == 32 {
                for src in x.q.chunks_exact(crate::layout::BLOCK) {
                    self.abcd.extend((0..8).map(|j| src[2 * j]));
                    self.abcd.extend((0..8).map(|j| src[2 * j + 1]));
                    self.abcd.extend((0..8).map(|j| src[16 + 2 * j]));
                    self.abcd.extend((0..8).map(|j| src[17 + 2 * j]));
                }
            }
        }
    }
}

/// Rows `rows` of `out[t][r] = x[t] · w[r]` for a w4 matrix (see [`W4Matrix::matmul_scalar`]);
/// `out` is `m × rows.len()`, `kernel` resolved, `p` filled for `w`.
pub(crate) fn w4_rows(
    kernel: Kernel,
    w: &W4Matrix,
    x: &ActQ16,
    p: &ArchPrep,
    rows: Range<usize>,
    out: &mut [f32],
) {
    let _ = p;
    match kernel {
        Kernel::Scalar => w.matmul_scalar_rows(x, rows, out),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::w4_matmul_rows(w, x, &p.simd, rows, out),
        // SAFETY: `kernel` was resolved: Avx2 only when AVX2, FMA and F16C were detected.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::w4_matmul_rows(w, x, &p.x86[0], rows, out) },
        _ => portable::w4_matmul_rows(w, x, rows, out),
    }
}

/// Rows `rows` (from a multiple of 8) of `out[t][r] = x[t] · w[r]` for an int8 matrix (see
/// [`Q8Matrix::matmul_scalar`]); as [`w4_rows`].
pub(crate) fn q8_rows(
    kernel: Kernel,
    w: &Q8Matrix,
    x: &ActQ16,
    p: &ArchPrep,
    rows: Range<usize>,
    out: &mut [f32],
) {
    let _ = p;
    match kernel {
        Kernel::Scalar => w.matmul_scalar_rows(x, rows, out),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::q8_matmul_rows(w, x, &p.simd, rows, out),
        // SAFETY: `kernel` was resolved: Avx2 only when AVX2, FMA and F16C were detected.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::q8_matmul_rows(w, x, &p.x86[1], rows, out) },
        _ => portable::q8_matmul_rows(w, x, rows, out),
    }
}

/// Rows `rows` of `out[t][r] = x[t] · w[r]` for an f16 matrix and f32 activations (`m ×
/// cols`); `out` is `m × rows.len()`, `kernel` resolved.
pub(crate) fn f16_rows(
    kernel: Kernel,
    w: &F16Matrix,
    x: &[f32],
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    match kernel {
        Kernel::Scalar => w.matmul_scalar_rows(x, m, rows, out),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::f16_matmul_rows(w, x, m, rows, out),
        // SAFETY: `kernel` was resolved: Avx2 only when AVX2, FMA and F16C were detected.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::f16_matmul_rows(w, x, m, rows, out) },
        _ => portable::f16_matmul_rows(w, x, m, rows, out),
    }
}

/// f32 dot product of equal-length slices with a non-scalar kernel.
#[inline]
pub(crate) fn dot_f32(kernel: Kernel, a: &[f32], b: &[f32]) -> f32 {
    match kernel {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::dot(a, b),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if Kernel::Avx2.is_available() => {
            // SAFETY: AVX2, FMA and F16C were detected on this CPU just above.
            unsafe { x86::dot(a, b) }
        }
        _ => portable::dot(a, b),
    }
}

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
/// The fp16 values (scales or minimums) of the 4-row tile starting at row `r0`, laid out
/// `[group][4]`: a slice of the matrix for a full tile, else a copy with zeros for the missing
/// rows (only the last tile of a matrix whose row count is not a multiple of 4).
pub(crate) fn tile_values(
    v: &[f16],
    rows: usize,
    groups: usize,
    r0: usize,
) -> std::borrow::Cow<'_, [f16]> {
    if v.is_empty() {
        return std::borrow::Cow::Borrowed(v);
    }
    let width = (rows - r0).min(ROW_TILE);
    let tile = &v[r0 * groups..(r0 + width) * groups];
    if width == ROW_TILE {
        return std::borrow::Cow::Borrowed(tile);
    }
    let mut out = vec![f16::ZERO; groups * ROW_TILE];
    for g in 0..groups {
        out[g * ROW_TILE..g * ROW_TILE + width].copy_from_slice(&tile[g * width..(g + 1) * width]);
    }
    std::borrow::Cow::Owned(out)
}

/// Checks the int4 shape the `attn_*_i4*` kernels rely on (the public functions assert it).
#[inline(always)]
fn i4_shape_ok(len: usize, nib: &[u8], scales: Option<&[f16]>) -> bool {
    let groups = len.div_ceil(I4_GROUP);
    nib.len() == groups * I4_GROUP_BYTES && scales.is_none_or(|s| s.len() == groups)
}

/// See [`crate::attn::dot_f16`].
#[inline]
pub(crate) fn attn_dot_f16(kernel: Kernel, q: &[f32], k: &[f16]) -> f32 {
    assert_eq!(q.len(), k.len(), "dot_f16: length mismatch");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_dot_f16(q, k),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_dot_f16(q, k) },
        _ => portable::attn_dot_f16(q, k),
    }
}

/// See [`crate::attn::dot_i8`].
#[inline]
pub(crate) fn attn_dot_i8(kernel: Kernel, q: &[f32], k: &[i8]) -> f32 {
    assert_eq!(q.len(), k.len(), "dot_i8: length mismatch");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_dot_i8(q, k),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_dot_i8(q, k) },
        _ => portable::attn_dot_i8(q, k),
    }
}

/// See [`crate::attn::dot_i4g32`].
#[inline]
pub(crate) fn attn_dot_i4g32(kernel: Kernel, q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    assert!(
        i4_shape_ok(q.len(), nib, Some(scales)),
        "dot_i4g32: bad shape"
    );
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_dot_i4::<true>(q, nib, scales),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_dot_i4::<true>(q, nib, scales) },
        _ => portable::attn_dot_i4::<true>(q, nib, scales),
    }
}

/// See [`crate::attn::dot_i4`].
#[inline]
pub(crate) fn attn_dot_i4(kernel: Kernel, q: &[f32], nib: &[u8]) -> f32 {
    assert!(i4_shape_ok(q.len(), nib, None), "dot_i4: bad shape");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_dot_i4::<false>(q, nib, &[]),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_dot_i4::<false>(q, nib, &[]) },
        _ => portable::attn_dot_i4::<false>(q, nib, &[]),
    }
}

/// See [`crate::attn::axpy_f32`].
#[inline]
pub(crate) fn attn_axpy_f32(kernel: Kernel, p: f32, x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_f32: length mismatch");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_axpy_f32(p, x, out),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_axpy_f32(p, x, out) },
        _ => portable::attn_axpy_f32(p, x, out),
    }
}

/// See [`crate::attn::axpy_f16`].
#[inline]
pub(crate) fn attn_axpy_f16(kernel: Kernel, p: f32, x: &[f16], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_f16: length mismatch");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_axpy_f16(p, x, out),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_axpy_f16(p, x, out) },
        _ => portable::attn_axpy_f16(p, x, out),
    }
}

/// See [`crate::attn::axpy_i8`].
#[inline]
pub(crate) fn attn_axpy_i8(kernel: Kernel, p: f32, x: &[i8], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_i8: length mismatch");
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_axpy_i8(p, x, out),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_axpy_i8(p, x, out) },
        _ => portable::attn_axpy_i8(p, x, out),
    }
}

/// See [`crate::attn::axpy_i4g32`].
#[inline]
pub(crate) fn attn_axpy_i4g32(kernel: Kernel, p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    assert!(
        i4_shape_ok(out.len(), nib, Some(scales)),
        "axpy_i4g32: bad shape"
    );
    match kernel.resolve() {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => simd128::attn_axpy_i4g32(p, nib, scales, out),
        // SAFETY: `resolve` returns Avx2 only when `is_available` detected AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { x86::attn_axpy_i4g32(p, nib, scales, out) },
        _ => portable::attn_axpy_i4g32(p, nib, scales, out),
    }
}
