//! Attention products over the KV-cache formats: `q · k` for one stored key (scores) and
//! `out += p · v` for one stored value (the weighted sum of values), read directly from the
//! stored form, never from a dequantized copy.
//!
//! One head vector of `head_dim` values (any length) is stored as
//!
//! | format | data | scale |
//! |---|---|---|
//! | f32 | `head_dim` f32 | – |
//! | f16 | `head_dim` IEEE halves ([`half::f16`]) | – |
//! | int8 | `head_dim` i8 | one per vector, applied by the caller (once per token) |
//! | int4g32 | `⌈head_dim/32⌉` groups of 16 bytes: byte `j` holds value `j` in its low nibble and value `j + 16` in its high nibble, value = `(nibble − 8) · scale` | one fp16 per group |
//!
//! [`dot_i4`] reads the int4 layout without scales (keys scaled per channel, whose scales the
//! caller folds into `q`). A last int4 group that `head_dim` does not fill is padded (with
//! nibble 8 = 0 by the cache); only the first `head_dim` values are read or written.
//!
//! Every function dispatches on [`Kernel`] like [`crate::dot`]: [`Kernel::Scalar`] is the
//! reference (plain loops in index order, one accumulator, `half`'s exact `f16::to_f32`);
//! the dots of the others reorder the sums (independent accumulators) and so differ from it by
//! f32 rounding only. The axpy kernels do the reference's per-element arithmetic
//! (`out_i + f · x_i` with the same `f`, no FMA), so every kernel's axpy equals the
//! reference's bit for bit (tested). f16 infinities and NaNs in the data give the reference's
//! class of result (±∞, NaN; NaN propagates), also tested for every one of the 65536 halves.
//!
//! | function | Portable | Simd128 | Avx2 |
//! |---|---|---|---|
//! | [`dot_f16`], [`axpy_f16`] | branch-free bit-trick conversion | bit-trick conversion of 8 halves (i32 lanes) | F16C `vcvtph2ps` (+ FMA in the dot) |
//! | [`dot_i8`], [`axpy_i8`] | plain Rust | i8 → i16 → i32 → f32 widening | `vpmovsxbd`, `vcvtdq2ps` |
//! | [`dot_i4g32`], [`dot_i4`], [`axpy_i4g32`] | group unpacked to 32 f32 | nibble and/shift, − 8 in i8, widen to f32 | same as Simd128, 8 lanes |
//! | [`axpy_f32`] | plain loop | f32x4 | f32x8 |
//!
//! Portable dots use 8 independent accumulators; portable axpys are plain loops over
//! independent elements, which the compiler vectorises.
//!
//! # Panics
//! The lengths are internal (the engine slices one head vector per call), so a mismatch is a
//! programming error and panics, as [`crate::dot`] does: `q`/`out` and the data must have the
//! same number of values, and int4 data must hold exactly `⌈len/32⌉` groups (16 bytes and, for
//! the scaled form, one scale each). No kernel ever reads out of bounds.

use half::f16;

use crate::layout::nibble;
pub use crate::layout::{I4_GROUP, I4_GROUP_BYTES};
use crate::Kernel;

/// `Σ q_i · k_i` for an f16 vector.
///
/// # Panics
/// If `q` and `k` differ in length.
#[inline]
pub fn dot_f16(kernel: Kernel, q: &[f32], k: &[f16]) -> f32 {
    assert_eq!(q.len(), k.len(), "dot_f16: length mismatch");
    match kernel {
        Kernel::Scalar => dot_f16_scalar(q, k),
        other => crate::arch::attn_dot_f16(other, q, k),
    }
}

/// `Σ q_i · k_i` for an int8 vector, unscaled (the caller multiplies by the vector's scale).
///
/// # Panics
/// If `q` and `k` differ in length.
#[inline]
pub fn dot_i8(kernel: Kernel, q: &[f32], k: &[i8]) -> f32 {
    assert_eq!(q.len(), k.len(), "dot_i8: length mismatch");
    match kernel {
        Kernel::Scalar => dot_i8_scalar(q, k),
        other => crate::arch::attn_dot_i8(other, q, k),
    }
}

/// `Σ_g scale_g · Σ_{i in g} q_i · (n_i − 8)` for an int4g32 vector of `q.len()` values.
///
/// # Panics
/// If `nib` is not `16 · ⌈q.len()/32⌉` bytes or `scales` not `⌈q.len()/32⌉` values.
#[inline]
pub fn dot_i4g32(kernel: Kernel, q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    check_i4("dot_i4g32", q.len(), nib, Some(scales));
    match kernel {
        Kernel::Scalar => dot_i4g32_scalar(q, nib, scales),
        other => crate::arch::attn_dot_i4g32(other, q, nib, scales),
    }
}

