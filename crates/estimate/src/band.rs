//! The arithmetic of a range ([`Band`], [`Bands`], [`band_of`]): a multiplicative band
//! `[x·r_10, x·r_90]` from residuals `r = measured / estimated`, the 10th and 90th percentile
//! widened to contain 1, per compute unit and [`Phase`] (pooled over units below
//! [`MIN_POINTS`]); the `q`-quantile of `n` sorted values is at index `q·(n − 1)`, linearly
//! interpolated. A leaf: [`crate::validate`] computes the bands with it, and
//! [`crate::uncertainty`] (which re-exports it) keeps the bands of the bundled set.

use serde::{Deserialize, Serialize};

use crate::format::ComputeUnit;

/// Fewest residuals a unit needs for a band of its own.
pub const MIN_POINTS: usize = 5;

/// Prefill or decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Prompt processing.
    Prefill,
    /// Token generation.
    Decode,
}

impl Phase {
    /// `prefill` or `decode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }
}

/// A multiplicative band: the measured value lies in `[x·low, x·high]` for ~80% of points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// 10th percentile of measured/estimated.
    pub low: f64,
    /// 90th percentile of measured/estimated.
    pub high: f64,
    /// Residuals it was computed from.
    pub points: usize,
    /// `npu prefill` or `all units, prefill` (pooled).
    pub scope: String,
}

impl Band {
    /// One line for the explanation.
    pub fn describe(&self) -> String {
        format!(
            "×{:.2}..×{:.2}, the 10th-90th percentile of measured/estimated over {} residuals of the validation set, leave-one-source-out and in-sample ({})",
            self.low, self.high, self.points, self.scope
        )
    }
}

/// The bands of every unit and phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bands {
    /// (unit, phase) → band, for units with enough points.
    pub by_unit: Vec<(ComputeUnit, Phase, Band)>,
    /// Pooled band per phase.
    pub pooled: Vec<(Phase, Band)>,
}

impl Bands {
    /// The band of `unit` in `phase` (pooled when the unit has too few points).
    pub fn band(&self, unit: ComputeUnit, phase: Phase) -> Band {
        self.by_unit
            .iter()
            .find(|(u, p, _)| *u == unit && *p == phase)
            .map(|(_, _, b)| b.clone())
            .or_else(|| {
                self.pooled
                    .iter()
                    .find(|(p, _)| *p == phase)
                    .map(|(_, b)| b.clone())
            })
            .unwrap_or(Band {
                low: 1.0,
                high: 1.0,
                points: 0,
                scope: "no validation points".into(),
            })
    }
}

/// The `q`-quantile of `v` (sorted ascending, non-empty), by linear interpolation.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let x = q * (v.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x - x.floor());
    match v.get(i + 1) {
        Some(next) => v[i] + f * (next - v[i]),
        None => v[i],
    }
}

/// Band of a set of residuals (need not be sorted).
pub fn band_of(mut r: Vec<f64>, scope: String) -> Band {
    r.sort_by(f64::total_cmp);
    Band {
        low: quantile(&r, 0.1).min(1.0),
        high: quantile(&r, 0.9).max(1.0),
        points: r.len(),
        scope,
    }
}
