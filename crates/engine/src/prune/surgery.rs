//! Layer surgery: a [`Work`] layer's weakest heads removed per group, its weights gathered to
//! what it keeps, and the report of what it lost.

use edgefit_kernels::Matrix;

use super::allocate::keep_indices;
use super::work::Work;
use super::LayerReport;
use crate::config::LayerShape;
use crate::weights::LayerWeights;

/// `m`'s rows `rows` (each restricted to `cols` if given) as a new f32 matrix.
pub(super) fn gather(m: &Matrix, rows: &[usize], cols: Option<&[usize]>) -> Matrix {
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
pub(super) fn pick(v: &Option<Vec<f32>>, idx: &[usize]) -> Option<Vec<f32>> {
    v.as_ref().map(|v| idx.iter().map(|&i| v[i]).collect())
}

impl Work<'_> {
    /// Removes the `c` weakest query heads of every kept group.
    pub(super) fn remove_weakest_per_group(&mut self, c: usize) {
        let g = self.group();
        let mut heads = Vec::new();
        for &k in &self.kv {
            let group: Vec<usize> = (k * g..(k + 1) * g).collect();
            let e: Vec<f64> = group.iter().map(|&h| self.head_energy(h)).collect();
            heads.extend(keep_indices(&group, &e, c));
        }
        self.heads = heads;
    }

    /// The layer's weights restricted to what is kept, and its new shape.
    pub(super) fn build(&self, lw: &LayerWeights) -> (LayerWeights, LayerShape) {
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
            b_gate: pick(&lw.b_gate, &self.ffn),
            b_up: pick(&lw.b_up, &self.ffn),
            // Hidden-wide outputs: a removed head or MLP unit only drops its share of the
            // product, the bias stays.
            bo: lw.bo.clone(),
            b_down: lw.b_down.clone(),
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

    pub(super) fn report(&self) -> LayerReport {
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