/// `Σ q_i · (n_i − 8)`: the int4 layout without scales (per-channel key scales folded into `q`).
///
/// # Panics
/// If `nib` is not `16 · ⌈q.len()/32⌉` bytes.
#[inline]
pub fn dot_i4(kernel: Kernel, q: &[f32], nib: &[u8]) -> f32 {
    check_i4("dot_i4", q.len(), nib, None);
    match kernel {
        Kernel::Scalar => dot_i4_scalar(q, nib),
        other => crate::arch::attn_dot_i4(other, q, nib),
    }
}

/// `out += p · x` for an f32 vector.
///
/// # Panics
/// If `x` and `out` differ in length.
#[inline]
pub fn axpy_f32(kernel: Kernel, p: f32, x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_f32: length mismatch");
    match kernel {
        Kernel::Scalar => axpy_f32_scalar(p, x, out),
        other => crate::arch::attn_axpy_f32(other, p, x, out),
    }
}

/// `out += p · x` for an f16 vector.
///
/// # Panics
/// If `x` and `out` differ in length.
#[inline]
pub fn axpy_f16(kernel: Kernel, p: f32, x: &[f16], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_f16: length mismatch");
    match kernel {
        Kernel::Scalar => axpy_f16_scalar(p, x, out),
        other => crate::arch::attn_axpy_f16(other, p, x, out),
    }
}

/// `out += p · x` for an int8 vector (the caller folds the vector's scale into `p`).
///
/// # Panics
/// If `x` and `out` differ in length.
#[inline]
pub fn axpy_i8(kernel: Kernel, p: f32, x: &[i8], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "axpy_i8: length mismatch");
    match kernel {
        Kernel::Scalar => axpy_i8_scalar(p, x, out),
        other => crate::arch::attn_axpy_i8(other, p, x, out),
    }
}

/// `out_i += (p · scale_g) · (n_i − 8)` for an int4g32 vector of `out.len()` values.
///
/// # Panics
/// If `nib` is not `16 · ⌈out.len()/32⌉` bytes or `scales` not `⌈out.len()/32⌉` values.
#[inline]
pub fn axpy_i4g32(kernel: Kernel, p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    check_i4("axpy_i4g32", out.len(), nib, Some(scales));
    match kernel {
        Kernel::Scalar => axpy_i4g32_scalar(p, nib, scales, out),
        other => crate::arch::attn_axpy_i4g32(other, p, nib, scales, out),
    }
}

fn check_i4(what: &str, len: usize, nib: &[u8], scales: Option<&[f16]>) {
    let groups = len.div_ceil(I4_GROUP);
    assert_eq!(
        nib.len(),
        groups * I4_GROUP_BYTES,
        "{what}: {} bytes of nibbles for {len} values",
        nib.len()
    );
    if let Some(s) = scales {
        assert_eq!(
            s.len(),
            groups,
            "{what}: {} scales for {len} values",
            s.len()
        );
    }
}

fn dot_f16_scalar(q: &[f32], k: &[f16]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in q.iter().zip(k) {
        acc += a * b.to_f32();
    }
    acc
}

fn dot_i8_scalar(q: &[f32], k: &[i8]) -> f32 {
    let mut acc = 0.0f32;
    for (a, &b) in q.iter().zip(k) {
        acc += a * f32::from(b);
    }
    acc
}

fn dot_i4g32_scalar(q: &[f32], nib: &[u8], scales: &[f16]) -> f32 {
    let mut total = 0.0f32;
    let groups = q.chunks(I4_GROUP).zip(nib.chunks_exact(I4_GROUP_BYTES));
    for ((qs, bytes), s) in groups.zip(scales) {
        let mut d = 0.0f32;
        for (i, a) in qs.iter().enumerate() {
            d += a * nibble(bytes, i);
        }
        total += d * s.to_f32();
    }
    total
}

fn dot_i4_scalar(q: &[f32], nib: &[u8]) -> f32 {
    let mut acc = 0.0f32;
    for (qs, bytes) in q.chunks(I4_GROUP).zip(nib.chunks_exact(I4_GROUP_BYTES)) {
        for (i, a) in qs.iter().enumerate() {
            acc += a * nibble(bytes, i);
        }
    }
    acc
}

fn axpy_f32_scalar(p: f32, x: &[f32], out: &mut [f32]) {
    for (o, a) in out.iter_mut().zip(x) {
        *o += p * a;
    }
}

fn axpy_f16_scalar(p: f32, x: &[f16], out: &mut [f32]) {
    for (o, a) in out.iter_mut().zip(x) {
        *o += p * a.to_f32();
    }
}

fn axpy_i8_scalar(p: f32, x: &[i8], out: &mut [f32]) {
    for (o, &a) in out.iter_mut().zip(x) {
        *o += p * f32::from(a);
    }
}

fn axpy_i4g32_scalar(p: f32, nib: &[u8], scales: &[f16], out: &mut [f32]) {
    let groups = out
        .chunks_mut(I4_GROUP)
        .zip(nib.chunks_exact(I4_GROUP_BYTES));
    for ((outs, bytes), s) in groups.zip(scales) {
        let f = p * s.to_f32();
        for (i, o) in outs.iter_mut().enumerate() {
            *o += f * nibble(bytes, i);
        }
    }
}
