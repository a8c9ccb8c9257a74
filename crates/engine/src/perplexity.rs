//! Perplexity of a model over a text: how surprised the model is, on average, by each next
//! token. `perplexity = exp(mean over predicted tokens of −ln p(token | the tokens before it))`.
//!
//! It is the number that tells whether a weight format (w4g32 vs f32, issue 4) or a KV format
//! (issue 5) costs quality: the same text, the same model, one number per configuration.
//!
//! # How the text is split
//! The tokens `t₀ … tₙ` give `n` predictions: `t₁` from `t₀`, `t₂` from `t₀ t₁`, and so on. The
//! *inputs* `t₀ … tₙ₋₁` are cut into consecutive windows of at most `window` tokens (default:
//! the model's context). Each window starts from an empty KV cache, so the first prediction of
//! a window sees only that window's first token; every token `t₁ … tₙ` is predicted exactly once
//! and no input runs through the model twice. Within a window the inputs go through
//! [`Model::forward`] in sub-batches of at most `batch` tokens (default 64) into one
//! [`KvCache`](crate::KvCache), with [`Logits::All`], so the logits held at once are at most
//! `batch × vocab` floats, never `window × vocab`. The result does not depend on `batch` (each
//! row of the forward pass is computed the same way whatever the batch; the tests check this),
//! but does depend on `window` (shorter windows give less context).
//!
//! # Numerics
//! Each position's `−ln softmax(logits)[target] = logsumexp(logits) − logits[target]`, with the
//! maximum subtracted before `exp` and the sum taken in f64; the total is accumulated in f64.
//!
//! The engine reads no clock: a caller that wants `ms` and `tokens_per_s` passes its
//! [`Platform`].

use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::model::{Logits, Model};
use crate::platform::Platform;
use crate::tokenizer::TextTokenizer;

/// Inputs fed through the model per forward call unless told otherwise.
pub const DEFAULT_BATCH: usize = 64;

/// Settings of one perplexity run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerplexityOptions {
    /// Predict at most this many tokens (the first ones of the text); `None` = all of them.
    pub max_tokens: Option<usize>,
    /// Inputs per window (the context each prediction can see at most); `None` = the model's
    /// context length. Must be at least 1 and at most the context length.
    pub window: Option<usize>,
    /// Inputs per forward call; `None` = [`DEFAULT_BATCH`]. Must be at least 1.
    pub batch: Option<usize>,
}

/// What a perplexity run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerplexityReport {
    /// `exp(mean_nll)`.
    pub perplexity: f64,
    /// Tokens predicted (each scored once).
    pub tokens: usize,
    /// Mean negative log-likelihood per predicted token, in nats.
    pub mean_nll: f64,
    /// Tokens of the whole text (BOS included when the tokenizer adds it), before `max_tokens`.
    pub text_tokens: usize,
    /// Inputs per window used.
    pub window: usize,
    /// Windows run.
    pub windows: usize,
    /// Inputs per forward call used.
    pub batch: usize,
    /// Milliseconds of the evaluation (forward passes and scoring, not tokenizing), when a
    /// [`Platform`] was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// Predicted tokens per second of `ms`, when a [`Platform`] was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
}

