//! Structured pruning: removes whole layers, query heads, KV heads (with their query group),
//! per-head Q/K dimensions (in RoPE pairs), per-head V dimensions and MLP channels, leaving a
//! smaller dense [`Model`] whose shape the estimator describes exactly
//! ([`PruneReport::pruning`], [`LlamaConfig::to_spec`]).
//!
//! Without retraining, which units go is decided by an importance score from the weights
//! ([`Importance::Magnitude`]) or from the weights and calibration activations
//! ([`Importance::Activation`], Wanda-style `|W| · ‖X‖`, with statistics from
//! [`collect_stats`]). Pruning runs on f32: every matrix of the input is read as f32 (4-bit and
//! 8-bit weights are dequantized row by row) and the result's linear layers are
//! [`WeightsFormat::F32`]; quantize afterwards (prune first, then quantize: quantization
//! statistics depend on the final structure). The embedding and output head are not pruned
//! (the hidden size stays) and keep their format.
//!
//! # Order and shapes
//! 1. Layers: [`PrunePlan::drop_layers`] plus the [`PrunePlan::layers`] least important others.
//! 2. KV heads (ratio `kv_heads`), each with its whole query group.
//! 3. Query heads (ratio `heads`): with grouped-query attention every KV group of a layer loses
//!    the same number of query heads (its weakest ones), so `n_heads` stays a multiple of
//!    `n_kv_heads`; with plain multi-head attention (group of 1) a query head goes with its KV
//!    head, as the estimator's [`edgefit_estimate::Pruning::from_ratios`] does.
//! 4. Q/K dimensions (ratio `qk_dims`) in RoPE pairs: a pair is pair `(2j, 2j+1)` of every query
//!    and key head of the layer (one set of kept pairs per layer, so heads stay uniform); its
//!    frequency is remembered in [`LayerShape::rope_pairs`], and the attention scale stays
//!    `1/√head_dim`, so a head scores exactly the sum over its kept pairs.
//! 5. V dimensions (ratio `v_dims`): V rows of every KV head with the matching output-projection
//!    input columns of every query head (one set per layer).
//! 6. MLP channels (ratio `mlp`): gate and up rows with the down columns.
//!
//! Each later step scores units over what the earlier steps kept.
//!
//! # Rounding (the estimator's rounding, so uniform ratios give the shape it predicts)
//! Ratios are fractions removed, in `[0, 1)`. A structure of `n` units keeps
//! `max(1, round((1 − r) · n))` (half away from zero): KV heads of a layer (`n = n_kv_heads`);
//! query heads per KV group (`n` = group size; with groups of one, `n = n_kv_heads` and the
//! pairs go together); RoPE pairs (`n = qk_dim / 2`, so `qk_dim` stays even); V dims; MLP
//! channels. So at least one KV head, one query head per group, one pair, one V dim and one
//! channel always remain, and at least one layer.
//!
//! MLP width alignment ([`PrunePlan::mlp_multiple`], default 1 = none): a pruned width is then
//! rounded to the nearest multiple (at least one multiple, at most the current width). 4-bit
//! groups of 32 run along a matrix's input dimension, and `w_down` reads the MLP width, so a
//! multiple of 32 leaves no padded tail group. The default does not align because the tail
//! costs at most 31 padded columns of one matrix per layer (about 1% of `w_down` at SmolLM2's
//! 1536), while aligning would make the engine's shape differ from the estimator's
//! `Pruning::from_ratios` for the same ratios; the CLI may pass 32.
//!
//! # Allocation
//! [`Allocation::Uniform`] removes each layer's own ratio (the global ratios, or
//! [`PrunePlan::per_layer`]). [`Allocation::Global`] (FLAP-style, non-uniform) removes the same
//! total number of units per structure as the uniform ratios would, but ranks the units of all
//! layers together: each unit's score divided by the mean score of its layer's units of that
//! structure (so a layer whose weights are merely larger is not favoured), lowest first, with
//! every layer keeping at least one unit. For query heads with grouped-query attention a unit
//! is "one more head from every group" (scored by the sum over groups of each group's next
//! weakest head). Global allocation with per-layer ratios is refused (they already fix each
//! layer's share).
//!
//! # Importance
//! Each unit's score is the square root of an energy, the sum over the paths through the unit
//! of a product of squared norms (`‖·‖` is L2; rows and columns as in [`crate::weights`]).
//! Magnitude reads a matrix's input columns as the block applies them: column `i` of q/k/v
//! weighted by the attention RMSNorm weight `γᵢ²`, of gate/up by the MLP norm's (real models'
//! norm weights differ by orders of magnitude between channels). Activation weights them by
//! the calibration sums `Σₜ xᵢ²` of the same inputs instead:
//!
//! | unit | magnitude | activation |
//! |---|---|---|
//! | V dim `d` of head `h` (path) | `‖wo[:,(h,d)]‖² · ‖wv[(kv(h),d),:]‖²` | `‖wo[:,(h,d)]‖² · Σₜ att(h,d)²` |
//! | query head `h` | Σ over its V dims of the path above | same |
//! | KV head | Σ over its query heads | same |
//! | V dim `d` of a layer | Σ over the layer's heads of the path | same |
//! | RoPE pair `p` of a layer | Σ over heads `h` of `‖wq[(h,p),:]‖² · ‖wk[(kv(h),p),:]‖²` | same, input-weighted by `Σₜ x̂ᵢ²` (normed attention input) |
//! | MLP channel `j` | `‖w_down[:,j]‖² · ‖w_gate[j,:]‖² · ‖w_up[j,:]‖²` | `‖w_down[:,j]‖² · Σₜ mⱼ²` (`m = silu(gate)·up`) |
//! | layer | position: the layers just before the last one first | block influence (below) |
//!
//! With activations, an output-side unit's score is exactly the Frobenius norm of what it adds
//! to the residual stream over the calibration tokens (`‖w[:,c]‖ · ‖X_c‖` for a rank-one term).
//! A unit that contributes nothing (a zero output column, a zero query pair) scores 0 under
//! both methods. Ties go to the lower index.
//!
//! Layers: with activations, ShortGPT's block influence `1 − cos(x_in, x_out)` of the residual
//! stream, averaged over calibration tokens (a block that barely turns the residual is
//! redundant). The weights alone carry no usable signal for depth: on SmolLM2-135M the
//! weight-norm proxy `‖wo‖²_F + ‖w_down‖²_F` picked layer 0 (block influence 1.0, the most
//! important layer) and two dropped layers took perplexity from 9.7 to ~10⁵. So magnitude uses
//! the estimator's position rule (`Pruning::from_ratios`: the `n` layers just before the last),
//! and the activation method is the one to use for depth.
//!
//! Measured on SmolLM2-135M (f32, calibration 2048 tokens of the Constitution in windows of
//! 256, perplexity on 1024 held-out tokens of it, base 9.71), magnitude / activation:
//! MLP 30% 14 487 / 23.5 (global allocation 7 891 / 26.1); query heads 33% (one per group)
//! 97.5 / 71.9; Q/K dims 25% 144 / 19.1; V dims 25% 1 493 / 12.6; two layers (27, 28 by position
//! / 14, 15 by block influence) 377 / 14.7. Without retraining, magnitude is a fallback only.
//!
//! Biases (Qwen2's q/k/v) are gathered with their matrix's rows. FLAP's bias compensation
//! (adding the removed units' mean output as a bias) is not done. Q/K dims of a QK-norm
//! architecture (Qwen3) cannot be pruned: the plan check refuses it.

use std::collections::BTreeMap;
use std::str::FromStr;

use edgefit_estimate::{KvFormat, LayerPrune, Pruning};
use edgefit_kernels::Matrix;
use serde::{Deserialize, Serialize};

use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::model::{Logits, Model, ProbePoint};
use crate::ops::cosine;
use crate::weights::{LayerWeights, LoadOptions, Weights, WeightsFormat};

/// How a unit's importance is measured (see the module docs for the formulas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Importance {
    /// From the weights alone.
    #[default]
    Magnitude,
    /// Weights times calibration activations ([`collect_stats`]); layers by block influence.
    Activation,
}

impl Importance {
    pub fn as_str(self) -> &'static str {
        match self {
            Importance::Magnitude => "magnitude",
            Importance::Activation => "activation",
        }
    }
}

impl FromStr for Importance {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "magnitude" => Ok(Importance::Magnitude),
            "activation" => Ok(Importance::Activation),
            _ => Err(EngineError::Setting {
                name: "method",
                value: s.to_string(),
                expected: "magnitude or activation".into(),
            }),
        }
    }
}

