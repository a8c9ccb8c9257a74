//! wasm32 SIMD128 kernels (`core::arch::wasm32`), compiled only with `+simd128`.
//!
//! Why one long file: it is one ISA's half of every kernel (w4, int8, f16, the ggml formats,
//! attention), each section a twin of the same section of `x86.rs` and `portable.rs`, compared
//! with the scalar reference in `tests.rs`, `ggml_tests.rs` and `attn_tests.rs`; the sections
//! share the lane helpers (`f16x4`, the reductions) and `unsafe` conventions at the top.
//!
//! # w4 and int8: int16 activations, `i32x4.dot_i16x8_s`, 4 rows per pass
//! In wasm an int4 GEMV is bound by instruction count, not memory, so the loops are built to
//! spend as few SIMD operations per weight as possible:
//!
//! - Unpacking uses 16-bit lanes only (native `psrlw`/`pand` in V8; byte shifts and
//!   `extend_*_u8x16` cost 2–3 x86 instructions each): viewing a 16-byte w4 block as `i16x8`,
//!   `v & 0xF`, `(v >> 8) & 0xF`, `(v >> 4) & 0xF` and `v >> 12` are the weights at positions
//!   0,2..14 / 1,3..15 / 16,18..30 / 17,19..31. The activations are reordered once per call
//!   into that order (`[A B C D]`, 8 values each). Int8 blocks need no split: each 8 weights
//!   are one `i16x8.load8x8_s` (`pmovsxbw` from memory in V8) against the activations in index
//!   order, 4 operations per 32 weights where a 16-byte load split into even and odd bytes
//!   (`(v << 8) >> 8`, `v >> 8`) took 8.
//! - 4 output rows per pass share every activation load. Their four `i32x4` partial sums are
//!   reduced together (one 4×4 transpose-add with `unpack{lo,hi}` shuffles V8 recognises)
//!   into `[row 0, row 1, row 2, row 3]`, which lines up with the 4-row scale tiles of
//!   [`crate::quant`]: the 4 fp16 scales are one 8-byte load and one vector conversion (fp16
//!   has no wasm instruction; the bit trick in [`f16x4`] is 4 operations for 4 scales).
//! - The symmetric offset (`q − 8`) is taken out of the integer sum as `8 · Σ xq` per block.
//! - Int8 runs one 8-row value tile ([`crate::quant`]'s int8 layout) per pass as two 4-row
//!   reductions, so the weights are one sequential stream: with 8 separate short row streams
//!   (the old row-major layout) the head GEMV of the default model (49152×576) took 4.5–5.1 ms
//!   in Chromium 156, now 2.6 ms; 4-row value tiles read 8 rows at a time (two streams) were no
//!   faster than row-major, and 4 rows per pass (one stream) 3.0 ms.
//!
//! - The fp16 → f32 scale conversion's final `· 2¹¹²` is folded into the per-block activation
//!   factors (precomputed once per call, see [`factors`]), and the asymmetric minimum's term
//!   (`Σ_b m · sx · Σ xq`, no weights involved) runs as a light second pass so the main loop's
//!   registers stay on the nibbles: q4_1 now costs within ~10% of symmetric w4g32.
//!
//! Prefill (`m ≥` [`GEMM_MIN_TOKENS`], w4 only) unpacks each tile of 8 rows once into an
//! L1-sized int16 scratch in "lane per row" order ([`unpack_tile4`]) and then runs 4 tokens at
//! a time over it with one `i32x4.dot_i16x8_s` and one add per 8 multiply-adds and no
//! reductions ([`w4_gemm_tile`]). Shorter inputs run every token through the GEMV tile loop,
//! where a tile's weights come from memory once and from L1 for the other tokens.

use core::arch::wasm32::*;
use core::ops::Range;

use half::f16;

use crate::act::ActQ16;
use crate::arch::{tile_values, GgmlPrep, GgmlTile};
use crate::ggml::{GgmlFormat, GgmlMatrix};
use crate::layout::{BLOCK, I4_GROUP, I4_GROUP_BYTES, Q8_TILE, ROW_TILE};
use crate::quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};

/// Activations prepared once per input for the w4 and int8 kernels ([`crate::matrix::Prepared`]):
/// the reordered int16 values and the per-block factors for symmetric weights (w4 symmetric,
/// int8) and asymmetric ones (q4_1), each built only when a matrix of that kind reads the input.
#[derive(Debug, Default)]
pub(crate) struct Prep {
    q: Vec<i16>,
    /// `[sym, asym]` factors (see [`factors_into`]).
    f: [Vec<[v128; 2]>; 2],
    /// Whether `f[i]` was built for the current input.
    built: [bool; 2],
    /// Whether `f[i]` is usable (no scale overflowed: else the portable path runs).
    ok: [bool; 2],
}

impl Prep {
    /// Forgets the previous input.
    pub(crate) fn reset(&mut self) {
        self.q.clear();
        self.built = [false; 2];
        self.ok = [false; 2];
    }

    /// Whether [`Prep::fill`] ran for this kind of weights.
    pub(crate) fn ready(&self, sym: bool) -> bool {
        self.built[usize::from(!sym)]
    }

    /// Builds what a w4 (`sym` as the matrix) or int8 (`sym = true`) matrix needs from `x`.
    pub(crate) fn fill(&mut self, x: &ActQ16, sym: bool) {
        if self.q.len() != x.q.len() {
            reorder_into(x, &mut self.q);
        }
        let i = usize::from(!sym);
        if !self.built[i] {
            self.ok[i] = factors_into(x, sym, &mut self.f[i]);
            self.built[i] = true;
        }
    }

    fn factors(&self, sym: bool) -> Option<&[[v128; 2]]> {
        let i = usize::from(!sym);
        self.ok[i].then_some(&self.f[i][..])
    }
}

/// The int16 activations of every token reordered to `[A B C D]` per block (see the module
/// docs): `A` = positions 0,2..14, `B` = 1,3..15, `C` = 16,18..30, `D` = 17,19..31.
fn reorder_into(x: &ActQ16, q: &mut Vec<i16>) {
    q.clear();
    q.resize(x.q.len(), 0);
    for (dst, src) in q.chunks_exact_mut(BLOCK).zip(x.q.chunks_exact(BLOCK)) {
        for j in 0..8 {
            dst[j] = src[2 * j];
            dst[8 + j] = src[2 * j + 1];
            dst[16 + j] = src[16 + 2 * j];
            dst[24 + j] = src[17 + 2 * j];
        }
    }
}

/// 2¹¹²: the factor between an fp16 value and the f32 whose bits [`f16x4_raw`] builds.
const F16_BIAS: f32 = f32::from_bits(0x7780_0000);

/// Four fp16 values (8 bytes at `p`) to f32 bits scaled by 2⁻¹¹²: sign-extend each half into a
/// 32-bit lane (one `v128.load16x4_s`), shift the exponent and mantissa into f32 position and
/// drop the sign copies. Multiplying by [`F16_BIAS`] gives the value exactly (subnormal halves
/// included); the kernels fold that factor into the activation scale instead (one operation
/// fewer per 4 scales). The formats reject infinities and NaNs.
///
/// # Safety
/// `p` must be valid for 8 bytes.
#[inline(always)]
unsafe fn f16x4_raw(p: *const f16) -> v128 {
    // SAFETY: the caller guarantees 8 readable bytes.
    let w = unsafe { i32x4_load_extend_i16x4(p as *const i16) };
    v128_and(i32x4_shl(w, 13), i32x4_splat(0x8FFF_E000u32 as i32))
}

/// Four fp16 values (8 bytes at `p`) to f32, exactly (see [`f16x4_raw`]).
///
/// # Safety
/// `p` must be valid for 8 bytes.
#[inline(always)]
unsafe fn f16x4(p: *const f16) -> v128 {
    // SAFETY: forwarded from the caller.
    f32x4_mul(unsafe { f16x4_raw(p) }, f32x4_splat(F16_BIAS))
}

/// The fp16 values at the 4 pointers (2 bytes each) to f32 lanes, exactly: four
/// `v128.load16_lane`s, a sign extension to 32 bits, then [`f16x4`]'s bit trick.
///
/// # Safety
/// Every pointer must be valid for 2 bytes.
#[inline(always)]
unsafe fn f16_lanes4(p: [*const u8; 4]) -> v128 {
    // SAFETY: the caller guarantees 2 readable bytes at each pointer; `load16_lane` needs no
    // alignment.
    let h = unsafe {
        let v = i16x8_splat(0);
        let v = v128_load16_lane::<0>(v, p[0] as *const u16);
        let v = v128_load16_lane::<1>(v, p[1] as *const u16);
        let v = v128_load16_lane::<2>(v, p[2] as *const u16);
        v128_load16_lane::<3>(v, p[3] as *const u16)
    };
    let w = i32x4_extend_low_i16x8(h);
    f32x4_mul(
        v128_and(i32x4_shl(w, 13), i32x4_splat(0x8FFF_E000u32 as i32)),
        f32x4_splat(F16_BIAS),
    )
}

