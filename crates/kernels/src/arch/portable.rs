//! Portable kernels: plain Rust over fixed-size blocks with independent accumulators, which
//! LLVM vectorises for whatever the target has (SSE2 natively, simd128 in wasm, NEON on
//! aarch64). This is what a build without a hand-written path runs.
//!
//! Strategy for the integer formats: each weight row is unpacked once into a small int16
//! scratch (plus one f32 scale, and minimum, per block) and then dotted with every activation
//! row, so prefill unpacks each weight once however many tokens it multiplies.

use std::cell::RefCell;
use std::ops::Range;

use half::f16;

use crate::act::ActQ16;
use crate::ggml::GgmlMatrix;
use crate::layout::{
    f16_bits_to_f32, f16_bits_to_f32_exact, q8_block_index, scale_index, BLOCK, I4_GROUP,
    I4_GROUP_BYTES,
};
use crate::quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};

/// f32 dot product with 8 independent accumulators (the [`crate::Kernel::Portable`] `dot`).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = a.len() / LANES;
    let (a_body, a_tail) = a.split_at(chunks * LANES);
    let (b_body, b_tail) = b.split_at(chunks * LANES);
    for (ca, cb) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += ca[i] * cb[i];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in a_tail.iter().zip(b_tail) {
        tail += x * y;
    }
    // Pairwise reduction keeps the rounding error small and symmetric.
    let s0 = (acc[0] + acc[4]) + (acc[2] + acc[6]);
    let s1 = (acc[1] + acc[5]) + (acc[3] + acc[7]);
    s0 + s1 + tail
}

/// Exact i32 sum of one block's products, in adjacent pairs (the shape of `pmaddwd`,
/// `i32x4.dot_i16x8_s` and NEON `smlal`, which LLVM can then pick).
#[inline(always)]
fn block_dot(w: &[i16; BLOCK], x: &[i16; BLOCK]) -> i32 {
    let mut acc = [0i32; BLOCK / 2];
    for (j, a) in acc.iter_mut().enumerate() {
        *a = i32::from(w[2 * j]) * i32::from(x[2 * j])
            + i32::from(w[2 * j + 1]) * i32::from(x[2 * j + 1]);
    }
    acc.iter().sum()
}

/// One unpacked weight row: int16 values, f32 scale and minimum per block of 32.
struct Row {
    q: Vec<i16>,
    s: Vec<f32>,
    m: Vec<f32>,
}

