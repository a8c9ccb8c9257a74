//! The forward pass of a decoder-only model over its weights ([`crate::weights::Weights`]),
//! composed from block helpers keyed by what the weights hold (q/k/v biases, q/k norms, sandwich
//! norms), never by the architecture's name; the numeric helpers (RMSNorm, RoPE, softmax, the
//! activations) are in `crate::ops`.
//!
//! Every matrix is row-major with one row per output feature, so a linear layer is `y = x · Wᵀ`
//! ([`edgefit_kernels::Matrix::matmul_t_with`]), in whatever format the weights were loaded in
//! (w4g32 by default, see [`crate::weights`]). Integer formats read the input quantized to
//! int16 per block of 32 ([`edgefit_kernels::ActQ16`]); an input shared by several matrices (q/k/v, gate/up) is
//! quantized once.
//!
//! RoPE uses the GGUF llama layout: within each head, element pairs `(2i, 2i+1)` rotate by
//! `pos · base^(−2i/d) / s_i`, with the divisors `s_i` of the config's RoPE scaling
//! ([`LlamaConfig::rope_inv_freq`]; 1 without scaling). llama.cpp's converter permutes HF's
//! q/k weights into that layout, and the safetensors loader applies the same permutation, so
//! one rotation serves both sources. YaRN and LongRoPE multiply the rotated values by their
//! attention factor (the cos/sin tables scaled, as transformers' `attention_scaling`), and
//! LongRoPE switches to its long factors for a pass that reaches past the original context
//! (and every pass after it on the same cache: [`Model::plan_positions`]).
//!
//! Soft-capping (Gemma 2): attention scores `c · tanh(s / c)` after the scale and before the
//! mask and softmax, logits `c' · tanh(l / c')` after the output head.

use edgefit_estimate::KvFormat;
use std::sync::{Mutex, TryLockError};

use edgefit_kernels::{Kernel, Matrix, Pool, Prepared};

use crate::config::{Activation, LayerShape, LlamaConfig};
use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::ops::{
    add_bias, add_in_place, gelu_tanh, rms_norm, rms_norm_in_place, rope, silu, softmax,
};
use crate::weights::Weights;

/// Which logits a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only for the last token (generation).
    Last,
    /// For every input token (evaluation, golden tests).
    All,
    /// None: a prefill chunk before the prompt's last ([`crate::Engine::prefill_chunk`]), whose
    /// logits nothing reads. Skips the final norm and the output head (Gemma 3: a 262,144-row
    /// product, as many weights as the rest of the 270M model).
    None,
}

/// A point of the forward pass that [`Model::forward_probed`] reports, with the layer's
/// `tokens × width` values there (row-major, one row per input token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbePoint {
    /// The residual stream entering the block (`hidden` wide).
    BlockIn,
    /// The RMS-normed attention input, what q/k/v read (`hidden`).
    AttnIn,
    /// The attention output before the output projection, what `wo` reads
    /// (`n_heads × v_dim`, head-major).
    AttnOut,
    /// The RMS-normed MLP input, what gate/up read (`hidden`).
    MlpIn,
    /// The MLP intermediate `silu(gate) · up`, what `w_down` reads (`ffn`).
    MlpMid,
    /// The residual stream leaving the block (`hidden`).
    BlockOut,
}

/// A loaded model: its shape, its weights and the kernel its matrix products use.
#[derive(Debug, Clone)]
pub struct Model {
    pub config: LlamaConfig,
    pub weights: Weights,
    pub kernel: Kernel,
    /// The format of the KV caches [`Model::new_cache`] makes (f32 unless set).
    pub kv_format: KvFormat,
    inv_freq: Vec<f32>,
    /// LongRoPE's long set: `(original context, frequencies)`
    /// ([`LlamaConfig::rope_long_inv_freq`]).
    long_inv_freq: Option<(usize, Vec<f32>)>,
    /// The factor the global RoPE tables are multiplied by
    /// ([`edgefit_estimate::RopeScaling::attention_factor`]; 1 but for YaRN and LongRoPE).
    rope_attn_factor: f32,
    /// The sliding layers' own frequencies ([`LlamaConfig::rope_local_inv_freq`]).
    local_inv_freq: Option<Vec<f32>>,
    /// Every block's shape (from the config, cached).
    shapes: Vec<LayerShape>,
    /// The threads the matrix products and attention heads are split across (one unless
    /// set; results are the same bits for any count, see [`edgefit_kernels::pool`]).
    pub pool: Pool,
    /// The forward pass's buffers, reused from call to call.
    workspace: WorkspaceCell,
}

