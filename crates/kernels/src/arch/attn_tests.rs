//! The attention kernels ([`crate::attn`]) of every ISA against the scalar reference, per KV
//! format (f32, f16, int8, int4g32, int4), on random and adversarial inputs.
//!
//! Dot bounds: a kernel and the reference each sum the same f32 products in their own order,
//! each within `(n + 1) · ε · Σ|terms|` of the exact sum (n − 1 additions, one product rounding,
//! and for int4g32 one more for the scale), so they agree within `2 · (n + 3) · ε · Σ|terms|`,
//! `Σ|terms| = Σ_i |q_i · x_i|` with `x_i` the dequantized value, computed in f64.
//! The axpy kernels do the reference's per-element arithmetic (`out_i + f · x_i`, same `f`, no
//! FMA), so they must agree bit for bit (NaNs: both NaN).

use half::f16;

use super::tests::EPS;
use crate::attn::{self, I4_GROUP, I4_GROUP_BYTES};
use crate::Kernel;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const LENS: [usize; 12] = [1, 7, 8, 16, 31, 32, 33, 40, 64, 100, 128, 257];

/// One head vector in every format, plus its dequantized values (f64) per format.
struct Data {
    f32v: Vec<f32>,
    f16v: Vec<f16>,
    i8v: Vec<i8>,
    nib: Vec<u8>,
    scales: Vec<f16>,
}

impl Data {
    /// Random data; int4 padding nibbles random too (they must be ignored).
    fn random(seed: u64, len: usize) -> Data {
        let r = crate::pseudo_random(seed, len);
        let groups = len.div_ceil(I4_GROUP);
        let bytes = crate::pseudo_random(seed + 1, groups * I4_GROUP_BYTES);
        let sc = crate::pseudo_random(seed + 2, groups);
        Data {
            f32v: r.clone(),
            f16v: r.iter().map(|&v| f16::from_f32(v)).collect(),
            i8v: r.iter().map(|&v| (v * 128.0).floor() as i8).collect(),
            nib: bytes.iter().map(|&v| ((v + 1.0) * 128.0) as u8).collect(),
            scales: sc.iter().map(|&v| f16::from_f32(v * 0.1)).collect(),
        }
    }

    fn f16(&self) -> Vec<f64> {
        self.f16v.iter().map(|h| h.to_f64()).collect()
    }

    fn i8(&self) -> Vec<f64> {
        self.i8v.iter().map(|&v| f64::from(v)).collect()
    }

    /// `(n_i − 8) · s_g` (`scaled`) or `n_i − 8`, for the first `len` values.
    fn i4(&self, len: usize, scaled: bool) -> Vec<f64> {
        (0..len)
            .map(|i| {
                let (g, j) = (i / I4_GROUP, i % I4_GROUP);
                let b = self.nib[g * I4_GROUP_BYTES + j % I4_GROUP_BYTES];
                let n = if j < I4_GROUP_BYTES { b & 0x0F } else { b >> 4 };
                let s = if scaled { self.scales[g].to_f64() } else { 1.0 };
                (f64::from(n) - 8.0) * s
            })
            .collect()
    }
}

fn mag(q: &[f32], x: &[f64]) -> f64 {
    q.iter()
        .zip(x)
        .map(|(a, b)| (f64::from(*a) * b).abs())
        .sum()
}

fn exact(q: &[f32], x: &[f64]) -> f64 {
    q.iter().zip(x).map(|(a, b)| f64::from(*a) * b).sum()
}