/// `[Σ a, Σ b, Σ c, Σ d]` of four `i32x4`.
#[inline(always)]
fn reduce4(a: v128, b: v128, c: v128, d: v128) -> v128 {
    let ab = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(a, b),
        i32x4_shuffle::<2, 6, 3, 7>(a, b),
    );
    let cd = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(c, d),
        i32x4_shuffle::<2, 6, 3, 7>(c, d),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
        i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
    )
}

/// Partial sums of one w4 block (16 bytes at `p`) against `[A B C D]` activations.
///
/// # Safety
/// `p` must be valid for 16 bytes.
#[inline(always)]
unsafe fn w4_block(p: *const u8, x: &[v128; 4]) -> v128 {
    // SAFETY: the caller guarantees 16 readable bytes.
    let v = unsafe { v128_load(p as *const v128) };
    let m = i16x8_splat(0x0F);
    let a = v128_and(v, m);
    let b = v128_and(u16x8_shr(v, 8), m);
    let c = v128_and(u16x8_shr(v, 4), m);
    let d = u16x8_shr(v, 12);
    i32x4_add(
        i32x4_add(i32x4_dot_i16x8(a, x[0]), i32x4_dot_i16x8(b, x[1])),
        i32x4_add(i32x4_dot_i16x8(c, x[2]), i32x4_dot_i16x8(d, x[3])),
    )
}

/// Partial sums of one int8 block (32 bytes at `p`) against activations in index order: each
/// 8 weights are one `i16x8.load8x8_s` (a load and a sign extension in one x86 instruction,
/// `pmovsxbw`), where splitting a 16-byte load into even and odd bytes took 3 shifts more per
/// 16 weights.
///
/// # Safety
/// `p` must be valid for 32 bytes.
#[inline(always)]
unsafe fn q8_block(p: *const u8, x: &[v128; 4]) -> v128 {
    // SAFETY: the caller guarantees 32 readable bytes; `load8x8_s` needs no alignment.
    let w = |i: usize| unsafe { i16x8_load_extend_i8x8(p.add(8 * i) as *const i8) };
    i32x4_add(
        i32x4_add(i32x4_dot_i16x8(w(0), x[0]), i32x4_dot_i16x8(w(1), x[1])),
        i32x4_add(i32x4_dot_i16x8(w(2), x[2]), i32x4_dot_i16x8(w(3), x[3])),
    )
}

/// Per-block activation factors, splatted to 4 lanes, for every token: `[sx · 2¹¹², c]` with
/// `c` = `8 · Σ xq` (i32, the symmetric w4 offset) or `sx · Σ xq` (f32, the asymmetric w4
/// minimum's factor; unused by int8), into `f`. `false` if some `sx · 2¹¹²` overflows f32
/// (activations beyond ~2·10⁹): the caller then takes the portable path.
fn factors_into(x: &ActQ16, sym: bool, f: &mut Vec<[v128; 2]>) -> bool {
    f.clear();
    for (&sx, &sum) in x.scales.iter().zip(&x.sums) {
        let scaled = sx * F16_BIAS;
        if sx.is_finite() && !scaled.is_finite() {
            return false;
        }
        let c = if sym {
            i32x4_splat(8 * sum)
        } else {
            f32x4_splat(sx * sum as f32)
        };
        f.push([f32x4_splat(scaled), c]);
    }
    true
}

/// Everything one tile pass needs about token `t`'s activations.
struct Token<'a> {
    /// Reordered int16 values, `blocks × 32`.
    q: &'a [i16],
    /// Per-block factors (see [`factors`]).
    f: &'a [[v128; 2]],
}

impl<'a> Token<'a> {
    fn new(x: &ActQ16, q: &'a [i16], f: &'a [[v128; 2]], t: usize) -> Token<'a> {
        let xb = x.blocks();
        Token {
            q: &q[t * xb * BLOCK..(t + 1) * xb * BLOCK],
            f: &f[t * xb..(t + 1) * xb],
        }
    }

    /// Block `b`'s four activation vectors.
    #[inline(always)]
    fn block(&self, b: usize) -> [v128; 4] {
        let q = &self.q[b * BLOCK..(b + 1) * BLOCK];
        // SAFETY: `q` holds 32 i16 = four 16-byte vectors; `v128_load` needs no alignment.
        unsafe {
            let p = q.as_ptr() as *const v128;
            [
                v128_load(p),
                v128_load(p.add(1)),
                v128_load(p.add(2)),
                v128_load(p.add(3)),
            ]
        }
    }
}

/// `T` 4-row tiles of a w4 matrix against one token: 4 outputs per tile. The tiles share
/// every activation load.
///
/// # Safety
/// `rows[i][j]` must point at whole packed rows of at least `x.q.len() / 32` blocks; `sc[i]`
/// (and `mn[i]` unless `SYM`) at tile `i`'s `[group][4]` fp16 values.
#[inline(never)]
unsafe fn w4_tiles<const SYM: bool, const PG: usize, const T: usize>(
    rows: [[*const u8; 4]; T],
    sc: [*const f16; T],
    mn: [*const f16; T],
    x: &Token<'_>,
) -> [v128; T] {
    let mut acc = [f32x4_splat(0.0); T];
    for (b, &[fs, fc]) in x.f.iter().enumerate() {
        let xv = x.block(b);
        let g = b / PG;
        for i in 0..T {
            // SAFETY: block `b` exists in every row and group `b / PG` in every tile (caller).
            unsafe {
                let r = &rows[i];
                let d = reduce4(
                    w4_block(r[0].add(b * 16), &xv),
                    w4_block(r[1].add(b * 16), &xv),
                    w4_block(r[2].add(b * 16), &xv),
                    w4_block(r[3].add(b * 16), &xv),
                );
                // `fs` carries the 2¹¹² that `f16x4_raw` leaves out.
                let s = f32x4_mul(f16x4_raw(sc[i].add(g * 4)), fs);
                let d = if SYM { i32x4_sub(d, fc) } else { d };
                acc[i] = f32x4_add(acc[i], f32x4_mul(f32x4_convert_i32x4(d), s));
            }
        }
    }
    if !SYM {
        // The minimum's term `Σ_b m · sx · Σ xq` reads no weights: a second, light pass keeps
        // the main loop's registers for the nibbles.
        for (b, &[_, fc]) in x.f.iter().enumerate() {
            for i in 0..T {
                // SAFETY: group `b` exists in every tile (caller; asymmetric groups are blocks).
                let m = unsafe { f16x4(mn[i].add(b * 4)) };
                acc[i] = f32x4_add(acc[i], f32x4_mul(m, fc));
            }
        }
    }
    acc
}

/// `T` 4-row tiles of an int8 matrix against one token: `rows[i][j]` points at block 0 of
/// row `j` of tile `i`, and `stride[i]` bytes separate a row's consecutive blocks (the tile's
/// width · 32: blocks are block-major inside a tile, see [`crate::quant`]), so a full tile is
/// read as one sequential stream of 128 bytes per block.
///
/// # Safety
/// Every row must hold at least `x.q.len() / 32` blocks of 32 bytes at its stride; `sc[i]` must
/// point at tile `i`'s `[block][4]` fp16 scales.
#[inline(never)]
unsafe fn q8_tiles<const T: usize>(
    rows: [[*const u8; 4]; T],
    stride: [usize; T],
    sc: [*const f16; T],
    x: &Token<'_>,
) -> [v128; T] {
    let mut acc = [f32x4_splat(0.0); T];
    for (b, &[fs, _]) in x.f.iter().enumerate() {
        let xv = x.block(b);
        for i in 0..T {
            // SAFETY: block `b` exists in every row and in every tile (caller).
            unsafe {
                let r = &rows[i];
                let o = b * stride[i];
                let d = reduce4(
                    q8_block(r[0].add(o), &xv),
                    q8_block(r[1].add(o), &xv),
                    q8_block(r[2].add(o), &xv),
                    q8_block(r[3].add(o), &xv),
                );
                let s = f32x4_mul(f16x4_raw(sc[i].add(b * 4)), fs);
                acc[i] = f32x4_add(acc[i], f32x4_mul(f32x4_convert_i32x4(d), s));
            }
        }
    }
    acc
}

/// Output tiles per pass for w4 (each tile is 4 rows): 8 rows per pass measured 0–15% faster
/// than 4 in Chromium 156 and within noise of it in Node 20 (see the crate's kernel notes).
const W4_TILES: usize = 2;

/// Rows `range` of a w4 product (`out`: `m × range.len()`); `p` was filled from `x` for
/// this matrix's kind.
pub(crate) fn w4_matmul_rows(
    w: &W4Matrix,
    x: &ActQ16,
    p: &Prep,
    range: Range<usize>,
    out: &mut [f32],
) {
    if x.rows() >= GEMM_MIN_TOKENS {
        return w4_gemm(w, x, range, out);
    }
    match (w.kind(), w.group()) {
        (W4Kind::Symmetric, 32) => w4_run::<true, 1>(w, x, p, range, out),
        (W4Kind::Symmetric, 64) => w4_run::<true, 2>(w, x, p, range, out),
        (W4Kind::Symmetric, _) => w4_run::<true, 4>(w, x, p, range, out),
        (W4Kind::Asymmetric, _) => w4_run::<false, 1>(w, x, p, range, out),
    }
}

