//! The key/value cache in every KV format the estimator knows (`f32`, `f16`, `k8v16`, `int8`,
//! `int4g32`, `kivi4`), with the attention products that read each format directly.
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
//! | kivi4 keys | per token the same nibble order as int4g32, but `x ≈ n · s_c + m_c` with `n ∈ 0..15` and one fp16 scale `s_c = (max − min)/15` and minimum `m_c` **per channel** `c` per block of 32 tokens; the newest `len mod 32` tokens wait in f16 until their block is full | `2 · head_dim` fp16 per block per head |
//!
//! `k8v16` keeps K in int8 and V in f16 (softmax smooths errors in K; errors in V flow straight
//! into the output); `int8` and `int4g32` use the same store for K and V; `kivi4` stores K per
//! channel (KIVI: a few key channels carry outliers, and a per-token scale spends its range on
//! them) and V as `int4g32`. Bytes are exactly `edgefit_estimate::kv_bytes(spec, format, len)`
//! (a test checks it for every format at many lengths), which is `len × kv_bytes_per_token` for
//! every format but `kivi4`.
//!
//! Attention never dequantizes the cache into a copy: `KvCache::scores` computes `q · k_j` for
//! every held token from the stored form with the kernels of [`edgefit_kernels::attn`] (int8: an
//! unscaled dot product per token, the scale applied once per token; kivi4: `q` multiplied by
//! the block's channel scales once per block, so each token is one unscaled 4-bit dot product
//! plus a per-block constant), and `KvCache::add_weighted_values` accumulates `Σ p_j v_j`
//! (int8: the probability and the scale folded into one factor per token).
//!
//! Growth: the cache grows in chunks of [`GROW_TOKENS`] tokens rather than being preallocated to
//! the model's context, because SmolLM2's 8192-token context would reserve 377 MB of f32 KV up
//! front in a browser tab that mostly runs prompts of a few hundred tokens. Reaching `max_tokens`
//! is an error ([`EngineError::ContextFull`]), never a silent overwrite. [`KvCache::truncate`]
//! drops the newest tokens (multi-turn chat keeps the tokens a new turn shares with the cache).

use edgefit_estimate::{kv_bytes, KvFormat, ModelSpec, KIVI_BLOCK};
use edgefit_kernels::{attn, Kernel};
use half::f16;

use crate::error::{EngineError, Result};

/// Tokens added per growth step.
pub const GROW_TOKENS: usize = 256;

/// Values per int4 group (one scale each).
const I4_GROUP: usize = 32;

/// Tokens per kivi4 key block.
const BLOCK: usize = KIVI_BLOCK as usize;

/// How one of K or V is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    F32,
    F16,
    Int8,
    Int4,
    Kivi,
}

