//! 16-bit activations for the integer kernels ("a16").
//!
//! The w4 and int8 kernels multiply weights by activations held as int16 with one f32 scale per
//! block of [`BLOCK`] values along `k`: `x ≈ q · s`, `s = max|x| / 32767` over the block, `q =
//! round(x / s)`. The relative error this adds to a dot product is about 2⁻¹⁶ of the block's
//! largest value (measured ~1.6e-5 on model activations), three orders of magnitude below the
//! 4-bit weights' own error, and it lets SIMD kernels use 16-bit integer dot products
//! (`i32x4.dot_i16x8_s`, AVX2 `vpmaddwd`), which is what makes an int4 GEMV fast in wasm (see
//! the repository's kernel notes).
//!
//! Rows are padded with zeros to a whole number of blocks. A block holding a NaN or infinity
//! gets a NaN scale, so the product comes out NaN rather than silently finite.

pub use crate::layout::BLOCK;

/// `rows` activation vectors of `cols` values, quantized to int16 per block of 32.
#[derive(Debug, Clone, Default)]
pub struct ActQ16 {
    rows: usize,
    cols: usize,
    blocks: usize,
    /// `rows × blocks × 32` int16 values (zero padded).
    pub(crate) q: Vec<i16>,
    /// `rows × blocks` scales.
    pub(crate) scales: Vec<f32>,
    /// `rows × blocks` sums of `q` over each block (for weights with a per-group minimum).
    pub(crate) sums: Vec<i32>,
}

impl ActQ16 {
    /// Quantizes `x` (`rows × cols`, row-major).
    ///
    /// # Panics
    /// If `x.len() != rows * cols` (a programming error).
    pub fn quantize(x: &[f32], rows: usize, cols: usize) -> ActQ16 {
        let mut a = ActQ16::default();
        a.requantize(x, rows, cols);
        a
    }

    /// Like [`ActQ16::quantize`], reusing this value's buffers.
    pub fn requantize(&mut self, x: &[f32], rows: usize, cols: usize) {
        assert_eq!(x.len(), rows * cols, "ActQ16: x has the wrong length");
        self.reset(rows, cols);
        if cols == 0 {
            return;
        }
        let blocks = self.blocks;
        quantize_rows(
            x,
            cols,
            blocks,
            &mut self.q,
            &mut self.scales,
            &mut self.sums,
        );
    }

    /// Sizes the buffers for `rows × cols` (zeroed), as [`ActQ16::requantize`] does before it
    /// quantizes: the pool then fills row ranges with [`quantize_rows`] on several threads.
    pub(crate) fn reset(&mut self, rows: usize, cols: usize) {
        let blocks = cols.div_ceil(BLOCK);
        self.rows = rows;
        self.cols = cols;
        self.blocks = blocks;
        self.q.clear();
        self.q.resize(rows * blocks * BLOCK, 0);
        self.scales.clear();
        self.scales.resize(rows * blocks, 0.0);
        self.sums.clear();
        self.sums.resize(rows * blocks, 0);
    }

    /// The buffers [`quantize_rows`] fills: `(q, scales, sums)`.
    pub(crate) fn parts_mut(&mut self) -> (&mut [i16], &mut [f32], &mut [i32]) {
        (&mut self.q, &mut self.scales, &mut self.sums)
    }

    /// Number of activation rows (tokens).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row before padding.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// The dequantized values of row `r` (padding dropped), for tests and error budgets.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.cols);
        for c in 0..self.cols {
            let b = r * self.blocks + c / BLOCK;
            out.push(f32::from(self.q[r * self.blocks * BLOCK + c]) * self.scales[b]);
        }
        out
    }
}

/// Quantizes the rows of `x` (`x.len() / cols` rows of `cols > 0` values) into `q` (`blocks ×
/// 32` values a row, zero padded: zeroed by the caller), `scales` and `sums` (`blocks` a row):
/// [`ActQ16::requantize`]'s work, one row at a time, so a range of rows gives the same values
/// whichever thread quantizes it.
pub(crate) fn quantize_rows(
    x: &[f32],
    cols: usize,
    blocks: usize,
    q: &mut [i16],
    scales: &mut [f32],
    sums: &mut [i32],
) {
    for (r, row) in x.chunks_exact(cols).enumerate() {
        for (b, chunk) in row.chunks(BLOCK).enumerate() {
            let amax = block_amax(chunk);
            let i = r * blocks + b;
            if amax.is_nan() {
                scales[i] = f32::NAN;
                continue;
            }
            if amax == 0.0 {
                continue;
            }
            let inv = 32767.0 / amax;
            scales[i] = amax / 32767.0;
            let q = &mut q[i * BLOCK..i * BLOCK + chunk.len()];
            let mut sum = 0i32;
            // Ties to even (`f32.nearest`, one SIMD instruction) rather than `round`'s ties
            // away from zero, which wasm has no instruction for: either is within half a
            // step, and every kernel reads these same integers.
            for (d, v) in q.iter_mut().zip(chunk) {
                let v = round_ties_even_small(v * inv).clamp(-32767.0, 32767.0) as i16;
                *d = v;
                sum += i32::from(v);
            }
            sums[i] = sum;
        }
    }
}