fn w4_run<const SYM: bool, const PG: usize>(
    w: &W4Matrix,
    x: &ActQ16,
    p: &Prep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let (n, m) = (w.rows(), x.rows());
    let gpr = w.groups_per_row();
    let row_bytes = w.blocks_per_row() * 16;
    let Some(f) = p.factors(SYM) else {
        return crate::arch::portable::w4_matmul_rows(w, x, range, out);
    };
    let q = &p.q;
    let (lo, hi) = (range.start, range.end);
    let len = hi - lo;
    let tiles = hi.div_ceil(ROW_TILE);
    let mut tile = lo / ROW_TILE;
    while tile < tiles {
        // Passes of W4_TILES full tiles, then one tile at a time (including a partial one).
        let step = if tile + W4_TILES <= hi / ROW_TILE {
            W4_TILES
        } else {
            1
        };
        // Full tiles borrow their scales; only a partial last tile copies (no Vec per step).
        let sc: [_; W4_TILES] = core::array::from_fn(|i| {
            tile_values(
                &w.scales,
                n,
                gpr,
                ((tile + i.min(step - 1)) * ROW_TILE).min(n - 1),
            )
        });
        let mn: [_; W4_TILES] = core::array::from_fn(|i| {
            tile_values(
                &w.mins,
                n,
                gpr,
                ((tile + i.min(step - 1)) * ROW_TILE).min(n - 1),
            )
        });
        let rows = |i: usize| -> [*const u8; 4] {
            let r0 = (tile + i) * ROW_TILE;
            let last = n - 1;
            core::array::from_fn(|j| w.packed[(r0 + j).min(last) * row_bytes..].as_ptr())
        };
        for t in 0..m {
            let tok = Token::new(x, q, f, t);
            let mut v = [0.0f32; 4 * W4_TILES];
            // SAFETY: rows hold `blocks_per_row ≥ x.blocks()` blocks and the tiles every group;
            // `v` has room for `4 · step` floats.
            unsafe {
                if step == W4_TILES {
                    let acc = w4_tiles::<SYM, PG, W4_TILES>(
                        core::array::from_fn(rows),
                        core::array::from_fn(|i| sc[i].as_ptr()),
                        core::array::from_fn(|i| mn[i].as_ptr()),
                        &tok,
                    );
                    for (i, a) in acc.iter().enumerate() {
                        v128_store(v.as_mut_ptr().add(4 * i) as *mut v128, *a);
                    }
                } else {
                    let acc =
                        w4_tiles::<SYM, PG, 1>([rows(0)], [sc[0].as_ptr()], [mn[0].as_ptr()], &tok);
                    v128_store(v.as_mut_ptr() as *mut v128, acc[0]);
                }
            }
            let r0 = tile * ROW_TILE;
            let width = (hi - r0).min(ROW_TILE * step);
            let at = t * len + r0 - lo;
            out[at..at + width].copy_from_slice(&v[..width]);
        }
        tile += step;
    }
}

/// Token count from which the w4 product unpacks each weight tile once ([`w4_gemm`]) instead
/// of running the GEMV loop per token. Unpacking a tile costs about two GEMV passes over it
/// (Chromium 156: 1536×576 q4_1 GEMV 0.073 ms/token; GEMM 0.33 ms for 4 tokens, 0.039
/// ms/token at 65), so below ~6 tokens the GEMV loop wins.
const GEMM_MIN_TOKENS: usize = 6;

/// 4-row groups per GEMM weight tile: 8 rows × k int16 stay in L1 up to k ≈ 1900.
const GEMM_GROUPS: usize = 2;

/// Tokens per pass over a GEMM weight tile.
const GEMM_TOKENS: usize = 4;

/// Unpacks rows `r0..r0+4` (clamped to the last row) of a w4 matrix into "lane per row" int16
/// pairs: for block `b` and pair `p` (weights `2p`, `2p+1`), `q[b·16 + p]` is
/// `[w(r0, 2p) w(r0, 2p+1) | w(r0+1, ..) | w(r0+2, ..) | w(r0+3, ..)]` with the symmetric
/// offset applied, so `i32x4.dot_i16x8_s` against the activation pair splatted to every lane
/// gives the 4 rows' partial sums directly, with no reduction. `s[b]` (and `mn[b]`) get the
/// 4 rows' f32 scales (minimums) of block `b`.
fn unpack_tile4(
    w: &W4Matrix,
    r0: usize,
    xb: usize,
    q: &mut [v128],
    s: &mut [v128],
    mn: &mut [v128],
) {
    let n = w.rows();
    let (gpr, pg) = (w.groups_per_row(), w.group() / BLOCK);
    let row_bytes = w.blocks_per_row() * 16;
    let rows: [&[u8]; 4] =
        core::array::from_fn(|j| &w.packed[(r0 + j).min(n - 1) * row_bytes..][..xb * 16]);
    let sym = w.kind() == W4Kind::Symmetric;
    let sc = tile_values(&w.scales, n, gpr, r0);
    let mi = tile_values(&w.mins, n, gpr, r0);
    let low = i8x16_splat(0x0F);
    let eight = i8x16_splat(8);
    for b in 0..xb {
        // SAFETY: every row slice holds `xb` blocks of 16 bytes; `v128_load` needs no alignment.
        let v: [v128; 4] = core::array::from_fn(|j| unsafe {
            v128_load(rows[j].as_ptr().add(b * 16) as *const v128)
        });
        // Weights 0..15 (low nibbles) and 16..31 (high nibbles), as bytes.
        for (half, dst) in q[b * 16..(b + 1) * 16].chunks_exact_mut(8).enumerate() {
            let u: [v128; 4] = core::array::from_fn(|j| {
                if half == 0 {
                    v128_and(v[j], low)
                } else {
                    v128_and(u16x8_shr(v[j], 4), low)
                }
            });
            // 16-bit units are weight pairs: zip rows 0/1 and 2/3 unit by unit, then 32-bit
            // units so each 8 bytes hold one pair of all 4 rows.
            let z01 = i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(u[0], u[1]);
            let z01h = i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(u[0], u[1]);
            let z23 = i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(u[2], u[3]);
            let z23h = i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(u[2], u[3]);
            let pairs = [
                i32x4_shuffle::<0, 4, 1, 5>(z01, z23),
                i32x4_shuffle::<2, 6, 3, 7>(z01, z23),
                i32x4_shuffle::<0, 4, 1, 5>(z01h, z23h),
                i32x4_shuffle::<2, 6, 3, 7>(z01h, z23h),
            ];
            for (i, &pv) in pairs.iter().enumerate() {
                if sym {
                    let pv = i8x16_sub(pv, eight);
                    dst[2 * i] = i16x8_extend_low_i8x16(pv);
                    dst[2 * i + 1] = i16x8_extend_high_i8x16(pv);
                } else {
                    dst[2 * i] = u16x8_extend_low_u8x16(pv);
                    dst[2 * i + 1] = u16x8_extend_high_u8x16(pv);
                }
            }
        }
        let g = b / pg;
        // SAFETY: the tiles hold 4 values for every group.
        unsafe {
            s[b] = f16x4(sc.as_ptr().add(g * 4));
            if !sym {
                mn[b] = f16x4(mi.as_ptr().add(g * 4));
            }
        }
    }
}

/// `R` unpacked 4-row groups (see [`unpack_tile4`]) against `T` tokens: per block, 16 steps
/// of one dot and one add per (group, token), then one f32 scale step. Returns `[group][token]`
/// vectors of 4 outputs.
///
/// # Safety
/// `q`, `s` (and `mn` unless `SYM`) hold `R` groups of `xb` blocks; every token in `t` is a
/// token of `x`.
#[inline(never)]
unsafe fn w4_gemm_tile<const SYM: bool, const R: usize, const T: usize>(
    q: &[v128],
    s: &[v128],
    mn: &[v128],
    x: &ActQ16,
    t: [usize; T],
) -> [[v128; T]; R] {
    let xb = x.blocks();
    let mut acc = [[f32x4_splat(0.0); T]; R];
    let xq: [*const i16; T] = core::array::from_fn(|i| x.q[t[i] * xb * BLOCK..].as_ptr());
    for b in 0..xb {
        let mut d = [[i32x4_splat(0); T]; R];
        for p in 0..16 {
            // SAFETY: pair `p` of block `b` lies inside each token's row and each group's
            // unpacked block (caller).
            unsafe {
                let xv: [v128; T] = core::array::from_fn(|i| {
                    v128_load32_splat(xq[i].add(b * BLOCK + 2 * p) as *const u32)
                });
                for (g, dg) in d.iter_mut().enumerate() {
                    let wv = *q.get_unchecked((g * xb + b) * 16 + p);
                    for (di, &xi) in dg.iter_mut().zip(&xv) {
                        *di = i32x4_add(*di, i32x4_dot_i16x8(wv, xi));
                    }
                }
            }
        }
        for i in 0..T {
            let at = t[i] * xb + b;
            let sx = f32x4_splat(x.scales[at]);
            for g in 0..R {
                let f = f32x4_mul(s[g * xb + b], sx);
                acc[g][i] = f32x4_add(acc[g][i], f32x4_mul(f32x4_convert_i32x4(d[g][i]), f));
                if !SYM {
                    let c = f32x4_splat(x.scales[at] * x.sums[at] as f32);
                    acc[g][i] = f32x4_add(acc[g][i], f32x4_mul(mn[g * xb + b], c));
                }
            }
        }
    }
    acc
}

