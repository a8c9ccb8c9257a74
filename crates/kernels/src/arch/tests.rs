//! Every kernel this build can run against the scalar reference, plus the formats' error
//! budgets. On wasm32 these run under wasm-bindgen-test in Node and headless Chromium, so the
//! simd128 kernels are checked there.
//!
//! The agreement bound: the integer kernels compute the same exact i32 sum per block of 32 as
//! the reference and differ only in the f32 rounding of the per-block terms and of their sum,
//! so `|got − ref| ≤ (blocks + 8) · 2⁻²³ · Σ_b |term_b|`, with `Σ_b |term_b| = Σ_b |sx_b| ·
//! (|s| Σ_j |w_j · xq_j| + |m| Σ_j |xq_j|)` computed in f64 from the same integers.

use half::f16;

use crate::act::ActQ16;
use crate::layout::{q8_block_index, scale_index, BLOCK};
use crate::quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};
use crate::{f32_ops, Kernel, Matrix};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

pub(super) const EPS: f64 = f32::EPSILON as f64;

/// Every w4 variant: (group, kind).
const W4_KINDS: [(usize, W4Kind); 4] = [
    (32, W4Kind::Symmetric),
    (64, W4Kind::Symmetric),
    (128, W4Kind::Symmetric),
    (32, W4Kind::Asymmetric),
];

/// `Σ_b |term_b|` for output `[t][r]` of a w4 product (see the module docs).
fn w4_magnitude(w: &W4Matrix, x: &ActQ16, t: usize, r: usize) -> f64 {
    let (xb, bpr, gpr) = (x.blocks(), w.blocks_per_row(), w.groups_per_row());
    let mut mag = 0.0;
    for b in 0..xb {
        let g = scale_index(w.rows(), gpr, r, b * BLOCK / w.group());
        let s = w.scales[g].to_f64().abs();
        let mn = if w.mins.is_empty() {
            0.0
        } else {
            w.mins[g].to_f64().abs()
        };
        let (mut wx, mut ax) = (0.0, 0.0);
        for j in 0..BLOCK {
            let byte = w.packed[(r * bpr + b) * 16 + j % 16];
            let q = if j < 16 { byte & 0x0F } else { byte >> 4 };
            let q = match w.kind() {
                W4Kind::Symmetric => f64::from(q) - 8.0,
                W4Kind::Asymmetric => f64::from(q),
            };
            let xq = f64::from(x.q[(t * xb + b) * BLOCK + j]);
            wx += (q * xq).abs();
            ax += xq.abs();
        }
        mag += f64::from(x.scales[t * xb + b]).abs() * (s * wx + mn * ax);
    }
    mag
}

fn q8_magnitude(w: &Q8Matrix, x: &ActQ16, t: usize, r: usize) -> f64 {
    let xb = x.blocks();
    let mut mag = 0.0;
    for b in 0..xb {
        let s = w.scales[scale_index(w.rows(), xb, r, b)].to_f64().abs();
        let at = q8_block_index(w.rows(), xb, r, b);
        let wx: f64 = (0..BLOCK)
            .map(|j| {
                let wq = f64::from(w.values[at * BLOCK + j]);
                (wq * f64::from(x.q[(t * xb + b) * BLOCK + j])).abs()
            })
            .sum();
        mag += f64::from(x.scales[t * xb + b]).abs() * s * wx;
    }
    mag
}

/// Checks `got` against `want` element-wise with bound `(blocks + 8) · ε · mag(t, r)`.
fn assert_close(
    what: &str,
    got: &[f32],
    want: &[f32],
    n: usize,
    blocks: usize,
    mag: impl Fn(usize, usize) -> f64,
) {
    for (i, (g, e)) in got.iter().zip(want).enumerate() {
        let (t, r) = (i / n, i % n);
        let bound = (blocks as f64 + 8.0) * EPS * mag(t, r);
        let diff = (f64::from(*g) - f64::from(*e)).abs();
        assert!(
            diff <= bound,
            "{what} [{t},{r}]: {g} vs reference {e} (|diff| {diff:e} > bound {bound:e})"
        );
    }
}