/// Every dot of every available kernel against the scalar reference (bound above).
fn check_dots(q: &[f32], d: &Data, label: &str) {
    let n = q.len();
    let bound = |x: &[f64]| 2.0 * (n as f64 + 3.0) * EPS * mag(q, x);
    let (x16, x8, x4s, x4) = (d.f16(), d.i8(), d.i4(n, true), d.i4(n, false));
    for kernel in Kernel::available() {
        let s = Kernel::Scalar;
        let cases = [
            (
                "dot_f16",
                attn::dot_f16(kernel, q, &d.f16v),
                attn::dot_f16(s, q, &d.f16v),
                bound(&x16),
            ),
            (
                "dot_i8",
                attn::dot_i8(kernel, q, &d.i8v),
                attn::dot_i8(s, q, &d.i8v),
                bound(&x8),
            ),
            (
                "dot_i4g32",
                attn::dot_i4g32(kernel, q, &d.nib, &d.scales),
                attn::dot_i4g32(s, q, &d.nib, &d.scales),
                bound(&x4s),
            ),
            (
                "dot_i4",
                attn::dot_i4(kernel, q, &d.nib),
                attn::dot_i4(s, q, &d.nib),
                bound(&x4),
            ),
        ];
        for (what, got, want, b) in cases {
            let diff = (f64::from(got) - f64::from(want)).abs();
            assert!(
                diff <= b,
                "{} {what} {label} len {n}: {got} vs reference {want} (|diff| {diff:e} > {b:e})",
                kernel.name()
            );
        }
    }
}

/// Bitwise equality, or both NaN.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Every axpy of every available kernel against the scalar reference, bit for bit.
fn check_axpys(p: f32, d: &Data, out0: &[f32], label: &str) {
    let n = out0.len();
    let run = |kernel: Kernel| {
        let mut o = [out0.to_vec(), out0.to_vec(), out0.to_vec(), out0.to_vec()];
        attn::axpy_f32(kernel, p, &d.f32v, &mut o[0]);
        attn::axpy_f16(kernel, p, &d.f16v, &mut o[1]);
        attn::axpy_i8(kernel, p, &d.i8v, &mut o[2]);
        attn::axpy_i4g32(kernel, p, &d.nib, &d.scales, &mut o[3]);
        o
    };
    let want = run(Kernel::Scalar);
    for kernel in Kernel::available() {
        let got = run(kernel);
        for (f, what) in ["axpy_f32", "axpy_f16", "axpy_i8", "axpy_i4g32"]
            .iter()
            .enumerate()
        {
            for i in 0..n {
                let (g, w) = (got[f][i], want[f][i]);
                assert!(
                    same(g, w),
                    "{} {what} {label} len {n} [{i}]: {g} vs reference {w}",
                    kernel.name()
                );
            }
        }
    }
}

#[test]
fn attn_kernels_match_scalar_on_random_inputs() {
    for (t, len) in LENS.into_iter().enumerate() {
        let seed = 1000 + 10 * t as u64;
        let d = Data::random(seed, len);
        let q = crate::pseudo_random(seed + 5, len);
        check_dots(&q, &d, "random");
        let out = crate::pseudo_random(seed + 6, len);
        check_axpys(0.37, &d, &out, "random");
        check_axpys(-1.0e3, &d, &out, "random, large p");
    }
}

#[test]
fn attn_kernels_give_exact_zeros() {
    for len in LENS {
        let zq = vec![0.0f32; len];
        let d = Data::random(7, len);
        let q = crate::pseudo_random(8, len);
        let groups = len.div_ceil(I4_GROUP);
        let z = Data {
            f32v: vec![0.0; len],
            f16v: vec![f16::ZERO; len],
            i8v: vec![0; len],
            nib: vec![0x88; groups * I4_GROUP_BYTES],
            scales: d.scales.clone(),
        };
        for kernel in Kernel::available() {
            let dots = |q: &[f32], d: &Data| {
                [
                    attn::dot_f16(kernel, q, &d.f16v),
                    attn::dot_i8(kernel, q, &d.i8v),
                    attn::dot_i4g32(kernel, q, &d.nib, &d.scales),
                    attn::dot_i4(kernel, q, &d.nib),
                ]
            };
            for (what, got) in [("zero q", dots(&zq, &d)), ("zero data", dots(&q, &z))] {
                assert_eq!(got, [0.0; 4], "{} {what} len {len}", kernel.name());
            }
            // Zero data or a zero weight leave `out` exactly as it was.
            let out0 = crate::pseudo_random(9, len);
            let mut o = out0.clone();
            attn::axpy_f32(kernel, 0.5, &z.f32v, &mut o);
            attn::axpy_f16(kernel, 0.5, &z.f16v, &mut o);
            attn::axpy_i8(kernel, 0.5, &z.i8v, &mut o);
            attn::axpy_i4g32(kernel, 0.5, &z.nib, &z.scales, &mut o);
            attn::axpy_i4g32(kernel, 0.0, &d.nib, &d.scales, &mut o);
            attn::axpy_f16(kernel, 0.0, &d.f16v, &mut o);
            assert_eq!(o, out0, "{} axpy zeros len {len}", kernel.name());
        }
        check_axpys(0.0, &d, &vec![0.0; len], "p = 0");
    }
}

