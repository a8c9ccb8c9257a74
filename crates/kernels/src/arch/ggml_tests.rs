//! The ggml block formats ([`crate::ggml`]): dequantization against a line-by-line
//! transcription of ggml's `dequantize_row_*` (bit for bit), every kernel against the scalar
//! reference on random and adversarial blocks, the reference against an f64 product of the
//! dequantized values, and the constructors' refusals.
//!
//! The agreement bound, as for the other integer formats (`tests.rs`): the kernels compute the
//! same exact i32 sums per unit as the reference and differ only in the f32 rounding of the
//! per-unit terms and of their sum, so `|got − ref| ≤ (units + 8) · 2⁻²³ · Σ_b |sx_b| · (Σ_u
//! |a_u| Σ_j |q_j · xq_j| + |c_b| Σ_j |xq_j|)`, computed in f64 from the same integers.

use half::f16;

use crate::act::ActQ16;
use crate::error::KernelError;
use crate::ggml::{GgmlFormat, GgmlMatrix};
use crate::layout::BLOCK;
use crate::{Kernel, Matrix};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const EPS: f64 = f32::EPSILON as f64;

/// Deterministic random bytes (splitmix64).
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

/// How the fp16 fields of generated blocks are chosen.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scales {
    /// Small random values of either sign, like real files (|d| up to ~0.06).
    Random,
    /// ±65504, the largest finite halves.
    Max,
    /// The smallest subnormal halves.
    Tiny,
    /// Zero.
    Zero,
}

