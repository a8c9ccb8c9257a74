//! One kept layer while its units are chosen ([`Work`]): what it keeps so far, and the
//! per-unit scores over what it keeps (from the layer's [`LayerNorms`]).

use super::score::LayerNorms;
use super::LayerRatios;
use crate::config::LayerShape;

/// One kept layer while its units are chosen: what it keeps so far (indices of the input layer).
pub(super) struct Work<'a> {
    pub(super) layer: usize,
    pub(super) shape: &'a LayerShape,
    pub(super) norms: &'a LayerNorms,
    pub(super) ratios: LayerRatios,
    pub(super) kv: Vec<usize>,
    /// Kept query heads, ascending (so grouped by KV head).
    pub(super) heads: Vec<usize>,
    /// Kept pair positions within a head (`0..qk_dim/2`).
    pub(super) pairs: Vec<usize>,
    pub(super) vdims: Vec<usize>,
    pub(super) ffn: Vec<usize>,
}

impl<'a> Work<'a> {
    pub(super) fn new(
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

    pub(super) fn group(&self) -> usize {
        self.shape.n_heads / self.shape.n_kv_heads
    }

    /// Keeps the query heads of the kept KV heads.
    pub(super) fn heads_from_kv(&mut self) {
        let g = self.group();
        let kv = &self.kv;
        self.heads.retain(|h| kv.contains(&(h / g)));
    }
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
