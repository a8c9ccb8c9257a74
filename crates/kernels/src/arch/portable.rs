//! Portable kernels: plain Rust over fixed-size blocks with independent accumulators, which
//! LLVM vectorises for whatever the target has (SSE2 natively, simd128 in wasm, NEON on
//! aarch64). This is what a build without a hand-written path runs.
//!
//! Strategy for the integer formats: each weight row is unpacked once into a small int16
//! scratch (plus one f32 scale, and minimum, per block) and then dotted with every activation
//! row, so prefill unpacks each weight once however many tokens it multiplies.

use crate::act::{ActQ16, BLOCK};
use crate::arch::f16_bits_to_f32;
use crate::quant::{q8_block_index, scale_index, F16Matrix, Q8Matrix, W4Kind, W4Matrix};

/// f32 dot product with 8 independent accumulators.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    crate::f32_ops::dot_unrolled(a, b)
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

impl Row {
    fn new(blocks: usize) -> Row {
        Row {
            q: vec![0; blocks * BLOCK],
            s: vec![0.0; blocks],
            m: vec![0.0; blocks],
        }
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

pub(crate) fn w4_matmul(w: &W4Matrix, x: &ActQ16, out: &mut [f32]) {
    let (n, xb) = (w.rows(), x.blocks());
    let (bpr, gpr, pg) = (w.blocks_per_row(), w.groups_per_row(), w.group() / BLOCK);
    let asym = w.kind() == W4Kind::Asymmetric;
    let offset: i16 = if asym { 0 } else { 8 };
    let mut row = Row::new(xb);
    for r in 0..n {
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
            out[t * n + r] = row.dot(x, t, asym);
        }
    }
}

pub(crate) fn q8_matmul(w: &Q8Matrix, x: &ActQ16, out: &mut [f32]) {
    let (n, xb) = (w.rows(), x.blocks());
    let mut row = Row::new(xb);
    for r in 0..n {
        for (b, q) in row.q.chunks_exact_mut(BLOCK).enumerate() {
            let at = q8_block_index(n, xb, r, b);
            for (d, v) in q.iter_mut().zip(&w.values[at * BLOCK..(at + 1) * BLOCK]) {
                *d = i16::from(*v);
            }
            row.s[b] = f16_bits_to_f32(w.scales[scale_index(n, xb, r, b)].to_bits());
        }
        for t in 0..x.rows() {
            out[t * n + r] = row.dot(x, t, false);
        }
    }
}

pub(crate) fn f16_matmul(w: &F16Matrix, x: &[f32], m: usize, out: &mut [f32]) {
    let (n, k) = (w.rows(), w.cols());
    let mut row = vec![0.0f32; k];
    for r in 0..n {
        for (d, v) in row.iter_mut().zip(&w.values[r * k..(r + 1) * k]) {
            *d = f16_bits_to_f32(v.to_bits());
        }
        for t in 0..m {
            out[t * n + r] = dot(&x[t * k..(t + 1) * k], &row);
        }
    }
}
