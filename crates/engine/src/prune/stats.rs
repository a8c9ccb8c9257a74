//! Calibration statistics: what [`Importance::Activation`](super::Importance::Activation) and
//! layer dropping by block influence read, collected over calibration tokens
//! ([`collect_stats`]).

use edgefit_estimate::KvFormat;
use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::model::{Logits, Model, ProbePoint};
use crate::ops::cosine;

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

/// A calibration run a few windows at a time, so that a caller which must stay responsive (the
/// page's worker) reports progress between pieces: each [`step`](Self::step) collects the
/// statistics of the next windows ([`collect_stats`]) and merges them into the ones so far
/// ([`merge_stats`]); once [`done`](Self::done), [`stats`](Self::stats) equals one
/// [`collect_stats`] over all the tokens (sums regrouped, equal to rounding).
#[derive(Debug, Clone)]
pub struct Calibration {
    tokens: Vec<u32>,
    window: usize,
    /// Tokens run so far.
    next: usize,
    stats: Option<ActivationStats>,
}

impl Calibration {
    /// A calibration of `model` over `tokens` in windows of `window` tokens, nothing run yet.
    /// No tokens, or a window of 0 or longer than the model's context, is an error.
    pub fn new(model: &Model, tokens: Vec<u32>, window: usize) -> Result<Calibration> {
        let context = model.config.context_length;
        if tokens.is_empty() {
            return Err(EngineError::Setting {
                name: "calibration",
                value: "no tokens".into(),
                expected: "at least one calibration token".into(),
            });
        }
        if window == 0 || window > context {
            return Err(EngineError::Setting {
                name: "window",
                value: window.to_string(),
                expected: format!("1..={context} (the model's context)"),
            });
        }
        Ok(Calibration {
            tokens,
            window,
            next: 0,
            stats: None,
        })
    }

    /// Runs the next `windows` windows (fewer at the end) on `model`, the one the calibration
    /// began on, and returns the tokens run so far (all of them once done; nothing more runs
    /// then). `windows` of 0 is an error.
    pub fn step(&mut self, model: &Model, windows: usize) -> Result<usize> {
        if windows == 0 {
            return Err(EngineError::Setting {
                name: "windows",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        if !self.done() {
            let end = self
                .next
                .saturating_add(windows.saturating_mul(self.window))
                .min(self.tokens.len());
            let piece = collect_stats(model, &self.tokens[self.next..end], self.window)?;
            self.stats = Some(match self.stats.take() {
                None => piece,
                Some(acc) => merge_stats(acc, &piece)?,
            });
            self.next = end;
        }
        Ok(self.next)
    }

    /// Whether every token has run.
    pub fn done(&self) -> bool {
        self.next >= self.tokens.len()
    }

    /// The tokens the calibration runs.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The statistics over all the tokens, once [`done`](Self::done); `None` before.
    pub fn stats(&self) -> Option<&ActivationStats> {
        self.stats.as_ref().filter(|_| self.done())
    }
}

/// Statistics of two consecutive calibration pieces as one
/// ([`Engine::calibrate_tokens`](crate::Engine::calibrate_tokens)): sums add, block influence
/// is averaged over all tokens. Errors when their shapes differ.
pub fn merge_stats(a: ActivationStats, b: &ActivationStats) -> Result<ActivationStats> {
    let fits = a.layers.len() == b.layers.len()
        && a.layers.iter().zip(&b.layers).all(|(x, y)| {
            x.attn_in.len() == y.attn_in.len()
                && x.attn_out.len() == y.attn_out.len()
                && x.mlp_in.len() == y.mlp_in.len()
                && x.mlp_mid.len() == y.mlp_mid.len()
        });
    if !fits {
        return Err(EngineError::Setting {
            name: "calibration",
            value: "statistics of differently shaped models".into(),
            expected: "pieces collected on the same model".into(),
        });
    }
    let tokens = a.tokens + b.tokens;
    let (wa, wb) = if tokens == 0 {
        (0.0, 0.0)
    } else {
        (
            a.tokens as f64 / tokens as f64,
            b.tokens as f64 / tokens as f64,
        )
    };
    let add = |x: &mut Vec<f64>, y: &[f64]| {
        for (p, q) in x.iter_mut().zip(y) {
            *p += q;
        }
    };
    let mut layers = a.layers;
    for (x, y) in layers.iter_mut().zip(&b.layers) {
        add(&mut x.attn_in, &y.attn_in);
        add(&mut x.attn_out, &y.attn_out);
        add(&mut x.mlp_in, &y.mlp_in);
        add(&mut x.mlp_mid, &y.mlp_mid);
        x.block_influence = x.block_influence * wa + y.block_influence * wb;
    }
    Ok(ActivationStats {
        tokens,
        windows: a.windows + b.windows,
        layers,
    })
}