/// Products of `w4` with every available kernel, checked against the scalar reference.
fn check_w4(w: &W4Matrix, x: &[f32], m: usize, label: &str) {
    let xq = ActQ16::quantize(x, m, w.cols());
    let mut want = vec![0.0; m * w.rows()];
    w.matmul_scalar(&xq, &mut want);
    for kernel in Kernel::available() {
        let mut got = vec![f32::NAN; m * w.rows()];
        Matrix::W4(w.clone()).matmul_t_with(kernel, x, &xq, m, &mut got);
        let what = format!("{} {} {label}", kernel.name(), w.format_name());
        assert_close(&what, &got, &want, w.rows(), xq.blocks(), |t, r| {
            w4_magnitude(w, &xq, t, r)
        });
    }
}

fn check_q8(w: &Q8Matrix, x: &[f32], m: usize, label: &str) {
    let xq = ActQ16::quantize(x, m, w.cols());
    let mut want = vec![0.0; m * w.rows()];
    w.matmul_scalar(&xq, &mut want);
    for kernel in Kernel::available() {
        let mut got = vec![f32::NAN; m * w.rows()];
        Matrix::Q8(w.clone()).matmul_t_with(kernel, x, &xq, m, &mut got);
        let what = format!("{} q8_0 {label}", kernel.name());
        assert_close(&what, &got, &want, w.rows(), xq.blocks(), |t, r| {
            q8_magnitude(w, &xq, t, r)
        });
    }
}

#[test]
fn kernels_match_scalar_on_random_odd_shapes() {
    let mut seed = 100;
    for k in [1usize, 31, 32, 33, 64, 100, 577] {
        for n in [1usize, 3, 4, 5, 7, 9] {
            for m in [1usize, 2, 5] {
                seed += 2;
                let x = crate::pseudo_random(seed, m * k);
                let w = crate::pseudo_random(seed + 1, n * k);
                let label = format!("m {m} n {n} k {k}");
                for (g, kind) in W4_KINDS {
                    let q = W4Matrix::quantize(&w, n, k, g, kind).unwrap();
                    check_w4(&q, &x, m, &label);
                }
                check_q8(&Q8Matrix::quantize(&w, n, k).unwrap(), &x, m, &label);
            }
        }
    }
}

#[test]
fn kernels_match_scalar_for_many_tokens() {
    let (m, n, k) = (17, 13, 320);
    let x = crate::pseudo_random(7, m * k);
    let w = crate::pseudo_random(8, n * k);
    for (g, kind) in W4_KINDS {
        check_w4(
            &W4Matrix::quantize(&w, n, k, g, kind).unwrap(),
            &x,
            m,
            "m 17",
        );
    }
    check_q8(&Q8Matrix::quantize(&w, n, k).unwrap(), &x, m, "m 17");
}

/// Prefill shapes: the wasm GEMM path (weight tiles unpacked once, several tokens per pass)
/// with token counts that leave every remainder, and row counts that leave partial tiles.
#[test]
fn gemm_tiles_match_scalar() {
    let mut seed = 300;
    for (m, n, k) in [
        (2, 13, 97),
        (3, 9, 64),
        (7, 21, 33),
        (64, 11, 160),
        (5, 8, 577),
    ] {
        seed += 2;
        let x = crate::pseudo_random(seed, m * k);
        let w = crate::pseudo_random(seed + 1, n * k);
        let label = format!("gemm m {m} n {n} k {k}");
        for (g, kind) in W4_KINDS {
            check_w4(
                &W4Matrix::quantize(&w, n, k, g, kind).unwrap(),
                &x,
                m,
                &label,
            );
        }
        check_q8(&Q8Matrix::quantize(&w, n, k).unwrap(), &x, m, &label);
    }
}