/// Every buffer of a forward pass, kept between calls so a decode step allocates nothing but
/// its returned logits.
#[derive(Debug, Default)]
struct Workspace {
    x: Vec<f32>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    normed: Vec<f32>,
    q: Vec<f32>,
    kk: Vec<f32>,
    vv: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    lcos: Vec<f32>,
    lsin: Vec<f32>,
    local_cos: Vec<f32>,
    local_sin: Vec<f32>,
    proj: Vec<f32>,
    final_x: Vec<f32>,
    scores: Vec<f32>,
    prep: Prepared,
    split: Vec<f32>,
}

/// The workspace behind a lock (a model is shared by reference; two forward passes at once
/// on one model each get buffers: the second a fresh set). A clone starts empty.
#[derive(Debug, Default)]
struct WorkspaceCell(Mutex<Workspace>);

impl Clone for WorkspaceCell {
    fn clone(&self) -> Self {
        WorkspaceCell::default()
    }
}

impl Model {
    /// Wraps validated weights. The loaders check every tensor's shape before calling this.
    pub fn new(config: LlamaConfig, weights: Weights) -> Self {
        // The config must be validated (every loader does): bad RoPE scaling is refused there.
        // Should an unvalidated one get here, its frequencies are NaN, so every logit is NaN
        // (visibly broken) rather than plausibly wrong.
        let inv_freq = config
            .rope_inv_freq()
            .unwrap_or_else(|_| vec![f32::NAN; config.rotary_dim() / 2]);
        let long_inv_freq = config
            .rope_long_inv_freq()
            .map(|r| r.unwrap_or_else(|_| (0, vec![f32::NAN; config.rotary_dim() / 2])));
        let rope_attn_factor = config.rope_scaling.attention_factor();
        let local_inv_freq = config.rope_local_inv_freq();
        let shapes = config.layer_shapes();
        Model {
            config,
            weights,
            kernel: Kernel::best(),
            kv_format: KvFormat::F32,
            inv_freq,
            long_inv_freq,
            rope_attn_factor,
            local_inv_freq,
            shapes,
            pool: Pool::serial(),
            workspace: WorkspaceCell::default(),
        }
    }

    /// A KV cache in [`Model::kv_format`] sized for this model, holding at most `max_tokens`
    /// (capped at the context). Its bytes are the estimator's `kv_bytes` for the same shape and
    /// format.
    pub fn new_cache(&self, max_tokens: usize) -> KvCache {
        self.new_cache_in(self.kv_format, max_tokens)
    }

    /// [`new_cache`](Self::new_cache) in `format` instead of [`Model::kv_format`].
    pub fn new_cache_in(&self, format: KvFormat, max_tokens: usize) -> KvCache {
        KvCache::new(
            format,
            self.config.to_spec(),
            max_tokens.min(self.config.context_length),
        )
    }

    /// Prepares an empty `cache` for a sequence that will reach position `end` (exclusive) over
    /// several passes: with LongRoPE, a prompt reaching past the original context uses the long
    /// factors from its first pass on, as transformers' single pass over the whole prompt does.
    /// A cache already holding short-rotated tokens is left as it is: the pass that crosses
    /// recomputes the sequence ([`Model::forward`]). The engine's chunked prefill calls it;
    /// other kinds ignore it.
    pub fn plan_positions(&self, cache: &mut KvCache, end: usize) {
        if let Some((after, _)) = &self.long_inv_freq {
            if end > *after && cache.is_empty() {
                cache.set_long_rope();
            }
        }
    }