/// `rows × cols` of random `format` blocks whose fp16 fields follow `scales`.
pub(super) fn blocks(
    format: GgmlFormat,
    rows: usize,
    cols: usize,
    seed: u64,
    scales: Scales,
) -> Vec<u8> {
    let bb = format.block_bytes();
    let n = rows * cols / format.block_values();
    let mut data = random_bytes(seed, n * bb);
    let vals = crate::pseudo_random(seed ^ 0x5555, 2 * n);
    let fields: &[usize] = match format {
        GgmlFormat::Q5_0 => &[0],
        GgmlFormat::Q6K => &[208],
        _ => &[0, 2],
    };
    for (i, blk) in data.chunks_exact_mut(bb).enumerate() {
        for (f, &at) in fields.iter().enumerate() {
            let v = vals[2 * i + f];
            let h = match scales {
                Scales::Random => f16::from_f32(v * 0.0625),
                Scales::Max => f16::from_f32(if v < 0.0 { -65504.0 } else { 65504.0 }),
                Scales::Tiny => f16::from_bits(if v < 0.0 { 0x8001 } else { 0x0001 }),
                Scales::Zero => f16::ZERO,
            };
            blk[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    data
}

fn half(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// ggml's `get_scale_min_k4`, transcribed.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// ggml's `dequantize_row_*` for one block, transcribed loop by loop from `ggml-quants.c`
/// (independently of `crate::ggml`'s decoder).
fn ggml_dequantize_block(format: GgmlFormat, x: &[u8], y: &mut Vec<f32>) {
    match format {
        GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => {
            let one = format == GgmlFormat::Q5_1;
            let d = half(x, 0);
            let m = if one { half(x, 2) } else { 0.0 };
            let at = if one { 4 } else { 2 };
            let qh = u32::from_le_bytes([x[at], x[at + 1], x[at + 2], x[at + 3]]);
            let qs = &x[at + 4..at + 20];
            let mut out = [0.0f32; 32];
            for j in 0..16 {
                let xh_0 = (((qh >> j) << 4) & 0x10) as u8;
                let xh_1 = ((qh >> (j + 12)) & 0x10) as u8;
                if one {
                    let x0 = i32::from((qs[j] & 0x0F) | xh_0);
                    let x1 = i32::from((qs[j] >> 4) | xh_1);
                    out[j] = x0 as f32 * d + m;
                    out[j + 16] = x1 as f32 * d + m;
                } else {
                    let x0 = i32::from((qs[j] & 0x0F) | xh_0) - 16;
                    let x1 = i32::from((qs[j] >> 4) | xh_1) - 16;
                    out[j] = x0 as f32 * d;
                    out[j + 16] = x1 as f32 * d;
                }
            }
            y.extend_from_slice(&out);
        }
        GgmlFormat::Q4K | GgmlFormat::Q5K => {
            let five = format == GgmlFormat::Q5K;
            let d = half(x, 0);
            let min = half(x, 2);
            let scales = &x[4..16];
            let qh = &x[16..48];
            let mut ql = if five { &x[48..] } else { &x[16..] };
            let (mut is, mut u1, mut u2) = (0, 1u8, 2u8);
            for _ in (0..256).step_by(64) {
                let (sc, m) = get_scale_min_k4(is, scales);
                let d1 = d * f32::from(sc);
                let m1 = min * f32::from(m);
                let (sc, m) = get_scale_min_k4(is + 1, scales);
                let d2 = d * f32::from(sc);
                let m2 = min * f32::from(m);
                for l in 0..32 {
                    let h = if five && qh[l] & u1 != 0 { 16 } else { 0 };
                    y.push(d1 * f32::from((ql[l] & 0xF) + h) - m1);
                }
                for l in 0..32 {
                    let h = if five && qh[l] & u2 != 0 { 16 } else { 0 };
                    y.push(d2 * f32::from((ql[l] >> 4) + h) - m2);
                }
                ql = &ql[32..];
                is += 2;
                u1 <<= 2;
                u2 <<= 2;
            }
        }
        GgmlFormat::Q6K => {
            let d = half(x, 208);
            let mut out = [0.0f32; 256];
            for n in 0..2 {
                let ql = &x[64 * n..];
                let qh = &x[128 + 32 * n..];
                let sc = &x[192 + 8 * n..];
                let y = &mut out[128 * n..];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = i32::from(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8) - 32;
                    let q2 = i32::from(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8) - 32;
                    let q3 = i32::from(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8) - 32;
                    let q4 = i32::from(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8) - 32;
                    let s = |i: usize| f32::from(sc[i] as i8);
                    y[l] = d * s(is) * q1 as f32;
                    y[l + 32] = d * s(is + 2) * q2 as f32;
                    y[l + 64] = d * s(is + 4) * q3 as f32;
                    y[l + 96] = d * s(is + 6) * q4 as f32;
                }
            }
            y.extend_from_slice(&out);
        }
    }
}

fn ggml_dequantize(format: GgmlFormat, data: &[u8]) -> Vec<f32> {
    let mut y = Vec::new();
    for blk in data.chunks_exact(format.block_bytes()) {
        ggml_dequantize_block(format, blk, &mut y);
    }
    y
}

/// `Σ_b |sx_b| · (Σ_u |a_u| Σ_j |q_j xq_j| + |c_b| Σ_j |xq_j|)` for output `[t][r]`.
fn magnitude(w: &GgmlMatrix, x: &ActQ16, t: usize, r: usize) -> f64 {
    let (mut q, mut a, mut c) = w.row_scratch();
    w.decode_row(r, &mut q, &mut a, &mut c);
    let u = w.format().unit();
    let xb = x.blocks();
    let mut mag = 0.0;
    for (b, &cb) in c.iter().enumerate().take(xb) {
        let mut term = 0.0;
        for j in 0..BLOCK {
            let i = b * BLOCK + j;
            let xq = f64::from(x.q[(t * xb + b) * BLOCK + j]).abs();
            term += f64::from(a[i / u]).abs() * (f64::from(q[i]) * xq).abs();
            if w.format().has_min() {
                term += f64::from(cb).abs() * xq;
            }
        }
        mag += f64::from(x.scales[t * xb + b]).abs() * term;
    }
    mag
}

/// Every available kernel against the scalar reference.
fn check(w: &GgmlMatrix, x: &[f32], m: usize, label: &str) {
    let xq = ActQ16::quantize(x, m, w.cols());
    let n = w.rows();
    let mut want = vec![0.0; m * n];
    w.matmul_scalar(&xq, &mut want);
    let units = w.cols() / w.format().unit();
    for kernel in Kernel::available() {
        let mut got = vec![f32::NAN; m * n];
        Matrix::Ggml(w.clone()).matmul_t_with(kernel, x, &xq, m, &mut got);
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            let (t, r) = (i / n, i % n);
            let bound = (units as f64 + 8.0) * EPS * magnitude(w, &xq, t, r);
            let diff = (f64::from(*g) - f64::from(*e)).abs();
            assert!(
                diff <= bound,
                "{} {} {label} [{t},{r}]: {g} vs reference {e} (|diff| {diff:e} > {bound:e})",
                kernel.name(),
                w.format_name(),
            );
        }
    }
}

/// Column counts for a format: one block, a few, an odd number of them.
fn col_counts(format: GgmlFormat) -> [usize; 3] {
    if format.block_values() == 32 {
        [32, 96, 576]
    } else {
        [256, 512, 768]
    }
}

#[test]
fn dequantize_is_bit_for_bit_ggml() {
    for format in GgmlFormat::ALL {
        for (i, scales) in [Scales::Random, Scales::Max, Scales::Tiny, Scales::Zero]
            .into_iter()
            .enumerate()
        {
            let (rows, cols) = (3, col_counts(format)[1]);
            let data = blocks(format, rows, cols, 10 + i as u64, scales);
            let w = GgmlMatrix::from_ggml(format, &data, rows, cols).unwrap();
            let got = w.dequantize();
            let want = ggml_dequantize(format, &data);
            assert_eq!(got.len(), want.len());
            for (j, (g, e)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    e.to_bits(),
                    "{} {scales:?} value {j}: {g} vs ggml {e}",
                    format.name()
                );
            }
            let mut row = vec![0.0; cols];
            Matrix::Ggml(w.clone()).row(rows - 1, &mut row);
            assert_eq!(row, want[(rows - 1) * cols..]);
        }
    }
}

#[test]
fn dequantize_covers_every_integer_level() {
    // All-ones and all-zeros bit patterns reach each format's extreme levels exactly.
    for format in GgmlFormat::ALL {
        for fill in [0x00u8, 0xFF] {
            let cols = format.block_values();
            let mut data = vec![fill; format.block_bytes()];
            let d_at = if format == GgmlFormat::Q6K { 208 } else { 0 };
            data[d_at..d_at + 2].copy_from_slice(&f16::ONE.to_le_bytes());
            if format != GgmlFormat::Q5_0 && format != GgmlFormat::Q6K {
                data[2..4].copy_from_slice(&f16::ZERO.to_le_bytes());
            }
            let w = GgmlMatrix::from_ggml(format, &data, 1, cols).unwrap();
            let got = w.dequantize();
            let want: f32 = match (format, fill) {
                (GgmlFormat::Q5_0, 0) => -16.0,
                (GgmlFormat::Q5_0, _) => 15.0,
                (GgmlFormat::Q5_1, 0) => 0.0,
                (GgmlFormat::Q5_1, _) => 31.0,
                // sc = 0 for a zero fill; 63 · 15 (q4_k) and 63 · 31 (q5_k) for all ones.
                (GgmlFormat::Q4K | GgmlFormat::Q5K, 0) => 0.0,
                (GgmlFormat::Q4K, _) => 945.0,
                (GgmlFormat::Q5K, _) => 1953.0,
                // sc = 0, or sc = −1 and q − 32 = 31.
                (GgmlFormat::Q6K, 0) => 0.0,
                (GgmlFormat::Q6K, _) => -31.0,
            };
            assert!(
                got.iter().all(|&v| v == want),
                "{} fill {fill:#x}: {got:?}",
                format.name()
            );
        }
    }
}

#[test]
fn kernels_match_scalar_on_random_blocks() {
    let mut seed = 1000;
    for format in GgmlFormat::ALL {
        for k in col_counts(format) {
            for n in [1usize, 3, 4, 5, 9] {
                for m in [1usize, 2, 5] {
                    seed += 2;
                    let data = blocks(format, n, k, seed, Scales::Random);
                    let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
                    let x = crate::pseudo_random(seed + 1, m * k);
                    check(&w, &x, m, &format!("m {m} n {n} k {k}"));
                }
            }
        }
    }
}

#[test]
fn kernels_match_scalar_on_adversarial_blocks() {
    let mut seed = 2000;
    for format in GgmlFormat::ALL {
        let k = col_counts(format)[2];
        for scales in [Scales::Max, Scales::Tiny, Scales::Zero] {
            for (n, m) in [(7, 1), (5, 17)] {
                seed += 2;
                let data = blocks(format, n, k, seed, scales);
                let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
                let mut x = crate::pseudo_random(seed + 1, m * k);
                // Outliers: one huge activation, one tiny, a block of zeros, a huge last value.
                x[k / 3] = 3.0e4;
                x[1] = -1.0e-6;
                x[m * k - 1] = -1.0e9;
                for v in &mut x[32..64] {
                    *v = 0.0;
                }
                check(&w, &x, m, &format!("{scales:?} m {m} n {n}"));
            }
        }
        // All-ones blocks: the largest integer weights (and Q6_K's −128 scales with 0xFF→
        // sc = −1; 0x80 fills give −128) against full-scale activations of one sign.
        for fill in [0xFFu8, 0x80, 0x00] {
            let (n, m) = (6, 3);
            let mut data = blocks(format, n, k, seed, Scales::Max);
            let bb = format.block_bytes();
            for blk in data.chunks_exact_mut(bb) {
                let keep: Vec<(usize, [u8; 2])> = match format {
                    GgmlFormat::Q5_0 => vec![(0, [blk[0], blk[1]])],
                    GgmlFormat::Q6K => vec![(208, [blk[208], blk[209]])],
                    _ => vec![(0, [blk[0], blk[1]]), (2, [blk[2], blk[3]])],
                };
                blk.fill(fill);
                for (at, v) in keep {
                    blk[at..at + 2].copy_from_slice(&v);
                }
            }
            let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
            let x = vec![1.0f32; m * k];
            check(&w, &x, m, &format!("fill {fill:#x}"));
        }
    }
}

#[test]
fn reference_matches_the_f64_product_of_dequantized_values() {
    for format in GgmlFormat::ALL {
        let (m, n, k) = (3, 5, col_counts(format)[1]);
        let data = blocks(format, n, k, 77, Scales::Random);
        let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
        let x = crate::pseudo_random(78, m * k);
        let xq = ActQ16::quantize(&x, m, k);
        let deq = w.dequantize();
        for kernel in Kernel::available() {
            let mut got = vec![0.0; m * n];
            Matrix::Ggml(w.clone()).matmul_t_with(kernel, &x, &xq, m, &mut got);
            for t in 0..m {
                let xd = xq.dequantize_row(t);
                for r in 0..n {
                    let (mut exact, mut mag) = (0.0f64, 0.0f64);
                    for c in 0..k {
                        let p = f64::from(xd[c]) * f64::from(deq[r * k + c]);
                        exact += p;
                        mag += p.abs();
                    }
                    // The kernels' integer sums are exact; what differs is f32 rounding of
                    // the factors, the dequantized values and the sums: a few ε per block.
                    let bound = (k as f64 / 16.0 + 8.0) * EPS * (mag + magnitude(&w, &xq, t, r));
                    let g = f64::from(got[t * n + r]);
                    assert!(
                        (g - exact).abs() <= bound,
                        "{} {} [{t},{r}]: {g} vs f64 {exact} (bound {bound:e})",
                        kernel.name(),
                        format.name()
                    );
                }
            }
        }
    }
}

#[test]
fn zero_blocks_and_zero_activations_give_exact_zeros() {
    for format in GgmlFormat::ALL {
        let (m, n, k) = (2, 5, col_counts(format)[1]);
        let zero_w = GgmlMatrix::from_ggml(
            format,
            &vec![0; n * k / format.block_values() * format.block_bytes()],
            n,
            k,
        )
        .unwrap();
        let w =
            GgmlMatrix::from_ggml(format, &blocks(format, n, k, 5, Scales::Random), n, k).unwrap();
        let x = crate::pseudo_random(6, m * k);
        let zx = vec![0.0f32; m * k];
        for kernel in Kernel::available() {
            for (mat, input) in [(&zero_w, &x), (&w, &zx)] {
                let mut out = vec![f32::NAN; m * n];
                Matrix::Ggml(mat.clone()).matmul_t(kernel, input, m, &mut out);
                assert!(
                    out.iter().all(|v| *v == 0.0),
                    "{} {}: {out:?}",
                    kernel.name(),
                    format.name()
                );
            }
        }
    }
}

#[test]
fn nan_activations_propagate_and_prefill_equals_decode() {
    for format in GgmlFormat::ALL {
        let (m, n, k) = (9, 6, col_counts(format)[1]);
        let w =
            GgmlMatrix::from_ggml(format, &blocks(format, n, k, 9, Scales::Random), n, k).unwrap();
        let mat = Matrix::Ggml(w);
        let mut x = crate::pseudo_random(10, m * k);
        for kernel in Kernel::available() {
            let mut all = vec![f32::NAN; m * n];
            mat.matmul_t(kernel, &x, m, &mut all);
            for t in 0..m {
                let mut one = vec![f32::NAN; n];
                mat.matmul_t(kernel, &x[t * k..(t + 1) * k], 1, &mut one);
                // Same kernel, same per-token arithmetic: identical results.
                assert_eq!(
                    &all[t * n..(t + 1) * n],
                    &one[..],
                    "{} token {t}",
                    kernel.name()
                );
            }
        }
        x[k + 3] = f32::NAN;
        for kernel in Kernel::available() {
            let mut out = vec![0.0; m * n];
            mat.matmul_t(kernel, &x, m, &mut out);
            let what = format!("{} {}", kernel.name(), format.name());
            assert!(out[..n].iter().all(|v| v.is_finite()), "{what}: {out:?}");
            assert!(out[n..2 * n].iter().all(|v| v.is_nan()), "{what}: {out:?}");
        }
    }
}

#[test]
fn held_bytes_are_the_gguf_bytes() {
    let per_block = [
        (GgmlFormat::Q5_0, 32, 22),
        (GgmlFormat::Q5_1, 32, 24),
        (GgmlFormat::Q4K, 256, 144),
        (GgmlFormat::Q5K, 256, 176),
        (GgmlFormat::Q6K, 256, 210),
    ];
    for (format, v, b) in per_block {
        let (rows, cols) = (3, 2 * v);
        let data = blocks(format, rows, cols, 3, Scales::Random);
        assert_eq!(data.len(), rows * 2 * b);
        let w = GgmlMatrix::from_ggml(format, &data, rows, cols).unwrap();
        assert_eq!(w.data(), &data[..]);
        let owned = GgmlMatrix::from_ggml_vec(format, data.clone(), rows, cols).unwrap();
        assert_eq!(owned.data(), &data[..]);
        assert!(GgmlMatrix::from_ggml_vec(format, data[1..].to_vec(), rows, cols).is_err());
        let mat = Matrix::Ggml(w);
        assert_eq!(mat.bytes(), (rows * 2 * b) as u64);
        assert_eq!((mat.rows(), mat.cols()), (rows, cols));
        assert_eq!(mat.format_name(), format.name());
        assert!(mat.wants_q16());
        assert_eq!(mat.to_f32(), ggml_dequantize(format, &data));
    }
}

#[test]
fn constructors_refuse_bad_blocks() {
    for format in GgmlFormat::ALL {
        let (v, bb) = (format.block_values(), format.block_bytes());
        let data = blocks(format, 2, v, 4, Scales::Random);
        let name = format.name();
        assert!(matches!(
            GgmlMatrix::from_ggml(format, &data[..data.len() - 1], 2, v),
            Err(KernelError::DataLength { got, expected, .. }) if got == 2 * bb - 1 && expected == 2 * bb
        ));
        let err = GgmlMatrix::from_ggml(format, &data, 1, 2 * v + 16).unwrap_err();
        assert!(
            err.to_string().contains("not a multiple of"),
            "{name}: {err}"
        );
        assert!(GgmlMatrix::from_ggml(format, &[], 0, v).is_err());
        assert!(GgmlMatrix::from_ggml(format, &data, usize::MAX, v).is_err());
        let fields: &[usize] = match format {
            GgmlFormat::Q5_0 => &[0],
            GgmlFormat::Q6K => &[208],
            _ => &[0, 2],
        };
        for &at in fields {
            for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
                let mut d = data.clone();
                d[bb + at..bb + at + 2].copy_from_slice(&bad.to_le_bytes());
                let err = GgmlMatrix::from_ggml(format, &d, 2, v).unwrap_err();
                match &err {
                    KernelError::NotFinite { what, index, .. } => {
                        assert_eq!(*index, 1, "{name}: {err}");
                        assert!(what.starts_with(name), "{name}: {err}");
                    }
                    other => panic!("{name}: {other}"),
                }
            }
        }
    }
    // The named constructors pick their format.
    let d = blocks(GgmlFormat::Q4K, 1, 256, 1, Scales::Random);
    assert_eq!(
        GgmlMatrix::from_q4_k(&d, 1, 256).unwrap().format(),
        GgmlFormat::Q4K
    );
    assert!(GgmlMatrix::from_q5_k(&d, 1, 256).is_err());
    let d = blocks(GgmlFormat::Q6K, 1, 256, 1, Scales::Random);
    assert_eq!(
        GgmlMatrix::from_q6_k(&d, 1, 256).unwrap().format(),
        GgmlFormat::Q6K
    );
    let d = blocks(GgmlFormat::Q5K, 1, 256, 1, Scales::Random);
    assert_eq!(
        GgmlMatrix::from_q5_k(&d, 1, 256).unwrap().format(),
        GgmlFormat::Q5K
    );
    let d = blocks(GgmlFormat::Q5_0, 1, 32, 1, Scales::Random);
    assert_eq!(
        GgmlMatrix::from_q5_0(&d, 1, 32).unwrap().format(),
        GgmlFormat::Q5_0
    );
    let d = blocks(GgmlFormat::Q5_1, 1, 32, 1, Scales::Random);
    assert_eq!(
        GgmlMatrix::from_q5_1(&d, 1, 32).unwrap().format(),
        GgmlFormat::Q5_1
    );
}