/// Activations so large that `sx · 2¹¹²` overflows f32 (the simd128 GEMV folds 2¹¹² into the
/// activation scale and falls back to the portable kernel then).
#[test]
fn huge_activations_match_scalar() {
    let (n, k) = (6, 96);
    let w = crate::pseudo_random(81, n * k);
    for m in [1, 3] {
        let mut x = crate::pseudo_random(82, m * k);
        x[40] = 3.0e9;
        x[m * k - 1] = -1.0e12;
        for (g, kind) in W4_KINDS {
            check_w4(
                &W4Matrix::quantize(&w, n, k, g, kind).unwrap(),
                &x,
                m,
                "huge x",
            );
        }
        check_q8(&Q8Matrix::quantize(&w, n, k).unwrap(), &x, m, "huge x");
    }
}

#[test]
fn zero_weights_and_activations_give_exact_zeros() {
    let (m, n, k) = (2, 5, 100);
    let zeros_w = vec![0.0f32; n * k];
    let zeros_x = vec![0.0f32; m * k];
    let x = crate::pseudo_random(3, m * k);
    let w = crate::pseudo_random(4, n * k);
    let mut mats: Vec<Matrix> = Vec::new();
    for (g, kind) in W4_KINDS {
        mats.push(Matrix::W4(
            W4Matrix::quantize(&zeros_w, n, k, g, kind).unwrap(),
        ));
        mats.push(Matrix::W4(W4Matrix::quantize(&w, n, k, g, kind).unwrap()));
    }
    mats.push(Matrix::Q8(Q8Matrix::quantize(&zeros_w, n, k).unwrap()));
    mats.push(Matrix::Q8(Q8Matrix::quantize(&w, n, k).unwrap()));
    mats.push(Matrix::F16(F16Matrix::from_f32(&zeros_w, n, k).unwrap()));
    mats.push(Matrix::F16(F16Matrix::from_f32(&w, n, k).unwrap()));
    for (i, mat) in mats.iter().enumerate() {
        let zero_w = i % 2 == 0;
        for kernel in Kernel::available() {
            // Zero weights with real activations, and real weights with zero activations.
            let input = if zero_w { &x } else { &zeros_x };
            let mut out = vec![f32::NAN; m * n];
            mat.matmul_t(kernel, input, m, &mut out);
            assert!(
                out.iter().all(|v| *v == 0.0),
                "{} {} (zero {}): {out:?}",
                kernel.name(),
                mat.format_name(),
                if zero_w { "weights" } else { "activations" }
            );
        }
    }
}

#[test]
fn kernels_match_scalar_with_outliers() {
    let (m, n, k) = (3, 7, 577);
    let mut x = crate::pseudo_random(11, m * k);
    let mut w = crate::pseudo_random(12, n * k);
    x[k + 300] = 3.0e4; // one huge activation in token 1
    x[5] = -1.0e-3;
    w[2 * k + 40] = -2.0e3; // one huge weight in row 2
    w[6 * k + 576] = 5.0e2; // and one in the last (padded) block of row 6
    for (g, kind) in W4_KINDS {
        check_w4(
            &W4Matrix::quantize(&w, n, k, g, kind).unwrap(),
            &x,
            m,
            "outliers",
        );
    }
    check_q8(&Q8Matrix::quantize(&w, n, k).unwrap(), &x, m, "outliers");
}

