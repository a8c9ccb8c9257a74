//! The key/value cache in every KV format the estimator knows (`f32`, `f16`, `k8v16`, `int8`,
//! `int4g32`), with the attention products that read each format directly.
//!
//! Layout, per layer, token-major: token `t`'s keys for all KV heads come before token `t + 1`'s.
//! Each head's vector of `head_dim` values is stored as:
//!
//! | store | values | scale |
//! |---|---|---|
//! | f32 | `head_dim` f32 | – |
//! | f16 | `head_dim` IEEE halves | – |
//! | int8 | `head_dim` int8, `x ≈ q · s`, `s = max|x| / 127`, round to nearest | one fp16 per token per head |
//! | int4g32 | `⌈head_dim/32⌉` groups of 16 bytes of nibbles (`x ≈ (q − 8) · s`, `s = x_max / −8` with `x_max` the group's value of largest magnitude, signed; byte `j` holds values `j` (low) and `j + 16` (high)) | one fp16 per group |
//!
//! `k8v16` keeps K in int8 and V in f16 (softmax smooths errors in K; errors in V flow straight
//! into the output); `int8` and `int4g32` use the same store for K and V. Bytes per token are
//! therefore exactly `edgefit_estimate::kv_bytes_per_token` for the format (a test checks it for
//! every format), and the cache reports `len × that`.
//!
//! Attention never dequantizes the cache into a copy: [`KvCache::scores`] computes `q · k_j` for
//! every held token from the stored form (int8: one integer-valued dot product per token, the
//! scale applied once per token), and [`KvCache::add_weighted_values`] accumulates `Σ p_j v_j`
//! (int8: the probability and the scale folded into one factor per token). These are scalar
//! loops today, except f32 keys, which use the kernels' dot product.
//!
//! Growth: the cache grows in chunks of [`GROW_TOKENS`] tokens rather than being preallocated to
//! the model's context, because SmolLM2's 8192-token context would reserve 377 MB of f32 KV up
//! front in a browser tab that mostly runs prompts of a few hundred tokens. Reaching `max_tokens`
//! is an error ([`EngineError::ContextFull`]), never a silent overwrite.

use edgefit_estimate::KvFormat;
use edgefit_kernels::{dot, Kernel};
use half::f16;

use crate::error::{EngineError, Result};

/// Tokens added per growth step.
pub const GROW_TOKENS: usize = 256;

/// Values per int4 group (one scale each).
const I4_GROUP: usize = 32;

/// How one of K or V is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    F32,
    F16,
    Int8,
    Int4,
}

/// One layer's K (or V): values and, for the integer kinds, scales.
#[derive(Debug, Clone)]
enum Store {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Int8 { q: Vec<i8>, s: Vec<f16> },
    Int4 { q: Vec<u8>, s: Vec<f16> },
}

impl Store {
    fn new(kind: Kind) -> Store {
        match kind {
            Kind::F32 => Store::F32(Vec::new()),
            Kind::F16 => Store::F16(Vec::new()),
            Kind::Int8 => Store::Int8 {
                q: Vec::new(),
                s: Vec::new(),
            },
            Kind::Int4 => Store::Int4 {
                q: Vec::new(),
                s: Vec::new(),
            },
        }
    }

    fn clear(&mut self) {
        match self {
            Store::F32(v) => v.clear(),
            Store::F16(v) => v.clear(),
            Store::Int8 { q, s } => {
                q.clear();
                s.clear();
            }
            Store::Int4 { q, s } => {
                q.clear();
                s.clear();
            }
        }
    }

    /// Bytes allocated.
    fn capacity_bytes(&self) -> u64 {
        (match self {
            Store::F32(v) => 4 * v.capacity(),
            Store::F16(v) => 2 * v.capacity(),
            Store::Int8 { q, s } => q.capacity() + 2 * s.capacity(),
            Store::Int4 { q, s } => q.capacity() + 2 * s.capacity(),
        }) as u64
    }

    /// Makes room for `tokens` tokens in total (`heads` vectors of `hd` values each).
    fn reserve_tokens(&mut self, tokens: usize, heads: usize, hd: usize) {
        fn room<T>(v: &mut Vec<T>, want: usize) {
            v.reserve_exact(want.saturating_sub(v.len()));
        }
        let groups = hd.div_ceil(I4_GROUP);
        match self {
            Store::F32(v) => room(v, tokens * heads * hd),
            Store::F16(v) => room(v, tokens * heads * hd),
            Store::Int8 { q, s } => {
                room(q, tokens * heads * hd);
                room(s, tokens * heads);
            }
            Store::Int4 { q, s } => {
                room(q, tokens * heads * groups * 16);
                room(s, tokens * heads * groups);
            }
        }
    }