/// How the units to remove are spread over layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocation {
    /// Every layer removes its own ratio.
    #[default]
    Uniform,
    /// The same total, ranked across layers by normalised importance (FLAP-style).
    Global,
}

impl FromStr for Allocation {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "uniform" => Ok(Allocation::Uniform),
            "global" => Ok(Allocation::Global),
            _ => Err(EngineError::Setting {
                name: "allocation",
                value: s.to_string(),
                expected: "uniform or global".into(),
            }),
        }
    }
}

/// Fractions removed of each structure of a layer, each in `[0, 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayerRatios {
    /// Query heads (within each KV group; whole (query, KV) pairs without GQA).
    pub heads: f64,
    /// KV heads, each with its query group.
    pub kv_heads: f64,
    /// Per-head Q/K dims, in RoPE pairs.
    pub qk_dims: f64,
    /// Per-head V dims (with the output projection's matching inputs).
    pub v_dims: f64,
    /// MLP channels.
    pub mlp: f64,
}

/// What to remove. `Default` removes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrunePlan {
    /// Ratios for every layer (unless `per_layer` is given).
    pub ratios: LayerRatios,
    /// One entry per layer of the input model (in its numbering), replacing `ratios`; entries
    /// of dropped layers are ignored. Only with [`Allocation::Uniform`].
    pub per_layer: Option<Vec<LayerRatios>>,
    /// How many whole layers to drop, the least important ones (besides `drop_layers`).
    pub layers: usize,
    /// Layers dropped whatever their importance (indices of the input model).
    pub drop_layers: Vec<usize>,
    pub allocation: Allocation,
    pub importance: Importance,
    /// Round pruned MLP widths to a multiple of this (1 = no rounding; see the module docs).
    pub mlp_multiple: usize,
}

impl Default for PrunePlan {
    fn default() -> Self {
        PrunePlan {
            ratios: LayerRatios::default(),
            per_layer: None,
            layers: 0,
            drop_layers: Vec::new(),
            allocation: Allocation::Uniform,
            importance: Importance::Magnitude,
            mlp_multiple: 1,
        }
    }
}

/// Calibration statistics of one layer: per input channel, sums over tokens of squared values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerStats {
    /// Normed attention input (`hidden`).
    pub attn_in: Vec<f64>,
    /// Attention output per (head, V dim) (`n_heads × v_dim`, the output projection's input).
    pub attn_out: Vec<f64>,
    /// Normed MLP input (`hidden`).
    pub mlp_in: Vec<f64>,
    /// MLP intermediate `silu(gate) · up` (`ffn`, the down projection's input).
    pub mlp_mid: Vec<f64>,
    /// ShortGPT block influence: mean over tokens of `1 − cos(x_in, x_out)` of the residual
    /// stream around the block.
    pub block_influence: f64,
}

/// Calibration statistics of a model ([`collect_stats`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivationStats {
    /// Calibration tokens run.
    pub tokens: usize,
    /// Windows they were run in (a fresh cache each).
    pub windows: usize,
    pub layers: Vec<LayerStats>,
}

/// Runs `tokens` through `model` in windows of `window` tokens (the cache reset before each, the
/// last window possibly shorter) and sums, per layer, the squared activations at every probe
/// point and the block influence.
pub fn collect_stats(model: &Model, tokens: &[u32], window: usize) -> Result<ActivationStats> {
    let c = &model.config;
    if tokens.is_empty() {
        return Err(EngineError::Setting {
            name: "calibration",
            value: "no tokens".into(),
            expected: "at least one calibration token".into(),
        });
    }
    if window == 0 || window > c.context_length {
        return Err(EngineError::Setting {
            name: "window",
            value: window.to_string(),
            expected: format!("1..={} (the model's context)", c.context_length),
        });
    }
    let h = c.hidden;
    let shapes = c.layer_shapes();
    let mut layers: Vec<LayerStats> = shapes
        .iter()
        .map(|s| LayerStats {
            attn_in: vec![0.0; h],
            attn_out: vec![0.0; s.o_width()],
            mlp_in: vec![0.0; h],
            mlp_mid: vec![0.0; s.ffn],
            block_influence: 0.0,
        })
        .collect();
    let mut block_in: Vec<f32> = Vec::new();
    let mut cache = model.new_cache_in(KvFormat::F32, window);
    let mut windows = 0;
    for chunk in tokens.chunks(window) {
        cache.reset();
        model.forward_probed(chunk, &mut cache, Logits::Last, &mut |li, point, v| {
            let st = &mut layers[li];
            match point {
                ProbePoint::BlockIn => {
                    block_in.clear();
                    block_in.extend_from_slice(v);
                }
                ProbePoint::AttnIn => add_squares(&mut st.attn_in, v),
                ProbePoint::AttnOut => add_squares(&mut st.attn_out, v),
                ProbePoint::MlpIn => add_squares(&mut st.mlp_in, v),
                ProbePoint::MlpMid => add_squares(&mut st.mlp_mid, v),
                ProbePoint::BlockOut => {
                    for (a, b) in block_in.chunks_exact(h).zip(v.chunks_exact(h)) {
                        st.block_influence += 1.0 - cosine(a, b);
                    }
                }
            }
        })?;
        windows += 1;
    }
    for l in &mut layers {
        l.block_influence /= tokens.len() as f64;
    }
    Ok(ActivationStats {
        tokens: tokens.len(),
        windows,
        layers,
    })
}

/// `acc[i] += Σ_rows v[row][i]²`.
fn add_squares(acc: &mut [f64], v: &[f32]) {
    for row in v.chunks_exact(acc.len()) {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a += f64::from(x) * f64::from(x);
        }
    }
}

/// What [`prune`] removed from one layer (indices of the input model).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerReport {
    /// The layer's index in the input model.
    pub layer: usize,
    pub removed_kv_heads: Vec<usize>,
    /// Every query head removed, including those that went with their KV head.
    pub removed_query_heads: Vec<usize>,
    /// RoPE pair ids (of the unpruned head) removed from every Q/K head.
    pub removed_qk_pairs: Vec<u16>,
    pub removed_v_dims: Vec<usize>,
    pub removed_mlp_channels: Vec<usize>,
}

/// Totals removed over the kept layers (dims are per head, summed over layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RemovedTotals {
    pub layers: usize,
    pub query_heads: usize,
    pub kv_heads: usize,
    pub qk_dims: usize,
    pub v_dims: usize,
    pub mlp_channels: usize,
}

/// What [`prune`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneReport {
    pub importance: Importance,
    pub allocation: Allocation,
    /// [`LlamaConfig::params`] before and after.
    pub params_before: u64,
    pub params_after: u64,
    /// KV-cache bytes per token in f32 before and after (the estimator's arithmetic).
    pub kv_f32_bytes_per_token_before: u64,
    pub kv_f32_bytes_per_token_after: u64,
    pub removed: RemovedTotals,
    /// Input-model indices of the layers dropped.
    pub dropped_layers: Vec<usize>,
    /// One entry per kept layer.
    pub layers: Vec<LayerReport>,
    /// The new shapes, one per kept layer.
    pub shapes: Vec<LayerShape>,
    /// The same pruning as the estimator describes it: `input_spec.pruned(&pruning)` has the
    /// result's layers.
    pub pruning: Pruning,
}

/// Prunes `model` as `plan` says (module docs: order, rounding, allocation, importance) and
/// returns the smaller model (f32 linear layers, same kernel and KV format) with a report.
/// `stats` (from [`collect_stats`] on this model) is required by [`Importance::Activation`]
/// and ignored by [`Importance::Magnitude`].
pub fn prune(
    model: &Model,
    plan: &PrunePlan,
    stats: Option<&ActivationStats>,
) -> Result<(Model, PruneReport)> {
    let options = LoadOptions {
        weights: WeightsFormat::F32,
        embedding: Some(model.weights.options.embedding_format()),
        requantize: model.weights.options.requantize,
    };
    prune_into(model, plan, stats, options)
}