#[test]
fn gemm_rows_equal_gemv_of_each_row() {
    let (m, n, k) = (17, 9, 200);
    let x = crate::pseudo_random(21, m * k);
    let w = crate::pseudo_random(22, n * k);
    let mut mats = vec![
        Matrix::Q8(Q8Matrix::quantize(&w, n, k).unwrap()),
        Matrix::F16(F16Matrix::from_f32(&w, n, k).unwrap()),
        Matrix::F32 {
            data: w.clone(),
            rows: n,
            cols: k,
        },
    ];
    for (g, kind) in W4_KINDS {
        mats.push(Matrix::W4(W4Matrix::quantize(&w, n, k, g, kind).unwrap()));
    }
    for mat in &mats {
        for kernel in Kernel::available() {
            let mut all = vec![f32::NAN; m * n];
            mat.matmul_t(kernel, &x, m, &mut all);
            for t in 0..m {
                let mut one = vec![f32::NAN; n];
                mat.matmul_t(kernel, &x[t * k..(t + 1) * k], 1, &mut one);
                for r in 0..n {
                    let (a, b) = (all[t * n + r], one[r]);
                    // Same kernel, same per-token arithmetic: allow only summation-order noise.
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{} {} token {t} row {r}: GEMM {a} vs GEMV {b}",
                        kernel.name(),
                        mat.format_name()
                    );
                }
            }
        }
    }
}

#[test]
fn float_kernels_match_scalar() {
    for (m, n, k) in [(1, 1, 1), (1, 5, 31), (2, 7, 33), (5, 3, 100), (1, 9, 577)] {
        let x = crate::pseudo_random(31 + k as u64, m * k);
        let w = crate::pseudo_random(32 + k as u64, n * k);
        let f16m = F16Matrix::from_f32(&w, n, k).unwrap();
        let mut want16 = vec![0.0; m * n];
        f16m.matmul_scalar(&x, m, &mut want16);
        let mut want32 = vec![0.0; m * n];
        f32_ops::matmul_t(Kernel::Scalar, &x, m, k, &w, n, &mut want32);
        let wh: Vec<f32> = f16m.values.iter().map(|v| v.to_f32()).collect();
        for kernel in Kernel::available() {
            let mut got16 = vec![f32::NAN; m * n];
            Matrix::F16(f16m.clone()).matmul_t(kernel, &x, m, &mut got16);
            let mut got32 = vec![f32::NAN; m * n];
            f32_ops::matmul_t(kernel, &x, m, k, &w, n, &mut got32);
            for i in 0..m * n {
                let (t, r) = (i / n, i % n);
                let mag = |ws: &[f32]| -> f64 {
                    (0..k)
                        .map(|c| (f64::from(x[t * k + c]) * f64::from(ws[r * k + c])).abs())
                        .sum()
                };
                // Two f32 summations in different orders: 2(k + 1)·ε·Σ|x·w|.
                let b16 = 2.0 * (k as f64 + 1.0) * EPS * mag(&wh);
                let b32 = 2.0 * (k as f64 + 1.0) * EPS * mag(&w);
                let d16 = (f64::from(got16[i]) - f64::from(want16[i])).abs();
                let d32 = (f64::from(got32[i]) - f64::from(want32[i])).abs();
                let name = kernel.name();
                assert!(
                    d16 <= b16,
                    "{name} f16 {m}×{n}×{k} [{t},{r}]: {d16:e} > {b16:e}"
                );
                assert!(
                    d32 <= b32,
                    "{name} f32 {m}×{n}×{k} [{t},{r}]: {d32:e} > {b32:e}"
                );
            }
        }
    }
}

#[test]
fn nan_activations_propagate_to_the_output() {
    let (m, n, k) = (2, 6, 100);
    let mut x = crate::pseudo_random(41, m * k);
    x[k + 70] = f32::NAN; // token 1 only
    let w = crate::pseudo_random(42, n * k);
    let mut mats = vec![
        Matrix::Q8(Q8Matrix::quantize(&w, n, k).unwrap()),
        Matrix::F16(F16Matrix::from_f32(&w, n, k).unwrap()),
        Matrix::F32 {
            data: w.clone(),
            rows: n,
            cols: k,
        },
    ];
    for (g, kind) in W4_KINDS {
        mats.push(Matrix::W4(W4Matrix::quantize(&w, n, k, g, kind).unwrap()));
    }
    for mat in &mats {
        for kernel in Kernel::available() {
            let mut out = vec![0.0; m * n];
            mat.matmul_t(kernel, &x, m, &mut out);
            let what = format!("{} {}", kernel.name(), mat.format_name());
            assert!(
                out[..n].iter().all(|v| v.is_finite()),
                "{what}: token 0 {out:?}"
            );
            assert!(
                out[n..].iter().all(|v| v.is_nan()),
                "{what}: token 1 {out:?}"
            );
        }
    }
}