    /// Appends tokens given as f32 rows of `heads × hd` values.
    fn push(&mut self, x: &[f32], hd: usize) {
        match self {
            Store::F32(v) => v.extend_from_slice(x),
            Store::F16(v) => v.extend(x.iter().map(|&a| f16::from_f32(a))),
            Store::Int8 { q, s } => {
                for head in x.chunks_exact(hd) {
                    let amax = head.iter().fold(0.0f32, |m, a| m.max(a.abs()));
                    let scale = f16::from_f32(amax / 127.0);
                    let sf = scale.to_f32();
                    let inv = if sf > 0.0 { 1.0 / sf } else { 0.0 };
                    q.extend(
                        head.iter()
                            .map(|&a| (a * inv).round().clamp(-127.0, 127.0) as i8),
                    );
                    s.push(scale);
                }
            }
            Store::Int4 { q, s } => {
                for head in x.chunks_exact(hd) {
                    for group in head.chunks(I4_GROUP) {
                        let vmax = group
                            .iter()
                            .fold(0.0f32, |m, &a| if a.abs() > m.abs() { a } else { m });
                        let scale = f16::from_f32(vmax / -8.0);
                        let sf = scale.to_f32();
                        let inv = if sf != 0.0 { 1.0 / sf } else { 0.0 };
                        let mut nib = [8u8; I4_GROUP];
                        for (n, &a) in nib.iter_mut().zip(group) {
                            *n = ((a * inv).round() + 8.0).clamp(0.0, 15.0) as u8;
                        }
                        q.extend((0..16).map(|j| nib[j] | (nib[j + 16] << 4)));
                        s.push(scale);
                    }
                }
            }
        }
    }

    /// `Σ_i q_i · x_v[i]` for stored vector number `v` (token × heads + head), `q` of `hd`.
    fn dot(&self, v: usize, q: &[f32], hd: usize, kernel: Kernel) -> f32 {
        match self {
            Store::F32(x) => dot(kernel, q, &x[v * hd..(v + 1) * hd]),
            Store::F16(x) => q
                .iter()
                .zip(&x[v * hd..(v + 1) * hd])
                .map(|(a, b)| a * b.to_f32())
                .sum(),
            Store::Int8 { q: xq, s } => {
                let d: f32 = q
                    .iter()
                    .zip(&xq[v * hd..(v + 1) * hd])
                    .map(|(a, &b)| a * f32::from(b))
                    .sum();
                d * s[v].to_f32()
            }
            Store::Int4 { q: xq, s } => {
                let groups = hd.div_ceil(I4_GROUP);
                let mut total = 0.0;
                for g in 0..groups {
                    let bytes = &xq[(v * groups + g) * 16..(v * groups + g + 1) * 16];
                    let qs = &q[g * I4_GROUP..((g + 1) * I4_GROUP).min(hd)];
                    let mut d = 0.0f32;
                    for (i, a) in qs.iter().enumerate() {
                        let b = bytes[i % 16];
                        let n = if i < 16 { b & 0x0F } else { b >> 4 };
                        d += a * (f32::from(n) - 8.0);
                    }
                    total += d * s[v * groups + g].to_f32();
                }
                total
            }
        }
    }

    /// `out += p · x_v` for stored vector number `v`.
    fn axpy(&self, v: usize, p: f32, out: &mut [f32], hd: usize) {
        match self {
            Store::F32(x) => {
                for (o, a) in out.iter_mut().zip(&x[v * hd..(v + 1) * hd]) {
                    *o += p * a;
                }
            }
            Store::F16(x) => {
                for (o, a) in out.iter_mut().zip(&x[v * hd..(v + 1) * hd]) {
                    *o += p * a.to_f32();
                }
            }
            Store::Int8 { q, s } => {
                let f = p * s[v].to_f32();
                for (o, &a) in out.iter_mut().zip(&q[v * hd..(v + 1) * hd]) {
                    *o += f * f32::from(a);
                }
            }
            Store::Int4 { q, s } => {
                let groups = hd.div_ceil(I4_GROUP);
                for g in 0..groups {
                    let f = p * s[v * groups + g].to_f32();
                    let bytes = &q[(v * groups + g) * 16..(v * groups + g + 1) * 16];
                    let outs = &mut out[g * I4_GROUP..((g + 1) * I4_GROUP).min(hd)];
                    for (i, o) in outs.iter_mut().enumerate() {
                        let b = bytes[i % 16];
                        let n = if i < 16 { b & 0x0F } else { b >> 4 };
                        *o += f * (f32::from(n) - 8.0);
                    }
                }
            }
        }
    }
}

