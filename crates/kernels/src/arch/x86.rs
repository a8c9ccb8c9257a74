//! x86_64 kernels on AVX2 + FMA + F16C. Every function here is `unsafe` with
//! `#[target_feature]` and is called only after run-time detection ([`crate::Kernel::Avx2`]).
//!
//! Why one long file: it is one ISA's half of every kernel (w4, int8, f16, the ggml formats,
//! attention), each section a twin of the same section of `simd128.rs` and `portable.rs`,
//! compared with the scalar reference in `tests.rs`, `ggml_tests.rs` and `attn_tests.rs`; the
//! sections share the lane helpers and the `#[target_feature]` conventions at the top.
//!
//! # w4 and int8: int16 activations, `vpmaddwd`, 4 rows per pass
//! The activations are reordered once per call so they line up with the weights as they come
//! out of the cheapest unpacking (16-bit shifts and masks, no byte shuffles). For w4 one 32-byte
//! load holds blocks `b` and `b+1` of one row; viewed as 16-bit lanes, `v & 0xF`, `(v>>8) & 0xF`,
//! `(v>>4) & 0xF` and `v>>12` are the weights at even positions 0..14, odd positions 1..15, even
//! 16..30 and odd 17..31 of each block. For int8 one 32-byte load is one block, and the even and
//! odd bytes sign-extend with `(v<<8)>>8` and `v>>8`. `vpmaddwd` against the matching
//! activations then gives partial i32 sums, 4 rows are reduced together with `vphaddd` into
//! `[block b: rows 0..4 | block b+1: rows 0..4]`, which lines up exactly with the 8 fp16 scales
//! of the 4-row tile ([`crate::quant`]'s layout), converted by one `vcvtph2ps`. The symmetric
//! w4 offset (`q − 8`) is taken out of the integer sum as `8 · Σ xq` per block.
//!
//! Int8 blocks come in 8-row tiles, block-major ([`crate::quant`]), read as two 4-row tiles at
//! a block stride of 256 bytes, with software prefetch of the next 8-row tile.
//!
//! Prefill (`m > 1`) runs every token through a 4-row tile before moving on, so each tile's
//! weights (4 rows · k/2 bytes) come from memory once and from L1 for the other tokens.

use core::arch::x86_64::*;
use core::ops::Range;

use half::f16;

use crate::act::ActQ16;
use crate::arch::{tile_values, GgmlPrep, GgmlTile};
use crate::ggml::{GgmlFormat, GgmlMatrix};
use crate::layout::{f16_bits_to_f32, BLOCK, I4_GROUP, I4_GROUP_BYTES, Q8_TILE, ROW_TILE};
use crate::quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};

/// How the int16 activations are ordered within a pair of blocks `b`, `b+1` (64 values).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Order {
    /// `[A_b A_b1 | B_b B_b1 | C_b C_b1 | D_b D_b1]` with `A` = positions 0,2..14, `B` =
    /// 1,3..15, `C` = 16,18..30, `D` = 17,19..31 (8 values each): the w4 unpack order.
    W4,
    /// `[A_b C_b | B_b D_b | A_b1 C_b1 | B_b1 D_b1]`: the int8 even/odd order.
    Q8,
}

/// Activations of every token, reordered, with per-block factors expanded to
/// `[block b ×4 | block b+1 ×4]` so they line up with the reduced sums. Built once per input
/// ([`crate::matrix::Prepared`]) and read by every row range of every matrix of that format.
#[derive(Debug, Default)]
pub(crate) struct Prep {
    pairs: usize,
    /// `m × pairs × 64`.
    q: Vec<i16>,
    /// `m × pairs × 8`: activation scales.
    sx: Vec<f32>,
    /// `m × pairs × 8`: `8 · Σ xq` (the symmetric w4 offset).
    corr: Vec<i32>,
    /// `m × pairs × 8`: `sx · Σ xq` (for the asymmetric minimum).
    xs: Vec<f32>,
}

impl Prep {
    /// Fills the buffers for `x` in `order` (reusing their allocations).
    pub(crate) fn fill(&mut self, x: &ActQ16, order: Order) {
        let (m, xb) = (x.rows(), x.blocks());
        let pairs = xb.div_ceil(2);
        let p = self;
        p.pairs = pairs;
        for v in [&mut p.sx, &mut p.xs] {
            v.clear();
            v.resize(m * pairs * 8, 0.0);
        }
        p.q.clear();
        p.q.resize(m * pairs * 64, 0);
        p.corr.clear();
        p.corr.resize(m * pairs * 8, 0);
        for t in 0..m {
            for b in 0..xb {
                let (pair, h) = (t * pairs + b / 2, b % 2);
                let xq = &x.q[(t * xb + b) * BLOCK..(t * xb + b + 1) * BLOCK];
                let dst = &mut p.q[pair * 64..(pair + 1) * 64];
                // Starting offsets of A, B, C, D for this block.
                let at = match order {
                    Order::W4 => [8 * h, 16 + 8 * h, 32 + 8 * h, 48 + 8 * h],
                    Order::Q8 => [32 * h, 32 * h + 16, 32 * h + 8, 32 * h + 24],
                };
                for j in 0..8 {
                    dst[at[0] + j] = xq[2 * j];
                    dst[at[1] + j] = xq[2 * j + 1];
                    dst[at[2] + j] = xq[16 + 2 * j];
                    dst[at[3] + j] = xq[17 + 2 * j];
                }
                let (sx, sum) = (x.scales[t * xb + b], x.sums[t * xb + b]);
                for l in 0..4 {
                    let i = pair * 8 + 4 * h + l;
                    p.sx[i] = sx;
                    p.corr[i] = 8 * sum;
                    p.xs[i] = sx * sum as f32;
                }
            }
        }
    }
}

/// Horizontal sum of the two 4-lane halves: `lo + hi`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn fold(v: __m256) -> __m128 {
    _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v))
}

/// The 8 f32 factors `[block 2p: rows 0..4 | block 2p+1: rows 0..4]` from a `[group][4]` tile
/// of fp16 values; `PG` blocks per group. With `half`, only block `2p` exists: the upper
/// lanes are zero and nothing past the tile is read.
///
/// # Safety
/// `tile` must hold the groups of blocks `2p` (and `2p+1` unless `half`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_factors<const PG: usize, const HALF: bool>(tile: *const f16, p: usize) -> __m256 {
    // SAFETY (all loads): the caller guarantees the groups read here are inside `tile`.
    unsafe {
        if PG == 1 && !HALF {
            _mm256_cvtph_ps(_mm_loadu_si128(tile.add(p * 8) as *const __m128i))
        } else {
            let g = 2 * p / PG;
            let s = _mm_cvtph_ps(_mm_loadl_epi64(tile.add(g * 4) as *const __m128i));
            if HALF {
                _mm256_zextps128_ps256(s)
            } else {
                _mm256_set_m128(s, s)
            }
        }
    }
}