/// Symmetric RTN budget: every weight within `s/2` of its original except on the clamped +8
/// side (`w/s > 7.5`, level 16 does not exist), where it is within `s·(1 + 2⁻¹⁰)` (the f16
/// rounding of `s` can stretch `|w/s|` to `8·(1 + 2⁻¹¹)`). Asymmetric: within `s/2` plus the
/// f16 rounding of the minimum. Int8: within `s/2`.
#[test]
fn quantize_dequantize_error_within_budget() {
    let (n, k) = (16, 577);
    let w = crate::pseudo_random(51, n * k);
    let rms = |d: &[f32]| -> f64 {
        let e: f64 = w
            .iter()
            .zip(d)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum();
        let s: f64 = w.iter().map(|a| f64::from(*a).powi(2)).sum();
        (e / s).sqrt()
    };
    for (g, kind) in W4_KINDS {
        let q = W4Matrix::quantize(&w, n, k, g, kind).unwrap();
        let d = q.dequantize();
        for r in 0..n {
            for c in 0..k {
                let at = scale_index(n, q.groups_per_row(), r, c / g);
                let signed = f64::from(q.scales[at].to_f32());
                let s = signed.abs();
                let (orig, got) = (f64::from(w[r * k + c]), f64::from(d[r * k + c]));
                let bound = match kind {
                    W4Kind::Symmetric if orig / signed > 7.5 => s * (1.0 + 1.0 / 1024.0),
                    W4Kind::Symmetric => s / 2.0 * (1.0 + 1e-6),
                    W4Kind::Asymmetric => {
                        s / 2.0 * (1.0 + 1e-6) + f64::from(q.mins[at].to_f32()).abs() / 2048.0
                    }
                };
                assert!(
                    (orig - got).abs() <= bound,
                    "{} [{r},{c}]: {orig} → {got}, s {s}",
                    q.format_name()
                );
            }
        }
        // Relative RMS error on uniform weights in [-1, 1): (step/√12)/rms(w), step ≈ 1/8
        // symmetric, 2/15 asymmetric, so ≈ 0.06–0.067 (measured 0.065 / 0.066 / 0.067 for
        // g32 / g64 / g128 and 0.060 for q4_1).
        let budget = match (g, kind) {
            (_, W4Kind::Asymmetric) => 0.065,
            (32 | 64, _) => 0.07,
            _ => 0.075,
        };
        let e = rms(&d);
        eprintln!("{} relative RMS error {e}", q.format_name());
        assert!(
            e <= budget,
            "{}: relative RMS error {e} > {budget}",
            q.format_name()
        );
    }
    let q = Q8Matrix::quantize(&w, n, k).unwrap();
    let d = q.dequantize();
    for r in 0..n {
        for c in 0..k {
            let s = f64::from(q.scales[scale_index(n, q.blocks_per_row(), r, c / 32)].to_f32());
            let diff = (f64::from(w[r * k + c]) - f64::from(d[r * k + c])).abs();
            assert!(diff <= s / 2.0 * (1.0 + 1e-6), "q8_0 [{r},{c}]");
        }
    }
    let e = rms(&d);
    assert!(e <= 0.005, "q8_0: relative RMS error {e} > 0.005");
}