/// One layer's K (or V): values and, for the integer kinds, scales.
#[derive(Debug, Clone)]
enum Store {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Int8 {
        q: Vec<i8>,
        s: Vec<f16>,
    },
    Int4 {
        q: Vec<u8>,
        s: Vec<f16>,
    },
    /// Keys per channel: `q` holds the nibbles of every token of the full blocks (token-major,
    /// int4g32 order), `s`/`m` one scale and minimum per block × head × channel, `tail` the f16
    /// values of the tokens after the last full block.
    Kivi {
        q: Vec<u8>,
        s: Vec<f16>,
        m: Vec<f16>,
        tail: Vec<f16>,
    },
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
            Kind::Kivi => Store::Kivi {
                q: Vec::new(),
                s: Vec::new(),
                m: Vec::new(),
                tail: Vec::new(),
            },
        }
    }

    /// Keeps the first `tokens` tokens (`heads × hd` values each); returns how many it kept,
    /// which is `tokens` except for kivi4 keys cut inside a full block (the block's values are
    /// gone, so the cache falls back to the block's start and the caller feeds the rest again).
    fn truncate(&mut self, tokens: usize, heads: usize, hd: usize) -> usize {
        let groups = hd.div_ceil(I4_GROUP);
        match self {
            Store::F32(v) => v.truncate(tokens * heads * hd),
            Store::F16(v) => v.truncate(tokens * heads * hd),
            Store::Int8 { q, s } => {
                q.truncate(tokens * heads * hd);
                s.truncate(tokens * heads);
            }
            Store::Int4 { q, s } => {
                q.truncate(tokens * heads * groups * 16);
                s.truncate(tokens * heads * groups);
            }
            Store::Kivi { q, s, m, tail } => {
                let full = q.len() / (heads * groups * 16);
                if tokens >= full {
                    tail.truncate((tokens - full) * heads * hd);
                } else {
                    let keep = tokens / BLOCK * BLOCK;
                    q.truncate(keep * heads * groups * 16);
                    s.truncate(keep / BLOCK * heads * hd);
                    m.truncate(keep / BLOCK * heads * hd);
                    tail.clear();
                    return keep;
                }
            }
        }
        tokens
    }

    /// Bytes allocated.
    fn capacity_bytes(&self) -> u64 {
        (match self {
            Store::F32(v) => 4 * v.capacity(),
            Store::F16(v) => 2 * v.capacity(),
            Store::Int8 { q, s } => q.capacity() + 2 * s.capacity(),
            Store::Int4 { q, s } => q.capacity() + 2 * s.capacity(),
            Store::Kivi { q, s, m, tail } => {
                q.capacity() + 2 * (s.capacity() + m.capacity() + tail.capacity())
            }
        }) as u64
    }

    /// Bytes the store holds for its tokens, counted from its contents.
    fn len_bytes(&self) -> u64 {
        (match self {
            Store::F32(v) => 4 * v.len(),
            Store::F16(v) => 2 * v.len(),
            Store::Int8 { q, s } => q.len() + 2 * s.len(),
            Store::Int4 { q, s } => q.len() + 2 * s.len(),
            Store::Kivi { q, s, m, tail } => q.len() + 2 * (s.len() + m.len() + tail.len()),
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
            Store::Kivi { q, s, m, tail } => {
                let blocks = tokens / BLOCK;
                room(q, blocks * BLOCK * heads * groups * 16);
                room(s, blocks * heads * hd);
                room(m, blocks * heads * hd);
                room(tail, BLOCK * heads * hd);
            }
        }
    }

    /// Writes one token (`heads × hd` f32 values) over the one held in slot `slot` (a ring of
    /// a sliding-window layer; per-token kinds only, which every kind but kivi4 keys is).
    fn overwrite(&mut self, slot: usize, x: &[f32], heads: usize, hd: usize) {
        let mut one = Store::new(self.kind());
        one.push(x, heads, hd);
        fn put<T: Copy>(dst: &mut [T], slot: usize, src: &[T]) {
            dst[slot * src.len()..(slot + 1) * src.len()].copy_from_slice(src);
        }
        match (self, one) {
            (Store::F32(v), Store::F32(t)) => put(v, slot, &t),
            (Store::F16(v), Store::F16(t)) => put(v, slot, &t),
            (Store::Int8 { q, s }, Store::Int8 { q: tq, s: ts }) => {
                put(q, slot, &tq);
                put(s, slot, &ts);
            }
            (Store::Int4 { q, s }, Store::Int4 { q: tq, s: ts }) => {
                put(q, slot, &tq);
                put(s, slot, &ts);
            }
            _ => unreachable!("kivi4 keys of a sliding layer shift by blocks"),
        }
    }

    /// Forgets the oldest `n` tokens (`heads × hd` values each), moving the rest to the front;
    /// for kivi4 keys `n` is a multiple of the block, and only full blocks go.
    fn drop_front(&mut self, n: usize, heads: usize, hd: usize) {
        let groups = hd.div_ceil(I4_GROUP);
        match self {
            Store::F32(v) => drop(v.drain(..n * heads * hd)),
            Store::F16(v) => drop(v.drain(..n * heads * hd)),
            Store::Int8 { q, s } => {
                q.drain(..n * heads * hd);
                s.drain(..n * heads);
            }
            Store::Int4 { q, s } => {
                q.drain(..n * heads * groups * 16);
                s.drain(..n * heads * groups);
            }
            Store::Kivi { q, s, m, .. } => {
                q.drain(..n * heads * groups * 16);
                s.drain(..n / BLOCK * heads * hd);
                m.drain(..n / BLOCK * heads * hd);
            }
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Store::F32(_) => Kind::F32,
            Store::F16(_) => Kind::F16,
            Store::Int8 { .. } => Kind::Int8,
            Store::Int4 { .. } => Kind::Int4,
            Store::Kivi { .. } => Kind::Kivi,
        }
    }

    /// Appends tokens given as f32 rows of `heads × hd` values.
    fn push(&mut self, x: &[f32], heads: usize, hd: usize) {
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
                        pack_nibbles(&nib, q);
                        s.push(scale);
                    }
                }
            }
            Store::Kivi { q, s, m, tail } => {
                let width = heads * hd;
                for token in x.chunks_exact(width) {
                    tail.extend(token.iter().map(|&a| f16::from_f32(a)));
                    if tail.len() == BLOCK * width {
                        quantize_block(tail, heads, hd, q, s, m);
                        tail.clear();
                    }
                }
            }
        }
    }

    /// `out[j] = scale · (q · k_j)` for head `head` of `heads` and tokens `0..out.len()`.
    fn scores(&self, head: usize, heads: usize, q: &[f32], scale: f32, out: &mut [f32], k: Kernel) {
        let hd = q.len();
        let groups = hd.div_ceil(I4_GROUP);
        let at = |j: usize| (j * heads + head) * hd;
        match self {
            Store::F32(x) => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = edgefit_kernels::dot(k, q, &x[at(j)..at(j) + hd]) * scale;
                }
            }
            Store::F16(x) => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = attn::dot_f16(k, q, &x[at(j)..at(j) + hd]) * scale;
                }
            }
            Store::Int8 { q: xq, s } => {
                for (j, o) in out.iter_mut().enumerate() {
                    let d = attn::dot_i8(k, q, &xq[at(j)..at(j) + hd]);
                    *o = d * s[j * heads + head].to_f32() * scale;
                }
            }
            Store::Int4 { q: xq, s } => {
                for (j, o) in out.iter_mut().enumerate() {
                    let v = j * heads + head;
                    let nib = &xq[v * groups * 16..(v + 1) * groups * 16];
                    *o = attn::dot_i4g32(k, q, nib, &s[v * groups..(v + 1) * groups]) * scale;
                }
            }
            Store::Kivi { q: xq, s, m, tail } => {
                let full = xq.len() / (heads * groups * 16);
                let mut qs = vec![0.0f32; hd];
                let n = full.min(out.len());
                for (b, block) in out[..n].chunks_mut(BLOCK).enumerate() {
                    // Σ_c q_c (n s_c + m_c) = Σ_c (q_c s_c)(n − 8) + Σ_c q_c (8 s_c + m_c).
                    let c0 = (b * heads + head) * hd;
                    let mut constant = 0.0f32;
                    for (c, w) in qs.iter_mut().enumerate() {
                        let sc = s[c0 + c].to_f32();
                        *w = q[c] * sc;
                        constant += q[c] * (8.0 * sc + m[c0 + c].to_f32());
                    }
                    for (t, o) in block.iter_mut().enumerate() {
                        let v = (b * BLOCK + t) * heads + head;
                        let nib = &xq[v * groups * 16..(v + 1) * groups * 16];
                        *o = (attn::dot_i4(k, &qs, nib) + constant) * scale;
                    }
                }
                for (j, o) in out.iter_mut().enumerate().skip(full) {
                    let t = ((j - full) * heads + head) * hd;
                    *o = attn::dot_f16(k, q, &tail[t..t + hd]) * scale;
                }
            }
        }
    }

    /// `out += Σ_j p[j] · x_j` for head `head` of `heads` over tokens `0..p.len()`.
    fn weighted_sum(&self, head: usize, heads: usize, p: &[f32], out: &mut [f32], k: Kernel) {
        let hd = out.len();
        let groups = hd.div_ceil(I4_GROUP);
        let at = |j: usize| (j * heads + head) * hd;
        match self {
            Store::F32(x) => {
                for (j, &pj) in p.iter().enumerate() {
                    attn::axpy_f32(k, pj, &x[at(j)..at(j) + hd], out);
                }
            }
            Store::F16(x) => {
                for (j, &pj) in p.iter().enumerate() {
                    attn::axpy_f16(k, pj, &x[at(j)..at(j) + hd], out);
                }
            }
            Store::Int8 { q, s } => {
                for (j, &pj) in p.iter().enumerate() {
                    let f = pj * s[j * heads + head].to_f32();
                    attn::axpy_i8(k, f, &q[at(j)..at(j) + hd], out);
                }
            }
            Store::Int4 { q, s } => {
                for (j, &pj) in p.iter().enumerate() {
                    let v = j * heads + head;
                    let nib = &q[v * groups * 16..(v + 1) * groups * 16];
                    attn::axpy_i4g32(k, pj, nib, &s[v * groups..(v + 1) * groups], out);
                }
            }
            // kivi4 stores values as int4g32, so this store only ever holds keys; the sum is
            // still defined: Σ_t p_t (n s_c + m_c) = s_c Σ_t p_t (n − 8) + (8 s_c + m_c) Σ_t p_t.
            Store::Kivi { q, s, m, tail } => {
                let full = q.len() / (heads * groups * 16);
                let ones = vec![f16::ONE; groups];
                let mut acc = vec![0.0f32; hd];
                for (b, block) in p[..full.min(p.len())].chunks(BLOCK).enumerate() {
                    acc.fill(0.0);
                    for (t, &pt) in block.iter().enumerate() {
                        let v = (b * BLOCK + t) * heads + head;
                        let nib = &q[v * groups * 16..(v + 1) * groups * 16];
                        attn::axpy_i4g32(k, pt, nib, &ones, &mut acc);
                    }
                    let psum: f32 = block.iter().sum();
                    let c0 = (b * heads + head) * hd;
                    for (c, o) in out.iter_mut().enumerate() {
                        let sc = s[c0 + c].to_f32();
                        *o += sc * acc[c] + (8.0 * sc + m[c0 + c].to_f32()) * psum;
                    }
                }
                for (j, &pj) in p.iter().enumerate().skip(full) {
                    let t = ((j - full) * heads + head) * hd;
                    attn::axpy_f16(k, pj, &tail[t..t + hd], out);
                }
            }
        }
    }
}