    /// LongRoPE's switch, as transformers generates (`Phi3ForCausalLM.
    /// prepare_inputs_for_generation`): the first pass that reaches past the original context
    /// after earlier passes within it drops the cache and runs the whole sequence again, so
    /// every key is rotated with the long factors (keeping the cached keys, rotated with the
    /// short ones, would mix the two). Returns the logits of `tokens`' positions only; `probe`
    /// sees the whole recomputed sequence. On an error the cache is left empty.
    fn recompute_long(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        which: Logits,
        probe: &mut dyn FnMut(usize, ProbePoint, &[f32]),
    ) -> Result<Vec<f32>> {
        let start = cache.len();
        let mut all = cache.tokens().to_vec();
        all.extend_from_slice(tokens);
        cache.reset();
        cache.set_long_rope();
        let out = self.forward_probed(&all, cache, which, probe)?;
        Ok(match which {
            Logits::All => out[start * self.config.vocab..].to_vec(),
            Logits::Last | Logits::None => out,
        })
    }

    /// Runs `tokens` through the model after the tokens already in `cache`, appends their keys
    /// and values to it, and returns logits (`vocab` per returned position). With LongRoPE, the
    /// first pass reaching past the original context on a cache of short-rotated tokens runs
    /// the cached tokens again with it (`recompute_long`, as transformers generates).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, which: Logits) -> Result<Vec<f32>> {
        self.forward_probed(tokens, cache, which, &mut |_, _, _| {})
    }

    /// [`forward`](Self::forward), calling `probe(layer, point, values)` at every
    /// [`ProbePoint`] of every layer, in the order the points are listed, with the
    /// `tokens × width` values there. The slices are the forward pass's own buffers (nothing is
    /// copied for the probe). The KV-format evaluation compares [`ProbePoint::AttnOut`] between
    /// formats; pruning's calibration ([`crate::prune::collect_stats`]) reads them all.
    pub fn forward_probed(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        which: Logits,
        probe: &mut dyn FnMut(usize, ProbePoint, &[f32]),
    ) -> Result<Vec<f32>> {
        let c = &self.config;
        let t_len = tokens.len();
        if t_len == 0 {
            return Ok(Vec::new());
        }
        cache.check_room(t_len)?;
        for &t in tokens {
            if t as usize >= c.vocab {
                return Err(crate::EngineError::Setting {
                    name: "token",
                    value: t.to_string(),
                    expected: format!("a token id below the vocabulary size {}", c.vocab),
                });
            }
        }
        let (h, hd) = (c.hidden, c.head_dim);
        let start = cache.len();
        if let Some((after, _)) = &self.long_inv_freq {
            if start > 0 && !cache.long_rope() && start + t_len > *after {
                return self.recompute_long(tokens, cache, which, probe);
            }
        }
        let k = self.kernel;
        let pool = &self.pool;

        let mut fresh = Workspace::default();
        let mut guard = match self.workspace.0.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        let ws = guard.as_deref_mut().unwrap_or(&mut fresh);
        let Workspace {
            x,
            cos,
            sin,
            normed,
            q,
            kk,
            vv,
            att,
            gate,
            up,
            lcos,
            lsin,
            local_cos,
            local_sin,
            proj,
            final_x,
            scores,
            prep,
            split,
        } = ws;

        x.resize(t_len * h, 0.0);
        for (row, &t) in x.chunks_exact_mut(h).zip(tokens) {
            self.weights.embed.row(t as usize, row);
        }
        if c.embed_scale {
            // Gemma: embeddings × √hidden (the f32 value, as transformers casts it).
            let s = (h as f32).sqrt();
            x.iter_mut().for_each(|v| *v *= s);
        }

        // cos/sin for every (position, rotated pair), shared by all layers, times the scaling's
        // attention factor; the sliding layers' own set when they have their own base.
        let half = self.inv_freq.len();
        let rope_table = |inv_freq: &[f32], m: f32, cos: &mut Vec<f32>, sin: &mut Vec<f32>| {
            cos.resize(t_len * half, 0.0);
            sin.resize(t_len * half, 0.0);
            for t in 0..t_len {
                let pos = (start + t) as f32;
                for (i, f) in inv_freq.iter().enumerate() {
                    let (s, co) = (pos * f).sin_cos();
                    cos[t * half + i] = co * m;
                    sin[t * half + i] = s * m;
                }
            }
        };
        // LongRoPE: the long factors once a pass reaches past the original context
        // (transformers: `max(position) + 1 > original_max_position_embeddings`).
        let long_rope = match &self.long_inv_freq {
            Some((after, _)) => cache.long_rope() || start + t_len > *after,
            None => false,
        };
        let global = match &self.long_inv_freq {
            Some((_, long)) if long_rope => long,
            _ => &self.inv_freq,
        };
        rope_table(global, self.rope_attn_factor, cos, sin);
        let has_local = match self.local_inv_freq.as_deref() {
            Some(f) => {
                rope_table(f, 1.0, local_cos, local_sin);
                true
            }
            None => false,
        };

        normed.resize(t_len * h, 0.0);
        // The unpruned head dim (or Gemma's query_pre_attn_scalar) sets the scale, so pruned
        // dims drop out of the sum only.
        let scale = c.attn_scale();
        let attn_cap = c.attn_softcap;
        // `y = x · Wᵀ` for every matrix `w` reading the same input `x` (prepared once), row
        // ranges split across the pool.
        let mut linear = |x: &[f32], outs: &mut [(&Matrix, &mut Vec<f32>)]| {
            pool.linear(k, prep, split, x, t_len, outs);
        };

        for (li, (lw, shape)) in self.weights.layers.iter().zip(&self.shapes).enumerate() {
            let (qd, kd, od, dk, dv) = (
                shape.q_width(),
                shape.k_width(),
                shape.o_width(),
                shape.qk_dim,
                shape.v_dim,
            );
            q.resize(t_len * qd, 0.0);
            kk.resize(t_len * kd, 0.0);
            vv.resize(t_len * shape.v_width(), 0.0);
            att.resize(t_len * od, 0.0);
            gate.resize(t_len * shape.ffn, 0.0);
            up.resize(t_len * shape.ffn, 0.0);
            probe(li, ProbePoint::BlockIn, x);
            rms_norm(x, &lw.attn_norm, c.rms_eps, normed);
            probe(li, ProbePoint::AttnIn, normed);
            linear(normed, &mut [(&lw.wq, q), (&lw.wk, kk), (&lw.wv, vv)]);
            for (x, b) in [(&mut *q, &lw.bq), (&mut *kk, &lw.bk), (&mut *vv, &lw.bv)] {
                if let Some(b) = b {
                    add_bias(x, b);
                }
            }
            for (x, w) in [(&mut *q, &lw.q_norm), (&mut *kk, &lw.k_norm)] {
                if let Some(w) = w {
                    rms_norm_in_place(x, w, c.rms_eps);
                }
            }
            let window = c.layer_window(li);
            let (cos, sin): (&[f32], &[f32]) = if has_local && window.is_some() {
                (local_cos, local_sin)
            } else {
                (cos, sin)
            };
            let (cs, sn) = if shape.qk_dim == hd {
                (cos, sin)
            } else {
                // A pruned head keeps some of the pairs, each with its own frequency.
                let pairs = &shape.rope_pairs;
                lcos.clear();
                lsin.clear();
                for t in 0..t_len {
                    lcos.extend(pairs.iter().map(|&p| cos[t * half + p as usize]));
                    lsin.extend(pairs.iter().map(|&p| sin[t * half + p as usize]));
                }
                (&lcos[..], &lsin[..])
            };
            rope(q, qd, dk, cs, sn);
            rope(kk, kd, dk, cs, sn);
            let group = shape.n_heads / shape.n_kv_heads;
            // Attention of a query over what the cache holds for this layer: `held` tokens, of
            // which the first `masked` are older than a sliding layer's window (weight 0).
            let attend = |cache: &KvCache,
                          qh: &[f32],
                          kvh: usize,
                          held,
                          masked,
                          sc: &mut [f32],
                          out: &mut [f32]| {
                let sc = &mut sc[..held];
                cache.scores(li, kvh, qh, scale, sc, k);
                if let Some(cap) = attn_cap {
                    sc.iter_mut().for_each(|s| *s = cap * (*s / cap).tanh());
                }
                sc[..masked].fill(0.0);
                softmax(&mut sc[masked..]);
                out.fill(0.0);
                cache.add_weighted_values(li, kvh, sc, out, k);
            };
            // A sliding layer whose ring does not wrap in this pass (every position below the
            // window) holds its tokens as a full layer does in a per-token KV format, so they go
            // in at once and attend as a full layer's: one region for every (token, head) item
            // instead of one per token over its few heads. Not in kivi4, whose key blocks are
            // quantized once full: a token of the pass would read its own block quantized there.
            let one_by_one = window.is_some_and(|w| {
                start + t_len > w || cache.format() == edgefit_estimate::KvFormat::Kivi4
            });
            if one_by_one {
                // A sliding layer's ring holds only its window ([`KvCache::window_view`]), so
                // its tokens go in one at a time, each attending right after; the heads of a
                // token are split across the pool.
                let (kw, vw) = (kd, shape.v_width());
                for t in 0..t_len {
                    cache.append(li, &kk[t * kw..(t + 1) * kw], &vv[t * vw..(t + 1) * vw]);
                    let (held, masked) = cache.window_view(li);
                    let (cache, q) = (&*cache, &*q);
                    let out = &mut att[t * od..(t + 1) * od];
                    pool.for_each_item(out, dv, scores, held, &|head, out, sc| {
                        let qh = &q[t * qd + head * dk..t * qd + (head + 1) * dk];
                        attend(cache, qh, head / group, held, masked, sc, out);
                    });
                }
            } else {
                cache.append(li, kk, vv);
                // One item per (token, head), `att[t·od + head·dv..]` (od = heads · dv), split
                // across the pool; each run of items has its own scores buffer. (A sliding layer
                // here holds every position so far: its view is the full layer's.)
                let (heads, cache, q) = (shape.n_heads, &*cache, &*q);
                pool.for_each_item(att, dv, scores, start + t_len, &|i, out, sc| {
                    let (t, head) = (i / heads, i % heads);
                    let qh = &q[t * qd + head * dk..t * qd + (head + 1) * dk];
                    // causal: positions 0..=start+t
                    attend(cache, qh, head / group, start + t + 1, 0, sc, out);
                });
            }
            probe(li, ProbePoint::AttnOut, att);
            linear(att, &mut [(&lw.wo, proj)]);
            if let Some(b) = &lw.bo {
                add_bias(proj, b);
            }
            if let Some(w) = &lw.post_attn_norm {
                rms_norm_in_place(proj, w, c.rms_eps);
            }
            add_in_place(x, proj);

            rms_norm(x, &lw.ffn_norm, c.rms_eps, normed);
            probe(li, ProbePoint::MlpIn, normed);
            linear(normed, &mut [(&lw.w_gate, gate), (&lw.w_up, up)]);
            for (x, b) in [(&mut *gate, &lw.b_gate), (&mut *up, &lw.b_up)] {
                if let Some(b) = b {
                    add_bias(x, b);
                }
            }
            match c.activation {
                Activation::Silu => gate
                    .iter_mut()
                    .zip(up.iter())
                    .for_each(|(g, u)| *g = silu(*g) * u),
                Activation::GeluTanh => gate
                    .iter_mut()
                    .zip(up.iter())
                    .for_each(|(g, u)| *g = gelu_tanh(*g) * u),
            }
            probe(li, ProbePoint::MlpMid, gate);
            linear(gate, &mut [(&lw.w_down, proj)]);
            if let Some(b) = &lw.b_down {
                add_bias(proj, b);
            }
            if let Some(w) = &lw.post_ffn_norm {
                rms_norm_in_place(proj, w, c.rms_eps);
            }
            add_in_place(x, proj);
            probe(li, ProbePoint::BlockOut, x);
        }
        // A pool thread that failed inside a region left its part undone: none of this pass
        // is kept (the cache keeps its length), and the error names the thread.
        pool.check()
            .map_err(|e| crate::EngineError::Threads(e.to_string()))?;
        cache.commit(tokens);
        if long_rope {
            cache.set_long_rope();
        }

        let rows = match which {
            Logits::Last => &x[(t_len - 1) * h..],
            Logits::All => &x[..],
            Logits::None => return Ok(Vec::new()),
        };
        let n_rows = rows.len() / h;
        final_x.resize(rows.len(), 0.0);
        rms_norm(rows, &self.weights.final_norm, c.rms_eps, final_x);
        let head = self.weights.output.as_ref().unwrap_or(&self.weights.embed);
        let mut logits = Vec::with_capacity(n_rows * c.vocab);
        pool.linear(k, prep, split, final_x, n_rows, &mut [(head, &mut logits)]);
        pool.check()
            .map_err(|e| crate::EngineError::Threads(e.to_string()))?;
        if let Some(cap) = c.final_softcap {
            logits.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Ok(logits)
    }
}