/// Int16 activation budget: per value `|x − x̂| ≤ sx/2 + 3ε|x|` (`sx = amax/32767` rounded to
/// f32, then `q = round(x · 32767/amax)`), so a dot with any weights is off by at most
/// `Σ_j |w_j| (sx_b/2 + 3ε|x_j|)` ≈ `2⁻¹⁶ · Σ_b amax_b Σ_{j∈b} |w_j|`.
#[test]
fn activation_quantization_error_within_budget() {
    let k = 577;
    let mut x = crate::pseudo_random(61, k);
    x[100] = 40.0;
    x[200] = -1e-7;
    let w = crate::pseudo_random(62, k);
    let xq = ActQ16::quantize(&x, 1, k);
    let xd = xq.dequantize_row(0);
    let exact: f64 = x
        .iter()
        .zip(&w)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    let approx: f64 = xd
        .iter()
        .zip(&w)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    let mut bound = 0.0;
    let mut mag = 0.0;
    for c in 0..k {
        let sx = f64::from(xq.scales[c / 32]);
        let wc = f64::from(w[c]).abs();
        bound += wc * (sx / 2.0 + 3.0 * EPS * f64::from(x[c]).abs());
        mag += wc * f64::from(x[c]).abs();
    }
    let err = (exact - approx).abs();
    assert!(err <= bound, "dot error {err:e} > bound {bound:e}");
    // The bound is tiny relative to the dot's magnitude here (~1e-4 with one 40× outlier).
    assert!(err / mag < 1e-4, "relative error {}", err / mag);
    for (c, (a, b)) in x.iter().zip(&xd).enumerate() {
        let (a, b) = (f64::from(*a), f64::from(*b));
        let sx = f64::from(xq.scales[c / 32]);
        assert!(
            (a - b).abs() <= sx / 2.0 + 3.0 * EPS * a.abs(),
            "x[{c}]: {a} → {b}"
        );
    }
}

/// ggml blocks built by hand load without re-rounding: the dequantized matrix equals the
/// block arithmetic exactly, and every kernel agrees with the reference on it.
#[test]
fn ggml_blocks_round_trip() {
    let (rows, cols) = (5, 64); // 5 rows: a full 4-row scale tile and a partial one
    let blocks = rows * cols / 32;
    let nib = |i: usize, j: usize| ((i * 7 + j * 3) % 16) as u8;
    let d = |i: usize| {
        f16::from_f32(0.01 * (i as f32 + 1.0) * if i.is_multiple_of(3) { -1.0 } else { 1.0 })
    };
    let mn = |i: usize| f16::from_f32(-0.05 * i as f32);
    let (mut q40, mut q41, mut q80) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..blocks {
        let qs: Vec<u8> = (0..16).map(|j| nib(i, j) | (nib(i, j + 16) << 4)).collect();
        q40.extend_from_slice(&d(i).to_le_bytes());
        q40.extend_from_slice(&qs);
        q41.extend_from_slice(&d(i).to_le_bytes());
        q41.extend_from_slice(&mn(i).to_le_bytes());
        q41.extend_from_slice(&qs);
        q80.extend_from_slice(&d(i).to_le_bytes());
        q80.extend((0..32).map(|j| ((i * 37 + j * 11) % 255) as u8));
    }
    let a = W4Matrix::from_q4_0(&q40, rows, cols).unwrap();
    let b = W4Matrix::from_q4_1(&q41, rows, cols).unwrap();
    let c = Q8Matrix::from_q8_0(&q80, rows, cols).unwrap();
    assert_eq!(a.bytes(), q40.len() as u64);
    assert_eq!(b.bytes(), q41.len() as u64);
    assert_eq!(c.bytes(), q80.len() as u64);
    let (da, db, dc) = (a.dequantize(), b.dequantize(), c.dequantize());
    for r in 0..rows {
        for col in 0..cols {
            let i = r * cols / 32 + col / 32; // ggml block index
            let j = col % 32;
            let (s, m) = (d(i).to_f32(), mn(i).to_f32());
            let v8 = ((i * 37 + j * 11) % 255) as u8 as i8;
            assert_eq!(
                da[r * cols + col],
                (f32::from(nib(i, j)) - 8.0) * s,
                "q4_0 [{r},{col}]"
            );
            assert_eq!(
                db[r * cols + col],
                f32::from(nib(i, j)) * s + m,
                "q4_1 [{r},{col}]"
            );
            assert_eq!(dc[r * cols + col], f32::from(v8) * s, "q8_0 [{r},{col}]");
        }
    }
    let x = crate::pseudo_random(71, 3 * cols);
    check_w4(&a, &x, 3, "from q4_0");
    check_w4(&b, &x, 3, "from q4_1");
    check_q8(&c, &x, 3, "from q8_0");
}