/// `y` rounded to the nearest integer, ties to even — `f32::round_ties_even` — for `|y| < 2²²`
/// (here `|y| ≤ 32767` and a rounding step: `y = x · 32767 / max|x|`).
///
/// On wasm32 that is `f32.nearest` (vectorised as `f32x4.nearest`). Elsewhere it is computed as
/// `(y + 1.5·2²³) − 1.5·2²³`: the sum has no fraction bits left, so the addition itself rounds
/// `y` to an integer, ties to even (IEEE round-to-nearest, the only mode Rust runs in), and the
/// subtraction is exact. On x86-64 without SSE4.1 (the CLI's baseline) `round_ties_even` is a
/// call to libm's `rintf` per value, which `perf` put at 10 % of a prefill's samples; the two
/// additions vectorise. Only the sign of a zero can differ (`-0.3` gives `+0.0`), which a
/// cast to an integer erases; `rounds_like_round_ties_even` checks the rest. NaN stays NaN.
/// The engine's `exp_f32` rounds `x·log₂e ∈ [−126, 128]` with it too.
#[inline(always)]
pub fn round_ties_even_small(y: f32) -> f32 {
    #[cfg(target_arch = "wasm32")]
    {
        y.round_ties_even()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
        (y + MAGIC) - MAGIC
    }
}

/// The largest |value| of a block, or NaN if the block holds a NaN or an infinity (a poisoned
/// block). Eight independent lanes and branch-free compares, so the compiler vectorises it
/// (`f32::max` would not be: it has NaN semantics wasm's `f32x4.max` lacks, and it would drop a
/// NaN seen before a finite value).
fn block_amax(chunk: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut m = [0.0f32; LANES];
    let mut bad = [0u32; LANES];
    let mut it = chunk.chunks_exact(LANES);
    for c in &mut it {
        for i in 0..LANES {
            let a = c[i].abs();
            // True for NaN and for infinity.
            bad[i] |= u32::from(!a.is_finite());
            m[i] = if a > m[i] { a } else { m[i] };
        }
    }
    for &v in it.remainder() {
        let a = v.abs();
        bad[0] |= u32::from(!a.is_finite());
        m[0] = if a > m[0] { a } else { m[0] };
    }
    if bad.iter().any(|&b| b != 0) {
        return f32::NAN;
    }
    m.iter()
        .fold(0.0f32, |acc, &v| if v > acc { v } else { acc })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn block_amax_is_the_largest_magnitude_and_poisons_on_nan_or_infinity() {
        for len in [1usize, 7, 8, 9, 31, 32] {
            let mut v = crate::pseudo_random(len as u64, len);
            let want = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            assert_eq!(block_amax(&v), want, "len {len}");
            // Put the largest value last (in the remainder when len % 8 != 0), negative.
            v[len - 1] = -5.0;
            assert_eq!(block_amax(&v), 5.0, "len {len}");
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut w = v.clone();
                w[0] = bad; // before every finite value
                assert!(block_amax(&w).is_nan(), "len {len}, {bad}");
                let mut w = v.clone();
                w[len - 1] = bad;
                assert!(block_amax(&w).is_nan(), "len {len}, {bad} last");
            }
        }
        assert_eq!(block_amax(&[0.0; 32]), 0.0);
    }

    #[test]
    fn quantized_values_are_within_half_a_step() {
        let x = crate::pseudo_random(3, 2 * 70);
        let a = ActQ16::quantize(&x, 2, 70);
        for r in 0..2 {
            let back = a.dequantize_row(r);
            for (c, (v, w)) in x[r * 70..(r + 1) * 70].iter().zip(&back).enumerate() {
                let s = a.scales[r * a.blocks() + c / BLOCK];
                assert!(
                    (v - w).abs() <= s * 0.5 + f32::EPSILON * v.abs(),
                    "{v} vs {w}"
                );
            }
        }
    }

    #[test]
    fn rounds_like_round_ties_even() {
        let mut ys: Vec<f32> = Vec::new();
        // Every half-integer tie of the range and its two neighbours, both signs.
        for n in -32768i32..=32768 {
            let t = n as f32 + 0.5;
            ys.extend([t, t.next_up(), t.next_down(), n as f32]);
        }
        // Random values of the range, tiny ones, zeros and the clamp's edges.
        let r = crate::pseudo_random(11, 20_000);
        ys.extend(r.iter().map(|v| v * 32767.0));
        ys.extend(r.iter().map(|v| v * 1e-3));
        ys.extend([0.0, -0.0, 32767.0, -32767.0, 32767.5, -32767.5, 4_194_303.5]);
        for y in ys {
            assert_eq!(
                round_ties_even_small(y),
                y.round_ties_even(),
                "{y:e} ({:#010x})",
                y.to_bits()
            );
        }
    }
}
