//! The memory preflight: what a model will need once loaded ([`MemoryNeed`]), from its shape
//! alone, so a loader refuses a model over a budget before allocating it; and
//! [`human_bytes`] for the messages.

use serde::Serialize;

use super::format::{held_format, LoadOptions, MatrixUse, Source};
use crate::config::LlamaConfig;
use crate::error::{EngineError, Result};
use crate::tensors::{LayerPart, TensorRole};

/// What a model will need in memory once loaded, by part, computed from its shape alone (no
/// tensor read), so a loader can refuse a model over a memory budget before allocating it.
/// With the same formats the load produces ([`held_format`] of each tensor's type in the file):
///
/// - `weights`: the linear layers as held: kept GGUF blocks at their own size (Q4_K 144 bytes
///   per 256 values, ...), converted ones in [`LoadOptions::weights`];
/// - `embedding`: the embedding, and the output head when untied, as held under
///   [`LoadOptions::embedding_format`];
/// - `norms`: the f32 vectors (norm weights, and biases where the architecture has them);
/// - `kv_cache`: the KV cache at the model's whole context in the engine's default KV format
///   ([`edgefit_estimate::DEFAULT_KV_FORMAT`]); the cache grows in steps, so this is what a
///   conversation reaches at the context limit;
/// - `load_scratch`: while loading, the largest tensor twice at f32 (its bytes as read, at
///   most f32, and its f32 conversion);
/// - `run_scratch`: while generating, the logits and a few activation rows, plus one row of
///   attention scores over the whole context.
///
/// Loading and generating do not overlap, so [`total`](MemoryNeed::total) is the weights plus
/// the larger of `load_scratch` and `kv_cache + run_scratch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryNeed {
    pub weights: u64,
    pub embedding: u64,
    pub norms: u64,
    pub kv_cache: u64,
    pub kv_tokens: u64,
    pub load_scratch: u64,
    pub run_scratch: u64,
}

impl MemoryNeed {
    /// The need of `config` loaded with `options` from float tensors (HF safetensors, the
    /// synthetic model); a GGUF loader that knows each tensor's type uses
    /// [`MemoryNeed::of_sources`].
    pub fn of(config: &LlamaConfig, options: &LoadOptions) -> MemoryNeed {
        Self::of_sources(config, options, |_| Source::Float("f32"))
    }

    /// The need of `config` loaded with `options` when tensor `role` is stored as
    /// `source(role)`: each matrix counted in the format it will be held in ([`held_format`]),
    /// with the estimator's byte arithmetic (`edgefit_estimate::WeightFormat::matrix_bytes`),
    /// which is what the loaded matrices hold.
    pub fn of_sources(
        config: &LlamaConfig,
        options: &LoadOptions,
        source: impl Fn(TensorRole) -> Source,
    ) -> MemoryNeed {
        let (h, vocab) = (config.hidden, config.vocab);
        let lin = options.weights;
        let rq = options.requantize;
        let bytes = |role: TensorRole, format, use_, rows: usize, cols: usize| {
            held_format(source(role), format, use_, rq).matrix_bytes(rows as u64, cols as u64)
        };
        let mut weights = 0u64;
        let mut largest = (vocab as u64).saturating_mul(h as u64);
        let mut widest = h.max(vocab);
        let mut vectors = h as u64; // the final norm
        for (i, l) in config.layer_shapes().iter().enumerate() {
            for part in LayerPart::ALL.into_iter().filter(|p| p.present(config)) {
                let (rows, cols) = part.shape(l, h);
                if part.is_vector() {
                    vectors = vectors.saturating_add(cols as u64);
                    continue;
                }
                let role = TensorRole::Layer(i, part);
                weights = weights.saturating_add(bytes(role, lin, MatrixUse::Linear, rows, cols));
                largest = largest.max((rows as u64).saturating_mul(cols as u64));
            }
            widest = widest.max(l.ffn).max(l.q_width());
        }
        let emb = options.embedding_format();
        let mut embedding = bytes(TensorRole::Embed, emb, MatrixUse::Embedding, vocab, h);
        if !config.tied_embeddings {
            embedding = embedding.saturating_add(bytes(
                TensorRole::Output,
                emb,
                MatrixUse::Embedding,
                vocab,
                h,
            ));
        }
        let norms = vectors.saturating_mul(4);
        let kv_tokens = config.context_length as u64;
        let kv_cache = edgefit_estimate::kv_bytes(
            &config.to_spec(),
            edgefit_estimate::DEFAULT_KV_FORMAT,
            kv_tokens,
        );
        let load_scratch = largest.saturating_mul(8);
        let run_scratch = (widest as u64)
            .saturating_mul(4 * 8)
            .saturating_add(kv_tokens.saturating_mul(4));
        MemoryNeed {
            weights,
            embedding,
            norms,
            kv_cache,
            kv_tokens,
            load_scratch,
            run_scratch,
        }
    }

    /// Weights, embedding and norms, plus the larger of loading's and generating's extra.
    pub fn total(&self) -> u64 {
        let extra = self
            .load_scratch
            .max(self.kv_cache.saturating_add(self.run_scratch));
        [self.embedding, self.norms, extra]
            .iter()
            .fold(self.weights, |a, b| a.saturating_add(*b))
    }

    /// `Ok` when `budget` is `None` or at least [`total`](Self::total); else
    /// [`EngineError::OverBudget`] with the numbers and the parts, largest first.
    pub fn check(&self, budget: Option<u64>) -> Result<()> {
        let Some(budget) = budget else {
            return Ok(());
        };
        let needed = self.total();
        if needed <= budget {
            return Ok(());
        }
        let mut parts = [
            ("weights".to_string(), self.weights),
            ("embedding".to_string(), self.embedding),
            (
                format!("KV cache ({} tokens)", self.kv_tokens),
                self.kv_cache,
            ),
            ("loading scratch".to_string(), self.load_scratch),
            ("generation scratch".to_string(), self.run_scratch),
            ("norms".to_string(), self.norms),
        ];
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        let parts = parts
            .iter()
            .filter(|p| p.1 > 0)
            .map(|(what, b)| format!("{what} {}", human_bytes(*b)))
            .collect::<Vec<_>>()
            .join(", ");
        Err(EngineError::OverBudget {
            needed,
            budget,
            needed_h: human_bytes(needed),
            budget_h: human_bytes(budget),
            parts,
        })
    }
}

/// `1234567` → `1.2 MiB` (powers of 1024, one decimal): binary units, as the page and the
/// CLI print every size.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_are_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(323_069_184), "308.1 MiB");
        assert_eq!(human_bytes(4 << 30), "4.0 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}