/// Partial i32 sums of one row's blocks `2p`, `2p+1` (or only `2p` with `half`) against the
/// reordered activations `xv`: lanes 0..4 belong to block `2p`, lanes 4..8 to `2p+1`.
///
/// # Safety
/// `row` must be valid for 32 bytes (16 with `half`) from `p · 32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn w4_row<const HALF: bool>(row: *const u8, p: usize, xv: &[__m256i; 4]) -> __m256i {
    // SAFETY: the caller guarantees the bytes read here are inside the row.
    let v = unsafe {
        if HALF {
            _mm256_zextsi128_si256(_mm_loadu_si128(row.add(p * 32) as *const __m128i))
        } else {
            _mm256_loadu_si256(row.add(p * 32) as *const __m256i)
        }
    };
    let m = _mm256_set1_epi16(0x0F);
    let a = _mm256_and_si256(v, m);
    let b = _mm256_and_si256(_mm256_srli_epi16::<8>(v), m);
    let c = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m);
    let d = _mm256_srli_epi16::<12>(v);
    _mm256_add_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(a, xv[0]), _mm256_madd_epi16(b, xv[1])),
        _mm256_add_epi32(_mm256_madd_epi16(c, xv[2]), _mm256_madd_epi16(d, xv[3])),
    )
}

/// Reduces the per-row partial sums `[block b: 4 lanes | block b+1: 4 lanes]` of 4 rows to
/// `[block b: rows 0..4 | block b+1: rows 0..4]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce4(d: [__m256i; 4]) -> __m256i {
    _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]))
}

/// One step of a w4 tile: blocks `2p` (and `2p+1` unless `HALF`) of 4 rows against token
/// pair `at` of `xp`, accumulated into `acc` as `[block 2p: rows | block 2p+1: rows]`.
///
/// # Safety
/// As [`w4_tile`], for pair `p`.
#[inline(always)]
unsafe fn w4_step<const SYM: bool, const PG: usize, const HALF: bool>(
    rows: &[*const u8; 4],
    [sc, mn]: [*const f16; 2],
    xp: &Prep,
    pair: usize,
    p: usize,
    row_bytes: usize,
    acc: __m256,
) -> __m256 {
    // SAFETY: the caller guarantees `pair` is a pair of `xp` and that the rows and tiles hold
    // blocks `2p` (and `2p+1` unless `HALF`); the CPU features are the caller's contract.
    unsafe {
        let xq = xp.q.as_ptr().add(pair * 64) as *const __m256i;
        let xv = [
            _mm256_loadu_si256(xq),
            _mm256_loadu_si256(xq.add(1)),
            _mm256_loadu_si256(xq.add(2)),
            _mm256_loadu_si256(xq.add(3)),
        ];
        if !HALF {
            // The next tile's rows follow this tile's 4 rows in memory: fetch its 128 bytes
            // per pair ahead (short rows defeat the hardware prefetcher). Prefetches past the
            // end of the matrix are harmless hints.
            let next = rows[0].wrapping_add(4 * row_bytes + p * 128) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(next);
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64));
        }
        let d = [
            w4_row::<HALF>(rows[0], p, &xv),
            w4_row::<HALF>(rows[1], p, &xv),
            w4_row::<HALF>(rows[2], p, &xv),
            w4_row::<HALF>(rows[3], p, &xv),
        ];
        let mut h = reduce4(d);
        let at = pair * 8;
        if SYM {
            h = _mm256_sub_epi32(
                h,
                _mm256_loadu_si256(xp.corr.as_ptr().add(at) as *const __m256i),
            );
        }
        let f = _mm256_cvtepi32_ps(h);
        let s = tile_factors::<PG, HALF>(sc, p);
        let sx = _mm256_loadu_ps(xp.sx.as_ptr().add(at));
        let mut acc = _mm256_fmadd_ps(f, _mm256_mul_ps(s, sx), acc);
        if !SYM {
            let m = tile_factors::<PG, HALF>(mn, p);
            acc = _mm256_fmadd_ps(m, _mm256_loadu_ps(xp.xs.as_ptr().add(at)), acc);
        }
        acc
    }
}

/// One 4-row tile of a w4 matrix against token `t`: returns the 4 outputs.
///
/// # Safety
/// `rows[i]` must each point at a whole packed row; `sc` (and `mn` unless `SYM`) at the
/// tile's `[group][4]` values; `t` must be a token of `xp`; `xb` the activation blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn w4_tile<const SYM: bool, const PG: usize>(
    rows: [*const u8; 4],
    sc: *const f16,
    mn: *const f16,
    xp: &Prep,
    t: usize,
    xb: usize,
    row_bytes: usize,
) -> __m128 {
    let mut acc = _mm256_setzero_ps();
    let base = t * xp.pairs;
    // SAFETY: pairs below `xb / 2` are whole; a last odd block is read as a half pair.
    unsafe {
        for p in 0..xb / 2 {
            acc = w4_step::<SYM, PG, false>(&rows, [sc, mn], xp, base + p, p, row_bytes, acc);
        }
        if xb % 2 == 1 {
            let p = xb / 2;
            acc = w4_step::<SYM, PG, true>(&rows, [sc, mn], xp, base + p, p, row_bytes, acc);
        }
    }
    fold(acc)
}

/// Runs `tile(rows, r0, t)` for every 4-row tile of `range` and every token and scatters the
/// 4 results into `out` (`m × range.len()`). A last partial tile repeats its last row (results
/// dropped).
fn for_each_tile(
    range: Range<usize>,
    m: usize,
    row_bytes: usize,
    data: *const u8,
    out: &mut [f32],
    mut tile: impl FnMut([*const u8; 4], usize, usize) -> __m128,
) {
    let (lo, hi) = (range.start, range.end);
    let len = hi - lo;
    for r0 in range.step_by(ROW_TILE) {
        let width = (hi - r0).min(ROW_TILE);
        // SAFETY: every index is clamped to a row below `n`, and `data` holds `n` rows.
        let rows: [*const u8; 4] =
            core::array::from_fn(|i| unsafe { data.add((r0 + i.min(width - 1)) * row_bytes) });
        for t in 0..m {
            let mut v = [0.0f32; 4];
            // SAFETY: `v` has room for 4 floats; `_mm_storeu_ps` needs no alignment.
            unsafe { _mm_storeu_ps(v.as_mut_ptr(), tile(rows, r0, t)) };
            let at = t * len + r0 - lo;
            out[at..at + width].copy_from_slice(&v[..width]);
        }
    }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C. Shapes are checked by the caller; `xp` was filled
/// from `x` in [`Order::W4`]; `out` is `m × range.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn w4_matmul_rows(
    w: &W4Matrix,
    x: &ActQ16,
    xp: &Prep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let (n, m, xb) = (w.rows(), x.rows(), x.blocks());
    let gpr = w.groups_per_row();
    let row_bytes = w.blocks_per_row() * 16;
    let sym = w.kind() == W4Kind::Symmetric;
    for_each_tile(
        range,
        m,
        row_bytes,
        w.packed.as_ptr(),
        out,
        |rows, r0, t| {
            let sc = tile_values(&w.scales, n, gpr, r0);
            let mn = tile_values(&w.mins, n, gpr, r0);
            let (s, mi) = (sc.as_ptr(), mn.as_ptr());
            // SAFETY: the rows hold `blocks_per_row ≥ xb` blocks, the tiles every group, and `t` is
            // a token of `xp`; the CPU features are this function's own contract.
            unsafe {
                match (sym, w.group()) {
                    (true, 32) => w4_tile::<true, 1>(rows, s, mi, xp, t, xb, row_bytes),
                    (true, 64) => w4_tile::<true, 2>(rows, s, mi, xp, t, xb, row_bytes),
                    (true, _) => w4_tile::<true, 4>(rows, s, mi, xp, t, xb, row_bytes),
                    (false, _) => w4_tile::<false, 1>(rows, s, mi, xp, t, xb, row_bytes),
                }
            }
        },
    );
}