/// Prefill: unpacks each tile of up to [`GEMM_GROUPS`] · 4 rows once into an L1-sized scratch,
/// then runs every token (two at a time) through it.
fn w4_gemm(w: &W4Matrix, x: &ActQ16, range: Range<usize>, out: &mut [f32]) {
    // The unpacked tile scratch is the thread's own, reused by every call on that thread.
    let (mut q, mut s, mut mn) = GEMM_SCRATCH.take();
    let xb = x.blocks();
    q.resize(GEMM_GROUPS * xb * 16, i32x4_splat(0));
    s.resize(GEMM_GROUPS * xb, f32x4_splat(0.0));
    mn.resize(GEMM_GROUPS * xb, f32x4_splat(0.0));
    if w.kind() == W4Kind::Symmetric {
        w4_gemm_run::<true>(w, x, range, out, [&mut q, &mut s, &mut mn])
    } else {
        w4_gemm_run::<false>(w, x, range, out, [&mut q, &mut s, &mut mn])
    }
    GEMM_SCRATCH.set((q, s, mn));
}

thread_local! {
    /// Each thread's GEMM weight tile `(q, s, mn)` (see [`unpack_tile4`]).
    static GEMM_SCRATCH: core::cell::RefCell<(Vec<v128>, Vec<v128>, Vec<v128>)> =
        const { core::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
    /// Each thread's decoded tile and per-token accumulators for [`ggml_matmul_rows`].
    static GGML_SCRATCH: core::cell::RefCell<(Option<GgmlTile>, Vec<v128>)> =
        const { core::cell::RefCell::new((None, Vec::new())) };
}

fn w4_gemm_run<const SYM: bool>(
    w: &W4Matrix,
    x: &ActQ16,
    range: Range<usize>,
    out: &mut [f32],
    [q, s, mn]: [&mut Vec<v128>; 3],
) {
    let (m, xb) = (x.rows(), x.blocks());
    let (lo, n) = (range.start, range.end);
    let len = n - lo;
    let mut r0 = lo;
    while r0 < n {
        let groups = if r0 + GEMM_GROUPS * ROW_TILE <= n {
            GEMM_GROUPS
        } else {
            1
        };
        for g in 0..groups {
            unpack_tile4(
                w,
                r0 + g * ROW_TILE,
                xb,
                &mut q[g * xb * 16..(g + 1) * xb * 16],
                &mut s[g * xb..(g + 1) * xb],
                &mut mn[g * xb..(g + 1) * xb],
            );
        }
        let width = (n - r0).min(groups * ROW_TILE);
        let mut store = |t: usize, g: usize, v: v128| {
            let mut o = [0.0f32; 4];
            // SAFETY: `o` has room for 16 bytes; `v128_store` needs no alignment.
            unsafe { v128_store(o.as_mut_ptr() as *mut v128, v) };
            let lo = g * ROW_TILE;
            if lo < width {
                let hi = (lo + ROW_TILE).min(width);
                let at = t * len + r0 - range.start;
                out[at + lo..at + hi].copy_from_slice(&o[..hi - lo]);
            }
        };
        let mut t = 0;
        // SAFETY: the scratch holds `groups` unpacked groups of `xb` blocks; tokens are < m.
        unsafe {
            while t < m {
                let tt = if t + GEMM_TOKENS <= m { GEMM_TOKENS } else { 1 };
                let tok: [usize; GEMM_TOKENS] = core::array::from_fn(|i| t + i);
                match (groups == GEMM_GROUPS, tt == GEMM_TOKENS) {
                    (true, true) => {
                        let acc = w4_gemm_tile::<SYM, GEMM_GROUPS, GEMM_TOKENS>(q, s, mn, x, tok);
                        for (g, a) in acc.iter().enumerate() {
                            for (i, v) in a.iter().enumerate() {
                                store(t + i, g, *v);
                            }
                        }
                    }
                    (true, false) => {
                        let acc = w4_gemm_tile::<SYM, GEMM_GROUPS, 1>(q, s, mn, x, [t]);
                        for (g, a) in acc.iter().enumerate() {
                            store(t, g, a[0]);
                        }
                    }
                    (false, true) => {
                        let acc = w4_gemm_tile::<SYM, 1, GEMM_TOKENS>(q, s, mn, x, tok);
                        for (i, v) in acc[0].iter().enumerate() {
                            store(t + i, 0, *v);
                        }
                    }
                    (false, false) => {
                        let acc = w4_gemm_tile::<SYM, 1, 1>(q, s, mn, x, [t]);
                        store(t, 0, acc[0][0]);
                    }
                }
                t += tt;
            }
        }
        r0 += groups * ROW_TILE;
    }
}

/// Rows `range` (starting on a multiple of 8) of an int8 product (`out`: `m × range.len()`);
/// `p` was filled from `x` for symmetric weights.
pub(crate) fn q8_matmul_rows(
    w: &Q8Matrix,
    x: &ActQ16,
    p: &Prep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let (n, m, xb) = (w.rows(), x.rows(), x.blocks());
    let Some(f) = p.factors(true) else {
        return crate::arch::portable::q8_matmul_rows(w, x, range, out);
    };
    let (lo, len) = (range.start, range.len());
    // SAFETY: i8 and u8 have the same size and alignment; this only reinterprets the bytes.
    let data =
        unsafe { core::slice::from_raw_parts(w.values.as_ptr() as *const u8, w.values.len()) };
    // One pass per 8-row value tile: its blocks are one sequential stream (see the module
    // docs of `crate::quant`), read as two 4-row scale tiles; rows past a partial tile's
    // width repeat its last row (their results are dropped).
    for r0 in range.step_by(Q8_TILE) {
        let width = (n - r0).min(Q8_TILE);
        let base = &data[r0 * xb * BLOCK..(r0 + width) * xb * BLOCK];
        let rows: [[*const u8; 4]; 2] = core::array::from_fn(|i| {
            core::array::from_fn(|j| base[(4 * i + j).min(width - 1) * BLOCK..].as_ptr())
        });
        let stride = width * BLOCK;
        let two = width > ROW_TILE;
        let sc0 = tile_values(&w.scales, n, xb, r0);
        let sc1 = if two {
            tile_values(&w.scales, n, xb, r0 + ROW_TILE)
        } else {
            sc0.clone()
        };
        for t in 0..m {
            // Int8 blocks read the activations in index order (see [`q8_block`]).
            let tok = Token::new(x, &x.q, f, t);
            let mut v = [0.0f32; Q8_TILE];
            // SAFETY: every row pointer holds `xb` blocks at `stride`, `sc0`/`sc1` hold `xb`
            // groups of 4 scales; `v` has room for 8 floats.
            unsafe {
                if two {
                    let acc = q8_tiles::<2>(rows, [stride; 2], [sc0.as_ptr(), sc1.as_ptr()], &tok);
                    v128_store(v.as_mut_ptr() as *mut v128, acc[0]);
                    v128_store(v.as_mut_ptr().add(4) as *mut v128, acc[1]);
                } else {
                    let acc = q8_tiles::<1>([rows[0]], [stride], [sc0.as_ptr()], &tok);
                    v128_store(v.as_mut_ptr() as *mut v128, acc[0]);
                }
            }
            let at = t * len + r0 - lo;
            out[at..at + width].copy_from_slice(&v[..width]);
        }
    }
}

// ---- ggml block formats (see `crate::ggml`) ----
//
// Each 4-row tile is decoded once ([`GgmlTile`]: i8 weights in index order, factors
// `[unit][4 rows]`), then every token runs over it: per row and unit, 16 weights are widened
// with `i16x8.extend_{low,high}_i8x16_s` and multiplied with the activations (in their own
// order) by `i32x4.dot_i16x8_s`; the 4 rows' partial sums are reduced together into
// `[row 0..4]`, one f32 step per unit against one 128-bit load of the tile's factors.

/// Partial i32 sums of one unit of `U` (16 or 32) weights at `w` against activations at `x`.
///
/// # Safety
/// `w` must be valid for `U` i8 and `x` for `U` i16.
#[inline(always)]
unsafe fn ggml_unit<const U: usize>(w: *const i8, x: *const i16) -> v128 {
    // SAFETY: the caller guarantees `U` readable values behind each pointer.
    unsafe {
        let x = x as *const v128;
        let v = v128_load(w as *const v128);
        let d = i32x4_add(
            i32x4_dot_i16x8(i16x8_extend_low_i8x16(v), v128_load(x)),
            i32x4_dot_i16x8(i16x8_extend_high_i8x16(v), v128_load(x.add(1))),
        );
        if U == 16 {
            d
        } else {
            let v = v128_load(w.add(16) as *const v128);
            i32x4_add(
                d,
                i32x4_add(
                    i32x4_dot_i16x8(i16x8_extend_low_i8x16(v), v128_load(x.add(2))),
                    i32x4_dot_i16x8(i16x8_extend_high_i8x16(v), v128_load(x.add(3))),
                ),
            )
        }
    }
}

/// One decoded chunk of a 4-row tile (`units` units of `U` values, starting at unit `u0` of
/// the row and at block `b0` of 32) against token `t`: the 4 rows' partial outputs.
///
/// # Safety
/// `tile` holds that chunk decoded from the matrix `xp` and `x` were prepared for, and
/// `t < x.rows()`.
#[inline(never)]
unsafe fn ggml_tile<const U: usize, const MIN: bool>(
    tile: &GgmlTile,
    xp: &GgmlPrep,
    x: &ActQ16,
    t: usize,
    [u0, units, b0]: [usize; 3],
) -> v128 {
    let (xb, k) = (x.blocks(), units * U);
    let xq = x.q[t * xb * BLOCK + u0 * U..].as_ptr();
    let sx = xp.sx[(t * xp.units + u0) * 4..].as_ptr();
    let (wq, a) = (tile.q.as_ptr(), tile.a.as_ptr());
    let mut acc = f32x4_splat(0.0);
    // SAFETY: units `u < units` lie inside every decoded row (`k = units · U` values apart)
    // and the token's activations from `u0`; the factor arrays hold `units × 4` values.
    unsafe {
        for u in 0..units {
            let (w, xv) = (wq.add(u * U), xq.add(u * U));
            let d = reduce4(
                ggml_unit::<U>(w, xv),
                ggml_unit::<U>(w.add(k), xv),
                ggml_unit::<U>(w.add(2 * k), xv),
                ggml_unit::<U>(w.add(3 * k), xv),
            );
            let s = f32x4_mul(
                v128_load(a.add(u * 4) as *const v128),
                v128_load(sx.add(u * 4) as *const v128),
            );
            acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(d), s));
        }
        if MIN {
            // The minimum's term `Σ_b c_b · sx · Σ xq` reads no weights.
            let (c, xs) = (tile.c.as_ptr(), xp.xs[(t * xb + b0) * 4..].as_ptr());
            for b in 0..k / BLOCK {
                let cv = v128_load(c.add(b * 4) as *const v128);
                let xv = v128_load(xs.add(b * 4) as *const v128);
                acc = f32x4_add(acc, f32x4_mul(cv, xv));
            }
        }
    }
    acc
}