#[test]
fn attn_kernels_match_scalar_with_outliers() {
    for (t, len) in LENS.into_iter().enumerate() {
        let seed = 2000 + 10 * t as u64;
        let mut q = crate::pseudo_random(seed, len);
        let mut d = Data::random(seed + 1, len);
        for i in (0..len).step_by(3) {
            q[i] = if i % 2 == 0 { 1.0e4 } else { -1.0e-4 };
        }
        for i in (0..len).step_by(5) {
            d.f16v[i] = f16::from_f32(if i % 2 == 0 { -6.0e4 } else { 1.0e-4 });
            d.f32v[i] = if i % 2 == 0 { 3.0e7 } else { -1.0e-7 };
        }
        for s in d.scales.iter_mut().step_by(2) {
            *s = f16::from_f32(-3.0e3);
        }
        check_dots(&q, &d, "outliers");
        let mut out = crate::pseudo_random(seed + 2, len);
        out[len / 2] = 1.0e8;
        check_axpys(1.0e-4, &d, &out, "outliers");
        check_axpys(5.0e3, &d, &out, "outliers");
    }
}

#[test]
fn attn_kernels_match_scalar_on_extreme_int8_and_nibbles() {
    for (t, len) in LENS.into_iter().enumerate() {
        let seed = 3000 + 10 * t as u64;
        let q = crate::pseudo_random(seed, len);
        let out = crate::pseudo_random(seed + 1, len);
        let groups = len.div_ceil(I4_GROUP);
        for (label, byte, v8) in [
            ("nibbles 0, int8 −128", 0x00u8, [-128i8, -128]),
            ("nibbles 15, int8 127", 0xFF, [127, 127]),
            ("nibbles 0/15, int8 ±", 0xF0, [-128, 127]),
        ] {
            let mut d = Data::random(seed + 2, len);
            d.nib = vec![byte; groups * I4_GROUP_BYTES];
            d.i8v = (0..len).map(|i| v8[i % 2]).collect();
            check_dots(&q, &d, label);
            check_axpys(-0.7, &d, &out, label);
            // A constant nibble n gives `Σ q_i · (n − 8)` (scales 1), checked in f64.
            if byte != 0xF0 {
                let n = f64::from(byte & 0x0F) - 8.0;
                let want: f64 = q.iter().map(|&a| f64::from(a) * n).sum();
                let m: f64 = q.iter().map(|&a| (f64::from(a) * n).abs()).sum();
                for kernel in Kernel::available() {
                    let got = f64::from(attn::dot_i4(kernel, &q, &d.nib));
                    assert!(
                        (got - want).abs() <= (len as f64 + 1.0) * EPS * m,
                        "{} {label} len {len}: {got} vs {want}",
                        kernel.name()
                    );
                }
            }
        }
    }
}