/// Partial sums of one int8 block (32 bytes at `p`) against `[A C | B D]` activations.
///
/// # Safety
/// `p` must be valid for 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_row(p: *const u8, xac: __m256i, xbd: __m256i) -> __m256i {
    // SAFETY: the caller guarantees the block is readable.
    let v = unsafe { _mm256_loadu_si256(p as *const __m256i) };
    let even = _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(v));
    let odd = _mm256_srai_epi16::<8>(v);
    _mm256_add_epi32(_mm256_madd_epi16(even, xac), _mm256_madd_epi16(odd, xbd))
}

/// One 4-row tile of an int8 matrix against token `t`: `rows[i]` points at row `i`'s block 0
/// and `stride` bytes separate a row's consecutive blocks (the tile's width · 32, see
/// [`crate::quant`]'s int8 layout).
///
/// # Safety
/// As [`w4_tile`], with `xb` blocks per row at that stride.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_tile(
    rows: [*const u8; 4],
    stride: usize,
    pf: *const u8,
    sc: *const f16,
    xp: &Prep,
    t: usize,
    xb: usize,
) -> __m128 {
    let mut acc = _mm256_setzero_ps();
    let base = t * xp.pairs;
    for p in 0..xp.pairs {
        let half = 2 * p + 1 == xb;
        // SAFETY: as in `w4_tile`; block `2p+1` is read only when it exists.
        unsafe {
            let xq = xp.q.as_ptr().add((base + p) * 64) as *const __m256i;
            let (x0ac, x0bd) = (_mm256_loadu_si256(xq), _mm256_loadu_si256(xq.add(1)));
            // Prefetch this tile's share of the same pair of blocks of the next 8-row tile
            // (`pf`, see `q8_matmul`). Prefetches past the end are harmless hints.
            let next = pf.wrapping_add(p * 2 * stride) as *const i8;
            for l in 0..4 {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * l));
            }
            let (b0, b1) = (2 * p * stride, (2 * p + 1) * stride);
            let d0 = [
                q8_row(rows[0].add(b0), x0ac, x0bd),
                q8_row(rows[1].add(b0), x0ac, x0bd),
                q8_row(rows[2].add(b0), x0ac, x0bd),
                q8_row(rows[3].add(b0), x0ac, x0bd),
            ];
            let q0 = reduce4(d0);
            let q1 = if half {
                _mm256_setzero_si256()
            } else {
                let (x1ac, x1bd) = (_mm256_loadu_si256(xq.add(2)), _mm256_loadu_si256(xq.add(3)));
                reduce4([
                    q8_row(rows[0].add(b1), x1ac, x1bd),
                    q8_row(rows[1].add(b1), x1ac, x1bd),
                    q8_row(rows[2].add(b1), x1ac, x1bd),
                    q8_row(rows[3].add(b1), x1ac, x1bd),
                ])
            };
            let h = _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(q0, q1),
                _mm256_permute2x128_si256::<0x31>(q0, q1),
            );
            let f = _mm256_cvtepi32_ps(h);
            let s = if half {
                tile_factors::<1, true>(sc, p)
            } else {
                tile_factors::<1, false>(sc, p)
            };
            let sx = _mm256_loadu_ps(xp.sx.as_ptr().add((base + p) * 8));
            acc = _mm256_fmadd_ps(f, _mm256_mul_ps(s, sx), acc);
        }
    }
    fold(acc)
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C. Shapes are checked by the caller; `xp` was filled
/// from `x` in [`Order::Q8`]; `range` starts on a multiple of 8 rows; `out` is `m ×
/// range.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q8_matmul_rows(
    w: &Q8Matrix,
    x: &ActQ16,
    xp: &Prep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let (n, m, xb) = (w.rows(), x.rows(), x.blocks());
    let (lo, len) = (range.start, range.len());
    for r8 in range.step_by(Q8_TILE) {
        let w8 = (n - r8).min(Q8_TILE);
        // The 8-row tile's blocks are block-major, `w8` rows each, read as 4-row tiles (a
        // partial last one repeats its last row; those results are dropped).
        let tile = &w.values[r8 * xb * BLOCK..(r8 + w8) * xb * BLOCK];
        let stride = w8 * BLOCK;
        // Rows not in this tile: prefetch hints only (`wrapping_add`, never dereferenced).
        let next = (tile.as_ptr() as *const u8).wrapping_add(tile.len());
        for r0 in (r8..r8 + w8).step_by(ROW_TILE) {
            let width = (r8 + w8 - r0).min(ROW_TILE);
            let first = r0 - r8;
            let rows: [*const u8; 4] = core::array::from_fn(|i| {
                tile[(first + i.min(width - 1)) * BLOCK..].as_ptr() as *const u8
            });
            let sc = tile_values(&w.scales, n, xb, r0);
            // Each 4-row half prefetches its 4 lines per pair of blocks of the next tile.
            let pf = next.wrapping_add(first * 64);
            for t in 0..m {
                let mut v = [0.0f32; 4];
                // SAFETY: the tile holds `xb` blocks per row at `stride`, `sc` its `xb` groups of
                // 4 scales, `t` is a token of `xp`; `v` has room for 4 floats.
                unsafe {
                    let acc = q8_tile(rows, stride, pf, sc.as_ptr(), xp, t, xb);
                    _mm_storeu_ps(v.as_mut_ptr(), acc);
                }
                let at = t * len + r0 - lo;
                out[at..at + width].copy_from_slice(&v[..width]);
            }
        }
    }
}