#[test]
fn f16_bit_conversion_is_exact_for_every_finite_half() {
    for bits in 0..=u16::MAX {
        let h = f16::from_bits(bits);
        if h.is_finite() {
            let got = crate::layout::f16_bits_to_f32(bits);
            assert_eq!(got.to_bits(), h.to_f32().to_bits(), "{bits:#06x}");
        }
    }
}

/// The int8 layout (8-row block-major tiles, partial last tiles): every kernel against the
/// reference for row counts around the tile sizes and odd `k`, the embedding lookup
/// (`Matrix::row`) equal to the dequantized matrix row and to the quantized values, and ggml
/// Q8_0 blocks back out of the layout unchanged.
#[test]
fn q8_tiles_partial_rows_and_row_lookup() {
    let mut seed = 500;
    for n in [1usize, 3, 5, 7, 8, 9, 13, 16, 17, 23] {
        for k in [1usize, 33, 100, 577] {
            seed += 2;
            let w = crate::pseudo_random(seed, n * k);
            let q = Q8Matrix::quantize(&w, n, k).unwrap();
            assert_eq!(q.bytes(), (n * k.div_ceil(32) * 34) as u64);
            for m in [1usize, 2, 7] {
                let x = crate::pseudo_random(seed + 1, m * k);
                check_q8(&q, &x, m, &format!("tiles m {m} n {n} k {k}"));
            }
            let all = q.dequantize();
            let mat = Matrix::Q8(q.clone());
            for r in 0..n {
                let mut row = vec![f32::NAN; k];
                mat.row(r, &mut row);
                assert_eq!(&row[..], &all[r * k..(r + 1) * k], "row {r} of {n}×{k}");
                for (c, (v, orig)) in row.iter().zip(&w[r * k..(r + 1) * k]).enumerate() {
                    let s = q.scales[scale_index(n, q.blocks_per_row(), r, c / 32)].to_f32();
                    assert!((v - orig).abs() <= s / 2.0 * (1.0 + 1e-6), "[{r},{c}]");
                }
            }
        }
    }
    // ggml blocks: every (row, block) keeps its own 32 bytes and scale.
    for n in [1usize, 3, 7, 9, 13] {
        let (cols, bpr) = (96, 3);
        let mut data = Vec::new();
        for i in 0..n * bpr {
            data.extend_from_slice(&f16::from_f32(0.5 + i as f32).to_le_bytes());
            data.extend((0..32).map(|j| ((i * 31 + j * 7) % 256) as u8));
        }
        let q = Q8Matrix::from_q8_0(&data, n, cols).unwrap();
        assert_eq!(q.bytes(), data.len() as u64);
        for r in 0..n {
            for b in 0..bpr {
                let blk = &data[(r * bpr + b) * 34..(r * bpr + b + 1) * 34];
                let s = q.scales[scale_index(n, bpr, r, b)];
                assert_eq!(s.to_le_bytes(), [blk[0], blk[1]], "scale [{r},{b}]");
                let at = q8_block_index(n, bpr, r, b) * BLOCK;
                let v: Vec<u8> = q.values[at..at + BLOCK].iter().map(|&v| v as u8).collect();
                assert_eq!(&v[..], &blk[2..], "values [{r},{b}]");
            }
        }
        let x = crate::pseudo_random(77, 2 * cols);
        check_q8(&q, &x, 2, &format!("from q8_0 n {n}"));
    }
}