/// Rows `range` of a ggml product (`out`: `m × range.len()`); `xp` was filled from `x` for
/// `w`'s unit. One token of Q5_0 or Q4_K runs [`ggml_direct1`], anything else the tile.
pub(crate) fn ggml_matmul_rows(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    if x.rows() == 1 && ggml_direct(w.format()) {
        return ggml_direct1(w, x, xp, range, out);
    }
    ggml_matmul_rows_tiled(w, x, xp, range, out);
}

/// Whether one token of `format` runs the direct decode ([`ggml_direct1`]).
pub(crate) fn ggml_direct(format: GgmlFormat) -> bool {
    matches!(format, GgmlFormat::Q5_0 | GgmlFormat::Q4K)
}

/// [`ggml_matmul_rows`] through the decoded tile for every input (the direct decode's twin).
pub(crate) fn ggml_matmul_rows_tiled(
    w: &GgmlMatrix,
    x: &ActQ16,
    xp: &GgmlPrep,
    range: Range<usize>,
    out: &mut [f32],
) {
    let m = x.rows();
    let f = w.format();
    let (u, v) = (f.unit(), f.block_values());
    let (lo, n) = (range.start, range.end);
    let len = n - lo;
    let (mut tile, mut acc) = GGML_SCRATCH.take();
    let tile_ref = tile.get_or_insert_with(GgmlTile::new);
    acc.resize(m, f32x4_splat(0.0));
    for r0 in range.step_by(ROW_TILE) {
        acc.fill(f32x4_splat(0.0));
        for (c0, nb) in GgmlTile::chunks(w) {
            tile_ref.load(w, r0, c0, nb);
            let at = [c0 * v / u, nb * v / u, c0 * v / BLOCK];
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: the tile holds this chunk of `w`, `xp` was built for `w` and `x`,
                // `t < m`.
                let o = unsafe {
                    match (u == 16, f.has_min()) {
                        (true, _) => ggml_tile::<16, false>(tile_ref, xp, x, t, at),
                        (false, true) => ggml_tile::<32, true>(tile_ref, xp, x, t, at),
                        (false, false) => ggml_tile::<32, false>(tile_ref, xp, x, t, at),
                    }
                };
                *acc = f32x4_add(*acc, o);
            }
        }
        let width = (n - r0).min(ROW_TILE);
        for (t, a) in acc.iter().enumerate() {
            let mut o = [0.0f32; 4];
            // SAFETY: `o` has room for 16 bytes; `v128_store` needs no alignment.
            unsafe { v128_store(o.as_mut_ptr() as *mut v128, *a) };
            let at = t * len + r0 - lo;
            out[at..at + width].copy_from_slice(&o[..width]);
        }
    }
    GGML_SCRATCH.set((tile, acc));
}

// ---- ggml decode (m = 1): block bytes split into weights in registers ----
//
// With one token the tile's decode (shared Rust into an i8 scratch, then widened again) is
// most of the work, so Q5_0 and Q4_K skip it. A 16-byte load of nibbles viewed as `i16x8`
// gives, with `v & 0xF`, `(v >> 8) & 0xF`, `(v >> 4) & 0xF` and `v >> 12`, the low nibbles of
// the even bytes, of the odd bytes, the high nibbles of the even and of the odd bytes, already
// int16: the w4 unpacking of the module docs. In both formats those are positions `[A B C D]`
// of a block of 32 (Q5_0's `qs`: value `j` in the low nibble of byte `j`, `j + 16` in the high
// one; Q4_K's `qs` pair: low nibbles one sub-block, high nibbles the next), so
// `i32x4.dot_i16x8_s` runs against the activations reordered once per input into that order
// ([`GgmlPrep`]). Q5_0's fifth bits are spread to bytes first ([`q5_0_block`]) and its −16
// is taken out of the integer sum as `16 · Σ xq` per block. Q4_K's per-sub-block factors
// (6-bit scales and minimums, times the fp16 `d` and `dmin`) are built for the 4 rows in
// vectors ([`q4_k_factors`]), not by a scalar loop per row and sub-block.
// Q6_K stays on the tile: the same scheme for it (2 high bits per value from 16-bit shifts and
// a `0x30` mask of `qh`, the −32 taken out as `32 · Σ xq` per unit) measured about twice as
// slow as the tile in Node 20 (Gemma's 2048→640 down projection, 0.54 against 0.29 ms).
// The per-row, per-unit i32 sums are exact, so they equal the tile
// path's whatever the order of the integer additions; the units, their reduction across the
// 4 rows and every f32 operation (per unit `acc + f32(Σ) · (a · sx)`, per chunk of 256 values
// the minimum terms, then the chunk added to the row total) are the tile path's
// ([`ggml_tile`], [`ggml_matmul_rows_tiled`]) in the same order: the results are
// bit-identical to it (`ggml_tests`).

/// `[A B C D]` of 16 nibble bytes `v`: low nibbles of even, odd bytes; high of even, odd.
#[inline(always)]
fn nibbles4(v: v128) -> [v128; 4] {
    let m = i16x8_splat(0x0F);
    [
        v128_and(v, m),
        v128_and(u16x8_shr(v, 8), m),
        v128_and(u16x8_shr(v, 4), m),
        u16x8_shr(v, 12),
    ]
}

/// `Σ w_i · x_i` of 4 int16 vectors against the 32 activations at `x`, as 4 i32 partials.
///
/// # Safety
/// `x` must be valid for 32 i16.
#[inline(always)]
unsafe fn dot32(w: [v128; 4], x: *const i16) -> v128 {
    // SAFETY: the caller guarantees 32 readable i16.
    unsafe {
        let x = x as *const v128;
        i32x4_add(
            i32x4_add(
                i32x4_dot_i16x8(w[0], v128_load(x)),
                i32x4_dot_i16x8(w[1], v128_load(x.add(1))),
            ),
            i32x4_add(
                i32x4_dot_i16x8(w[2], v128_load(x.add(2))),
                i32x4_dot_i16x8(w[3], v128_load(x.add(3))),
            ),
        )
    }
}