/// One token through a matrix on `kernel` via [`Matrix::matmul_rows`] (where the SIMD kernels
/// take their direct decode), rows `rows` only.
fn one_token_rows(
    kernel: Kernel,
    w: &GgmlMatrix,
    xq: &ActQ16,
    rows: std::ops::Range<usize>,
) -> Vec<f32> {
    let mat = Matrix::Ggml(w.clone());
    let mut prep = crate::Prepared::default();
    prep.prepare_q16(kernel, xq.clone(), 1, w.cols(), [&mat]);
    let mut out = vec![f32::NAN; rows.len()];
    mat.matmul_rows(&prep, &[], rows, &mut out);
    out
}

/// The direct decode (one token, block bytes split into weights in registers) against the
/// decoded tile of the same kernel, bit for bit, on every row range a split can ask for, and
/// against the scalar reference (within the bound of [`check`]).
fn check_direct(w: &GgmlMatrix, x: &[f32], label: &str) -> usize {
    check(w, x, 1, label);
    let xq = ActQ16::quantize(x, 1, w.cols());
    let n = w.rows();
    let split = crate::ROW_SPLIT;
    let ranges: Vec<std::ops::Range<usize>> = if n > split {
        vec![0..n, split..n, 0..split]
    } else {
        std::iter::once(0..n).collect()
    };
    let mut compared = 0;
    for kernel in Kernel::available() {
        if !crate::arch::ggml_direct(kernel, w.format()) {
            continue;
        }
        for rows in ranges.clone() {
            let Some(tile) = crate::arch::ggml_rows_tiled(kernel, w, &xq, rows.clone()) else {
                continue;
            };
            let direct = one_token_rows(kernel, w, &xq, rows.clone());
            for (i, (d, t)) in direct.iter().zip(&tile).enumerate() {
                assert_eq!(
                    d.to_bits(),
                    t.to_bits(),
                    "{} {} {label} rows {rows:?} [{i}]: direct {d} vs tile {t}",
                    kernel.name(),
                    w.format_name()
                );
            }
            compared += 1;
        }
    }
    compared
}

