//! f32 dot product and `y = x · Wᵀ` (activations × transposed row-major weights).

use crate::Kernel;

/// Dot product of two equal-length slices with the chosen kernel.
///
/// # Panics
/// If the slices differ in length (a programming error, never user input).
#[inline]
pub fn dot(kernel: Kernel, a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot: length mismatch");
    match kernel {
        Kernel::Scalar => dot_scalar(a, b),
        other => crate::arch::dot_f32(other, a, b),
    }
}

fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

/// `out[m][n] = Σ_k x[m][k] · w[n][k]` for `rows` activation rows of length `k` and a weight
/// matrix of `n` rows of length `k`. `out` has `rows × n` values.
///
/// Loops over weight rows on the outside so each weight row is read from memory once per call
/// and reused for every activation row (prefill), which is what makes prefill compute-bound and
/// decode (one row) bandwidth-bound.
///
/// # Panics
/// If the slice lengths do not match the dimensions (a programming error).
pub fn matmul_t(
    kernel: Kernel,
    x: &[f32],
    rows: usize,
    k: usize,
    w: &[f32],
    n: usize,
    out: &mut [f32],
) {
    assert_eq!(
        x.len(),
        rows * k,
        "matmul_t: x has {} values, expected {rows}×{k}",
        x.len()
    );
    assert_eq!(
        w.len(),
        n * k,
        "matmul_t: w has {} values, expected {n}×{k}",
        w.len()
    );
    assert_eq!(
        out.len(),
        rows * n,
        "matmul_t: out has {} values, expected {rows}×{n}",
        out.len()
    );
    matmul_t_rows(kernel, x, k, w, 0..n, out);
}

/// Output rows `range` of [`matmul_t`]: `out` is `x.len() / k × range.len()`, token-major.
pub(crate) fn matmul_t_rows(
    kernel: Kernel,
    x: &[f32],
    k: usize,
    w: &[f32],
    range: std::ops::Range<usize>,
    out: &mut [f32],
) {
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let (lo, len) = (range.start, range.len());
    for j in range {
        let w_row = &w[j * k..(j + 1) * k];
        for (r, x_row) in x.chunks_exact(k).enumerate() {
            out[r * len + j - lo] = dot(kernel, x_row, w_row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // On wasm32 the same tests run under wasm-bindgen-test in Node and headless Chromium, so the
    // simd128 build of every kernel is checked there, not only natively.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn values(seed: u64, len: usize) -> Vec<f32> {
        crate::pseudo_random(seed, len)
    }

    fn f64_dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
    }

    #[test]
    fn kernels_agree_with_f64_on_odd_sizes() {
        for len in [0usize, 1, 7, 8, 9, 31, 64, 577, 1536] {
            let a = values(len as u64, len);
            let b = values(len as u64 + 1000, len);
            let exact = f64_dot(&a, &b);
            let mag: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64 * *y as f64).abs())
                .sum();
            for kernel in Kernel::available() {
                let got = dot(kernel, &a, &b) as f64;
                // f32 summation error bound: len · ε · Σ|a·b|.
                let bound = (len as f64 + 1.0) * f32::EPSILON as f64 * mag + 1e-30;
                assert!(
                    (got - exact).abs() <= bound,
                    "{} len {len}: {got} vs {exact} (bound {bound})",
                    kernel.name()
                );
            }
        }
    }

    #[test]
    fn kernels_handle_zeros_and_outliers() {
        let mut a = vec![0.0f32; 100];
        let mut b = values(7, 100);
        assert_eq!(dot(Kernel::Portable, &a, &b), 0.0);
        a[99] = 1.0e6;
        b[99] = -3.0;
        a[3] = 1.0e-6;
        for kernel in Kernel::available() {
            let got = dot(kernel, &a, &b);
            let exact = f64_dot(&a, &b) as f32;
            assert!(
                (got - exact).abs() <= exact.abs() * 1e-6,
                "{}: {got} vs {exact}",
                kernel.name()
            );
        }
    }

    #[test]
    fn matmul_matches_row_by_row_dots() {
        let (rows, k, n) = (3, 37, 5);
        let x = values(1, rows * k);
        let w = values(2, n * k);
        for kernel in Kernel::available() {
            let mut out = vec![f32::NAN; rows * n];
            matmul_t(kernel, &x, rows, k, &w, n, &mut out);
            for r in 0..rows {
                for j in 0..n {
                    let expect = f64_dot(&x[r * k..(r + 1) * k], &w[j * k..(j + 1) * k]);
                    assert!(
                        (out[r * n + j] as f64 - expect).abs() < 1e-4,
                        "{} [{r},{j}]",
                        kernel.name()
                    );
                }
            }
        }
    }
}