/// i32 partials `Σ q · x` of one Q5_0 block (22 bytes at `b`; `q = lo | h << 4` in 0..=31,
/// without the −16) against its `[A B C D]` activations. The fifth bits go in per byte first:
/// byte `j` of `e` is `q_j` (low nibble of `qs[j]`, bit `j` of `qh`) and of `f` `q_{j+16}`
/// (high nibble, bit `j + 16`), each bit spread to its byte by a byte shuffle of `qh`, a mask
/// and `i8x16.eq`; the 16-bit lanes then split into even and odd bytes (`A`, `B` from `e`,
/// `C`, `D` from `f`).
///
/// # Safety
/// `b` must be valid for 22 bytes and `x` for 32 i16.
#[inline(always)]
unsafe fn q5_0_block(b: *const u8, x: *const i16) -> v128 {
    const BITS: v128 = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    // SAFETY: `qh` at 2..6 and `qs` at 6..22 lie inside the block; `x` as the caller says.
    unsafe {
        let qs = v128_load(b.add(6) as *const v128);
        let qh = v128_load32_zero(b.add(2) as *const u32);
        // 0x10 in byte `j` where bit `j` of the 16 bits from `qh` byte `2i` on is set.
        let spread = |v: v128| v128_and(i8x16_eq(v128_and(v, BITS), BITS), u8x16_splat(0x10));
        let hl = spread(i8x16_shuffle::<
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
        >(qh, qh));
        let hh = spread(i8x16_shuffle::<
            2,
            2,
            2,
            2,
            2,
            2,
            2,
            2,
            3,
            3,
            3,
            3,
            3,
            3,
            3,
            3,
        >(qh, qh));
        let m = u8x16_splat(0x0F);
        let e = v128_or(v128_and(qs, m), hl);
        let f = v128_or(v128_and(u16x8_shr(qs, 4), m), hh);
        let low = i16x8_splat(0xFF);
        dot32(
            [
                v128_and(e, low),
                u16x8_shr(e, 8),
                v128_and(f, low),
                u16x8_shr(f, 8),
            ],
            x,
        )
    }
}

/// i32 partials of Q4_K sub-blocks `2i` and `2i + 1` of the super-block at `b` (their 32
/// `qs` bytes: low nibbles `2i`, high `2i + 1`) against their `[A B C D]` activations at `x`.
///
/// # Safety
/// `b` must be a whole Q4_K block (144 bytes), `i < 4`, `x` valid for 64 i16.
#[inline(always)]
unsafe fn q4_k_pair(b: *const u8, i: usize, x: *const i16) -> (v128, v128) {
    // SAFETY: `qs` bytes 16 + 32i .. 48 + 32i lie inside the block; `x` as the caller says.
    unsafe {
        let p = b.add(16 + 32 * i);
        let n0 = nibbles4(v128_load(p as *const v128));
        let n1 = nibbles4(v128_load(p.add(16) as *const v128));
        (
            dot32([n0[0], n0[1], n1[0], n1[1]], x),
            dot32([n0[2], n0[3], n1[2], n1[3]], x.add(32)),
        )
    }
}

/// The 8 sub-block factors of 4 rows' Q4_K super-blocks (at `b[j]`), `[s] = [row 0..4]`:
/// `a[s] = d · sc_s` and `c[s] = −(dmin · m_s)`, the same f32 operations as the decode
/// (`crate::ggml`'s `decode_k45`, `get_scale_min_k4`), so the same bits.
///
/// Per row, one 16-byte load of `scales` (12 bytes, then 4 of `qs`, unused) gives
/// `[sc_0..8, m_0..8]` as bytes: for `s < 4` `sc = q[s] & 63`, `m = q[s+4] & 63`; for `s ≥ 4`
/// `sc = (q[s+4] & 15) | (q[s−4] >> 6) << 4`, `m = (q[s+4] >> 4) | (q[s] >> 6) << 4` (byte
/// shuffles place `q[s]` / `q[s+4]` and the bytes whose top 2 bits go on top; the byte shifts
/// are 16-bit shifts with byte masks). The 4 rows' bytes are then transposed to `[s][row]`
/// (interleaving bytes, then 16-bit pairs), widened to i32 and converted: exact, the values are
/// 0..=63. The fp16 `d` and `dmin` of the 4 rows are one vector each ([`f16_lanes4`]).
///
/// # Safety
/// Every `b[j]` must point at a whole Q4_K block (144 bytes).
#[inline(always)]
unsafe fn q4_k_factors(b: [*const u8; 4]) -> ([v128; 8], [v128; 8]) {
    let bytes = |p: *const u8| {
        // SAFETY: bytes 4..20 lie inside the block (the caller).
        let q = unsafe { v128_load(p.add(4) as *const v128) };
        // High nibbles of every byte in the low nibble: `q[s+4] >> 4` for `m`, s ≥ 4.
        let hi = v128_and(u16x8_shr(q, 4), u8x16_splat(0x0F));
        // `[q0 q1 q2 q3 q8 q9 q10 q11 | q4 q5 q6 q7 (q8 q9 q10 q11) >> 4]`, masked to the
        // low bits each field keeps.
        let low = v128_and(
            i8x16_shuffle::<0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 24, 25, 26, 27>(q, hi),
            u8x16(
                63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0xFF, 0xFF, 0xFF, 0xFF,
            ),
        );
        // The bytes whose top 2 bits become bits 4, 5: `q[s−4]` for `sc`, `q[s]` for `m`
        // (s ≥ 4); zero for s < 4.
        let top = i8x16_shuffle::<16, 16, 16, 16, 0, 1, 2, 3, 16, 16, 16, 16, 4, 5, 6, 7>(
            q,
            u8x16_splat(0),
        );
        v128_or(low, v128_and(u16x8_shr(top, 2), u8x16_splat(0x30)))
    };
    let v: [v128; 4] = core::array::from_fn(|j| bytes(b[j]));
    // Bytes of rows (0, 1) and (2, 3) interleaved: `[sc_s row 0, sc_s row 1]` pairs, then `m`.
    let lo01 = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(v[0], v[1]);
    let hi01 =
        i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(v[0], v[1]);
    let lo23 = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(v[2], v[3]);
    let hi23 =
        i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(v[2], v[3]);
    // 4 bytes (rows 0..4) per sub-block: `[s 0..4]`, `[s 4..8]` of `sc`, then of `m`.
    let quads = [
        i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(lo01, lo23),
        i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(lo01, lo23),
        i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(hi01, hi23),
        i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(hi01, hi23),
    ];
    // SAFETY: `d` and `dmin` are the block's first 4 bytes.
    let (d, dmin) = unsafe {
        (
            f16_lanes4(b),
            f16_lanes4(core::array::from_fn(|j| b[j].add(2))),
        )
    };
    let mut out = [[f32x4_splat(0.0); 8]; 2];
    for (i, &q) in quads.iter().enumerate() {
        let (lo, hi) = (u16x8_extend_low_u8x16(q), u16x8_extend_high_u8x16(q));
        let f = [
            u32x4_extend_low_u16x8(lo),
            u32x4_extend_high_u16x8(lo),
            u32x4_extend_low_u16x8(hi),
            u32x4_extend_high_u16x8(hi),
        ];
        for (k, &f) in f.iter().enumerate() {
            let f = f32x4_convert_i32x4(f);
            let s = 4 * (i % 2) + k;
            out[i / 2][s] = if i < 2 {
                f32x4_mul(d, f)
            } else {
                f32x4_neg(f32x4_mul(dmin, f))
            };
        }
    }
    (out[0], out[1])
}