fn kinds(format: KvFormat) -> (Kind, Kind) {
    match format {
        KvFormat::F32 => (Kind::F32, Kind::F32),
        KvFormat::F16 => (Kind::F16, Kind::F16),
        KvFormat::K8v16 => (Kind::Int8, Kind::F16),
        KvFormat::Int8 => (Kind::Int8, Kind::Int8),
        KvFormat::Int4g32 => (Kind::Int4, Kind::Int4),
    }
}

/// Per-layer keys and values for the tokens seen so far.
#[derive(Debug, Clone)]
pub struct KvCache {
    format: KvFormat,
    kv_heads: usize,
    head_dim: usize,
    /// Bytes one held token occupies, from the estimator's shared byte arithmetic.
    bytes_per_token: u64,
    max_tokens: usize,
    len: usize,
    /// Tokens appended to every layer, including ones not yet committed.
    appended: Vec<usize>,
    keys: Vec<Store>,
    values: Vec<Store>,
}

impl KvCache {
    /// An empty cache in `format` for `n_layers` layers of `kv_heads` heads of `head_dim`
    /// values, holding at most `max_tokens`, accounting `bytes_per_token` per held token (callers
    /// pass `edgefit_estimate::kv_bytes_per_token` for the same format, so the estimate and the
    /// cache agree by construction; see [`crate::Model::new_cache`]).
    pub fn new(
        format: KvFormat,
        n_layers: usize,
        kv_heads: usize,
        head_dim: usize,
        max_tokens: usize,
        bytes_per_token: u64,
    ) -> Self {
        let (k, v) = kinds(format);
        KvCache {
            format,
            kv_heads,
            head_dim,
            bytes_per_token,
            max_tokens,
            len: 0,
            appended: vec![0; n_layers],
            keys: (0..n_layers).map(|_| Store::new(k)).collect(),
            values: (0..n_layers).map(|_| Store::new(v)).collect(),
        }
    }

    /// The storage format.
    pub fn format(&self) -> KvFormat {
        self.format
    }

    /// Forgets every token; keeps the allocation for the next generation.
    pub fn reset(&mut self) {
        self.len = 0;
        self.appended.fill(0);
        for s in self.keys.iter_mut().chain(self.values.iter_mut()) {
            s.clear();
        }
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most tokens this cache will hold.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Bytes holding the tokens held, scales included: `len × bytes_per_token`.
    pub fn bytes(&self) -> u64 {
        self.len as u64 * self.bytes_per_token
    }

    /// Bytes allocated (held plus spare capacity).
    pub fn reserved_bytes(&self) -> u64 {
        self.keys
            .iter()
            .chain(self.values.iter())
            .map(Store::capacity_bytes)
            .sum()
    }

    /// Bytes the stores actually hold for the tokens held, counted from their contents (what
    /// [`bytes`](Self::bytes) must equal; for tests).
    pub fn stored_bytes(&self) -> u64 {
        self.keys
            .iter()
            .chain(self.values.iter())
            .map(|s| {
                (match s {
                    Store::F32(v) => 4 * v.len(),
                    Store::F16(v) => 2 * v.len(),
                    Store::Int8 { q, s } => q.len() + 2 * s.len(),
                    Store::Int4 { q, s } => q.len() + 2 * s.len(),
                }) as u64
            })
            .sum()
    }

    /// Fails if `extra` more tokens would not fit.
    pub fn check_room(&self, extra: usize) -> Result<()> {
        let needed = self.len + extra;
        if needed > self.max_tokens {
            return Err(EngineError::ContextFull {
                needed,
                limit: self.max_tokens,
            });
        }
        Ok(())
    }

    /// Appends `k` and `v` (each `tokens × kv_heads × head_dim`) to `layer`, quantizing them to
    /// the cache's format. The caller advances the length once all layers are written, with
    /// [`commit`](Self::commit).
    pub(crate) fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        let width = self.kv_heads * self.head_dim;
        let tokens = k.len().checked_div(width).unwrap_or(0);
        let total = self.appended[layer] + tokens;
        let target = (total.div_ceil(GROW_TOKENS) * GROW_TOKENS).min(self.max_tokens.max(total));
        for (store, new) in [(&mut self.keys[layer], k), (&mut self.values[layer], v)] {
            store.reserve_tokens(target, self.kv_heads, self.head_dim);
            store.push(new, self.head_dim);
        }
        self.appended[layer] = total;
    }

