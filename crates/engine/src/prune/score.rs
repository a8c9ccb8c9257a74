//! Importance scores of the units (module docs of [`super`], "Importance"): the squared norms of
//! a layer's weights, weighted by calibration statistics when there are any ([`LayerNorms`]);
//! the per-unit scores over what a layer keeps so far are [`super::work::Work`]'s.

use edgefit_kernels::Matrix;

use super::stats::LayerStats;
use crate::config::LayerShape;
use crate::weights::LayerWeights;

/// Squared norms of one layer's weights, weighted by calibration statistics when there are
/// any: everything the scores need, so the matrices are read once.
pub(super) struct LayerNorms {
    /// Per wq / wk row: `Σᵢ w² · aᵢ` (`aᵢ` = attention-input statistic, or 1).
    pub(super) q_row: Vec<f64>,
    pub(super) k_row: Vec<f64>,
    /// Per wo column: `Σ w²`, times the attention-output statistic with activations.
    pub(super) o_out: Vec<f64>,
    /// Per wv row `Σ w²` (magnitude only; with activations the statistic above holds V).
    pub(super) v_row: Option<Vec<f64>>,
    /// Per MLP channel: its energy (module docs).
    pub(super) mlp: Vec<f64>,
}

impl LayerNorms {
    pub(super) fn new(
        lw: &LayerWeights,
        shape: &LayerShape,
        stats: Option<&LayerStats>,
    ) -> LayerNorms {
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
pub(super) fn row_energy(m: &Matrix, weight: &[f64]) -> Vec<f64> {
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
pub(super) fn col_energy(m: &Matrix) -> Vec<f64> {
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