/// [`prune`], with each pruned layer converted to `options`' linear format as soon as it is
/// built (the embedding and output head are kept as they are, whatever `options.embedding`
/// says), so the peak memory is the input
/// model, the smaller model in its final format and one f32 layer, not a whole f32 model.
/// Converting the f32 result of [`prune`] with [`Weights::into_converted`] gives the same
/// weights.
pub fn prune_into(
    model: &Model,
    plan: &PrunePlan,
    stats: Option<&ActivationStats>,
    options: LoadOptions,
) -> Result<(Model, PruneReport)> {
    let config = &model.config;
    let shapes = config.layer_shapes();
    let n = shapes.len();
    check_plan(plan, n)?;
    check_arch(plan, config)?;
    let stats = match plan.importance {
        Importance::Magnitude => None,
        Importance::Activation => {
            let s = stats.ok_or_else(|| EngineError::Setting {
                name: "calibration",
                value: "none".into(),
                expected: "calibration statistics (collect_stats) for activation importance".into(),
            })?;
            check_stats(s, config, &shapes)?;
            Some(s)
        }
    };

    let norms: Vec<LayerNorms> = model
        .weights
        .layers
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(l, (lw, shape))| LayerNorms::new(lw, shape, stats.map(|s| &s.layers[l])))
        .collect();

    // 1. Layers.
    let mut dropped = vec![false; n];
    for &l in &plan.drop_layers {
        dropped[l] = true;
    }
    // Without data: the estimator's rule, the layers just before the last one first.
    let layer_score = |l: usize| match stats {
        Some(s) => s.layers[l].block_influence,
        None if l + 1 == n => n as f64,
        None => (n - 2 - l) as f64,
    };
    let mut candidates: Vec<usize> = (0..n).filter(|&l| !dropped[l]).collect();
    candidates.sort_by(|&a, &b| layer_score(a).total_cmp(&layer_score(b)).then(a.cmp(&b)));
    for &l in candidates.iter().take(plan.layers) {
        dropped[l] = true;
    }
    let ratios: Vec<LayerRatios> = plan
        .per_layer
        .clone()
        .unwrap_or_else(|| vec![plan.ratios; n]);
    let mut works: Vec<Work> = (0..n)
        .filter(|&l| !dropped[l])
        .map(|l| Work::new(l, &shapes[l], &norms[l], ratios[l]))
        .collect();
    let alloc = plan.allocation;

    // 2. KV heads, with their query groups.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::kv_scores).collect();
    let counts = removal_counts(&scores, &works, |r| r.kv_heads, alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.kv = keep_indices(&w.kv, s, c);
        w.heads_from_kv();
    }

    // 3. Query heads: per group, or with their KV head when groups have one head.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::head_unit_scores).collect();
    let counts = removal_counts(&scores, &works, |r| r.heads, alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        if w.group() == 1 {
            w.kv = keep_indices(&w.kv, s, c);
            w.heads_from_kv();
        } else {
            w.remove_weakest_per_group(c);
        }
    }

    // 4. RoPE pairs of Q/K.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::pair_scores).collect();
    let counts = removal_counts(&scores, &works, |r| r.qk_dims, alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.pairs = keep_indices(&w.pairs, s, c);
    }

    // 5. V dims.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::vdim_scores).collect();
    let counts = removal_counts(&scores, &works, |r| r.v_dims, alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.vdims = keep_indices(&w.vdims, s, c);
    }

    // 6. MLP channels, widths optionally aligned.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::mlp_scores).collect();
    let counts = removal_counts(&scores, &works, |r| r.mlp, alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        let f = s.len();
        let kept = align(f - c, f, plan.mlp_multiple);
        w.ffn = keep_indices(&w.ffn, s, f - kept);
    }

    // Build the smaller model.
    let mut layers = Vec::with_capacity(works.len());
    let mut new_shapes = Vec::with_capacity(works.len());
    let mut reports = Vec::with_capacity(works.len());
    let mut removed = RemovedTotals {
        layers: n - works.len(),
        ..Default::default()
    };
    let mut per_layer = BTreeMap::new();
    for w in &works {
        let (lw, new) = w.build(&model.weights.layers[w.layer]);
        let s = w.shape;
        removed.query_heads += s.n_heads - new.n_heads;
        removed.kv_heads += s.n_kv_heads - new.n_kv_heads;
        removed.qk_dims += s.qk_dim - new.qk_dim;
        removed.v_dims += s.v_dim - new.v_dim;
        removed.mlp_channels += s.ffn - new.ffn;
        per_layer.insert(
            w.layer as u32,
            LayerPrune {
                num_heads: Some(new.n_heads as u32),
                num_kv_heads: Some(new.n_kv_heads as u32),
                qk_head_dim: Some(new.qk_dim as u32),
                v_head_dim: Some(new.v_dim as u32),
                intermediate_size: Some(new.ffn as u32),
            },
        );
        reports.push(w.report());
        layers.push(lw.into_converted(w.layer, options)?);
        new_shapes.push(new);
    }
    let uniform = config.uniform_layer();
    let new_config = LlamaConfig {
        n_layers: new_shapes.len(),
        // Kept layers keep their attention kind (sliding or full).
        sliding_layers: if config.sliding_layers.is_empty() {
            Vec::new()
        } else {
            (0..n)
                .filter(|&l| !dropped[l])
                .map(|l| config.sliding_layers[l])
                .collect()
        },
        layers: if new_shapes.iter().all(|s| *s == uniform) {
            None
        } else {
            Some(new_shapes.clone())
        },
        ..config.clone()
    };
    new_config.validate()?;
    let weights = Weights {
        embed: model.weights.embed.clone(),
        layers,
        final_norm: model.weights.final_norm.clone(),
        output: model.weights.output.clone(),
        options: LoadOptions {
            embedding: Some(model.weights.options.embedding_format()),
            ..options
        },
        conversions: model.weights.conversions.clone(),
    };
    let kv = |c: &LlamaConfig| edgefit_estimate::kv_bytes_per_token(&c.to_spec(), KvFormat::F32);
    let report = PruneReport {
        importance: plan.importance,
        allocation: plan.allocation,
        params_before: config.params(),
        params_after: new_config.params(),
        kv_f32_bytes_per_token_before: kv(config),
        kv_f32_bytes_per_token_after: kv(&new_config),
        removed,
        dropped_layers: (0..n).filter(|&l| dropped[l]).collect(),
        layers: reports,
        shapes: new_shapes,
        pruning: Pruning {
            all_layers: LayerPrune::default(),
            per_layer,
            drop_layers: (0..n).filter(|&l| dropped[l]).map(|l| l as u32).collect(),
        },
    };
    let mut out = Model::new(new_config, weights);
    out.kernel = model.kernel;
    out.kv_format = model.kv_format;
    Ok((out, report))
}

/// The knobs named as a user sets them.
const RATIO_NAMES: [(&str, &str); 5] = [
    ("heads", "per_layer.heads"),
    ("kv_heads", "per_layer.kv_heads"),
    ("qk_dims", "per_layer.qk_dims"),
    ("v_dims", "per_layer.v_dims"),
    ("mlp", "per_layer.mlp"),
];

fn ratio_values(r: &LayerRatios) -> [f64; 5] {
    [r.heads, r.kv_heads, r.qk_dims, r.v_dims, r.mlp]
}

/// What a model's architecture lets the page and the CLI prune and export, each refusal with
/// the reason [`prune`] or the exporters give (the same checks, run on a probe plan), so a
/// control that would fail is disabled with that reason instead of failing after a click.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PruneLimits {
    /// Why nothing can be pruned (`None`: heads, KV heads, V dims, MLP and layers can).
    pub prune: Option<String>,
    /// Why per-head Q/K dims cannot be pruned.
    pub qk_dims: Option<String>,
    /// Why the model cannot be written as a GGUF or Hugging Face checkpoint.
    pub export: Option<String>,
}

/// [`PruneLimits`] of a model of shape `config`.
pub fn limits(config: &LlamaConfig) -> PruneLimits {
    let prune = no_pruning(config);
    PruneLimits {
        qk_dims: prune.clone().or_else(|| no_qk_dims(config)),
        prune,
        export: crate::export::exportable(config)
            .err()
            .map(|e| e.to_string()),
    }
}

/// Why `config` cannot be pruned at all: partial RoPE.
fn no_pruning(config: &LlamaConfig) -> Option<String> {
    let r = config.rope_dim.filter(|&r| r < config.head_dim)?;
    Some(format!(
        "pruning `{}`: its partial RoPE ({r} of {} dims per head rotated) has no pruned form (the per-layer RoPE pairs assume every dim rotates)",
        config.arch, config.head_dim
    ))
}

/// Why `config`'s per-head Q/K dims cannot be pruned: QK-norm (the per-head RMSNorm averages
/// over the head's dims, so removing some rescales every kept one and the pruned head no
/// longer scores the sum of its kept pairs).
fn no_qk_dims(config: &LlamaConfig) -> Option<String> {
    config.qk_norm.then(|| format!(
        "`{}`'s per-head q/k RMSNorm averages over the head's dims, so removing Q/K dims would change every kept one (heads, KV heads, V dims, MLP and layers can be pruned)",
        config.arch
    ))
}

