//! Warming the loaded model's code up before the first measured run ([`Engine::warm_up`]).
//!
//! Why: a browser compiles wasm in tiers. Chromium runs a function first as Liftoff (baseline)
//! code and recompiles it with TurboFan, in the background, once it has run enough; until that
//! job finishes the baseline code keeps running. The synthetic warm-up this replaced
//! (the GEMV and 64-row GEMM of each format, in `microbench`, since removed) left the forward pass itself
//! cold: V8's own trace (`--js-flags=--trace-wasm-compilation-times`, the page's first run after
//! its first load) showed `Model::forward_probed`, the KV cache's `scores` /
//! `add_weighted_values` / `push`, the attention kernels, RoPE and the tokenizer's regex VM
//! tiered up *during* the first run (the forward pass alone took 381 ms to compile on a busy
//! machine), and that run's TTFT was 2–3× the next ones'. So the warm-up runs the loaded model
//! itself, on the code paths a run takes: the tokenizer (with the chat template when the model has
//! one), a batched prefill, attention over a prompt, the KV cache in the run's format, the head
//! and greedy sampling, in passes until its time budget is spent, so the tier-up jobs those passes
//! trigger can finish before the first measured run.

use serde::Serialize;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::Logits;
use crate::sampler::argmax;

/// Prompt tokens of a warm-up pass: enough rows for the batched (multi-row) matrix products and
/// attention over a prompt, short enough that a pass of the default model takes a few hundred
/// milliseconds of baseline code in a browser. 19 = four tiles of the simd128 GEMM's 4 tokens
/// and a remainder of 3, which runs the one-token tile a prompt of any length not a multiple of
/// 4 takes (a separate function, `#[inline(never)]`, compiled in its own tier; 16 never ran it).
pub const WARM_PROMPT_TOKENS: usize = 19;

/// Decode steps of a warm-up pass: one-token forward passes (one-token products, attention over
/// the cache, the head) after the prefill.
pub const WARM_DECODE_STEPS: usize = 3;

/// Passes a warm-up runs at least, whatever its budget: the first runs (and so triggers the
/// tier-up of) the code a run executes, the second runs what was optimized meanwhile, and its
/// time against the first's shows how far that got.
pub const MIN_WARM_PASSES: usize = 2;

/// The longest warm-up budget accepted, ms.
pub const MAX_WARM_MS: f64 = 10_000.0;

/// Text a warm-up pass tokenizes (a paragraph, so the tokenizer's pre-tokenizer runs over
/// words, digits and punctuation); the first [`WARM_PROMPT_TOKENS`] tokens are fed.
const WARM_TEXT: &str = "Warm-up: the engine runs this text once or a few times before the \
    first measured run, so that the browser has compiled the code a run executes. Numbers like \
    3.14, 42 and 2026 appear too, as do \"quotes\", commas, and a question?";

/// What [`Engine::warm_up`] ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WarmUp {
    /// Passes run; each: tokenize, prefill `prompt_tokens` tokens, `decode_steps` decode steps,
    /// all in a throwaway KV cache.
    pub passes: usize,
    /// Prompt tokens each pass fed (fewer than [`WARM_PROMPT_TOKENS`] for a model whose context
    /// is shorter).
    pub prompt_tokens: usize,
    /// One-token forward passes after each pass's prefill ([`WARM_DECODE_STEPS`], fewer for a
    /// model whose context is shorter).
    pub decode_steps: usize,
    /// Milliseconds of each pass in order: the first runs the least optimized code, so the
    /// sequence shows the browser's tier-up.
    pub pass_ms: Vec<f64>,
    /// Milliseconds in all.
    pub total_ms: f64,
}

impl Engine {
    /// Runs the loaded model on a throwaway input in passes (tokenize, prefill, a few decode
    /// steps) until `budget_ms` has passed, at least [`MIN_WARM_PASSES`], and records what it ran in
    /// [`Metrics::warm_up`](super::Metrics) (kept until the next warm-up). The conversation, the
    /// KV cache and the generation in progress are untouched: each pass has its own cache.
    /// A budget that is not a number from 0 to [`MAX_WARM_MS`] is an error naming it.
    pub fn warm_up(&mut self, budget_ms: f64) -> Result<WarmUp> {
        if !(budget_ms.is_finite() && (0.0..=MAX_WARM_MS).contains(&budget_ms)) {
            return Err(EngineError::Setting {
                name: "warm-up budget",
                value: format!("{budget_ms} ms"),
                expected: format!("a number of milliseconds from 0 to {MAX_WARM_MS}"),
            });
        }
        let context = self.model.config.context_length;
        let t0 = self.platform.now_ms();
        let mut pass_ms = Vec::new();
        let pass = |engine: &Engine, pass_ms: &mut Vec<f64>| {
            let t = engine.platform.now_ms();
            let fed = engine.warm_pass(context)?;
            pass_ms.push(engine.platform.now_ms() - t);
            Ok::<_, EngineError>(fed)
        };
        let (prompt_tokens, decode_steps) = pass(self, &mut pass_ms)?;
        while pass_ms.len() < MIN_WARM_PASSES || self.platform.now_ms() - t0 < budget_ms {
            pass(self, &mut pass_ms)?;
        }
        let report = WarmUp {
            passes: pass_ms.len(),
            prompt_tokens,
            decode_steps,
            pass_ms,
            total_ms: self.platform.now_ms() - t0,
        };
        self.metrics.warm_up = Some(report.clone());
        Ok(report)
    }

    /// One warm-up pass; returns the prompt tokens and the decode steps it fed.
    fn warm_pass(&self, context: usize) -> Result<(usize, usize)> {
        let text = if self.tokenizer.has_chat_template() {
            self.tokenizer
                .apply_chat_template_messages(&[("user", WARM_TEXT.to_string())])?
        } else {
            WARM_TEXT.to_string()
        };
        let mut tokens = self.tokenizer.encode(&text)?;
        // Room for the decode steps within the context (a tiny test model may have little).
        let steps = WARM_DECODE_STEPS.min(context.saturating_sub(1));
        tokens.truncate(WARM_PROMPT_TOKENS.min(context - steps).max(1));
        let mut cache = self.model.new_cache(tokens.len() + steps);
        let logits = self.model.forward(&tokens, &mut cache, Logits::Last)?;
        let mut next = argmax(&logits);
        let mut generated = vec![next];
        for _ in 0..steps {
            let logits = self.model.forward(&[next], &mut cache, Logits::Last)?;
            next = argmax(&logits);
            generated.push(next);
        }
        // The text of what it generated, as a run streams it (decoding errors are not the
        // warm-up's to report: a run meets them itself).
        let _ = self.tokenizer.decode(&generated);
        Ok((tokens.len(), steps))
    }
}