thread_local! {
    /// Each thread's unpacked row, reused by every call on that thread (no allocation per
    /// call once the widest matrix has been seen).
    static ROW: RefCell<Row> = const {
        RefCell::new(Row {
            q: Vec::new(),
            s: Vec::new(),
            m: Vec::new(),
        })
    };
    /// Each thread's decoded ggml row `(q, a, c)` and widened f16 row.
    static GGML_ROW: RefCell<(Vec<i8>, Vec<f32>, Vec<f32>)> =
        const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
    static F16_ROW: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl Row {
    /// Sizes the scratch for rows of `blocks` blocks.
    fn reset(&mut self, blocks: usize) {
        self.q.resize(blocks * BLOCK, 0);
        self.s.resize(blocks, 0.0);
        self.m.resize(blocks, 0.0);
    }

    /// `Σ_b sx[b] · (s[b] · Σ q·xq + m[b] · Σ xq)` over activation row `t`.
    fn dot(&self, x: &ActQ16, t: usize, with_min: bool) -> f32 {
        let xb = x.blocks();
        let xq = &x.q[t * xb * BLOCK..(t + 1) * xb * BLOCK];
        let mut acc = [0.0f32; 4];
        let blocks = self.q.chunks_exact(BLOCK).zip(xq.chunks_exact(BLOCK));
        for (b, (w, xq)) in blocks.enumerate() {
            // Infallible: `chunks_exact` yields exactly BLOCK values.
            let (w, xq) = (
                w.try_into().unwrap_or(&[0; BLOCK]),
                xq.try_into().unwrap_or(&[0; BLOCK]),
            );
            let isum = block_dot(w, xq);
            let mut term = self.s[b] * isum as f32;
            if with_min {
                term += self.m[b] * x.sums[t * xb + b] as f32;
            }
            acc[b % 4] += x.scales[t * xb + b] * term;
        }
        (acc[0] + acc[2]) + (acc[1] + acc[3])
    }
}

/// Rows `rows` of `out[t][r] = x[t] · w[r]`; `out` is `m × rows.len()`, token-major.
pub(crate) fn w4_matmul_rows(w: &W4Matrix, x: &ActQ16, rows: Range<usize>, out: &mut [f32]) {
    ROW.with_borrow_mut(|row| w4_rows(w, x, rows, out, row));
}

fn w4_rows(w: &W4Matrix, x: &ActQ16, rows: Range<usize>, out: &mut [f32], row: &mut Row) {
    let (n, xb) = (w.rows(), x.blocks());
    let (bpr, gpr, pg) = (w.blocks_per_row(), w.groups_per_row(), w.group() / BLOCK);
    let asym = w.kind() == W4Kind::Asymmetric;
    let offset: i16 = if asym { 0 } else { 8 };
    let (lo, len) = (rows.start, rows.len());
    row.reset(xb);
    for r in rows {
        let packed = &w.packed[r * bpr * 16..(r * bpr + xb) * 16];
        for (b, (bytes, q)) in packed
            .chunks_exact(16)
            .zip(row.q.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let mut block = [0i16; BLOCK];
            let bytes: [u8; 16] = bytes.try_into().unwrap_or([0; 16]); // always 16 bytes
            for j in 0..16 {
                block[j] = i16::from(bytes[j] & 0x0F) - offset;
                block[j + 16] = i16::from(bytes[j] >> 4) - offset;
            }
            q.copy_from_slice(&block);
            let g = scale_index(n, gpr, r, b / pg);
            row.s[b] = f16_bits_to_f32(w.scales[g].to_bits());
            if asym {
                row.m[b] = f16_bits_to_f32(w.mins[g].to_bits());
            }
        }
        for t in 0..x.rows() {
            out[t * len + r - lo] = row.dot(x, t, asym);
        }
    }
}

/// Rows `rows` of an int8 product (`out`: `m × rows.len()`).
pub(crate) fn q8_matmul_rows(w: &Q8Matrix, x: &ActQ16, rows: Range<usize>, out: &mut [f32]) {
    ROW.with_borrow_mut(|row| {
        let (n, xb) = (w.rows(), x.blocks());
        let (lo, len) = (rows.start, rows.len());
        row.reset(xb);
        for r in rows {
            for (b, q) in row.q.chunks_exact_mut(BLOCK).enumerate() {
                let at = q8_block_index(n, xb, r, b);
                for (d, v) in q.iter_mut().zip(&w.values[at * BLOCK..(at + 1) * BLOCK]) {
                    *d = i16::from(*v);
                }
                row.s[b] = f16_bits_to_f32(w.scales[scale_index(n, xb, r, b)].to_bits());
            }
            for t in 0..x.rows() {
                out[t * len + r - lo] = row.dot(x, t, false);
            }
        }
    });
}

/// Exact i32 sum of `U` products of i8 weights and int16 activations, in adjacent pairs.
#[inline(always)]
fn unit_dot<const U: usize>(w: &[i8], x: &[i16]) -> i32 {
    let (w, x): (&[i8; U], &[i16; U]) = match (w.try_into(), x.try_into()) {
        (Ok(w), Ok(x)) => (w, x),
        _ => return 0, // never: the callers pass U values
    };
    let mut acc = [0i32; 8];
    for j in 0..U / 2 {
        acc[j % 8] += i32::from(w[2 * j]) * i32::from(x[2 * j])
            + i32::from(w[2 * j + 1]) * i32::from(x[2 * j + 1]);
    }
    acc.iter().sum()
}

/// ggml block formats: each row is decoded once (integer weights, factors, minimum terms) and
/// dotted with every token, 4 independent f32 accumulators. Rows `rows` only (`out`: `m ×
/// rows.len()`).
pub(crate) fn ggml_matmul_rows(w: &GgmlMatrix, x: &ActQ16, rows: Range<usize>, out: &mut [f32]) {
    GGML_ROW.with_borrow_mut(|(q, a, c)| {
        let xb = x.blocks();
        let six = w.format().unit() == 16;
        let min = w.format().has_min();
        let (lo, len) = (rows.start, rows.len());
        q.resize(w.cols(), 0);
        a.resize(w.cols() / w.format().unit(), 0.0);
        c.resize(w.cols() / BLOCK, 0.0);
        for r in rows {
            w.decode_row(r, q, a, c);
            for t in 0..x.rows() {
                let xq = &x.q[t * xb * BLOCK..(t + 1) * xb * BLOCK];
                let mut acc = [0.0f32; 4];
                for b in 0..xb {
                    let (wq, xv) = (
                        &q[b * BLOCK..(b + 1) * BLOCK],
                        &xq[b * BLOCK..(b + 1) * BLOCK],
                    );
                    let mut term = if six {
                        a[2 * b] * unit_dot::<16>(&wq[..16], &xv[..16]) as f32
                            + a[2 * b + 1] * unit_dot::<16>(&wq[16..], &xv[16..]) as f32
                    } else {
                        a[b] * unit_dot::<32>(wq, xv) as f32
                    };
                    if min {
                        term += c[b] * x.sums[t * xb + b] as f32;
                    }
                    acc[b % 4] += x.scales[t * xb + b] * term;
                }
                out[t * len + r - lo] = (acc[0] + acc[2]) + (acc[1] + acc[3]);
            }
        }
    });
}

/// Rows `rows` of an f16 product over f32 activations `x` (`m × cols`; `out`: `m ×
/// rows.len()`).
pub(crate) fn f16_matmul_rows(
    w: &F16Matrix,
    x: &[f32],
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    F16_ROW.with_borrow_mut(|row| {
        let k = w.cols();
        let (lo, len) = (rows.start, rows.len());
        row.resize(k, 0.0);
        for r in rows {
            for (d, v) in row.iter_mut().zip(&w.values[r * k..(r + 1) * k]) {
                *d = f16_bits_to_f32(v.to_bits());
            }
            for t in 0..m {
                out[t * len + r - lo] = dot(&x[t * k..(t + 1) * k], row);
            }
        }
    });
}

// ---- Attention kernels (see `crate::attn`): 8 independent f32 accumulators. ----

const LANES: usize = 8;

/// Pairwise sum of 8 accumulators (the order of [`dot`]).
#[inline(always)]
fn sum8(acc: &[f32; LANES]) -> f32 {
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

/// `Σ q_i · x_i` with 8 accumulators, `x_i = conv(k_i)`.
#[inline(always)]
fn dot_with<T: Copy>(q: &[f32], k: &[T], conv: impl Fn(T) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (qc, kc) = (q.chunks_exact(LANES), k.chunks_exact(LANES));
    let (qt, kt) = (qc.remainder(), kc.remainder());
    for (a, b) in qc.zip(kc) {
        for i in 0..LANES {
            acc[i] += a[i] * conv(b[i]);
        }
    }
    let mut tail = 0.0f32;
    for (a, &b) in qt.iter().zip(kt) {
        tail += a * conv(b);
    }
    sum8(&acc) + tail
}

/// `out_i += p · conv(x_i)`: independent elements, which the compiler vectorises as they are
/// (chunking them by hand measured slower, natively and in wasm).
#[inline(always)]
fn axpy_with<T: Copy>(p: f32, x: &[T], out: &mut [f32], conv: impl Fn(T) -> f32) {
    for (o, &a) in out.iter_mut().zip(x) {
        *o += p * conv(a);
    }
}

pub(crate) fn attn_dot_f16(q: &[f32], k: &[f16]) -> f32 {
    dot_with(q, k, |h| f16_bits_to_f32_exact(h.to_bits()))
}

pub(crate) fn attn_dot_i8(q: &[f32], k: &[i8]) -> f32 {
    dot_with(q, k, f32::from)
}

pub(crate) fn attn_axpy_f32(p: f32, x: &[f32], out: &mut [f32]) {
    axpy_with(p, x, out, |v| v);
}

pub(crate) fn attn_axpy_f16(p: f32, x: &[f16], out: &mut [f32]) {
    axpy_with(p, x, out, |h| f16_bits_to_f32_exact(h.to_bits()));
}

pub(crate) fn attn_axpy_i8(p: f32, x: &[i8], out: &mut [f32]) {
    axpy_with(p, x, out, f32::from);
}

/// The 32 values `n − 8` of one int4 group, in index order.
#[inline(always)]
fn i4_unpack(bytes: &[u8]) -> [f32; I4_GROUP] {
    let mut v = [0.0f32; I4_GROUP];
    for (j, &b) in bytes.iter().take(I4_GROUP_BYTES).enumerate() {
        v[j] = f32::from(b & 0x0F) - 8.0;
        v[j + I4_GROUP_BYTES] = f32::from(b >> 4) - 8.0;
    }
    v
}

/// `q` (at most 32 values) zero-padded to a whole group: the padded values count 0.
#[inline(always)]
fn i4_q(q: &[f32]) -> [f32; I4_GROUP] {
    let mut v = [0.0f32; I4_GROUP];
    v[..q.len()].copy_from_slice(q);
    v
}

/// `Σ_g s_g · Σ q_i (n_i − 8)` (`SCALED`), else `Σ q_i (n_i − 8)`.
pub(crate) fn attn_dot_i4<const SCALED: bool>(q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    let mut acc = [0.0f32; LANES];
    for (g, (qs, bytes)) in q
        .chunks(I4_GROUP)
        .zip(nib.chunks_exact(I4_GROUP_BYTES))
        .enumerate()
    {
        let x = i4_unpack(bytes);
        let qv = i4_q(qs);
        let mut d = [0.0f32; LANES];
        for c in 0..I4_GROUP / LANES {
            for i in 0..LANES {
                d[i] += qv[c * LANES + i] * x[c * LANES + i];
            }
        }
        if SCALED {
            let s = f16_bits_to_f32_exact(scales[g].to_bits());
            for i in 0..LANES {
                acc[i] += d[i] * s;
            }
        } else {
            for i in 0..LANES {
                acc[i] += d[i];
            }
        }
    }
    sum8(&acc)
}

pub(crate) fn attn_axpy_i4g32(p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    let groups = out
        .chunks_mut(I4_GROUP)
        .zip(nib.chunks_exact(I4_GROUP_BYTES));
    for ((outs, bytes), s) in groups.zip(scales) {
        let f = p * f16_bits_to_f32_exact(s.to_bits());
        let x = i4_unpack(bytes);
        for (o, v) in outs.iter_mut().zip(x) {
            *o += f * v;
        }
    }
}
