//! The small numeric helpers of the forward pass and of the measurements built on it: RMSNorm,
//! RoPE, softmax and `ln softmax`, SiLU and tanh-GELU, a branch-free `e^x`, KL divergence and
//! cosine similarity. A leaf module (it imports nothing from the crate), so [`crate::model`],
//! [`crate::sampler`], [`crate::kv_eval`] and [`crate::prune`] share one copy without importing
//! each other. Each function is `#[inline]`: they were private to the forward pass, and the
//! per-element ones (SiLU, GELU, `e^x`) must stay inlinable into its loops to vectorise.

/// `out = x / sqrt(mean(x²) + eps) · w`, row by row (`w.len()` values per row).
#[inline]
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    for (row, o) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for ((o, v), g) in o.iter_mut().zip(row).zip(w) {
            *o = v * inv * g;
        }
    }
}

/// `x = x / sqrt(mean(x²) + eps) · w` over every `w.len()` values (each head of q or k for
/// QK-norm).
#[inline]
pub(crate) fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    for row in x.chunks_exact_mut(n) {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for (v, g) in row.iter_mut().zip(w) {
            *v = *v * inv * g;
        }
    }
}

/// Adds `b` to every row of `x` (`b.len()` values per row).
#[inline]
pub(crate) fn add_bias(x: &mut [f32], b: &[f32]) {
    for row in x.chunks_exact_mut(b.len()) {
        add_in_place(row, b);
    }
}

/// Rotates adjacent pairs `(2i, 2i+1)` of every head of every row (GGUF llama layout); with
/// `cos`/`sin` holding `r < head_dim/2` pairs per row (partial RoPE), only the first `r`
/// pairs of each head rotate and the rest pass through.
#[inline]
pub(crate) fn rope(x: &mut [f32], width: usize, head_dim: usize, cos: &[f32], sin: &[f32]) {
    let rows = x.len() / width.max(1);
    let half = cos.len() / rows.max(1);
    for (t, row) in x.chunks_exact_mut(width).enumerate() {
        let (c, s) = (
            &cos[t * half..(t + 1) * half],
            &sin[t * half..(t + 1) * half],
        );
        for head in row.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * c[i] - b * s[i];
                head[2 * i + 1] = a * s[i] + b * c[i];
            }
        }
    }
}

/// In-place numerically stable softmax.
#[inline]
pub(crate) fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = exp_f32(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[inline]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp_f32(-x))
}

/// `gelu(x) = x/2 · (1 + tanh(u))`, `u = √(2/π) · (x + 0.044715 x³)`, with
/// `1 + tanh(u) = 2 − 2/(e^{2u} + 1)` (exact at both ends: e^{2u} overflows to ∞ → 2, underflows
/// to 0 → 0).
#[inline]
pub(crate) fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // √(2/π)
    let u = C * (x + 0.044_715 * x * x * x);
    x * (1.0 - 1.0 / (exp_f32(2.0 * u) + 1.0))
}

/// `e^x` in f32 within a few ulp, branch-free so the SiLU and softmax loops vectorise (wasm has
/// no `exp` instruction: `f32::exp` there is a libm call per value, ~4% of a decode step).
/// Cody–Waite reduction `x = n·ln2 + r`, `|r| ≤ ln2/2`, then the classic Cephes `expf`
/// polynomial for `e^r`, scaled by `2^n` through the exponent bits. Inputs are clamped to
/// [−87.3, 88.7] (results from ~1.2e−38 up to infinity), NaN stays NaN.
#[inline]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.336_55, 88.722_83);
    // |x·log₂e| ≤ 128: rounded with two additions, which vectorise where `round_ties_even`
    // is a libm call (x86-64 without SSE4.1); the same value.
    let n = edgefit_kernels::round_ties_even_small(x * std::f32::consts::LOG2_E);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // n ∈ [−126, 128]; 128 gives the bits of +infinity.
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[inline]
pub(crate) fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `ln softmax(x)` in f64 (maximum subtracted first).
pub(crate) fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let lse = x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln() + max;
    x.iter().map(|&v| v as f64 - lse).collect()
}

/// `KL(P ‖ Q) = Σ p (ln p − ln q)` from log-probabilities; never negative beyond rounding.
pub(crate) fn kl_divergence(log_p: &[f64], log_q: &[f64]) -> f64 {
    log_p
        .iter()
        .zip(log_q)
        .map(|(&lp, &lq)| lp.exp() * (lp - lq))
        .sum::<f64>()
        .max(0.0)
}

/// Cosine similarity in f64; 1 for two zero vectors, 0 if only one is zero.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 && bb == 0.0 {
        1.0
    } else if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_at_position_zero_is_identity_and_preserves_norm() {
        let hd = 8;
        let mut x: Vec<f32> = (0..16).map(|i| i as f32 * 0.1 - 0.5).collect();
        let orig = x.clone();
        let cos = vec![1.0; 4];
        let sin = vec![0.0; 4];
        rope(&mut x, 16, hd, &cos, &sin);
        assert_eq!(x, orig);
        let (s, c) = 0.7f32.sin_cos();
        let cos = vec![c; 4];
        let sin = vec![s; 4];
        rope(&mut x, 16, hd, &cos, &sin);
        let n0: f32 = orig.iter().map(|v| v * v).sum();
        let n1: f32 = x.iter().map(|v| v * v).sum();
        assert!((n0 - n1).abs() < 1e-5);
        // Pair (0, 1) rotated by 0.7 rad.
        assert!((x[0] - (orig[0] * c - orig[1] * s)).abs() < 1e-6);
    }

    #[test]
    fn exp_f32_is_within_a_few_ulp_of_exp() {
        let mut worst = 0.0f64;
        for i in 0..=200_000 {
            let x = -87.0 + 175.0 * i as f32 / 200_000.0;
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 4.0 * f32::EPSILON as f64, "relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(1000.0), f32::INFINITY);
        assert!(exp_f32(-1000.0) < 1.2e-38);
        assert_eq!(silu(-1000.0), 0.0);
        assert_eq!(silu(1000.0), 1000.0);
    }

    #[test]
    fn softmax_sums_to_one_and_is_shift_invariant() {
        let mut a = vec![1.0, 2.0, 3.0, -1000.0];
        let mut b = vec![101.0, 102.0, 103.0, -900.0];
        softmax(&mut a);
        softmax(&mut b);
        assert!((a.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-6);
        }
    }

    #[test]
    fn kl_cosine_and_log_softmax_by_hand() {
        let p = log_softmax(&[0.0, 0.0]);
        assert!((p[0] - 0.5f64.ln()).abs() < 1e-12);
        assert_eq!(kl_divergence(&p, &p), 0.0);
        let q = log_softmax(&[(3.0f32).ln(), 0.0]); // q = (0.75, 0.25)
        let want = 0.5 * (0.5f64 / 0.75).ln() + 0.5 * (0.5f64 / 0.25).ln();
        assert!((kl_divergence(&p, &q) - want).abs() < 1e-7);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(cosine(&[0.0; 3], &[0.0; 3]), 1.0);
        assert_eq!(cosine(&[0.0; 3], &[1.0; 3]), 0.0);
    }
}