/// Packs 32 nibbles (values `0..15`) as byte `j` = value `j` | value `j + 16` << 4.
fn pack_nibbles(nib: &[u8; I4_GROUP], out: &mut Vec<u8>) {
    out.extend((0..16).map(|j| nib[j] | (nib[j + 16] << 4)));
}

/// Quantizes one full block of f16 keys (`BLOCK` tokens × `heads` × `hd`) per channel:
/// `n = round((x − m)/s)` with `m` the channel's minimum and `s = (max − m)/15`, both fp16.
fn quantize_block(
    block: &[f16],
    heads: usize,
    hd: usize,
    q: &mut Vec<u8>,
    s: &mut Vec<f16>,
    m: &mut Vec<f16>,
) {
    let width = heads * hd;
    let mut inv = vec![0.0f32; width];
    let mut min = vec![0.0f32; width];
    for c in 0..width {
        let (lo, hi) = (0..BLOCK)
            .map(|t| block[t * width + c].to_f32())
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        let scale = f16::from_f32((hi - lo) / 15.0);
        let mh = f16::from_f32(lo);
        let sf = scale.to_f32();
        inv[c] = if sf > 0.0 { 1.0 / sf } else { 0.0 };
        min[c] = mh.to_f32();
        s.push(scale);
        m.push(mh);
    }
    for t in 0..BLOCK {
        for h in 0..heads {
            let row = &block[t * width + h * hd..t * width + (h + 1) * hd];
            for (g, group) in row.chunks(I4_GROUP).enumerate() {
                let mut nib = [8u8; I4_GROUP];
                for (i, (n, x)) in nib.iter_mut().zip(group).enumerate() {
                    let c = h * hd + g * I4_GROUP + i;
                    *n = ((x.to_f32() - min[c]) * inv[c]).round().clamp(0.0, 15.0) as u8;
                }
                // Padding past hd must read as zero after the affine map; the dot product
                // only reads the first hd values, so any nibble works there.
                pack_nibbles(&nib, q);
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
        KvFormat::Kivi4 => (Kind::Kivi, Kind::Int4),
    }
}

/// One layer's KV heads, per-head K and V dims, and sliding window.
#[derive(Debug, Clone, Copy)]
struct LayerDims {
    heads: usize,
    dk: usize,
    dv: usize,
    window: Option<usize>,
}

/// Per-layer keys and values for the tokens seen so far.
#[derive(Debug, Clone)]
pub struct KvCache {
    format: KvFormat,
    /// Per layer: KV heads, K dims per head, V dims per head.
    dims: Vec<LayerDims>,
    /// The shape the estimator's byte arithmetic is computed for.
    spec: ModelSpec,
    max_tokens: usize,
    /// Tokens appended to every layer, including ones not yet committed.
    appended: Vec<usize>,
    /// Per layer, the position of the oldest token held (0 unless the layer slides).
    first: Vec<usize>,
    keys: Vec<Store>,
    values: Vec<Store>,
    /// A forward pass on this cache used LongRoPE's long factors (it reached past the original
    /// context, or its prompt was going to): every later pass does too, as in transformers,
    /// where positions only grow ([`crate::Model::plan_positions`]).
    long_rope: bool,
    /// The ids of the tokens held, in order (their count is the cache's length): LongRoPE's
    /// switch to the long factors recomputes the sequence from them.
    tokens: Vec<u32>,
}

impl KvCache {
    /// An empty cache in `format` for `spec`'s layers (each layer's KV heads, K and V head
    /// dims), holding at most `max_tokens`. Its bytes are
    /// `edgefit_estimate::kv_bytes(spec, format, len)`, the estimator's own function, so the
    /// estimate and the cache agree by construction; see [`crate::Model::new_cache`].
    pub fn new(format: KvFormat, spec: ModelSpec, max_tokens: usize) -> Self {
        let (k, v) = kinds(format);
        let n_layers = spec.layers.len();
        let dims = spec
            .layers
            .iter()
            .map(|l| LayerDims {
                heads: l.num_kv_heads as usize,
                dk: l.qk_head_dim as usize,
                dv: l.v_head_dim as usize,
                window: l.sliding_window.map(|w| w as usize),
            })
            .collect();
        KvCache {
            format,
            dims,
            spec,
            max_tokens,
            appended: vec![0; n_layers],
            first: vec![0; n_layers],
            keys: (0..n_layers).map(|_| Store::new(k)).collect(),
            values: (0..n_layers).map(|_| Store::new(v)).collect(),
            long_rope: false,
            tokens: Vec::new(),
        }
    }

    /// Whether the passes on this cache use LongRoPE's long factors ([`KvCache::long_rope`]).
    pub fn long_rope(&self) -> bool {
        self.long_rope
    }

    pub(crate) fn set_long_rope(&mut self) {
        self.long_rope = true;
    }

    /// The storage format.
    pub fn format(&self) -> KvFormat {
        self.format
    }

    /// Forgets every token; keeps the allocation for the next generation.
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Keeps the oldest `tokens` tokens (at most [`len`](Self::len)) and forgets the rest;
    /// returns how many it kept: `tokens`, or fewer for `kivi4` when `tokens` falls inside a
    /// full block of keys (then it keeps the whole blocks before it).
    pub fn truncate(&mut self, tokens: usize) -> usize {
        if tokens >= self.len() {
            return self.len();
        }
        if self.long_rope
            || self
                .dims
                .iter()
                .zip(&self.appended)
                .zip(&self.first)
                .any(|((d, &n), &f)| f > 0 || d.window.is_some_and(|w| n > w))
        {
            // A sliding layer has forgotten (or overwritten) tokens older than its window, which
            // the kept prefix's next token may need again; or the cache switched to LongRoPE's
            // long factors, which a shorter prefix would not have used: start over.
            self.long_rope = false;
            for (l, d) in self.dims.iter().enumerate() {
                self.keys[l].truncate(0, d.heads, d.dk);
                self.values[l].truncate(0, d.heads, d.dv);
            }
            self.first.fill(0);
            self.appended.fill(0);
            self.tokens.clear();
            return 0;
        }
        let mut kept = tokens.min(self.len());
        for (l, d) in self.dims.iter().enumerate() {
            kept = kept.min(self.keys[l].truncate(kept, d.heads, d.dk));
            kept = kept.min(self.values[l].truncate(kept, d.heads, d.dv));
        }
        // A store that kept fewer tokens sets the length for all of them.
        for (l, d) in self.dims.iter().enumerate() {
            self.keys[l].truncate(kept, d.heads, d.dk);
            self.values[l].truncate(kept, d.heads, d.dv);
        }
        self.appended.fill(kept);
        self.tokens.truncate(kept);
        kept
    }

    /// The ids of the tokens held, oldest first.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The most tokens this cache will hold.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Bytes holding the tokens held, scales included: the estimator's
    /// `kv_bytes(spec, format, len)`.
    pub fn bytes(&self) -> u64 {
        kv_bytes(&self.spec, self.format, self.len() as u64)
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
            .map(Store::len_bytes)
            .sum()
    }

    /// Fails if `extra` more tokens would not fit.
    pub fn check_room(&self, extra: usize) -> Result<()> {
        let needed = self.len() + extra;
        if needed > self.max_tokens {
            return Err(EngineError::ContextFull {
                needed,
                limit: self.max_tokens,
            });
        }
        Ok(())
    }

    /// Appends `k` (`tokens × kv_heads × dk`) and `v` (`tokens × kv_heads × dv`) to `layer`,
    /// quantizing them to the cache's format. The caller advances the length once all layers
    /// are written, with [`commit`](Self::commit).
    pub(crate) fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        let d = self.dims[layer];
        let tokens = k.len().checked_div(d.heads * d.dk).unwrap_or(0);
        if let Some(w) = d.window {
            let (kw, vw) = (d.heads * d.dk, d.heads * d.dv);
            for t in 0..tokens {
                self.append_windowed(layer, w, &k[t * kw..(t + 1) * kw], &v[t * vw..(t + 1) * vw]);
            }
            return;
        }
        let total = self.appended[layer] + tokens;
        let target = (total.div_ceil(GROW_TOKENS) * GROW_TOKENS).min(self.max_tokens.max(total));
        for (store, new, dim) in [
            (&mut self.keys[layer], k, d.dk),
            (&mut self.values[layer], v, d.dv),
        ] {
            store.reserve_tokens(target, d.heads, dim);
            store.push(new, d.heads, dim);
        }
        self.appended[layer] = total;
    }

    /// Appends one token to sliding layer `layer` with window `w`. Per-token formats keep a
    /// ring of `w` slots (position `p` in slot `p mod w`, overwriting position `p − w`); kivi4
    /// keeps its key blocks whole and drops the oldest block (keys and values) once all of it
    /// is older than the window of the newest token, so it holds between `w` and `w + 31`
    /// tokens ([`edgefit_estimate::LayerSpec::held_tokens`] counts the same).
    fn append_windowed(&mut self, layer: usize, w: usize, k: &[f32], v: &[f32]) {
        let d = self.dims[layer];
        let pos = self.appended[layer];
        if self.format == KvFormat::Kivi4 {
            let cap = (w + BLOCK).min(self.max_tokens.max(pos + 1));
            for (store, new, dim) in [
                (&mut self.keys[layer], k, d.dk),
                (&mut self.values[layer], v, d.dv),
            ] {
                store.reserve_tokens(cap, d.heads, dim);
                store.push(new, d.heads, dim);
            }
            // Visible to `pos`: positions above pos − w. Whole dead blocks go.
            let dead = (pos + 1).saturating_sub(w);
            let drop = (dead / BLOCK * BLOCK).saturating_sub(self.first[layer]);
            if drop > 0 {
                self.keys[layer].drop_front(drop, d.heads, d.dk);
                self.values[layer].drop_front(drop, d.heads, d.dv);
                self.first[layer] += drop;
            }
        } else if pos < w {
            let cap = w.min(self.max_tokens.max(pos + 1));
            for (store, new, dim) in [
                (&mut self.keys[layer], k, d.dk),
                (&mut self.values[layer], v, d.dv),
            ] {
                store.reserve_tokens(cap, d.heads, dim);
                store.push(new, d.heads, dim);
            }
        } else {
            self.keys[layer].overwrite(pos % w, k, d.heads, d.dk);
            self.values[layer].overwrite(pos % w, v, d.heads, d.dv);
        }
        self.appended[layer] = pos + 1;
    }

    /// For the newest token appended to `layer`: how many tokens the layer holds (what
    /// [`scores`](Self::scores) and [`add_weighted_values`](Self::add_weighted_values) read),
    /// and how many of the first ones are older than its window (their weights must be 0).
    /// A layer without a window holds every token and masks none.
    pub(crate) fn window_view(&self, layer: usize) -> (usize, usize) {
        let n = self.appended[layer];
        match self.dims[layer].window {
            None => (n, 0),
            Some(w) if self.format == KvFormat::Kivi4 => {
                let first = self.first[layer];
                (n - first, n.saturating_sub(w).saturating_sub(first))
            }
            Some(w) => (n.min(w), 0),
        }
    }

    /// Marks `tokens` (their ids) as held, after the ones held before.
    pub(crate) fn commit(&mut self, tokens: &[u32]) {
        self.tokens.extend_from_slice(tokens);
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
        self.keys[layer].scores(kv_head, self.dims[layer].heads, q, scale, out, kernel);
    }

    /// `out += Σ_j p[j] · v_j` for KV head `kv_head` of `layer` over the first `p.len()` tokens.
    pub(crate) fn add_weighted_values(
        &self,
        layer: usize,
        kv_head: usize,
        p: &[f32],
        out: &mut [f32],
        kernel: Kernel,
    ) {
        self.values[layer].weighted_sum(kv_head, self.dims[layer].heads, p, out, kernel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(layers: u32, heads: u32, hd: u32) -> ModelSpec {
        ModelSpec::uniform(
            "t",
            edgefit_estimate::Family::Llama,
            heads * hd,
            layers,
            heads,
            heads,
            hd,
            8,
            16,
            true,
        )
        .unwrap()
    }

    #[test]
    fn bytes_count_tokens_and_reset_clears() {
        let mut c = KvCache::new(KvFormat::F32, spec(2, 1, 4), 10);
        assert!(c.is_empty());
        c.append(0, &[1.0; 8], &[2.0; 8]);
        c.append(1, &[1.0; 8], &[2.0; 8]);
        c.commit(&[0; 2]);
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
        // 70 tokens: two full kivi4 key blocks and an f16 tail of 6.
        let (heads, hd, tokens) = (2usize, 40usize, 70usize);
        let k = edgefit_kernels::pseudo_random(1, tokens * heads * hd);
        let v = edgefit_kernels::pseudo_random(2, tokens * heads * hd);
        let q = edgefit_kernels::pseudo_random(3, hd);
        let p: Vec<f32> = (0..tokens).map(|j| 0.1 + 0.05 * j as f32).collect();
        let run = |format| {
            let mut c = KvCache::new(format, spec(1, heads as u32, hd as u32), 128);
            c.append(0, &k, &v);
            c.commit(&vec![0; tokens]);
            let mut s = vec![0.0; tokens];
            c.scores(0, 1, &q, 0.5, &mut s, Kernel::Scalar);
            let mut o = vec![0.0; hd];
            c.add_weighted_values(0, 1, &p, &mut o, Kernel::Scalar);
            (s, o)
        };
        let (s0, o0) = run(KvFormat::F32);
        for (format, budget) in [
            (KvFormat::F16, 1e-3),
            (KvFormat::K8v16, 1e-2),
            (KvFormat::Int8, 1e-2),
            (KvFormat::Int4g32, 0.15),
            (KvFormat::Kivi4, 0.15),
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

    /// Truncating and feeding the same tokens again gives the same cache as never truncating,
    /// for every format; kivi4 cut inside a full block falls back to the block start.
    #[test]
    fn truncate_then_refeed_matches_an_uncut_cache() {
        let (heads, hd, tokens) = (1usize, 36usize, 75usize);
        let k = edgefit_kernels::pseudo_random(7, tokens * heads * hd);
        let v = edgefit_kernels::pseudo_random(8, tokens * heads * hd);
        let q = edgefit_kernels::pseudo_random(9, hd);
        let p: Vec<f32> = (0..tokens).map(|j| 1.0 / (1.0 + j as f32)).collect();
        let read = |c: &KvCache| {
            let mut s = vec![0.0; tokens];
            c.scores(0, 0, &q, 1.0, &mut s, Kernel::Scalar);
            let mut o = vec![0.0; hd];
            c.add_weighted_values(0, 0, &p, &mut o, Kernel::Scalar);
            (s, o)
        };
        for format in KvFormat::ALL.iter().copied() {
            let mut whole = KvCache::new(format, spec(1, 1, hd as u32), 128);
            whole.append(0, &k, &v);
            whole.commit(&vec![0; tokens]);
            for cut in [0usize, 5, 31, 32, 40, 64, 70, 75] {
                let mut c = whole.clone();
                let kept = c.truncate(cut);
                let want = if format == KvFormat::Kivi4 && cut < 64 {
                    cut / 32 * 32
                } else {
                    cut
                };
                assert_eq!(kept, want, "{format} cut {cut}");
                assert_eq!(c.len(), kept);
                assert_eq!(c.stored_bytes(), c.bytes(), "{format} cut {cut}");
                let w = kept * hd;
                c.append(0, &k[w..], &v[w..]);
                c.commit(&vec![0; tokens - kept]);
                assert_eq!(read(&c), read(&whole), "{format} cut {cut}");
            }
        }
    }

    /// The held bytes equal the estimator's at every length, kivi4's blocks and tail included.
    #[test]
    fn stored_bytes_equal_the_estimate_token_by_token() {
        let (heads, hd) = (3usize, 64usize);
        for format in KvFormat::ALL.iter().copied() {
            let mut c = KvCache::new(format, spec(2, heads as u32, hd as u32), 100);
            for n in 1..=70 {
                let x = edgefit_kernels::pseudo_random(n as u64, heads * hd);
                c.append(0, &x, &x);
                c.append(1, &x, &x);
                c.commit(&[0; 1]);
                assert_eq!(c.stored_bytes(), c.bytes(), "{format} at {n}");
            }
        }
    }

    /// A sliding layer holds only its window (a ring; kivi4 whole blocks) and reads, for every
    /// new token, exactly what a full cache reads over the newest `window` tokens, in every
    /// format; its bytes are the estimator's at every length.
    #[test]
    fn a_sliding_layer_keeps_its_window_and_reads_like_a_masked_full_cache() {
        let (heads, hd, tokens) = (2usize, 40usize, 110usize);
        for window in [1usize, 8, 37] {
            let mut windowed = spec(2, heads as u32, hd as u32);
            windowed.layers[0].sliding_window = Some(window as u32);
            for format in KvFormat::ALL.iter().copied() {
                let mut a = KvCache::new(format, windowed.clone(), 200);
                let mut b = KvCache::new(format, spec(2, heads as u32, hd as u32), 200);
                for n in 1..=tokens {
                    let k = edgefit_kernels::pseudo_random(n as u64, heads * hd);
                    let v = edgefit_kernels::pseudo_random(1000 + n as u64, heads * hd);
                    for c in [&mut a, &mut b] {
                        c.append(0, &k, &v);
                        c.append(1, &k, &v);
                        c.commit(&[0; 1]);
                    }
                    assert_eq!(a.stored_bytes(), a.bytes(), "{format} w {window} at {n}");
                    let (held, masked) = a.window_view(0);
                    let want_held = windowed.layers[0].held_tokens(format, n as u64) as usize;
                    assert_eq!(held, want_held, "{format} w {window} at {n}");
                    assert_eq!(held - masked, n.min(window), "{format} w {window} at {n}");
                    let q = edgefit_kernels::pseudo_random(5000 + n as u64, hd);
                    let mut sa = vec![0.0; held];
                    a.scores(0, 1, &q, 0.5, &mut sa, Kernel::Scalar);
                    let mut sb = vec![0.0; n];
                    b.scores(0, 1, &q, 0.5, &mut sb, Kernel::Scalar);
                    let mut got = sa[masked..].to_vec();
                    let mut want = sb[n - n.min(window)..].to_vec();
                    got.sort_by(f32::total_cmp);
                    want.sort_by(f32::total_cmp);
                    assert_eq!(got, want, "{format} w {window} at {n}: scores");
                    // The same weight for each token (its score), zero outside the window.
                    let mut pa = sa.clone();
                    pa[..masked].fill(0.0);
                    let mut pb = sb.clone();
                    pb[..n - n.min(window)].fill(0.0);
                    let (mut oa, mut ob) = (vec![0.0; hd], vec![0.0; hd]);
                    a.add_weighted_values(0, 1, &pa, &mut oa, Kernel::Scalar);
                    b.add_weighted_values(0, 1, &pb, &mut ob, Kernel::Scalar);
                    for (x, y) in oa.iter().zip(&ob) {
                        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{format} {x} {y}");
                    }
                }
                // Bounded: the ring never grows past the window (kivi4: window + a block).
                let cap = match format {
                    KvFormat::Kivi4 => window + BLOCK,
                    _ => window,
                };
                assert!(a.window_view(0).0 <= cap);
                // Truncating after the window slid starts over (the dropped tokens are gone).
                assert_eq!(a.truncate(50), 0, "{format}");
                assert_eq!(a.bytes(), 0);
            }
        }
    }
}