/// Perplexity of `model` over `text`, tokenized with `tokenizer` (BOS first when the tokenizer
/// adds one). See [`perplexity`] for the rest.
pub fn perplexity_of_text(
    model: &Model,
    tokenizer: &TextTokenizer,
    text: &str,
    options: PerplexityOptions,
    platform: Option<&dyn Platform>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PerplexityReport> {
    if text.is_empty() {
        return Err(EngineError::Setting {
            name: "text",
            value: "\"\"".to_string(),
            expected: "a non-empty text".to_string(),
        });
    }
    let tokens = tokenizer.encode(text)?;
    perplexity(model, &tokens, options, platform, progress)
}

/// Perplexity of `model` over `tokens`: every token after the first is predicted from the
/// tokens before it in its window (see the module docs). `progress(done, total)` is called
/// after each forward call with predicted tokens scored so far and in all. Errors: fewer than 2
/// tokens, `max_tokens`, `window` or `batch` of 0, a window longer than the context, a token
/// outside the vocabulary.
pub fn perplexity(
    model: &Model,
    tokens: &[u32],
    options: PerplexityOptions,
    platform: Option<&dyn Platform>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PerplexityReport> {
    let context = model.config.context_length;
    let window = options.window.unwrap_or(context);
    let batch = options.batch.unwrap_or(DEFAULT_BATCH);
    if window == 0 || window > context {
        return Err(EngineError::Setting {
            name: "window",
            value: window.to_string(),
            expected: format!("between 1 and the model's context length {context}"),
        });
    }
    if batch == 0 {
        return Err(EngineError::Setting {
            name: "batch",
            value: "0".to_string(),
            expected: "at least 1".to_string(),
        });
    }
    if options.max_tokens == Some(0) {
        return Err(EngineError::Setting {
            name: "max_tokens",
            value: "0".to_string(),
            expected: "at least 1".to_string(),
        });
    }
    if tokens.len() < 2 {
        return Err(EngineError::Setting {
            name: "text",
            value: format!("{} token(s)", tokens.len()),
            expected: "at least 2 tokens (one to predict from, one to predict)".to_string(),
        });
    }
    let predicted = options
        .max_tokens
        .map_or(tokens.len() - 1, |m| m.min(tokens.len() - 1));
    let inputs = &tokens[..predicted];
    let targets = &tokens[1..=predicted];
    let vocab = model.config.vocab;
    // The forward pass checks inputs; the last target is never an input, so check targets here.
    if let Some(&bad) = targets.iter().find(|&&t| t as usize >= vocab) {
        return Err(EngineError::Setting {
            name: "token",
            value: bad.to_string(),
            expected: format!("a token id below the vocabulary size {vocab}"),
        });
    }

    let t0 = platform.map(|p| p.now_ms());
    let mut cache = model.new_cache(window);
    let mut nll = 0.0f64;
    let mut done = 0usize;
    let mut windows = 0usize;
    progress(0, predicted);
    for (w_inputs, w_targets) in inputs.chunks(window).zip(targets.chunks(window)) {
        cache.reset();
        // The window is one sequence: with LongRoPE, one reaching past the original context
        // uses the long factors from its first sub-batch on, as one pass over it would.
        model.plan_positions(&mut cache, w_inputs.len());
        windows += 1;
        for (b_inputs, b_targets) in w_inputs.chunks(batch).zip(w_targets.chunks(batch)) {
            let logits = model.forward(b_inputs, &mut cache, Logits::All)?;
            for (row, &target) in logits.chunks_exact(vocab).zip(b_targets) {
                nll += token_nll(row, target);
            }
            done += b_inputs.len();
            progress(done, predicted);
        }
    }
    let ms = match (platform, t0) {
        (Some(p), Some(t0)) => Some(p.now_ms() - t0),
        _ => None,
    };
    let mean_nll = nll / predicted as f64;
    Ok(PerplexityReport {
        perplexity: mean_nll.exp(),
        tokens: predicted,
        mean_nll,
        text_tokens: tokens.len(),
        window,
        windows,
        batch,
        ms,
        tokens_per_s: ms.map(|ms| {
            if ms > 0.0 {
                predicted as f64 * 1000.0 / ms
            } else {
                0.0
            }
        }),
    })
}

/// `−ln softmax(logits)[target]` in f64: `logsumexp(logits) − logits[target]`, with the maximum
/// subtracted before `exp`. Non-finite logits give a non-finite result (never a panic); the
/// forward pass has already rejected a `target` outside the vocabulary.
pub fn token_nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let chosen = logits.get(target as usize).map_or(f64::NAN, |&l| l as f64);
    max + sum.ln() - chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_logits_cost_ln_vocab() {
        for vocab in [1usize, 2, 259, 49152] {
            let row = vec![3.25f32; vocab];
            let nll = token_nll(&row, (vocab - 1) as u32);
            assert!(
                (nll - (vocab as f64).ln()).abs() < 1e-12,
                "vocab {vocab}: {nll}"
            );
        }
    }

    #[test]
    fn nll_is_stable_for_huge_logits_and_matches_the_naive_formula() {
        // Naive softmax overflows at 1000; the shifted one does not.
        let nll = token_nll(&[1000.0, 1000.0, 0.0], 0);
        assert!((nll - 2f64.ln()).abs() < 1e-12, "{nll}");
        let row = [0.5f32, -1.25, 2.0, 0.0];
        let naive = {
            let z: f64 = row.iter().map(|&v| (v as f64).exp()).sum();
            -((row[2] as f64).exp() / z).ln()
        };
        assert!((token_nll(&row, 2) - naive).abs() < 1e-12);
        assert!(token_nll(&[f32::NAN, 0.0], 1).is_nan());
    }
}