/// What this architecture cannot have pruned ([`no_pruning`], [`no_qk_dims`]).
fn check_arch(plan: &PrunePlan, config: &LlamaConfig) -> Result<()> {
    if let Some(why) = no_pruning(config) {
        return Err(EngineError::Unsupported(why));
    }
    let Some(why) = no_qk_dims(config) else {
        return Ok(());
    };
    let per_layer = plan.per_layer.iter().flatten().map(|r| r.qk_dims);
    if let Some(v) = std::iter::once(plan.ratios.qk_dims)
        .chain(per_layer)
        .find(|&v| v != 0.0)
    {
        return Err(EngineError::Setting {
            name: "qk_dims",
            value: v.to_string(),
            expected: format!("0: {why}"),
        });
    }
    Ok(())
}

fn check_plan(plan: &PrunePlan, n: usize) -> Result<()> {
    let check = |name: &'static str, v: f64, layer: Option<usize>| -> Result<()> {
        if v.is_finite() && (0.0..1.0).contains(&v) {
            return Ok(());
        }
        Err(EngineError::Setting {
            name,
            value: match layer {
                Some(l) => format!("{v} (layer {l})"),
                None => v.to_string(),
            },
            expected: "a fraction removed in [0, 1)".into(),
        })
    };
    for ((name, _), v) in RATIO_NAMES.iter().zip(ratio_values(&plan.ratios)) {
        check(name, v, None)?;
    }
    if let Some(per) = &plan.per_layer {
        if per.len() != n {
            return Err(EngineError::Setting {
                name: "per_layer",
                value: format!("{} entries", per.len()),
                expected: format!("one entry per layer: {n}"),
            });
        }
        for (l, r) in per.iter().enumerate() {
            for ((_, name), v) in RATIO_NAMES.iter().zip(ratio_values(r)) {
                check(name, v, Some(l))?;
            }
        }
        if plan.allocation == Allocation::Global {
            return Err(EngineError::Setting {
                name: "allocation",
                value: "global".into(),
                expected: "uniform when per-layer ratios are given (they fix each layer's share)"
                    .into(),
            });
        }
    }
    if plan.mlp_multiple == 0 {
        return Err(EngineError::Setting {
            name: "mlp_multiple",
            value: "0".into(),
            expected: "at least 1 (1 = no rounding)".into(),
        });
    }
    let mut explicit = plan.drop_layers.clone();
    explicit.sort_unstable();
    explicit.dedup();
    if let Some(&bad) = explicit.iter().find(|&&l| l >= n) {
        return Err(EngineError::Setting {
            name: "drop_layers",
            value: bad.to_string(),
            expected: format!("layer indices below {n}"),
        });
    }
    if explicit.len() + plan.layers >= n {
        return Err(EngineError::Setting {
            name: "layers",
            value: format!("{} (+ {} listed)", plan.layers, explicit.len()),
            expected: format!("fewer than the model's {n} layers in all: at least one must remain"),
        });
    }
    Ok(())
}

fn check_stats(s: &ActivationStats, c: &LlamaConfig, shapes: &[LayerShape]) -> Result<()> {
    let fits = s.layers.len() == shapes.len()
        && s.layers.iter().zip(shapes).all(|(l, sh)| {
            l.attn_in.len() == c.hidden
                && l.mlp_in.len() == c.hidden
                && l.attn_out.len() == sh.o_width()
                && l.mlp_mid.len() == sh.ffn
        });
    if fits {
        Ok(())
    } else {
        Err(EngineError::Setting {
            name: "calibration",
            value: format!("statistics of {} layers", s.layers.len()),
            expected: "statistics collected on this model (same layers and widths)".into(),
        })
    }
}

/// Units a layer keeps of `n` after removing the fraction `r`: `max(1, round((1 − r) · n))`.
fn keep_count(r: f64, n: usize) -> usize {
    (((1.0 - r) * n as f64).round() as usize).clamp(1, n.max(1))
}

/// `kept` rounded to the nearest multiple of `m` within `[m, full]`; unchanged when nothing is
/// pruned, `m` is 1, or the width is not above one multiple.
fn align(kept: usize, full: usize, m: usize) -> usize {
    if m <= 1 || kept >= full || full <= m {
        return kept;
    }
    (((kept as f64 / m as f64).round() as usize) * m).clamp(m, full)
}