// ---- ggml block formats (see `crate::ggml`) ----
//
// Each 4-row tile is decoded once ([`GgmlTile`]: i8 weights in index order, factors
// `[unit][4 rows]`), then every token runs over it: per row and unit, `vpmovsxbw` widens 16
// weights to int16 and `vpmaddwd` multiplies them with the activations (in their own order, no
// reordering), two units at a time are reduced across the 4 rows into `[unit u: rows 0..4 |
// unit u+1: rows 0..4]`, which lines up with 8 consecutive tile factors and activation scales.

/// Partial i32 sums (8 lanes) of one unit of `U` (16 or 32) weights at `w` against the
/// activations at `x`.
///
/// # Safety
/// `w` must be valid for `U` i8 and `x` for `U` i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_unit<const U: usize>(w: *const i8, x: *const i16) -> __m256i {
    // SAFETY: the caller guarantees `U` readable values behind each pointer.
    unsafe {
        let lo = _mm256_madd_epi16(
            _mm256_cvtepi8_epi16(_mm_loadu_si128(w as *const __m128i)),
            _mm256_loadu_si256(x as *const __m256i),
        );
        if U == 16 {
            lo
        } else {
            let hi = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_loadu_si128(w.add(16) as *const __m128i)),
                _mm256_loadu_si256(x.add(16) as *const __m256i),
            );
            _mm256_add_epi32(lo, hi)
        }
    }
}

/// `[rows 0..4 of unit u | rows 0..4 of unit u+1]` i32 sums from two units' 8-lane partials.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn ggml_reduce(u0: [__m256i; 4], u1: [__m256i; 4]) -> __m256i {
    // [row sums over lanes 0..4 | over lanes 4..8] for rows 0..4.
    let x = reduce4(u0);
    let y = reduce4(u1);
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(x, y),
        _mm256_permute2x128_si256::<0x31>(x, y),
    )
}

/// The unit-`u` partial sums of the 4 rows of a decoded tile (rows `k` values apart).
///
/// # Safety
/// Unit `u` lies inside every row at `w` and inside the activations at `x`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_units4<const U: usize>(
    w: *const i8,
    k: usize,
    x: *const i16,
    u: usize,
) -> [__m256i; 4] {
    // SAFETY: forwarded from the caller.
    unsafe {
        let (w, x) = (w.add(u * U), x.add(u * U));
        [
            ggml_unit::<U>(w, x),
            ggml_unit::<U>(w.add(k), x),
            ggml_unit::<U>(w.add(2 * k), x),
            ggml_unit::<U>(w.add(3 * k), x),
        ]
    }
}

/// One decoded chunk of a 4-row tile (`units` units of `U` values, starting at unit `u0` of
/// the row and at block `b0` of 32) against token `t`: the 4 rows' partial outputs.
///
/// # Safety
/// `tile` holds that chunk decoded from the matrix `xp` and `x` were prepared for, and
/// `t < x.rows()`; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_tile<const U: usize, const MIN: bool>(
    tile: &GgmlTile,
    xp: &GgmlPrep,
    x: &ActQ16,
    t: usize,
    [u0, units, b0]: [usize; 3],
) -> __m128 {
    let k = units * U;
    let xq = x.q[t * x.blocks() * BLOCK + u0 * U..].as_ptr();
    let sx = xp.sx[(t * xp.units + u0) * 4..].as_ptr();
    let wq = tile.q.as_ptr();
    let a = tile.a.as_ptr();
    let mut acc = _mm256_setzero_ps();
    // SAFETY: units `u < units` lie inside every decoded row (`k = units · U` values apart)
    // and the token's activations from `u0`; the factor arrays hold `units × 4` values.
    unsafe {
        for u in (0..units / 2 * 2).step_by(2) {
            let d0 = ggml_units4::<U>(wq, k, xq, u);
            let d1 = ggml_units4::<U>(wq, k, xq, u + 1);
            let f = _mm256_cvtepi32_ps(ggml_reduce(d0, d1));
            let s = _mm256_mul_ps(
                _mm256_loadu_ps(a.add(u * 4)),
                _mm256_loadu_ps(sx.add(u * 4)),
            );
            acc = _mm256_fmadd_ps(f, s, acc);
        }
        if units % 2 == 1 {
            let u = units - 1;
            let d0 = ggml_units4::<U>(wq, k, xq, u);
            let z = [_mm256_setzero_si256(); 4];
            let f = _mm256_cvtepi32_ps(ggml_reduce(d0, z));
            let s = _mm_mul_ps(_mm_loadu_ps(a.add(u * 4)), _mm_loadu_ps(sx.add(u * 4)));
            acc = _mm256_fmadd_ps(f, _mm256_zextps128_ps256(s), acc);
        }
        let mut out = fold(acc);
        if MIN {
            // The minimum's term `Σ_b c_b · sx · Σ xq` reads no weights.
            let c = tile.c.as_ptr();
            let xs = xp.xs[(t * x.blocks() + b0) * 4..].as_ptr();
            for b in 0..k / BLOCK {
                out = _mm_fmadd_ps(_mm_loadu_ps(c.add(b * 4)), _mm_loadu_ps(xs.add(b * 4)), out);
            }
        }
        out
    }
}

// ---- ggml decode (m = 1): Q4_K and Q6_K decoded in registers from the block bytes ----
//
// With one token the tile's decode (shared Rust into an i8 scratch) is most of the work, so
// Q4_K and Q6_K skip it: per row and super-block, the 32-byte loads of `qs` (Q4_K) or `ql`
// and `qh` (Q6_K) are split with 16-bit shifts and byte masks (no bits cross a byte once
// masked) into the 32 values of two units, already in index order, widened by `vpmovsxbw` /
// `vpmovzxbw` and multiplied with the activations as in [`ggml_unit`]. The unit pairs, their
// reduction across the 4 rows and every f32 operation are those of [`ggml_tile`] in the same
// order, so the results are bit-identical to the tile path (the test
// `nan_activations_propagate_and_prefill_equals_decode` compares m = 1 with m = 9).

/// i32 partials (8 lanes) of 32 weights held as bytes in `v` (values 0..=15, or −32..=31
/// with `SIGNED`) against the activations at `x`, as two units of 16: `(lo 16, hi 16)`.
///
/// # Safety
/// `x` must be valid for 32 i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_bytes2<const SIGNED: bool>(v: __m256i, x: *const i16) -> (__m256i, __m256i) {
    let (lo, hi) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let (lo, hi) = if SIGNED {
        (_mm256_cvtepi8_epi16(lo), _mm256_cvtepi8_epi16(hi))
    } else {
        (_mm256_cvtepu8_epi16(lo), _mm256_cvtepu8_epi16(hi))
    };
    // SAFETY: the caller guarantees 32 readable i16 at `x`.
    unsafe {
        (
            _mm256_madd_epi16(lo, _mm256_loadu_si256(x as *const __m256i)),
            _mm256_madd_epi16(hi, _mm256_loadu_si256(x.add(16) as *const __m256i)),
        )
    }
}

