//! Importance scores of the units (module docs of [`super`], "Importance"): the squared norms of
//! a layer's weights, weighted by calibration statistics when there are any, and the per-unit
//! scores of a [`Work`] layer over what it keeps so far.

use edgefit_kernels::Matrix;

use super::stats::LayerStats;
use super::surgery::Work;
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

impl Work<'_> {
    /// Energy of the path through V dim `d` of query head `h`.
    pub(super) fn path(&self, h: usize, d: usize) -> f64 {
        let dv = self.shape.v_dim;
        let o = self.norms.o_out[h * dv + d];
        match &self.norms.v_row {
            Some(v) => o * v[(h / self.group()) * dv + d],
            None => o,
        }
    }

    pub(super) fn head_energy(&self, h: usize) -> f64 {
        self.vdims.iter().map(|&d| self.path(h, d)).sum()
    }

    /// Per kept KV head: its query heads' energy.
    pub(super) fn kv_scores(&self) -> Vec<f64> {
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
    pub(super) fn head_unit_scores(&self) -> Vec<f64> {
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

    /// Per kept pair position: Σ over kept heads of `‖q pair‖² · ‖k pair‖²`.
    pub(super) fn pair_scores(&self) -> Vec<f64> {
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

    pub(super) fn vdim_scores(&self) -> Vec<f64> {
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

    pub(super) fn mlp_scores(&self) -> Vec<f64> {
        self.ffn.iter().map(|&j| self.norms.mlp[j].sqrt()).collect()
    }
}