/// `out[r] = x · w[r]` for one token of a Q5_0 or Q4_K matrix, decoding in registers
/// (see the section's comment); `xp` was filled from `x` (one row) for `w`'s unit.
fn ggml_direct1(w: &GgmlMatrix, x: &ActQ16, xp: &GgmlPrep, range: Range<usize>, out: &mut [f32]) {
    let f = w.format();
    let n = w.rows();
    let (lo, hi) = (range.start, range.end);
    let (rb, bb) = (w.row_bytes(), f.block_bytes());
    let xq = xp.abcd.as_ptr();
    let sx = xp.sx.as_ptr();
    let sums = &x.sums;
    assert!(
        x.rows() == 1
            && x.cols() == w.cols()
            && xp.abcd.len() == w.cols()
            && xp.sx.len() == 4 * w.cols() / f.unit(),
        "ggml_direct1: the input was not prepared for one token of this matrix"
    );
    for r0 in range.step_by(ROW_TILE) {
        let row: [&[u8]; ROW_TILE] =
            core::array::from_fn(|j| &w.data[(r0 + j).min(n - 1) * rb..][..rb]);
        let mut total = f32x4_splat(0.0);
        // One f32 step of the tile path: `acc + f32(Σ) · (a · sx)` for unit `u` of the row,
        // `a` the 4 rows' factors of that unit.
        let step = |acc: v128, d: v128, a: v128, u: usize| {
            // SAFETY: `sx` holds 4 factors per unit of the row.
            let s = unsafe { f32x4_mul(a, v128_load(sx.add(4 * u) as *const v128)) };
            f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(d), s))
        };
        match f {
            GgmlFormat::Q5_0 => {
                // The 4 rows' blocks by pointer (each row slice holds `rb` bytes = every
                // block): no slice bounds checks per block in this, the hottest loop of a
                // Gemma decode step.
                let base: [*const u8; ROW_TILE] = core::array::from_fn(|j| row[j].as_ptr());
                for (c0, nb) in GgmlTile::chunks(w) {
                    let mut acc = f32x4_splat(0.0);
                    for (b, &sum) in sums.iter().enumerate().skip(c0).take(nb) {
                        // SAFETY: block `b < cols / 32` of each row lies inside its `rb` bytes
                        // (22 bytes each); the activations hold block `b`; `sx` 4 factors per
                        // unit. `Σ (q − 16) · x = Σ q · x − 16 · Σ x`, exact in i32.
                        unsafe {
                            let blk: [*const u8; ROW_TILE] =
                                core::array::from_fn(|j| base[j].add(b * bb));
                            let x = xq.add(32 * b);
                            let d = i32x4_sub(
                                reduce4(
                                    q5_0_block(blk[0], x),
                                    q5_0_block(blk[1], x),
                                    q5_0_block(blk[2], x),
                                    q5_0_block(blk[3], x),
                                ),
                                i32x4_splat(16 * sum),
                            );
                            // The 4 rows' `d` as one vector (exact, as the decode's
                            // `f16_bits_to_f32`), then the tile path's f32 step.
                            let s =
                                f32x4_mul(f16_lanes4(blk), v128_load(sx.add(4 * b) as *const v128));
                            acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(d), s));
                        }
                    }
                    total = f32x4_add(total, acc);
                }
            }
            GgmlFormat::Q4K => {
                for sb in 0..w.cols() / 256 {
                    let blk: [&[u8]; ROW_TILE] = core::array::from_fn(|j| &row[j][sb * bb..][..bb]);
                    // `d · sc` and `−(dmin · m)` per sub-block, the 4 rows' as one vector.
                    // SAFETY: each block is 144 bytes.
                    let (a, c) = unsafe { q4_k_factors(core::array::from_fn(|j| blk[j].as_ptr())) };
                    let mut acc = f32x4_splat(0.0);
                    for i in 0..4 {
                        // SAFETY: each block is 144 bytes, the activations hold super-block `sb`.
                        let (d0, d1) = unsafe {
                            let x = xq.add(256 * sb + 64 * i);
                            let p: [(v128, v128); 4] =
                                core::array::from_fn(|j| q4_k_pair(blk[j].as_ptr(), i, x));
                            (
                                reduce4(p[0].0, p[1].0, p[2].0, p[3].0),
                                reduce4(p[0].1, p[1].1, p[2].1, p[3].1),
                            )
                        };
                        acc = step(acc, d0, a[2 * i], 8 * sb + 2 * i);
                        acc = step(acc, d1, a[2 * i + 1], 8 * sb + 2 * i + 1);
                    }
                    // The minimum's term `Σ_b c_b · sx · Σ xq`, after the units (as the tile).
                    for (s, &cv) in c.iter().enumerate() {
                        // SAFETY: `xs` has 4 values per block of 32.
                        let xv = unsafe {
                            v128_load(xp.xs.as_ptr().add(4 * (8 * sb + s)) as *const v128)
                        };
                        acc = f32x4_add(acc, f32x4_mul(cv, xv));
                    }
                    total = f32x4_add(total, acc);
                }
            }
            _ => unreachable!("ggml_direct1 runs only the formats of `ggml_direct`"),
        }
        let width = (hi - r0).min(ROW_TILE);
        let mut o = [0.0f32; 4];
        // SAFETY: `o` has room for 16 bytes; `v128_store` needs no alignment.
        unsafe { v128_store(o.as_mut_ptr() as *mut v128, total) };
        out[r0 - lo..r0 - lo + width].copy_from_slice(&o[..width]);
    }
}

/// Sum of the 4 lanes.
#[inline(always)]
fn hsum(v: v128) -> f32 {
    let s = f32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
    f32x4_extract_lane::<0>(f32x4_add(s, i32x4_shuffle::<1, 0, 3, 2>(s, s)))
}

/// f32 dot product, 4 accumulators of 4 lanes.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let body = n / 16 * 16;
    let mut acc = [f32x4_splat(0.0); 4];
    for (ca, cb) in a[..body].chunks_exact(16).zip(b[..body].chunks_exact(16)) {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: each chunk holds 16 floats = four 16-byte vectors.
            unsafe {
                let va = v128_load(ca.as_ptr().add(4 * j) as *const v128);
                let vb = v128_load(cb.as_ptr().add(4 * j) as *const v128);
                *acc = f32x4_add(*acc, f32x4_mul(va, vb));
            }
        }
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += a[i] * b[i];
    }
    hsum(f32x4_add(
        f32x4_add(acc[0], acc[2]),
        f32x4_add(acc[1], acc[3]),
    )) + tail
}

/// f16 weights × f32 activations: each row is converted 8 halves at a time with the bit trick
/// of [`f16x4`] inside a 2-accumulator dot; tokens loop inside rows.
pub(crate) fn f16_matmul_rows(
    w: &F16Matrix,
    x: &[f32],
    m: usize,
    range: Range<usize>,
    out: &mut [f32],
) {
    let k = w.cols();
    let (lo, len) = (range.start, range.len());
    let body = k / 8 * 8;
    let mask = i32x4_splat(0x8FFF_E000u32 as i32);
    let bias = f32x4_splat(f32::from_bits(0x7780_0000));
    let zero = i16x8_splat(0);
    for r in range {
        let wr = &w.values[r * k..(r + 1) * k];
        for t in 0..m {
            let xr = &x[t * k..(t + 1) * k];
            let (mut a0, mut a1) = (f32x4_splat(0.0), f32x4_splat(0.0));
            for i in (0..body).step_by(8) {
                // SAFETY: `i + 8 ≤ body ≤ k` for both rows.
                unsafe {
                    let h = v128_load(wr.as_ptr().add(i) as *const v128);
                    let lo = i16x8_shuffle::<8, 0, 8, 1, 8, 2, 8, 3>(h, zero);
                    let hi = i16x8_shuffle::<8, 4, 8, 5, 8, 6, 8, 7>(h, zero);
                    let lo = f32x4_mul(v128_and(i32x4_shr(lo, 3), mask), bias);
                    let hi = f32x4_mul(v128_and(i32x4_shr(hi, 3), mask), bias);
                    let x0 = v128_load(xr.as_ptr().add(i) as *const v128);
                    let x1 = v128_load(xr.as_ptr().add(i + 4) as *const v128);
                    a0 = f32x4_add(a0, f32x4_mul(x0, lo));
                    a1 = f32x4_add(a1, f32x4_mul(x1, hi));
                }
            }
            let mut tail = 0.0f32;
            for i in body..k {
                tail += xr[i] * wr[i].to_f32();
            }
            out[t * len + r - lo] = hsum(f32x4_add(a0, a1)) + tail;
        }
    }
}

// ---- Attention kernels (see `crate::attn`): one KV head vector per call. ----
//
// f16 → f32 uses the bit trick of `f16x4_raw` on both halves of an 8-half vector (sign-extend
// to i32, shift, mask, · 2¹¹²), exact for every finite half including subnormals and ±0. That
// trick turns exponent 31 (±∞, NaN) into `±2¹⁶ · 1.m`: `dot` tracks the largest `|h|` seen (two
// operations per 8 halves) and reruns the portable (exact) kernel if any half was non-finite;
// `axpy`, which cannot undo its stores, fixes those lanes up in place ([`inf_nan_fix`]).
//
// int8 and int4 widen to i32 and convert to f32 (`f32x4.convert_i32x4_s`), so the products
// are f32 like the reference's; int4 splits a 16-byte group into its low nibbles (values 0..15)
// and high nibbles (values 16..31, a 16-bit shift then the byte mask), subtracts 8 in i8 lanes.

/// Eight halves to two f32x4 (values 0..3, 4..7), exact for finite halves (see the notes above).
#[inline(always)]
fn f16x8_finite(h: v128) -> [v128; 2] {
    let m = i32x4_splat(0x8FFF_E000u32 as i32);
    let b = f32x4_splat(F16_BIAS);
    let lo = v128_and(i32x4_shl(i32x4_extend_low_i16x8(h), 13), m);
    let hi = v128_and(i32x4_shl(i32x4_extend_high_i16x8(h), 13), m);
    [f32x4_mul(lo, b), f32x4_mul(hi, b)]
}

