//! The f32 key/value cache (issue 5 adds the quantized formats).
//!
//! Layout: one `Vec<f32>` of keys and one of values per layer, token-major: token `t`'s keys for
//! all KV heads sit at `[t × kv_dim, (t + 1) × kv_dim)`. Appending a token is a copy to the end,
//! and attention for one KV head strides by `kv_dim`.
//!
//! Growth: the cache grows in chunks of [`GROW_TOKENS`] tokens rather than being preallocated to
//! the model's context, because SmolLM2's 8192-token context would reserve 377 MB of f32 KV up
//! front in a browser tab that mostly runs prompts of a few hundred tokens. Reaching `max_tokens`
//! is an error ([`EngineError::ContextFull`]), never a silent overwrite.

use crate::error::{EngineError, Result};

/// Tokens added per growth step.
pub const GROW_TOKENS: usize = 256;

/// Per-layer keys and values for the tokens seen so far.
#[derive(Debug, Clone)]
pub struct KvCache {
    kv_dim: usize,
    /// Bytes one held token occupies, from the estimator's shared byte arithmetic.
    bytes_per_token: u64,
    max_tokens: usize,
    len: usize,
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl KvCache {
    /// An empty cache for `n_layers` layers of width `kv_dim` holding at most `max_tokens`,
    /// accounting `bytes_per_token` per held token (callers pass
    /// `edgefit_estimate::kv_bytes_per_token` so the estimate and the cache agree by construction;
    /// see [`crate::Model::new_cache`]).
    pub fn new(n_layers: usize, kv_dim: usize, max_tokens: usize, bytes_per_token: u64) -> Self {
        KvCache {
            kv_dim,
            bytes_per_token,
            max_tokens,
            len: 0,
            keys: vec![Vec::new(); n_layers],
            values: vec![Vec::new(); n_layers],
        }
    }

    /// Forgets every token; keeps the allocation for the next generation.
    pub fn reset(&mut self) {
        self.len = 0;
        for v in self.keys.iter_mut().chain(self.values.iter_mut()) {
            v.clear();
        }
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most tokens this cache will hold.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Bytes holding the tokens held: `len × bytes_per_token` (for f32: `layers × 2 × kv_dim × 4`
    /// per token).
    pub fn bytes(&self) -> u64 {
        self.len as u64 * self.bytes_per_token
    }

    /// Bytes allocated (held plus spare capacity).
    pub fn reserved_bytes(&self) -> u64 {
        let floats: usize = self
            .keys
            .iter()
            .chain(self.values.iter())
            .map(|v| v.capacity())
            .sum();
        (floats * std::mem::size_of::<f32>()) as u64
    }

    /// Fails if `extra` more tokens would not fit.
    pub fn check_room(&self, extra: usize) -> Result<()> {
        let needed = self.len + extra;
        if needed > self.max_tokens {
            return Err(EngineError::ContextFull {
                needed,
                limit: self.max_tokens,
            });
        }
        Ok(())
    }

    /// Appends `k` and `v` (each `tokens × kv_dim`) to `layer`. The caller advances the length
    /// once all layers are written, with [`commit`](Self::commit).
    pub(crate) fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        for (store, new) in [(&mut self.keys[layer], k), (&mut self.values[layer], v)] {
            if store.capacity() < store.len() + new.len() {
                let tokens = (store.len() + new.len()).div_ceil(self.kv_dim);
                let target = tokens.div_ceil(GROW_TOKENS) * GROW_TOKENS;
                let target = target.min(self.max_tokens) * self.kv_dim;
                store.reserve_exact(target.saturating_sub(store.len()));
            }
            store.extend_from_slice(new);
        }
    }

    /// Marks `tokens` more tokens as held.
    pub(crate) fn commit(&mut self, tokens: usize) {
        self.len += tokens;
    }

    /// Keys of `layer` for all tokens appended so far (including uncommitted ones).
    pub(crate) fn keys(&self, layer: usize) -> &[f32] {
        &self.keys[layer]
    }

    /// Values of `layer`, as [`keys`](Self::keys).
    pub(crate) fn values(&self, layer: usize) -> &[f32] {
        &self.values[layer]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_count_tokens_and_reset_clears() {
        let mut c = KvCache::new(2, 4, 10, 2 * 2 * 4 * 4);
        assert!(c.is_empty());
        c.append(0, &[1.0; 8], &[2.0; 8]);
        c.append(1, &[1.0; 8], &[2.0; 8]);
        c.commit(2);
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), 2 * 2 * 2 * 4 * 4);
        assert!(c.reserved_bytes() >= c.bytes());
        // Growth stops at max_tokens: 10 tokens × 4 floats × 4 tensors.
        assert_eq!(c.reserved_bytes(), 10 * 4 * 4 * 4);
        c.check_room(8).unwrap();
        assert!(matches!(
            c.check_room(9),
            Err(EngineError::ContextFull {
                needed: 11,
                limit: 10
            })
        ));
        c.reset();
        assert_eq!(c.len(), 0);
        assert_eq!(c.bytes(), 0);
    }
}