/// `out[r] = x · w[r]` for one token of a Q4_K or Q6_K matrix, decoding in registers.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `w` is Q4_K or Q6_K, `x` has one row of `w.cols()`
/// values, `out` has `w.rows()` values.
// The 4 rows × 4 value groups of a Q6_K half are indexed both ways.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_matmul_direct1(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let n = w.rows();
    let (lo, hi) = (range.start, range.end);
    let q6 = w.format() == GgmlFormat::Q6K;
    let (rb, bb) = (w.row_bytes(), w.format().block_bytes());
    let nsb = w.cols() / 256;
    let (m4, m3) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
    let k32 = _mm256_set1_epi8(32);
    for r0 in range.step_by(ROW_TILE) {
        let mut total = _mm_setzero_ps();
        for sb in 0..nsb {
            // Per-unit factors `[unit][4 rows]` (16 units for Q6_K, 8 for Q4_K) and Q4_K's
            // per-32 terms, as the tile decode computes them.
            let mut a = [0.0f32; 64];
            let mut c = [0.0f32; 32];
            let mut blk = [core::ptr::null::<u8>(); ROW_TILE];
            for (j, p) in blk.iter_mut().enumerate() {
                let r = (r0 + j).min(n - 1);
                let b = &w.data[r * rb + sb * bb..r * rb + (sb + 1) * bb];
                *p = b.as_ptr();
                if r0 + ROW_TILE + j < n {
                    let at = (r0 + ROW_TILE + j) * rb + sb * bb;
                    for line in w.data[at..at + bb].chunks(64) {
                        crate::arch::prefetch(line.as_ptr());
                    }
                }
                if q6 {
                    let d = f16_bits_to_f32(u16::from_le_bytes([b[208], b[209]]));
                    for u in 0..16 {
                        a[u * 4 + j] = d * f32::from(b[192 + u] as i8);
                    }
                } else {
                    let d = f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]));
                    let dmin = f16_bits_to_f32(u16::from_le_bytes([b[2], b[3]]));
                    // `scale_min_k4` for all 8 sub-blocks at once, 4 bytes per word (with
                    // `w0, w1, w2` the scale bytes 0..4, 4..8, 8..12): scales 0..4 `w0 & 63`,
                    // 4..8 `(w2 & 15) | (w0 >> 6) << 4`; minimums 0..4 `w1 & 63`, 4..8
                    // `(w2 >> 4 & 15) | (w1 >> 6) << 4` (masks keep each byte's own bits).
                    let word =
                        |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                    let (w0, w1, w2) = (word(4), word(8), word(12));
                    let (m6, m4, m2) = (0x3F3F_3F3Fu32, 0x0F0F_0F0Fu32, 0x0303_0303u32);
                    let sc = [w0 & m6, (w2 & m4) | (((w0 >> 6) & m2) << 4)];
                    let mn = [w1 & m6, ((w2 >> 4) & m4) | (((w1 >> 6) & m2) << 4)];
                    for s in 0..8 {
                        let (scale, min) = (
                            sc[s / 4] >> (8 * (s % 4)) & 0xFF,
                            mn[s / 4] >> (8 * (s % 4)) & 0xFF,
                        );
                        a[s * 4 + j] = d * scale as f32;
                        c[s * 4 + j] = -(dmin * min as f32);
                    }
                }
            }
            let xq = x.q[sb * 256..].as_ptr();
            let u0 = sb * if q6 { 16 } else { 8 };
            let sx = xp.sx[u0 * 4..].as_ptr();
            let mut acc = _mm256_setzero_ps();
            // SAFETY: each `blk[j]` points at a whole block of `bb` bytes (the 32-byte loads
            // stay inside it: Q4_K `qs` at 16..144, Q6_K `ql` 0..128, `qh` 128..192); `xq`
            // has the super-block's 256 activations, `sx` its units × 4 factors.
            unsafe {
                // One pair of units (u, u+1) per step: rows' i32 partials, reduced, scaled.
                let mut step = |u: usize, d: [(__m256i, __m256i); 4]| {
                    let f = _mm256_cvtepi32_ps(ggml_reduce(
                        [d[0].0, d[1].0, d[2].0, d[3].0],
                        [d[0].1, d[1].1, d[2].1, d[3].1],
                    ));
                    let s = _mm256_mul_ps(
                        _mm256_loadu_ps(a.as_ptr().add(u * 4)),
                        _mm256_loadu_ps(sx.add(u * 4)),
                    );
                    acc = _mm256_fmadd_ps(f, s, acc);
                };
                if q6 {
                    for h in 0..2 {
                        let ld = |j: usize, at: usize| {
                            _mm256_loadu_si256(blk[j].add(at) as *const __m256i)
                        };
                        let mut v = [[_mm256_setzero_si256(); 4]; 4];
                        for (j, v) in v.iter_mut().enumerate() {
                            let ql0 = ld(j, 64 * h);
                            let ql1 = ld(j, 64 * h + 32);
                            let qh = ld(j, 128 + 32 * h);
                            // Value 128h + 32k + l: low 4 bits from ql, bits 2k, 2k+1 of qh.
                            let hi = [
                                _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m3),
                                _mm256_and_si256(_mm256_slli_epi16::<2>(qh), m3),
                                _mm256_and_si256(qh, m3),
                                _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m3),
                            ];
                            let lo = [
                                _mm256_and_si256(ql0, m4),
                                _mm256_and_si256(ql1, m4),
                                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                            ];
                            for (k, v) in v.iter_mut().enumerate() {
                                *v = _mm256_sub_epi8(_mm256_or_si256(lo[k], hi[k]), k32);
                            }
                        }
                        for k in 0..4 {
                            let x = xq.add(128 * h + 32 * k);
                            step(
                                8 * h + 2 * k,
                                [
                                    ggml_bytes2::<true>(v[0][k], x),
                                    ggml_bytes2::<true>(v[1][k], x),
                                    ggml_bytes2::<true>(v[2][k], x),
                                    ggml_bytes2::<true>(v[3][k], x),
                                ],
                            );
                        }
                    }
                } else {
                    for i in 0..4 {
                        let mut d = [[(_mm256_setzero_si256(), _mm256_setzero_si256()); 4]; 2];
                        for j in 0..ROW_TILE {
                            let qs = _mm256_loadu_si256(blk[j].add(16 + 32 * i) as *const __m256i);
                            let lo = _mm256_and_si256(qs, m4);
                            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(qs), m4);
                            // Sub-block 2i (low nibbles) and 2i+1 (high), 32 values each.
                            let (x0, x1) = (xq.add(64 * i), xq.add(64 * i + 32));
                            let (p0, p1) = ggml_bytes2::<false>(lo, x0);
                            let (p2, p3) = ggml_bytes2::<false>(hi, x1);
                            d[0][j] = (_mm256_add_epi32(p0, p1), _mm256_setzero_si256());
                            d[1][j] = (_mm256_add_epi32(p2, p3), _mm256_setzero_si256());
                        }
                        step(
                            2 * i,
                            [
                                (d[0][0].0, d[1][0].0),
                                (d[0][1].0, d[1][1].0),
                                (d[0][2].0, d[1][2].0),
                                (d[0][3].0, d[1][3].0),
                            ],
                        );
                    }
                }
                let mut o = fold(acc);
                if !q6 {
                    let xs = xp.xs[sb * 8 * 4..].as_ptr();
                    for b in 0..8 {
                        o = _mm_fmadd_ps(
                            _mm_loadu_ps(c.as_ptr().add(b * 4)),
                            _mm_loadu_ps(xs.add(b * 4)),
                            o,
                        );
                    }
                }
                total = _mm_add_ps(total, o);
            }
        }
        let width = (hi - r0).min(ROW_TILE);
        let mut o = [0.0f32; 4];
        // SAFETY: `o` has room for 4 floats; `_mm_storeu_ps` needs no alignment.
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), total) };
        out[r0 - lo..r0 - lo + width].copy_from_slice(&o[..width]);
    }
}

