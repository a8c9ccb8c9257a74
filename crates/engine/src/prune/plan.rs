//! Checking a [`PrunePlan`] before anything is pruned: its ratios and layer counts, what the
//! architecture allows ([`limits`]), and calibration statistics of the right shape.

use serde::Serialize;

use super::{ActivationStats, Allocation, LayerRatios, PrunePlan};
use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};

/// The knobs named as a user sets them.
pub(super) const RATIO_NAMES: [(&str, &str); 5] = [
    ("heads", "per_layer.heads"),
    ("kv_heads", "per_layer.kv_heads"),
    ("qk_dims", "per_layer.qk_dims"),
    ("v_dims", "per_layer.v_dims"),
    ("mlp", "per_layer.mlp"),
];

pub(super) fn ratio_values(r: &LayerRatios) -> [f64; 5] {
    [r.heads, r.kv_heads, r.qk_dims, r.v_dims, r.mlp]
}

/// What a model's architecture lets the page and the CLI prune and export, each refusal with
/// the reason [`prune`](super::prune) or the exporters give (the same checks, run on a probe
/// plan), so a control that would fail is disabled with that reason instead of failing after a
/// click.
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
pub(super) fn no_pruning(config: &LlamaConfig) -> Option<String> {
    let r = config.rope_dim.filter(|&r| r < config.head_dim)?;
    Some(format!(
        "pruning `{}`: its partial RoPE ({r} of {} dims per head rotated) has no pruned form (the per-layer RoPE pairs assume every dim rotates)",
        config.arch, config.head_dim
    ))
}

/// Why `config`'s per-head Q/K dims cannot be pruned: QK-norm (the per-head RMSNorm averages
/// over the head's dims, so removing some rescales every kept one and the pruned head no
/// longer scores the sum of its kept pairs).
pub(super) fn no_qk_dims(config: &LlamaConfig) -> Option<String> {
    config.qk_norm.then(|| format!(
        "`{}`'s per-head q/k RMSNorm averages over the head's dims, so removing Q/K dims would change every kept one (heads, KV heads, V dims, MLP and layers can be pruned)",
        config.arch
    ))
}

/// What this architecture cannot have pruned ([`no_pruning`], [`no_qk_dims`]).
pub(super) fn check_arch(plan: &PrunePlan, config: &LlamaConfig) -> Result<()> {
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

pub(super) fn check_plan(plan: &PrunePlan, n: usize) -> Result<()> {
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

pub(super) fn check_stats(
    s: &ActivationStats,
    c: &LlamaConfig,
    shapes: &[LayerShape],
) -> Result<()> {
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