#[test]
fn direct_decode_is_bit_identical_to_the_tile_on_random_blocks() {
    let mut seed = 3000;
    let mut compared = 0;
    for format in GgmlFormat::ALL {
        // One block, a few, an odd number; Q5_0 also 640 (two and a half tile chunks).
        let mut cols = col_counts(format).to_vec();
        if format.block_values() == 32 {
            cols.push(640);
        }
        for k in cols {
            for n in [1usize, 3, 4, 13, 21] {
                seed += 2;
                let data = blocks(format, n, k, seed, Scales::Random);
                let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
                let x = crate::pseudo_random(seed + 1, k);
                compared += check_direct(&w, &x, &format!("n {n} k {k}"));
            }
        }
    }
    // Natively with AVX2 and in wasm (simd128), some format has a direct decode to compare.
    let simd = Kernel::available()
        .iter()
        .any(|k| matches!(k, Kernel::Avx2 | Kernel::Simd128));
    assert!(!simd || compared > 0, "no direct decode was compared");
}

#[test]
fn direct_decode_is_bit_identical_to_the_tile_on_adversarial_blocks() {
    let mut seed = 4000;
    for format in GgmlFormat::ALL {
        let k = col_counts(format)[2];
        let n = 11;
        for scales in [Scales::Max, Scales::Tiny, Scales::Zero] {
            seed += 2;
            let w =
                GgmlMatrix::from_ggml(format, &blocks(format, n, k, seed, scales), n, k).unwrap();
            let mut x = crate::pseudo_random(seed + 1, k);
            // Outliers: a huge activation, a tiny one, a block of zeros, a huge last value.
            x[k / 3] = 3.0e4;
            x[1] = -1.0e-6;
            x[k - 1] = -1.0e9;
            x[32..64].fill(0.0);
            check_direct(&w, &x, &format!("{scales:?}"));
        }
        // Every weight bit set (the largest integers: all-max nibbles and high bits), none,
        // and 0x80 (Q6_K's −128 scales), with full-scale activations of one sign and of both.
        for fill in [0xFFu8, 0x80, 0x00, 0x55] {
            let mut data = blocks(format, n, k, seed, Scales::Max);
            for blk in data.chunks_exact_mut(format.block_bytes()) {
                let keep: &[usize] = match format {
                    GgmlFormat::Q5_0 => &[0],
                    GgmlFormat::Q6K => &[208],
                    _ => &[0, 2],
                };
                let saved: Vec<(usize, u8, u8)> =
                    keep.iter().map(|&at| (at, blk[at], blk[at + 1])).collect();
                blk.fill(fill);
                for (at, a, b) in saved {
                    blk[at] = a;
                    blk[at + 1] = b;
                }
            }
            let w = GgmlMatrix::from_ggml(format, &data, n, k).unwrap();
            for x in [
                vec![1.0f32; k],
                (0..k)
                    .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
                    .collect(),
            ] {
                check_direct(&w, &x, &format!("fill {fill:#x}"));
            }
        }
    }
}