/// Units each layer removes: its own ratio's count, or (global) the same total ranked across
/// layers by score over the layer's mean score, each layer keeping at least one unit.
fn removal_counts(
    scores: &[Vec<f64>],
    works: &[Work],
    ratio: impl Fn(&LayerRatios) -> f64,
    allocation: Allocation,
) -> Vec<usize> {
    let uniform: Vec<usize> = scores
        .iter()
        .zip(works)
        .map(|(s, w)| s.len() - keep_count(ratio(&w.ratios), s.len()))
        .collect();
    if allocation == Allocation::Uniform {
        return uniform;
    }
    let budget: usize = uniform.iter().sum();
    let mut all: Vec<(f64, usize)> = Vec::new();
    for (li, s) in scores.iter().enumerate() {
        let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
        let mut sorted = s.clone();
        sorted.sort_by(f64::total_cmp);
        for &v in sorted.iter().take(s.len().saturating_sub(1)) {
            all.push((if mean > 0.0 { v / mean } else { 0.0 }, li));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut counts = vec![0; scores.len()];
    for &(_, li) in all.iter().take(budget) {
        counts[li] += 1;
    }
    counts
}

/// `units` (parallel to `scores`) without its `remove` lowest-scoring ones (ties: lower index
/// goes first), in their original order.
fn keep_indices(units: &[usize], scores: &[f64], remove: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    let mut gone = vec![false; units.len()];
    for &i in order.iter().take(remove) {
        gone[i] = true;
    }
    units
        .iter()
        .zip(gone)
        .filter(|(_, g)| !g)
        .map(|(&u, _)| u)
        .collect()
}

/// Squared norms of one layer's weights, weighted by calibration statistics when there are
/// any: everything the scores need, so the matrices are read once.
struct LayerNorms {
    /// Per wq / wk row: `Σᵢ w² · aᵢ` (`aᵢ` = attention-input statistic, or 1).
    q_row: Vec<f64>,
    k_row: Vec<f64>,
    /// Per wo column: `Σ w²`, times the attention-output statistic with activations.
    o_out: Vec<f64>,
    /// Per wv row `Σ w²` (magnitude only; with activations the statistic above holds V).
    v_row: Option<Vec<f64>>,
    /// Per MLP channel: its energy (module docs).
    mlp: Vec<f64>,
}

impl LayerNorms {
    fn new(lw: &LayerWeights, shape: &LayerShape, stats: Option<&LayerStats>) -> LayerNorms {
        // Magnitude reads the weights as the block applies them: each input column scaled by
        // its RMSNorm weight (real models' norm weights differ by orders of magnitude).
        let squares = |g: &[f32]| -> Vec<f64> { g.iter().map(|&v| f64::from(v * v)).collect() };
        let attn_in = match stats {
            Some(s) => s.attn_in.clone(),
            None => squares(&lw.attn_norm),
        };
        let o_col = col_energy(&lw.wo);
        let down_col = col_energy(&lw.w_down);
        let (o_out, v_row, mlp) = match stats {
            Some(s) => (
                o_col.iter().zip(&s.attn_out).map(|(w, x)| w * x).collect(),
                None,
                down_col
                    .iter()
                    .zip(&s.mlp_mid)
                    .map(|(w, x)| w * x)
                    .collect(),
            ),
            None => {
                let mlp_in = squares(&lw.ffn_norm);
                let g = row_energy(&lw.w_gate, &mlp_in);
                let u = row_energy(&lw.w_up, &mlp_in);
                let mlp = down_col
                    .iter()
                    .zip(g.iter().zip(&u))
                    .map(|(d, (g, u))| d * g * u)
                    .collect();
                (o_col, Some(row_energy(&lw.wv, &attn_in)), mlp)
            }
        };
        debug_assert_eq!(o_out.len(), shape.o_width());
        LayerNorms {
            q_row: row_energy(&lw.wq, &attn_in),
            k_row: row_energy(&lw.wk, &attn_in),
            o_out,
            v_row,
            mlp,
        }
    }
}

/// Per row: `Σᵢ w[r][i]² · weight[i]`.
fn row_energy(m: &Matrix, weight: &[f64]) -> Vec<f64> {
    let mut buf = vec![0.0f32; m.cols()];
    (0..m.rows())
        .map(|r| {
            m.row(r, &mut buf);
            buf.iter()
                .zip(weight)
                .map(|(&w, a)| f64::from(w) * f64::from(w) * a)
                .sum()
        })
        .collect()
}

/// Per column: `Σ_r w[r][c]²`.
fn col_energy(m: &Matrix) -> Vec<f64> {
    let mut buf = vec![0.0f32; m.cols()];
    let mut acc = vec![0.0f64; m.cols()];
    for r in 0..m.rows() {
        m.row(r, &mut buf);
        for (a, &w) in acc.iter_mut().zip(&buf) {
            *a += f64::from(w) * f64::from(w);
        }
    }
    acc
}

/// `m`'s rows `rows` (each restricted to `cols` if given) as a new f32 matrix.
fn gather(m: &Matrix, rows: &[usize], cols: Option<&[usize]>) -> Matrix {
    let mut buf = vec![0.0f32; m.cols()];
    let width = cols.map_or(m.cols(), <[usize]>::len);
    let mut data = Vec::with_capacity(rows.len() * width);
    for &r in rows {
        m.row(r, &mut buf);
        match cols {
            Some(c) => data.extend(c.iter().map(|&j| buf[j])),
            None => data.extend_from_slice(&buf),
        }
    }
    Matrix::F32 {
        data,
        rows: rows.len(),
        cols: width,
    }
}

/// The entries `idx` of an optional vector.
fn pick(v: &Option<Vec<f32>>, idx: &[usize]) -> Option<Vec<f32>> {
    v.as_ref().map(|v| idx.iter().map(|&i| v[i]).collect())
}

/// One kept layer while its units are chosen: what it keeps so far (indices of the input layer).
struct Work<'a> {
    layer: usize,
    shape: &'a LayerShape,
    norms: &'a LayerNorms,
    ratios: LayerRatios,
    kv: Vec<usize>,
    /// Kept query heads, ascending (so grouped by KV head).
    heads: Vec<usize>,
    /// Kept pair positions within a head (`0..qk_dim/2`).
    pairs: Vec<usize>,
    vdims: Vec<usize>,
    ffn: Vec<usize>,
}

impl<'a> Work<'a> {
    fn new(
        layer: usize,
        shape: &'a LayerShape,
        norms: &'a LayerNorms,
        ratios: LayerRatios,
    ) -> Self {
        Work {
            layer,
            shape,
            norms,
            ratios,
            kv: (0..shape.n_kv_heads).collect(),
            heads: (0..shape.n_heads).collect(),
            pairs: (0..shape.qk_dim / 2).collect(),
            vdims: (0..shape.v_dim).collect(),
            ffn: (0..shape.ffn).collect(),
        }
    }

    fn group(&self) -> usize {
        self.shape.n_heads / self.shape.n_kv_heads
    }

    /// Keeps the query heads of the kept KV heads.
    fn heads_from_kv(&mut self) {
        let g = self.group();
        let kv = &self.kv;
        self.heads.retain(|h| kv.contains(&(h / g)));
    }

    /// Energy of the path through V dim `d` of query head `h`.
    fn path(&self, h: usize, d: usize) -> f64 {
        let dv = self.shape.v_dim;
        let o = self.norms.o_out[h * dv + d];
        match &self.norms.v_row {
            Some(v) => o * v[(h / self.group()) * dv + d],
            None => o,
        }
    }

    fn head_energy(&self, h: usize) -> f64 {
        self.vdims.iter().map(|&d| self.path(h, d)).sum()
    }

    /// Per kept KV head: its query heads' energy.
    fn kv_scores(&self) -> Vec<f64> {
        let g = self.group();
        self.kv
            .iter()
            .map(|&k| {
                (k * g..(k + 1) * g)
                    .map(|h| self.head_energy(h))
                    .sum::<f64>()
                    .sqrt()
            })
            .collect()
    }

    /// Groups of one: per kept KV head (= its query head). Otherwise per removal slot `k`: the
    /// sum over groups of each group's `k`-th weakest head.
    fn head_unit_scores(&self) -> Vec<f64> {
        let g = self.group();
        if g == 1 {
            return self.kv_scores();
        }
        let mut slots = vec![0.0; g];
        for &k in &self.kv {
            let mut e: Vec<f64> = (k * g..(k + 1) * g)
                .map(|h| self.head_energy(h).sqrt())
                .collect();
            e.sort_by(f64::total_cmp);
            for (s, v) in slots.iter_mut().zip(e) {
                *s += v;
            }
        }
        slots
    }

    /// Removes the `c` weakest query heads of every kept group.
    fn remove_weakest_per_group(&mut self, c: usize) {
        let g = self.group();
        let mut heads = Vec::new();
        for &k in &self.kv {
            let group: Vec<usize> = (k * g..(k + 1) * g).collect();
            let e: Vec<f64> = group.iter().map(|&h| self.head_energy(h)).collect();
            heads.extend(keep_indices(&group, &e, c));
        }
        self.heads = heads;
    }

    /// Per kept pair position: Σ over kept heads of `‖q pair‖² · ‖k pair‖²`.
    fn pair_scores(&self) -> Vec<f64> {
        let (dk, g) = (self.shape.qk_dim, self.group());
        let (q, k) = (&self.norms.q_row, &self.norms.k_row);
        self.pairs
            .iter()
            .map(|&p| {
                self.heads
                    .iter()
                    .map(|&h| {
                        let (qr, kr) = (h * dk + 2 * p, (h / g) * dk + 2 * p);
                        (q[qr] + q[qr + 1]) * (k[kr] + k[kr + 1])
                    })
                    .sum::<f64>()
                    .sqrt()
            })
            .collect()
    }

    fn vdim_scores(&self) -> Vec<f64> {
        self.vdims
            .iter()
            .map(|&d| {
                self.heads
                    .iter()
                    .map(|&h| self.path(h, d))
                    .sum::<f64>()
                    .sqrt()
            })
            .collect()
    }

    fn mlp_scores(&self) -> Vec<f64> {
        self.ffn.iter().map(|&j| self.norms.mlp[j].sqrt()).collect()
    }

    /// The layer's weights restricted to what is kept, and its new shape.
    fn build(&self, lw: &LayerWeights) -> (LayerWeights, LayerShape) {
        let s = self.shape;
        let (dk, dv) = (s.qk_dim, s.v_dim);
        let qk_rows = |heads: &[usize]| -> Vec<usize> {
            heads
                .iter()
                .flat_map(|&h| {
                    self.pairs
                        .iter()
                        .flat_map(move |&p| [h * dk + 2 * p, h * dk + 2 * p + 1])
                })
                .collect()
        };
        let v_idx = |heads: &[usize]| -> Vec<usize> {
            heads
                .iter()
                .flat_map(|&h| self.vdims.iter().map(move |&d| h * dv + d))
                .collect()
        };
        let all_hidden: Vec<usize> = (0..lw.wo.rows()).collect();
        let layer = LayerWeights {
            attn_norm: lw.attn_norm.clone(),
            wq: gather(&lw.wq, &qk_rows(&self.heads), None),
            wk: gather(&lw.wk, &qk_rows(&self.kv), None),
            wv: gather(&lw.wv, &v_idx(&self.kv), None),
            wo: gather(&lw.wo, &all_hidden, Some(&v_idx(&self.heads))),
            ffn_norm: lw.ffn_norm.clone(),
            w_gate: gather(&lw.w_gate, &self.ffn, None),
            w_up: gather(&lw.w_up, &self.ffn, None),
            w_down: gather(&lw.w_down, &all_hidden, Some(&self.ffn)),
            // Biases follow their matrix's rows; q/k norms are per head (shared by every
            // head) and only lose entries with Q/K dims, which `check_arch` refuses for them.
            bq: pick(&lw.bq, &qk_rows(&self.heads)),
            bk: pick(&lw.bk, &qk_rows(&self.kv)),
            bv: pick(&lw.bv, &v_idx(&self.kv)),
            q_norm: pick(&lw.q_norm, &qk_rows(&[0])),
            k_norm: pick(&lw.k_norm, &qk_rows(&[0])),
            // Hidden-wide: pruning never changes the hidden size.
            post_attn_norm: lw.post_attn_norm.clone(),
            post_ffn_norm: lw.post_ffn_norm.clone(),
        };
        let shape = LayerShape {
            n_heads: self.heads.len(),
            n_kv_heads: self.kv.len(),
            qk_dim: 2 * self.pairs.len(),
            v_dim: self.vdims.len(),
            ffn: self.ffn.len(),
            rope_pairs: self.pairs.iter().map(|&p| s.rope_pairs[p]).collect(),
        };
        (layer, shape)
    }

    fn report(&self) -> LayerReport {
        let missing = |kept: &[usize], n: usize| -> Vec<usize> {
            (0..n).filter(|i| !kept.contains(i)).collect()
        };
        let s = self.shape;
        LayerReport {
            layer: self.layer,
            removed_kv_heads: missing(&self.kv, s.n_kv_heads),
            removed_query_heads: missing(&self.heads, s.n_heads),
            removed_qk_pairs: missing(&self.pairs, s.qk_dim / 2)
                .into_iter()
                .map(|p| s.rope_pairs[p])
                .collect(),
            removed_v_dims: missing(&self.vdims, s.v_dim),
            removed_mlp_channels: missing(&self.ffn, s.ffn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{gguf_bytes, SyntheticDType, FFN, HEAD_DIM, HIDDEN, KV_HEADS, LAYERS};

    const TOKENS: [u32; 7] = [5, 77, 140, 200, 33, 9, 250];

    fn load(dtype: SyntheticDType, weights: WeightsFormat) -> Model {
        let bytes = gguf_bytes(7, dtype).unwrap();
        let options = LoadOptions {
            weights,
            ..Default::default()
        };
        crate::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
            .unwrap()
            .0
    }

    fn synthetic() -> Model {
        load(SyntheticDType::F32, WeightsFormat::F32)
    }

    /// The synthetic model with its f32 layer weights edited.
    fn edited(edit: impl Fn(usize, &mut LayerWeights)) -> Model {
        let m = synthetic();
        let mut w = m.weights.clone();
        for (l, lw) in w.layers.iter_mut().enumerate() {
            edit(l, lw);
        }
        Model::new(m.config.clone(), w)
    }

    fn data(m: &mut Matrix) -> (&mut Vec<f32>, usize) {
        match m {
            Matrix::F32 { data, cols, .. } => (data, *cols),
            _ => panic!("tests edit f32 weights"),
        }
    }

    fn zero_col(m: &mut Matrix, c: usize) {
        let (d, cols) = data(m);
        for row in d.chunks_exact_mut(cols) {
            row[c] = 0.0;
        }
    }

    fn zero_row(m: &mut Matrix, r: usize) {
        let (d, cols) = data(m);
        d[r * cols..(r + 1) * cols].fill(0.0);
    }

    fn logits(m: &Model) -> Vec<f32> {
        let mut cache = m.new_cache(32);
        m.forward(&TOKENS, &mut cache, Logits::All).unwrap()
    }

    fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        let scale = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
            / scale
    }

    fn stats_of(m: &Model) -> ActivationStats {
        let tokens: Vec<u32> = (0..96).map(|i| (i * 37 % 250 + 3) as u32).collect();
        collect_stats(m, &tokens, 32).unwrap()
    }

    /// Prunes `model` with `plan` under both importance methods and checks each result: valid,
    /// the same logits (the removed units contributed exactly nothing), `removed` fewer params.
    /// Summation order changes (fewer terms, other SIMD lanes) cost a few ulp: 1e-5 relative.
    fn prunes_exactly(model: &Model, plan: PrunePlan, removed: u64) -> Vec<PruneReport> {
        let want = logits(model);
        let stats = stats_of(model);
        let mut reports = Vec::new();
        for importance in [Importance::Magnitude, Importance::Activation] {
            let plan = PrunePlan {
                importance,
                ..plan.clone()
            };
            let (p, r) = prune(model, &plan, Some(&stats)).unwrap();
            p.config.validate().unwrap();
            assert_eq!(p.weights.options.weights, WeightsFormat::F32);
            assert_eq!(
                model.config.params() - p.config.params(),
                removed,
                "{importance:?}: {r:?}"
            );
            assert_eq!(r.params_after, p.config.params());
            assert_eq!(p.config.to_spec().params().total, p.config.params());
            let d = rel_diff(&want, &logits(&p));
            assert!(d < 1e-5, "{importance:?}: relative logit difference {d}");
            reports.push(r);
        }
        reports
    }

    const H: u64 = HIDDEN as u64;
    const D: u64 = HEAD_DIM as u64;

    #[test]
    fn zeroed_mlp_channels_are_pruned_exactly() {
        let gone = [3, 17, 18, 40, 41, 42, 60, 95];
        let model = edited(|_, lw| gone.iter().for_each(|&j| zero_col(&mut lw.w_down, j)));
        // 96 channels, remove 8: keep round(96 · (1 − 1/12)) = 88.
        let plan = PrunePlan {
            ratios: LayerRatios {
                mlp: 1.0 / 12.0,
                ..Default::default()
            },
            ..Default::default()
        };
        for r in prunes_exactly(&model, plan, LAYERS as u64 * 8 * 3 * H) {
            for l in &r.layers {
                assert_eq!(l.removed_mlp_channels, gone);
            }
            assert_eq!(r.shapes[0].ffn, FFN - 8);
            assert_eq!(
                r.kv_f32_bytes_per_token_after,
                r.kv_f32_bytes_per_token_before
            );
        }
    }

    #[test]
    fn zeroed_query_heads_are_pruned_exactly_one_per_group() {
        // Heads 0,1 read KV head 0; heads 2,3 KV head 1. Zero head 1 and head 2.
        let model = edited(|_, lw| {
            for h in [1, 2] {
                (0..HEAD_DIM).for_each(|d| zero_col(&mut lw.wo, h * HEAD_DIM + d));
            }
        });
        let plan = PrunePlan {
            ratios: LayerRatios {
                heads: 0.5,
                ..Default::default()
            },
            ..Default::default()
        };
        // Per layer: two heads' q rows and o columns.
        for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * 2 * D * H) {
            for l in &r.layers {
                assert_eq!(l.removed_query_heads, [1, 2]);
                assert!(l.removed_kv_heads.is_empty());
            }
            assert_eq!((r.shapes[1].n_heads, r.shapes[1].n_kv_heads), (2, 2));
        }
    }

    #[test]
    fn zeroed_kv_group_is_pruned_exactly() {
        let model = edited(|_, lw| {
            for c in 2 * HEAD_DIM..4 * HEAD_DIM {
                zero_col(&mut lw.wo, c);
            }
        });
        let plan = PrunePlan {
            ratios: LayerRatios {
                kv_heads: 0.5,
                ..Default::default()
            },
            ..Default::default()
        };
        // Per layer: 2 query heads (q rows, o columns) and one KV head (k and v rows).
        let removed = LAYERS as u64 * (2 * 2 + 2) * D * H;
        for r in prunes_exactly(&model, plan, removed) {
            for l in &r.layers {
                assert_eq!(l.removed_kv_heads, [1]);
                assert_eq!(l.removed_query_heads, [2, 3]);
            }
            assert_eq!(
                r.kv_f32_bytes_per_token_after * 2,
                r.kv_f32_bytes_per_token_before
            );
        }
    }

    #[test]
    fn zeroed_rope_pairs_are_pruned_exactly() {
        let pairs = [1usize, 5];
        let model = edited(|_, lw| {
            for h in 0..lw.wq.rows() / HEAD_DIM {
                for &p in &pairs {
                    zero_row(&mut lw.wq, h * HEAD_DIM + 2 * p);
                    zero_row(&mut lw.wq, h * HEAD_DIM + 2 * p + 1);
                }
            }
        });
        // 8 pairs, keep round(8 · 0.75) = 6.
        let plan = PrunePlan {
            ratios: LayerRatios {
                qk_dims: 0.25,
                ..Default::default()
            },
            ..Default::default()
        };
        let heads = (crate::synthetic::HEADS + KV_HEADS) as u64;
        for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * 2 * heads * H) {
            for (l, s) in r.layers.iter().zip(&r.shapes) {
                assert_eq!(l.removed_qk_pairs, [1, 5]);
                assert_eq!(s.rope_pairs, [0, 2, 3, 4, 6, 7]);
                assert_eq!(s.qk_dim, 12);
            }
            // K shrinks by 4 of 32 dims per KV head: f32 K+V bytes 2·(16+16)·4 → 2·(12+16)·4.
            assert_eq!(r.kv_f32_bytes_per_token_before, LAYERS as u64 * 2 * 32 * 4);
            assert_eq!(r.kv_f32_bytes_per_token_after, LAYERS as u64 * 2 * 28 * 4);
        }
    }

    #[test]
    fn zeroed_v_dims_are_pruned_exactly() {
        let dims = [3usize, 10];
        let model = edited(|_, lw| {
            for h in 0..lw.wo.cols() / HEAD_DIM {
                dims.iter()
                    .for_each(|&d| zero_col(&mut lw.wo, h * HEAD_DIM + d));
            }
        });
        let plan = PrunePlan {
            ratios: LayerRatios {
                v_dims: 0.125,
                ..Default::default()
            },
            ..Default::default()
        };
        let heads = (crate::synthetic::HEADS + KV_HEADS) as u64;
        for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * heads * H) {
            for (l, s) in r.layers.iter().zip(&r.shapes) {
                assert_eq!(l.removed_v_dims, dims);
                assert_eq!(s.v_dim, 14);
            }
            assert_eq!(r.kv_f32_bytes_per_token_after, LAYERS as u64 * 2 * 30 * 4);
        }
    }

    #[test]
    fn identity_block_is_dropped_exactly() {
        let model = edited(|l, lw| {
            if l == 0 {
                for m in [&mut lw.wo, &mut lw.w_down] {
                    data(m).0.fill(0.0);
                }
            }
        });
        let plan = PrunePlan {
            layers: 1,
            ..Default::default()
        };
        let block = model.config.uniform_layer().params(HIDDEN);
        for r in prunes_exactly(&model, plan.clone(), block) {
            assert_eq!(r.dropped_layers, [0]);
            assert_eq!(r.removed.layers, 1);
            assert_eq!(r.layers.len(), 1);
            assert_eq!(r.layers[0].layer, 1);
        }
        // Block influence finds the identity wherever it is; magnitude goes by position (the
        // layers before the last one).
        let model = edited(|l, lw| {
            if l == 1 {
                for m in [&mut lw.wo, &mut lw.w_down] {
                    data(m).0.fill(0.0);
                }
            }
        });
        let stats = stats_of(&model);
        assert!(stats.layers[1].block_influence.abs() < 1e-12);
        let act = PrunePlan {
            importance: Importance::Activation,
            ..plan.clone()
        };
        let (p, r) = prune(&model, &act, Some(&stats)).unwrap();
        assert_eq!(r.dropped_layers, [1]);
        assert!(rel_diff(&logits(&model), &logits(&p)) < 1e-5);
        let (_, r) = prune(&model, &plan, None).unwrap();
        assert_eq!(r.dropped_layers, [0]);
    }

    #[test]
    fn every_structure_at_once_is_exact_on_zeroed_units() {
        // KV head 1's group, head 1 of group 0, pair 4, V dim 7, channels 0..12, layer 0.
        let model = edited(|l, lw| {
            if l == 0 {
                data(&mut lw.wo).0.fill(0.0);
                data(&mut lw.w_down).0.fill(0.0);
            }
            for c in HEAD_DIM..4 * HEAD_DIM {
                zero_col(&mut lw.wo, c);
            }
            zero_col(&mut lw.wo, 7);
            zero_row(&mut lw.wq, 8);
            zero_row(&mut lw.wq, 9);
            (0..12).for_each(|j| zero_col(&mut lw.w_down, j));
        });
        let plan = PrunePlan {
            ratios: LayerRatios {
                heads: 0.5,
                kv_heads: 0.5,
                qk_dims: 1.0 / 8.0,
                v_dims: 1.0 / 16.0,
                mlp: 0.125,
            },
            layers: 1,
            ..Default::default()
        };
        // Left: one layer with 1 head, 1 KV head, qk 14, v 15, ffn 84.
        let kept = LayerShape {
            n_heads: 1,
            n_kv_heads: 1,
            qk_dim: 14,
            v_dim: 15,
            ffn: 84,
            rope_pairs: vec![0, 1, 2, 3, 5, 6, 7],
        };
        let removed = model.config.params()
            - (model.config.params() - 2 * model.config.uniform_layer().params(HIDDEN)
                + kept.params(HIDDEN));
        for r in prunes_exactly(&model, plan, removed) {
            assert_eq!(r.shapes, std::slice::from_ref(&kept));
            assert_eq!(r.dropped_layers, [0]);
        }
    }

    /// Deterministic ratios in [0, 0.9).
    fn ratios(seed: u64) -> LayerRatios {
        let v = edgefit_kernels::pseudo_random(seed, 5);
        let r = |i: usize| f64::from(v[i].abs()) * 0.9;
        LayerRatios {
            heads: r(0),
            kv_heads: r(1),
            qk_dims: r(2),
            v_dims: r(3),
            mlp: r(4),
        }
    }

    fn only(which: usize, r: LayerRatios) -> LayerRatios {
        let v = ratio_values(&r);
        let pick = |i: usize| if i == which { v[i] } else { 0.0 };
        LayerRatios {
            heads: pick(0),
            kv_heads: pick(1),
            qk_dims: pick(2),
            v_dims: pick(3),
            mlp: pick(4),
        }
    }

    /// The result validates and runs, its params equal the estimator's count, and the
    /// estimator reproduces its shape from the report's `pruning`.
    fn check_result(model: &Model, p: &Model, r: &PruneReport) {
        p.config.validate().unwrap();
        let spec = p.config.to_spec();
        assert_eq!(spec.params().total, p.config.params());
        assert_eq!(r.params_after, p.config.params());
        let kv = edgefit_estimate::kv_bytes_per_token(&spec, KvFormat::F32);
        let by_hand: usize = p
            .config
            .layer_shapes()
            .iter()
            .map(|l| 4 * l.n_kv_heads * (l.qk_dim + l.v_dim))
            .sum();
        assert_eq!(kv, by_hand as u64);
        assert_eq!(r.kv_f32_bytes_per_token_after, kv);
        let again = model.config.to_spec().pruned(&r.pruning).unwrap();
        assert_eq!(again.layers, spec.layers);
        let out = logits(p);
        assert_eq!(out.len(), TOKENS.len() * p.config.vocab);
        assert!(out.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn random_plans_validate_run_and_match_the_estimator() {
        let model = synthetic();
        let stats = stats_of(&model);
        let spec = model.config.to_spec();
        let before_kv = edgefit_estimate::kv_bytes_per_token(&spec, KvFormat::F32);
        for seed in 1..=6u64 {
            let all = ratios(seed);
            let mut cases: Vec<LayerRatios> = (0..5).map(|i| only(i, all)).collect();
            cases.push(all);
            cases.push(LayerRatios {
                kv_heads: 0.0,
                ..all
            });
            for (ci, r) in cases.into_iter().enumerate() {
                for importance in [Importance::Magnitude, Importance::Activation] {
                    for allocation in [Allocation::Uniform, Allocation::Global] {
                        let plan = PrunePlan {
                            ratios: r,
                            layers: (seed as usize + ci) % 2,
                            importance,
                            allocation,
                            mlp_multiple: if seed % 2 == 0 { 32 } else { 1 },
                            ..Default::default()
                        };
                        let (p, rep) = prune(&model, &plan, Some(&stats)).unwrap();
                        check_result(&model, &p, &rep);
                        // Heads alone keep every KV head; KV heads and dims shrink the cache.
                        let kv = rep.kv_f32_bytes_per_token_after;
                        if ci == 0 {
                            assert_eq!(
                                kv * model.config.n_layers as u64,
                                before_kv * p.config.n_layers as u64
                            );
                        }
                        if allocation == Allocation::Uniform
                            && plan.mlp_multiple == 1
                            && r.kv_heads == 0.0
                        {
                            // Exactly the estimator's rounding of the same ratios.
                            let est = spec
                                .pruned(
                                    &edgefit_estimate::Pruning::from_ratios(
                                        &spec,
                                        &edgefit_estimate::PruneRatios {
                                            heads: r.heads,
                                            qk_dims: r.qk_dims,
                                            v_dims: r.v_dims,
                                            mlp: r.mlp,
                                            layers: plan.layers as u32,
                                        },
                                    )
                                    .unwrap(),
                                )
                                .unwrap();
                            assert_eq!(est.layers, p.config.to_spec().layers, "{plan:?}");
                        }
                        if plan.mlp_multiple == 32 {
                            assert!(p.config.layer_shapes().iter().all(|l| l.ffn % 32 == 0));
                        }
                        // Global allocation removes the uniform totals.
                        if allocation == Allocation::Global && plan.layers == 0 {
                            let uni = PrunePlan {
                                allocation: Allocation::Uniform,
                                mlp_multiple: 1,
                                ..plan.clone()
                            };
                            let (_, u) = prune(&model, &uni, Some(&stats)).unwrap();
                            assert_eq!(u.removed.kv_heads, rep.removed.kv_heads);
                            assert_eq!(u.removed.qk_dims, rep.removed.qk_dims);
                            assert_eq!(u.removed.v_dims, rep.removed.v_dims);
                            if plan.mlp_multiple == 1 {
                                assert_eq!(u.removed.mlp_channels, rep.removed.mlp_channels);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn quantized_input_is_pruned_in_f32_and_per_layer_ratios_apply() {
        let model = load(SyntheticDType::Q4_0, WeightsFormat::W4g32);
        let per = vec![
            LayerRatios {
                mlp: 0.5,
                v_dims: 0.25,
                ..Default::default()
            },
            LayerRatios {
                heads: 0.5,
                qk_dims: 0.5,
                ..Default::default()
            },
        ];
        let plan = PrunePlan {
            per_layer: Some(per),
            ..Default::default()
        };
        let (p, r) = prune(&model, &plan, None).unwrap();
        check_result(&model, &p, &r);
        assert_eq!(p.weights.options.weights, WeightsFormat::F32);
        assert_eq!(p.weights.options.embedding_format(), WeightsFormat::Q8_0);
        assert!(p.weights.layers[0].wq.format_name() == "f32");
        let s = &r.shapes;
        assert_eq!((s[0].ffn, s[0].v_dim, s[0].n_heads), (48, 12, 4));
        assert_eq!((s[1].ffn, s[1].qk_dim, s[1].n_heads), (96, 8, 2));
    }

    #[test]
    fn global_allocation_takes_from_the_layer_with_weak_units() {
        // Layer 0: 48 channels 1000× weaker than the rest; layer 1 uniform.
        let model = edited(|l, lw| {
            if l == 0 {
                let (d, cols) = data(&mut lw.w_down);
                for row in d.chunks_exact_mut(cols) {
                    row[..48].iter_mut().for_each(|v| *v *= 1e-3);
                }
            }
        });
        let plan = |allocation| PrunePlan {
            ratios: LayerRatios {
                mlp: 0.25,
                ..Default::default()
            },
            allocation,
            ..Default::default()
        };
        let (_, u) = prune(&model, &plan(Allocation::Uniform), None).unwrap();
        assert_eq!((u.shapes[0].ffn, u.shapes[1].ffn), (72, 72));
        let (p, g) = prune(&model, &plan(Allocation::Global), None).unwrap();
        assert_eq!((g.shapes[0].ffn, g.shapes[1].ffn), (48, 96));
        assert_eq!(
            g.layers[0].removed_mlp_channels,
            (0..48).collect::<Vec<_>>()
        );
        check_result(&model, &p, &g);
    }

    #[test]
    fn activation_importance_sees_a_channel_that_never_fires() {
        // Hidden dims 0..8 stay zero up to layer 0's MLP (zero embedding columns, zero wo rows);
        // channel 5 reads only those dims, with large weights: magnitude keeps it, activation
        // finds it silent.
        let j = 5;
        let m = synthetic();
        let mut w = m.weights.clone();
        (0..8).for_each(|c| zero_col(&mut w.embed, c));
        let lw = &mut w.layers[0];
        (0..8).for_each(|r| zero_row(&mut lw.wo, r));
        for m in [&mut lw.w_gate, &mut lw.w_up] {
            let (d, cols) = data(m);
            let row = &mut d[j * cols..(j + 1) * cols];
            row.fill(0.0);
            row[..8].fill(3.0);
        }
        let (d, cols) = data(&mut lw.w_down);
        d.chunks_exact_mut(cols).for_each(|r| r[j] = 2.0);
        let model = Model::new(m.config.clone(), w);
        let stats = stats_of(&model);
        assert_eq!(stats.layers[0].mlp_mid[j], 0.0);
        let plan = |importance| PrunePlan {
            ratios: LayerRatios {
                mlp: 0.01, // one channel of 96
                ..Default::default()
            },
            importance,
            ..Default::default()
        };
        let (_, mag) = prune(&model, &plan(Importance::Magnitude), Some(&stats)).unwrap();
        let (_, act) = prune(&model, &plan(Importance::Activation), Some(&stats)).unwrap();
        assert_eq!(act.layers[0].removed_mlp_channels, [j]);
        assert_eq!(mag.layers[0].removed_mlp_channels.len(), 1);
        assert_ne!(mag.layers[0].removed_mlp_channels, [j]);
    }

    #[test]
    fn stats_have_the_model_shape_and_bad_calibration_is_refused() {
        let model = synthetic();
        let s = stats_of(&model);
        assert_eq!((s.tokens, s.windows, s.layers.len()), (96, 3, LAYERS));
        for l in &s.layers {
            assert_eq!(l.attn_out.len(), model.config.q_dim());
            assert_eq!(l.mlp_mid.len(), FFN);
            assert!(l.attn_in.iter().all(|&v| v > 0.0));
            assert!(l.block_influence > 0.0 && l.block_influence < 2.0);
        }
        for (tokens, window, name) in [
            (&[][..], 8, "calibration"),
            (&[1, 2][..], 0, "window"),
            (&[1, 2][..], 10_000, "window"),
        ] {
            match collect_stats(&model, tokens, window) {
                Err(EngineError::Setting { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{other:?}"),
            }
        }
        assert!(collect_stats(&model, &[100_000], 8).is_err());
    }

    #[test]
    fn bad_plans_are_refused_naming_the_knob() {
        let model = synthetic();
        let stats = stats_of(&model);
        let r = |f: fn(&mut LayerRatios)| {
            let mut r = LayerRatios::default();
            f(&mut r);
            r
        };
        let cases: Vec<(PrunePlan, &str)> = vec![
            (
                PrunePlan {
                    ratios: r(|r| r.heads = f64::NAN),
                    ..Default::default()
                },
                "heads",
            ),
            (
                PrunePlan {
                    ratios: r(|r| r.mlp = 1.0),
                    ..Default::default()
                },
                "mlp",
            ),
            (
                PrunePlan {
                    ratios: r(|r| r.qk_dims = -0.1),
                    ..Default::default()
                },
                "qk_dims",
            ),
            (
                PrunePlan {
                    ratios: r(|r| r.v_dims = f64::INFINITY),
                    ..Default::default()
                },
                "v_dims",
            ),
            (
                PrunePlan {
                    layers: 2,
                    ..Default::default()
                },
                "layers",
            ),
            (
                PrunePlan {
                    layers: 1,
                    drop_layers: vec![1],
                    ..Default::default()
                },
                "layers",
            ),
            (
                PrunePlan {
                    drop_layers: vec![5],
                    ..Default::default()
                },
                "drop_layers",
            ),
            (
                PrunePlan {
                    per_layer: Some(vec![LayerRatios::default()]),
                    ..Default::default()
                },
                "per_layer",
            ),
            (
                PrunePlan {
                    per_layer: Some(vec![LayerRatios::default(), r(|r| r.kv_heads = 1.5)]),
                    ..Default::default()
                },
                "per_layer.kv_heads",
            ),
            (
                PrunePlan {
                    per_layer: Some(vec![LayerRatios::default(); 2]),
                    allocation: Allocation::Global,
                    ..Default::default()
                },
                "allocation",
            ),
            (
                PrunePlan {
                    mlp_multiple: 0,
                    ..Default::default()
                },
                "mlp_multiple",
            ),
        ];
        for (plan, knob) in cases {
            match prune(&model, &plan, Some(&stats)) {
                Err(EngineError::Setting { name, .. }) => assert_eq!(name, knob, "{plan:?}"),
                Err(e) => panic!("{plan:?}: {e}"),
                Ok(_) => panic!("{plan:?} accepted"),
            }
        }
        // Activation needs statistics of this model.
        let act = PrunePlan {
            importance: Importance::Activation,
            ..Default::default()
        };
        let err = prune(&model, &act, None).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("calibration")));
        let (small, _) = prune(
            &model,
            &PrunePlan {
                ratios: r(|r| r.mlp = 0.5),
                ..Default::default()
            },
            None,
        )
        .unwrap();
        assert!(matches!(
            prune(&small, &act, Some(&stats)),
            Err(EngineError::Setting {
                name: "calibration",
                ..
            })
        ));
        // Parsing the CLI's words.
        assert_eq!(
            "activation".parse::<Importance>().unwrap(),
            Importance::Activation
        );
        assert!("wanda".parse::<Importance>().is_err());
        assert_eq!("global".parse::<Allocation>().unwrap(), Allocation::Global);
        let plan: PrunePlan = serde_json::from_str(
            r#"{"ratios": {"mlp": 0.3}, "layers": 1, "importance": "activation"}"#,
        )
        .unwrap();
        assert_eq!(plan.mlp_multiple, 1);
        assert!(serde_json::from_str::<PrunePlan>(r#"{"ratio": {}}"#).is_err());
    }

    #[test]
    fn nothing_pruned_is_the_same_model() {
        let model = synthetic();
        let (p, r) = prune(&model, &PrunePlan::default(), None).unwrap();
        assert_eq!(p.config, model.config);
        assert_eq!(r.params_before, r.params_after);
        assert_eq!(logits(&p), logits(&model));
    }
}