/// i32 partials (8 lanes) of one Q5_0 block (22 bytes at `b`) against its 32 activations at
/// `x` (index order): `vpmovzxbw` puts byte `j` of `qs` in lane `j`, whose low nibble is value
/// `j` and high nibble value `j + 16`; lane `j` of a splatted 16-bit half of `qh` tested
/// against bit `j` (`vpcmpeqw`) turns `lo` into `lo − 16` where the fifth bit is clear.
///
/// # Safety
/// The CPU must have AVX2; `b` valid for 22 bytes, `x` for 32 i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_block(b: *const u8, x: *const i16) -> __m256i {
    let bits = _mm256_setr_epi16(
        1,
        1 << 1,
        1 << 2,
        1 << 3,
        1 << 4,
        1 << 5,
        1 << 6,
        1 << 7,
        1 << 8,
        1 << 9,
        1 << 10,
        1 << 11,
        1 << 12,
        1 << 13,
        1 << 14,
        i16::MIN,
    );
    // SAFETY: `qh` at 2..6 and `qs` at 6..22 lie inside the block; `x` as the caller says.
    unsafe {
        let v = _mm256_cvtepu8_epi16(_mm_loadu_si128(b.add(6) as *const __m128i));
        let qh = u32::from_le_bytes([*b.add(2), *b.add(3), *b.add(4), *b.add(5)]);
        let (z, neg) = (_mm256_setzero_si256(), _mm256_set1_epi16(-16));
        let q = |v: __m256i, h: u32| {
            let h = _mm256_set1_epi16(h as u16 as i16);
            let clear = _mm256_cmpeq_epi16(_mm256_and_si256(h, bits), z);
            _mm256_or_si256(v, _mm256_and_si256(clear, neg))
        };
        let lo = q(_mm256_and_si256(v, _mm256_set1_epi16(0x0F)), qh & 0xFFFF);
        let hi = q(_mm256_srli_epi16::<4>(v), qh >> 16);
        _mm256_add_epi32(
            _mm256_madd_epi16(lo, _mm256_loadu_si256(x as *const __m256i)),
            _mm256_madd_epi16(hi, _mm256_loadu_si256(x.add(16) as *const __m256i)),
        )
    }
}

/// `out[r] = x · w[r]` for one token of a Q5_0 matrix, decoding in registers
/// ([`q5_0_block`]); the units (blocks) in pairs, their reduction and every f32 operation are
/// [`ggml_tile`]'s for the same chunks, so the results are bit-identical to the tile path.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `w` is Q5_0, `x` has one row of `w.cols()` values,
/// `xp` was filled from it, `out` has `range.len()` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ggml_q5_0_direct1(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let n = w.rows();
    let (lo, hi) = (range.start, range.end);
    let (rb, bb) = (w.row_bytes(), w.format().block_bytes());
    let xq = x.q.as_ptr();
    let sx = xp.sx.as_ptr();
    let half_at = |b: &[u8], at: usize| f16_bits_to_f32(u16::from_le_bytes([b[at], b[at + 1]]));
    for r0 in range.step_by(ROW_TILE) {
        let row: [&[u8]; ROW_TILE] =
            core::array::from_fn(|j| &w.data[(r0 + j).min(n - 1) * rb..][..rb]);
        if r0 + ROW_TILE < n {
            for j in 0..ROW_TILE.min(n - r0 - ROW_TILE) {
                let next = &w.data[(r0 + ROW_TILE + j) * rb..][..rb];
                for line in next.chunks(64) {
                    crate::arch::prefetch(line.as_ptr());
                }
            }
        }
        let mut total = _mm_setzero_ps();
        for (c0, nb) in GgmlTile::chunks(w) {
            // The chunk's factors `[block][4 rows]`, as the tile holds them.
            let mut a = [0.0f32; 32];
            for (j, r) in row.iter().enumerate() {
                for u in 0..nb {
                    a[4 * u + j] = half_at(r, (c0 + u) * bb);
                }
            }
            // SAFETY: every block of the chunk lies inside its row, the activations and `sx`
            // hold the row's blocks; the CPU features are this function's contract.
            unsafe {
                let units4 = |u: usize| -> [__m256i; 4] {
                    let b = c0 + u;
                    let x = xq.add(32 * b);
                    core::array::from_fn(|j| q5_0_block(row[j].as_ptr().add(b * bb), x))
                };
                let sx = sx.add(4 * c0);
                let mut acc = _mm256_setzero_ps();
                for u in (0..nb / 2 * 2).step_by(2) {
                    let f = _mm256_cvtepi32_ps(ggml_reduce(units4(u), units4(u + 1)));
                    let s = _mm256_mul_ps(
                        _mm256_loadu_ps(a.as_ptr().add(u * 4)),
                        _mm256_loadu_ps(sx.add(u * 4)),
                    );
                    acc = _mm256_fmadd_ps(f, s, acc);
                }
                if nb % 2 == 1 {
                    let u = nb - 1;
                    let z = [_mm256_setzero_si256(); 4];
                    let f = _mm256_cvtepi32_ps(ggml_reduce(units4(u), z));
                    let s = _mm_mul_ps(
                        _mm_loadu_ps(a.as_ptr().add(u * 4)),
                        _mm_loadu_ps(sx.add(u * 4)),
                    );
                    acc = _mm256_fmadd_ps(f, _mm256_zextps128_ps256(s), acc);
                }
                total = _mm_add_ps(total, fold(acc));
            }
        }
        let width = (hi - r0).min(ROW_TILE);
        let mut o = [0.0f32; 4];
        // SAFETY: `o` has room for 4 floats; `_mm_storeu_ps` needs no alignment.
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), total) };
        out[r0 - lo..r0 - lo + width].copy_from_slice(&o[..width]);
    }
}