/// f16 subnormals and ±0 (finite: within the bound), then ±∞ and NaN at positions in the
/// vector bodies and tails: the result's class (±∞, NaN) must equal the reference's.
#[test]
fn attn_f16_specials_match_scalar() {
    let subnormals = [0x0001u16, 0x03FF, 0x8001, 0x83FF, 0x0000, 0x8000, 0x0400];
    for (t, len) in LENS.into_iter().enumerate() {
        let seed = 4000 + 10 * t as u64;
        let q = crate::pseudo_random(seed, len);
        let out = crate::pseudo_random(seed + 1, len);
        let mut d = Data::random(seed + 2, len);
        for (i, h) in d.f16v.iter_mut().enumerate() {
            if i % 2 == 0 {
                *h = f16::from_bits(subnormals[(i / 2) % subnormals.len()]);
            }
        }
        check_dots(&q, &d, "subnormals");
        check_axpys(0.3, &d, &out, "subnormals");
        let specials = [
            ("+inf", vec![f16::INFINITY]),
            ("-inf", vec![f16::NEG_INFINITY]),
            ("nan", vec![f16::NAN]),
            ("signed nan", vec![f16::from_bits(0xFC01)]),
            ("+inf and -inf", vec![f16::INFINITY, f16::NEG_INFINITY]),
        ];
        for (label, vals) in specials {
            for at in [0, len / 2, len - 1] {
                let mut k = d.f16v.clone();
                for (j, v) in vals.iter().enumerate() {
                    k[(at + 7 * j) % len] = *v;
                }
                let want = attn::dot_f16(Kernel::Scalar, &q, &k);
                for kernel in Kernel::available() {
                    let got = attn::dot_f16(kernel, &q, &k);
                    // ±∞ + finite = ±∞ and ∞ − ∞ = NaN in any order: the same class.
                    assert!(
                        !want.is_finite() && same(got, want),
                        "{} dot_f16 {label} at {at} len {len}: {got} vs reference {want}",
                        kernel.name()
                    );
                }
                let e = Data {
                    f16v: k,
                    ..Data::random(seed + 2, len)
                };
                check_axpys(0.3, &e, &out, label);
            }
        }
    }
}

/// Every one of the 65536 halves converts exactly as `half`'s `f16::to_f32` in every kernel
/// (through `axpy` with p = 1 onto zeros, and `dot` with a unit vector).
#[test]
fn attn_f16_conversion_is_exact_for_every_half() {
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    for kernel in Kernel::available() {
        let mut out = vec![0.0f32; all.len()];
        attn::axpy_f16(kernel, 1.0, &all, &mut out);
        for (h, o) in all.iter().zip(&out) {
            let want = 0.0 + h.to_f32();
            assert!(
                same(*o, want),
                "{} axpy_f16 {:#06x}: {o} vs {want}",
                kernel.name(),
                h.to_bits()
            );
        }
        let mut q = vec![0.0f32; 16];
        q[0] = 1.0;
        for h in &all {
            let k = [*h; 16];
            let got = attn::dot_f16(kernel, &q, &k);
            let want = if h.is_finite() { h.to_f32() } else { f32::NAN };
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{} dot_f16 {:#06x}: {got} vs {want}",
                kernel.name(),
                h.to_bits()
            );
        }
    }
    for h in &all {
        let got = crate::layout::f16_bits_to_f32_exact(h.to_bits());
        assert!(same(got, h.to_f32()), "{:#06x}: {got}", h.to_bits());
    }
}