    /// Marks `tokens` more tokens as held.
    pub(crate) fn commit(&mut self, tokens: usize) {
        self.len += tokens;
    }

    /// `out[j] = scale · (q · k_j)` for KV head `kv_head` of `layer` and the first `out.len()`
    /// tokens appended (committed or not); `q` has `head_dim` values.
    pub(crate) fn scores(
        &self,
        layer: usize,
        kv_head: usize,
        q: &[f32],
        scale: f32,
        out: &mut [f32],
        kernel: Kernel,
    ) {
        let store = &self.keys[layer];
        for (j, o) in out.iter_mut().enumerate() {
            *o = store.dot(j * self.kv_heads + kv_head, q, self.head_dim, kernel) * scale;
        }
    }

    /// `out += Σ_j p[j] · v_j` for KV head `kv_head` of `layer` over the first `p.len()` tokens.
    pub(crate) fn add_weighted_values(
        &self,
        layer: usize,
        kv_head: usize,
        p: &[f32],
        out: &mut [f32],
    ) {
        let store = &self.values[layer];
        for (j, &pj) in p.iter().enumerate() {
            store.axpy(j * self.kv_heads + kv_head, pj, out, self.head_dim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_count_tokens_and_reset_clears() {
        let mut c = KvCache::new(KvFormat::F32, 2, 1, 4, 10, 2 * 2 * 4 * 4);
        assert!(c.is_empty());
        c.append(0, &[1.0; 8], &[2.0; 8]);
        c.append(1, &[1.0; 8], &[2.0; 8]);
        c.commit(2);
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), 2 * 2 * 2 * 4 * 4);
        assert_eq!(c.stored_bytes(), c.bytes());
        assert!(c.reserved_bytes() >= c.bytes());
        // Growth stops at max_tokens: 10 tokens × 4 floats × 4 tensors.
        assert_eq!(c.reserved_bytes(), 10 * 4 * 4 * 4);
        c.check_room(8).unwrap();
        assert!(matches!(
            c.check_room(9),
            Err(EngineError::ContextFull {
                needed: 11,
                limit: 10
            })
        ));
        c.reset();
        assert_eq!(c.len(), 0);
        assert_eq!(c.bytes(), 0);
    }

    /// Every format's attention products are close to f32's, within budgets of the format's
    /// rounding: f16 ~1e-3, int8 ~1e-2, int4 ~1.5e-1 relative to Σ|terms|.
    #[test]
    fn every_format_reads_back_close_to_f32() {
        let (heads, hd, tokens) = (2usize, 40usize, 5usize);
        let k = edgefit_kernels::pseudo_random(1, tokens * heads * hd);
        let v = edgefit_kernels::pseudo_random(2, tokens * heads * hd);
        let q = edgefit_kernels::pseudo_random(3, hd);
        let p: Vec<f32> = (0..tokens).map(|j| 0.1 + 0.05 * j as f32).collect();
        let run = |format| {
            let mut c = KvCache::new(format, 1, heads, hd, 16, 0);
            c.append(0, &k, &v);
            c.commit(tokens);
            let mut s = vec![0.0; tokens];
            c.scores(0, 1, &q, 0.5, &mut s, Kernel::Scalar);
            let mut o = vec![0.0; hd];
            c.add_weighted_values(0, 1, &p, &mut o);
            (s, o)
        };
        let (s0, o0) = run(KvFormat::F32);
        for (format, budget) in [
            (KvFormat::F16, 1e-3),
            (KvFormat::K8v16, 1e-2),
            (KvFormat::Int8, 1e-2),
            (KvFormat::Int4g32, 0.15),
        ] {
            let (s, o) = run(format);
            let scale_s: f32 = q.iter().map(|a| a.abs()).sum::<f32>() * 0.5;
            for (a, b) in s.iter().zip(&s0) {
                assert!(
                    (a - b).abs() <= budget * scale_s,
                    "{format} score {a} vs {b}"
                );
            }
            assert_ne!(s, s0, "{format}: rounding K changes the scores");
            let scale_o: f32 = p.iter().sum();
            for (a, b) in o.iter().zip(&o0) {
                assert!((a - b).abs() <= budget * scale_o, "{format} out {a} vs {b}");
            }
        }
    }
}