thread_local! {
    /// Each thread's decoded tile and per-token accumulators for [`ggml_matmul_rows`], reused
    /// by every call on that thread.
    static GGML_SCRATCH: core::cell::RefCell<(Option<GgmlTile>, Vec<__m128>)> =
        const { core::cell::RefCell::new((None, Vec::new())) };
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C. Shapes are checked by the caller; `xp` was filled
/// from `x` for `w`'s unit; `out` is `m × range.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn ggml_matmul_rows(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    if x.rows() == 1 && ggml_direct(w.format()) {
        // SAFETY: one token of a format with a direct decode; shapes checked by the caller;
        // the CPU features are this function's own contract.
        unsafe {
            if w.format() == GgmlFormat::Q5_0 {
                ggml_q5_0_direct1(w, x, xp, range, out)
            } else {
                ggml_matmul_direct1(w, x, xp, range, out)
            }
        };
        return;
    }
    // SAFETY: as this function's contract.
    unsafe { ggml_matmul_rows_tiled(w, x, xp, range, out) }
}

/// Whether one token of `format` runs a direct decode ([`ggml_q5_0_direct1`],
/// [`ggml_matmul_direct1`]).
pub(crate) fn ggml_direct(format: GgmlFormat) -> bool {
    matches!(format, GgmlFormat::Q5_0 | GgmlFormat::Q4K | GgmlFormat::Q6K)
}

/// [`ggml_matmul_rows`] through the decoded tile for every input (the direct decode's twin).
///
/// # Safety
/// As [`ggml_matmul_rows`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn ggml_matmul_rows_tiled(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let m = x.rows();
    let f = w.format();
    let (u, v) = (f.unit(), f.block_values());
    let (lo, hi) = (range.start, range.end);
    let len = hi - lo;
    // Taken out of the thread-local and put back (rather than borrowed in a closure) so the
    // loop stays inside this function's target features.
    let (mut tile, mut acc) = GGML_SCRATCH.take();
    let tile_ref = tile.get_or_insert_with(GgmlTile::new);
    acc.resize(m, _mm_setzero_ps());
    for r0 in range.step_by(ROW_TILE) {
        acc.fill(_mm_setzero_ps());
        for (c0, nb) in GgmlTile::chunks(w) {
            tile_ref.load(w, r0, c0, nb);
            let at = [c0 * v / u, nb * v / u, c0 * v / BLOCK];
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: the tile holds this chunk of `w`, `xp` was built for `w` and `x`,
                // `t < m`; the CPU features are this function's own contract.
                let o = unsafe {
                    match (u == 16, f.has_min()) {
                        (true, _) => ggml_tile::<16, false>(tile_ref, xp, x, t, at),
                        (false, true) => ggml_tile::<32, true>(tile_ref, xp, x, t, at),
                        (false, false) => ggml_tile::<32, false>(tile_ref, xp, x, t, at),
                    }
                };
                *acc = _mm_add_ps(*acc, o);
            }
        }
        let width = (hi - r0).min(ROW_TILE);
        for (t, a) in acc.iter().enumerate() {
            let mut o = [0.0f32; 4];
            // SAFETY: `o` has room for 4 floats; `_mm_storeu_ps` needs no alignment.
            unsafe { _mm_storeu_ps(o.as_mut_ptr(), *a) };
            let at = t * len + r0 - lo;
            out[at..at + width].copy_from_slice(&o[..width]);
        }
    }
    GGML_SCRATCH.set((tile, acc));
}

/// Sum of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = fold(v);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// f32 dot product, 4 FMA accumulators of 8 lanes.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `a` and `b` have equal lengths.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let body = n / 32 * 32;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    for i in (0..body).step_by(32) {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `i + 8j + 8 ≤ body ≤ n`.
            unsafe {
                let va = _mm256_loadu_ps(pa.add(i + 8 * j));
                *acc = _mm256_fmadd_ps(va, _mm256_loadu_ps(pb.add(i + 8 * j)), *acc);
            }
        }
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += a[i] * b[i];
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    hsum(s) + tail
}

/// f16 weights × f32 activations: each row is widened by `vcvtph2ps` inside a 4-accumulator
/// FMA dot; the token loop is inside the row loop so a row is read from memory once.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C. Shapes are checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16_matmul_rows(
    w: &F16Matrix,
    x: &[f32],
    m: usize,
    range: Range<usize>,
    out: &mut [f32],
) {
    let k = w.cols();
    let (lo, len) = (range.start, range.len());
    let body = k / 32 * 32;
    for r in range {
        let wr = &w.values[r * k..(r + 1) * k];
        for t in 0..m {
            let xr = &x[t * k..(t + 1) * k];
            let mut acc = [_mm256_setzero_ps(); 4];
            for i in (0..body).step_by(32) {
                for (j, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `i + 8j + 8 ≤ body ≤ k` for both rows.
                    unsafe {
                        let wv = _mm256_cvtph_ps(_mm_loadu_si128(
                            wr.as_ptr().add(i + 8 * j) as *const __m128i
                        ));
                        let xv = _mm256_loadu_ps(xr.as_ptr().add(i + 8 * j));
                        *acc = _mm256_fmadd_ps(xv, wv, *acc);
                    }
                }
            }
            let mut tail = 0.0f32;
            for i in body..k {
                tail += xr[i] * wr[i].to_f32();
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
            out[t * len + r - lo] = hsum(s) + tail;
        }
    }
}

// ---- Attention kernels (see `crate::attn`): one KV head vector per call. ----
//
// f16 widens with F16C `vcvtph2ps` (exact for every half, infinities and NaNs included), int8
// and int4 with `vpmovsxbd` then `vcvtdq2ps`. The dots use FMA; the axpys use a separate
// multiply and add, so they round exactly like the reference (`out_i + p · x_i`).

/// Sixteen i8 (a 128-bit vector) to two f32x8 in index order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn i8x16_to_f32(v: __m128i) -> [__m256; 2] {
    [
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)),
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(v))),
    ]
}

