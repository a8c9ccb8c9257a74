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

mod allocate;
mod plan;
mod score;
mod stats;
mod surgery;
#[cfg(test)]
mod tests;
mod work;

use std::collections::BTreeMap;
use std::str::FromStr;

use edgefit_estimate::{KvFormat, LayerPrune, Pruning};
use serde::{Deserialize, Serialize};

use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::model::Model;
use crate::weights::{LoadOptions, Weights, WeightsFormat};

use allocate::{align, keep_indices, removal_counts};
use plan::{check_arch, check_plan, check_stats};
pub use plan::{limits, PruneLimits};
use score::LayerNorms;
pub use stats::{collect_stats, merge_stats, ActivationStats, Calibration, LayerStats};
use work::Work;

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
    // Each kept layer's ratio for one structure.
    let ratios_of = |works: &[Work], f: fn(&LayerRatios) -> f64| -> Vec<f64> {
        works.iter().map(|w| f(&w.ratios)).collect()
    };

    // 2. KV heads, with their query groups.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::kv_scores).collect();
    let counts = removal_counts(&scores, &ratios_of(&works, |r| r.kv_heads), alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.kv = keep_indices(&w.kv, s, c);
        w.heads_from_kv();
    }

    // 3. Query heads: per group, or with their KV head when groups have one head.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::head_unit_scores).collect();
    let counts = removal_counts(&scores, &ratios_of(&works, |r| r.heads), alloc);
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
    let counts = removal_counts(&scores, &ratios_of(&works, |r| r.qk_dims), alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.pairs = keep_indices(&w.pairs, s, c);
    }

    // 5. V dims.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::vdim_scores).collect();
    let counts = removal_counts(&scores, &ratios_of(&works, |r| r.v_dims), alloc);
    for ((w, s), c) in works.iter_mut().zip(&scores).zip(counts) {
        w.vdims = keep_indices(&w.vdims, s, c);
    }

    // 6. MLP channels, widths optionally aligned.
    let scores: Vec<Vec<f64>> = works.iter().map(Work::mlp_scores).collect();
    let counts = removal_counts(&scores, &ratios_of(&works, |r| r.mlp), alloc);
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