/// Every format's dot and axpy (every kernel, the reference included) against an f64
/// reference built by dequantizing the stored vector: checks the reference itself.
#[test]
fn attn_kernels_match_dequantized_reference() {
    for (t, len) in LENS.into_iter().enumerate() {
        let seed = 5000 + 10 * t as u64;
        let d = Data::random(seed, len);
        let q = crate::pseudo_random(seed + 5, len);
        let out0 = crate::pseudo_random(seed + 6, len);
        let p = -0.61f32;
        let x32: Vec<f64> = d.f32v.iter().map(|&v| f64::from(v)).collect();
        let formats: [(&str, Vec<f64>); 4] = [
            ("f32", x32),
            ("f16", d.f16()),
            ("int8", d.i8()),
            ("int4g32", d.i4(len, true)),
        ];
        for kernel in Kernel::available() {
            let dots = [
                crate::f32_ops::dot(kernel, &q, &d.f32v),
                attn::dot_f16(kernel, &q, &d.f16v),
                attn::dot_i8(kernel, &q, &d.i8v),
                attn::dot_i4g32(kernel, &q, &d.nib, &d.scales),
            ];
            let mut outs = [out0.clone(), out0.clone(), out0.clone(), out0.clone()];
            attn::axpy_f32(kernel, p, &d.f32v, &mut outs[0]);
            attn::axpy_f16(kernel, p, &d.f16v, &mut outs[1]);
            attn::axpy_i8(kernel, p, &d.i8v, &mut outs[2]);
            attn::axpy_i4g32(kernel, p, &d.nib, &d.scales, &mut outs[3]);
            for (f, (name, x)) in formats.iter().enumerate() {
                let want = exact(&q, x);
                let b = (len as f64 + 3.0) * EPS * mag(&q, x);
                let got = f64::from(dots[f]);
                assert!(
                    (got - want).abs() <= b,
                    "{} {name} dot len {len}: {got} vs dequantized {want}",
                    kernel.name()
                );
                for i in 0..len {
                    let px = f64::from(p) * x[i];
                    let want = f64::from(out0[i]) + px;
                    // Rounding of p·s, of the product and of the sum.
                    let b = 2.0 * EPS * (f64::from(out0[i]).abs() + 2.0 * px.abs());
                    let got = f64::from(outs[f][i]);
                    assert!(
                        (got - want).abs() <= b,
                        "{} {name} axpy len {len} [{i}]: {got} vs dequantized {want}",
                        kernel.name()
                    );
                }
            }
        }
    }
}

/// `dot_i4g32` with unit scales is `dot_i4`, and scales folded into `q` give `dot_i4g32`
/// (the per-channel use of `dot_i4`).
#[test]
fn attn_i4_unscaled_agrees_with_scaled() {
    for len in LENS {
        let d = Data::random(6000 + len as u64, len);
        let q = crate::pseudo_random(6001 + len as u64, len);
        let ones = vec![f16::ONE; d.scales.len()];
        let folded: Vec<f32> = q
            .iter()
            .enumerate()
            .map(|(i, &a)| a * d.scales[i / I4_GROUP].to_f32())
            .collect();
        let m = mag(&q, &d.i4(len, false));
        let ms = mag(&q, &d.i4(len, true));
        for kernel in Kernel::available() {
            let a = attn::dot_i4g32(kernel, &q, &d.nib, &ones);
            let b = attn::dot_i4(kernel, &q, &d.nib);
            let bound = 2.0 * (len as f64 + 3.0) * EPS * m;
            assert!(
                f64::from((a - b).abs()) <= bound,
                "{} len {len}: {a} vs {b}",
                kernel.name()
            );
            let a = attn::dot_i4g32(kernel, &q, &d.nib, &d.scales);
            let b = attn::dot_i4(kernel, &folded, &d.nib);
            let bound = 2.0 * (len as f64 + 3.0) * EPS * ms;
            assert!(
                f64::from((a - b).abs()) <= bound,
                "{} folded len {len}: {a} vs {b}",
                kernel.name()
            );
        }
    }
}

#[test]
fn attn_kernels_accept_empty_vectors() {
    for kernel in Kernel::available() {
        assert_eq!(attn::dot_f16(kernel, &[], &[]), 0.0);
        assert_eq!(attn::dot_i8(kernel, &[], &[]), 0.0);
        assert_eq!(attn::dot_i4g32(kernel, &[], &[], &[]), 0.0);
        assert_eq!(attn::dot_i4(kernel, &[], &[]), 0.0);
        let mut out: [f32; 0] = [];
        attn::axpy_f32(kernel, 1.0, &[], &mut out);
        attn::axpy_f16(kernel, 1.0, &[], &mut out);
        attn::axpy_i8(kernel, 1.0, &[], &mut out);
        attn::axpy_i4g32(kernel, 1.0, &[], &[], &mut out);
    }
}