/// The 32 values `n − 8` of one int4 group (16 bytes at `p`) as four f32x8 in index order.
///
/// # Safety
/// `p` must be valid for 16 bytes; the CPU must have AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn i4_group(p: *const u8) -> [__m256; 4] {
    // SAFETY: the caller guarantees 16 readable bytes.
    let v = unsafe { _mm_loadu_si128(p as *const __m128i) };
    let m = _mm_set1_epi8(0x0F);
    let eight = _mm_set1_epi8(8);
    let lo = i8x16_to_f32(_mm_sub_epi8(_mm_and_si128(v, m), eight));
    let hi = i8x16_to_f32(_mm_sub_epi8(
        _mm_and_si128(_mm_srli_epi16::<4>(v), m),
        eight,
    ));
    [lo[0], lo[1], hi[0], hi[1]]
}

/// `Σ q_i · x_i` over one group, as 8 lanes.
///
/// # Safety
/// `q` must be valid for 32 floats; the CPU must have AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn i4_group_dot(q: *const f32, x: &[__m256; 4]) -> __m256 {
    // SAFETY: the caller guarantees 32 readable floats.
    unsafe {
        let a = _mm256_mul_ps(_mm256_loadu_ps(q), x[0]);
        let b = _mm256_mul_ps(_mm256_loadu_ps(q.add(8)), x[1]);
        let a = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(16)), x[2], a);
        let b = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(24)), x[3], b);
        _mm256_add_ps(a, b)
    }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_dot_f16(q: &[f32], k: &[f16]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 16 * 16;
    let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in (0..body).step_by(16) {
        // SAFETY: `i + 16 ≤ body ≤ n` for both slices.
        unsafe {
            let kp = k.as_ptr().add(i) as *const __m128i;
            let k0 = _mm256_cvtph_ps(_mm_loadu_si128(kp));
            let k1 = _mm256_cvtph_ps(_mm_loadu_si128(kp.add(1)));
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i)), k0, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i + 8)), k1, a1);
        }
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += q[i] * k[i].to_f32();
    }
    hsum(_mm256_add_ps(a0, a1)) + tail
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_axpy_f16(p: f32, x: &[f16], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 8 * 8;
    let pv = _mm256_set1_ps(p);
    for i in (0..body).step_by(8) {
        // SAFETY: `i + 8 ≤ body ≤ n` for both slices.
        unsafe {
            let v = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
            let o = out.as_mut_ptr().add(i);
            _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(pv, v)));
        }
    }
    for i in body..n {
        out[i] += p * x[i].to_f32();
    }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_dot_i8(q: &[f32], k: &[i8]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 16 * 16;
    let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in (0..body).step_by(16) {
        // SAFETY: `i + 16 ≤ body ≤ n` for both slices.
        unsafe {
            let [k0, k1] = i8x16_to_f32(_mm_loadu_si128(k.as_ptr().add(i) as *const __m128i));
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i)), k0, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i + 8)), k1, a1);
        }
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += q[i] * f32::from(k[i]);
    }
    hsum(_mm256_add_ps(a0, a1)) + tail
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_axpy_i8(p: f32, x: &[i8], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 16 * 16;
    let pv = _mm256_set1_ps(p);
    for i in (0..body).step_by(16) {
        // SAFETY: `i + 16 ≤ body ≤ n` for both slices.
        unsafe {
            let v = i8x16_to_f32(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
            for (j, v) in v.iter().enumerate() {
                let o = out.as_mut_ptr().add(i + 8 * j);
                _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(pv, *v)));
            }
        }
    }
    for i in body..n {
        out[i] += p * f32::from(x[i]);
    }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_axpy_f32(p: f32, x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 8 * 8;
    let pv = _mm256_set1_ps(p);
    for i in (0..body).step_by(8) {
        // SAFETY: `i + 8 ≤ body ≤ n` for both slices.
        unsafe {
            let v = _mm256_loadu_ps(x.as_ptr().add(i));
            let o = out.as_mut_ptr().add(i);
            _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(pv, v)));
        }
    }
    for i in body..n {
        out[i] += p * x[i];
    }
}

/// `Σ_g s_g · Σ q_i (n_i − 8)` (`SCALED`), else `Σ q_i (n_i − 8)`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C. `nib` (and `scales` if `SCALED`) must hold exactly
/// `⌈q.len()/32⌉` groups (the dispatcher checks it).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_dot_i4<const SCALED: bool>(q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    let full = (q.len() / I4_GROUP).min(nib.len() / I4_GROUP_BYTES);
    let mut acc = _mm256_setzero_ps();
    let step = |acc: __m256, d: __m256, g: usize| {
        if SCALED {
            _mm256_fmadd_ps(d, _mm256_set1_ps(scales[g].to_f32()), acc)
        } else {
            _mm256_add_ps(acc, d)
        }
    };
    for g in 0..full {
        // SAFETY: group `g < full` has 16 bytes in `nib` and 32 floats in `q`.
        let d = unsafe {
            let x = i4_group(nib.as_ptr().add(g * I4_GROUP_BYTES));
            i4_group_dot(q.as_ptr().add(g * I4_GROUP), &x)
        };
        acc = step(acc, d, g);
    }
    let rest = &q[full * I4_GROUP..];
    if !rest.is_empty() {
        // A last, partial group: `q` zero-padded to 32 values, so the padding counts 0.
        let mut qp = [0.0f32; I4_GROUP];
        qp[..rest.len()].copy_from_slice(rest);
        let bytes = &nib[full * I4_GROUP_BYTES..(full + 1) * I4_GROUP_BYTES];
        // SAFETY: `bytes` is 16 bytes, `qp` 32 floats.
        let d = unsafe { i4_group_dot(qp.as_ptr(), &i4_group(bytes.as_ptr())) };
        acc = step(acc, d, full);
    }
    hsum(acc)
}

/// `out_i += (p · s_g) · (n_i − 8)`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C. `nib` and `scales` must hold exactly `⌈out.len()/32⌉`
/// groups (the dispatcher checks it).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn attn_axpy_i4g32(p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    let groups = out
        .chunks_mut(I4_GROUP)
        .zip(nib.chunks_exact(I4_GROUP_BYTES));
    for ((outs, bytes), s) in groups.zip(scales) {
        let f = _mm256_set1_ps(p * s.to_f32());
        // SAFETY: `bytes` is 16 bytes; the CPU features are this function's own contract.
        let x = unsafe { i4_group(bytes.as_ptr()) };
        if outs.len() == I4_GROUP {
            for (j, x) in x.iter().enumerate() {
                // SAFETY: `outs` holds 32 floats = four 8-float vectors.
                unsafe {
                    let o = outs.as_mut_ptr().add(8 * j);
                    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(f, *x)));
                }
            }
        } else {
            let mut t = [0.0f32; I4_GROUP];
            for (j, x) in x.iter().enumerate() {
                // SAFETY: `t` holds 32 floats.
                unsafe { _mm256_storeu_ps(t.as_mut_ptr().add(8 * j), _mm256_mul_ps(f, *x)) };
            }
            for (o, t) in outs.iter_mut().zip(t) {
                *o += t;
            }
        }
    }
}