/// Repairs the lanes [`f16x8_finite`] produced from exponent-31 halves: those came out as
/// `±2¹⁶ · 1.m`, above the largest finite half (65504), so every lane with `|v| ≥ 2¹⁶` gets all
/// f32 exponent bits set, giving `±∞` for a zero mantissa and a NaN otherwise.
#[inline(always)]
fn inf_nan_fix(v: v128) -> v128 {
    let big = f32x4_ge(f32x4_abs(v), f32x4_splat(65536.0));
    v128_or(v, v128_and(big, i32x4_splat(0x7F80_0000)))
}

/// Sixteen i8 to four f32x4 in index order.
#[inline(always)]
fn i8x16_to_f32(v: v128) -> [v128; 4] {
    let lo = i16x8_extend_low_i8x16(v);
    let hi = i16x8_extend_high_i8x16(v);
    [
        f32x4_convert_i32x4(i32x4_extend_low_i16x8(lo)),
        f32x4_convert_i32x4(i32x4_extend_high_i16x8(lo)),
        f32x4_convert_i32x4(i32x4_extend_low_i16x8(hi)),
        f32x4_convert_i32x4(i32x4_extend_high_i16x8(hi)),
    ]
}

/// The 32 values `n − 8` of one int4 group (16 bytes at `p`) as eight f32x4 in index order.
///
/// # Safety
/// `p` must be valid for 16 bytes.
#[inline(always)]
unsafe fn i4_group(p: *const u8) -> [v128; 8] {
    // SAFETY: the caller guarantees 16 readable bytes.
    let v = unsafe { v128_load(p as *const v128) };
    let m = u8x16_splat(0x0F);
    let eight = i8x16_splat(8);
    let lo = i8x16_to_f32(i8x16_sub(v128_and(v, m), eight));
    let hi = i8x16_to_f32(i8x16_sub(v128_and(u16x8_shr(v, 4), m), eight));
    [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
}

/// `Σ q_i · x_i` over one group, as 4 lanes.
///
/// # Safety
/// `q` must be valid for 32 floats.
#[inline(always)]
unsafe fn i4_group_dot(q: *const f32, x: &[v128; 8]) -> v128 {
    // SAFETY: the caller guarantees 32 readable floats.
    unsafe {
        let qv = |j: usize| v128_load(q.add(4 * j) as *const v128);
        let mut a = f32x4_mul(qv(0), x[0]);
        let mut b = f32x4_mul(qv(1), x[1]);
        for j in (2..8).step_by(2) {
            a = f32x4_add(a, f32x4_mul(qv(j), x[j]));
            b = f32x4_add(b, f32x4_mul(qv(j + 1), x[j + 1]));
        }
        f32x4_add(a, b)
    }
}

pub(crate) fn attn_dot_f16(q: &[f32], k: &[f16]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 8 * 8;
    let (mut a0, mut a1) = (f32x4_splat(0.0), f32x4_splat(0.0));
    let abs = i16x8_splat(0x7FFF);
    let mut hmax = i16x8_splat(0);
    for i in (0..body).step_by(8) {
        // SAFETY: `i + 8 ≤ body ≤ n` for both slices.
        unsafe {
            let h = v128_load(k.as_ptr().add(i) as *const v128);
            hmax = u16x8_max(hmax, v128_and(h, abs));
            let [lo, hi] = f16x8_finite(h);
            let q0 = v128_load(q.as_ptr().add(i) as *const v128);
            let q1 = v128_load(q.as_ptr().add(i + 4) as *const v128);
            a0 = f32x4_add(a0, f32x4_mul(q0, lo));
            a1 = f32x4_add(a1, f32x4_mul(q1, hi));
        }
    }
    if v128_any_true(u16x8_ge(hmax, u16x8_splat(0x7C00))) {
        // An infinity or NaN: rare, so the exact portable kernel redoes the whole vector.
        return crate::arch::portable::attn_dot_f16(q, k);
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += q[i] * k[i].to_f32();
    }
    hsum(f32x4_add(a0, a1)) + tail
}

pub(crate) fn attn_axpy_f16(p: f32, x: &[f16], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 8 * 8;
    let pv = f32x4_splat(p);
    for i in (0..body).step_by(8) {
        // SAFETY: `i + 8 ≤ body ≤ n` for both slices.
        unsafe {
            let h = v128_load(x.as_ptr().add(i) as *const v128);
            let [lo, hi] = f16x8_finite(h);
            let o = out.as_mut_ptr().add(i) as *mut v128;
            v128_store(o, f32x4_add(v128_load(o), f32x4_mul(pv, inf_nan_fix(lo))));
            let o = o.add(1);
            v128_store(o, f32x4_add(v128_load(o), f32x4_mul(pv, inf_nan_fix(hi))));
        }
    }
    for i in body..n {
        out[i] += p * x[i].to_f32();
    }
}

pub(crate) fn attn_dot_i8(q: &[f32], k: &[i8]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 16 * 16;
    let mut acc = [f32x4_splat(0.0); 4];
    for i in (0..body).step_by(16) {
        // SAFETY: `i + 16 ≤ body ≤ n` for both slices.
        unsafe {
            let x = i8x16_to_f32(v128_load(k.as_ptr().add(i) as *const v128));
            for (j, acc) in acc.iter_mut().enumerate() {
                let qv = v128_load(q.as_ptr().add(i + 4 * j) as *const v128);
                *acc = f32x4_add(*acc, f32x4_mul(qv, x[j]));
            }
        }
    }
    let mut tail = 0.0f32;
    for i in body..n {
        tail += q[i] * f32::from(k[i]);
    }
    hsum(f32x4_add(
        f32x4_add(acc[0], acc[2]),
        f32x4_add(acc[1], acc[3]),
    )) + tail
}

pub(crate) fn attn_axpy_i8(p: f32, x: &[i8], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 16 * 16;
    let pv = f32x4_splat(p);
    for i in (0..body).step_by(16) {
        // SAFETY: `i + 16 ≤ body ≤ n` for both slices.
        unsafe {
            let v = i8x16_to_f32(v128_load(x.as_ptr().add(i) as *const v128));
            let o = out.as_mut_ptr().add(i) as *mut v128;
            for (j, v) in v.iter().enumerate() {
                let o = o.add(j);
                v128_store(o, f32x4_add(v128_load(o), f32x4_mul(pv, *v)));
            }
        }
    }
    for i in body..n {
        out[i] += p * f32::from(x[i]);
    }
}

pub(crate) fn attn_axpy_f32(p: f32, x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let body = n / 8 * 8;
    let pv = f32x4_splat(p);
    for i in (0..body).step_by(8) {
        // SAFETY: `i + 8 ≤ body ≤ n` for both slices.
        unsafe {
            let xp = x.as_ptr().add(i) as *const v128;
            let o = out.as_mut_ptr().add(i) as *mut v128;
            v128_store(o, f32x4_add(v128_load(o), f32x4_mul(pv, v128_load(xp))));
            let (xp, o) = (xp.add(1), o.add(1));
            v128_store(o, f32x4_add(v128_load(o), f32x4_mul(pv, v128_load(xp))));
        }
    }
    for i in body..n {
        out[i] += p * x[i];
    }
}

/// `Σ_g s_g · Σ q_i (n_i − 8)` (`SCALED`), else `Σ q_i (n_i − 8)`. The caller checked that
/// `nib` (and `scales`) hold exactly `⌈q.len()/32⌉` groups.
pub(crate) fn attn_dot_i4<const SCALED: bool>(q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    let full = (q.len() / I4_GROUP).min(nib.len() / I4_GROUP_BYTES);
    let mut acc = f32x4_splat(0.0);
    let step = |acc: v128, d: v128, g: usize| {
        if SCALED {
            f32x4_add(acc, f32x4_mul(d, f32x4_splat(scales[g].to_f32())))
        } else {
            f32x4_add(acc, d)
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

/// `out_i += (p · s_g) · (n_i − 8)`. The caller checked that `nib` and `scales` hold exactly
/// `⌈out.len()/32⌉` groups.
pub(crate) fn attn_axpy_i4g32(p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    let groups = out
        .chunks_mut(I4_GROUP)
        .zip(nib.chunks_exact(I4_GROUP_BYTES));
    for ((outs, bytes), s) in groups.zip(scales) {
        let f = f32x4_splat(p * s.to_f32());
        // SAFETY: `bytes` is 16 bytes.
        let x = unsafe { i4_group(bytes.as_ptr()) };
        if outs.len() == I4_GROUP {
            for (j, x) in x.iter().enumerate() {
                // SAFETY: `outs` holds 32 floats = eight 16-byte vectors.
                unsafe {
                    let o = outs.as_mut_ptr().add(4 * j) as *mut v128;
                    v128_store(o, f32x4_add(v128_load(o), f32x4_mul(f, *x)));
                }
            }
        } else {
            let mut t = [0.0f32; I4_GROUP];
            for (j, x) in x.iter().enumerate() {
                // SAFETY: `t` holds 32 floats.
                unsafe { v128_store(t.as_mut_ptr().add(4 * j) as *mut v128, f32x4_mul(f, *x)) };
            }
            for (o, t) in outs.iter_mut().zip(t) {
                *o += t;
            }
        }
    }
}
