//! One generation: its settings, the prompt fed in chunks ([`PREFILL_CHUNK`]), then one token
//! per [`Engine::step`], sampled and decoded to text.

use serde::Serialize;

use super::metrics::{rate, FinishReason};
use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::Logits;
use crate::sampler::{Sampler, SamplerConfig};
use crate::tokenizer::TextStream;

/// Settings of one generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerateOptions {
    /// Wrap the prompt in the model's chat template.
    pub chat: bool,
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// Continue the conversation: the prompt follows the earlier turns (and the answers,
    /// including one stopped early), and the KV cache keeps every token they share with what
    /// it holds, so only the new tokens are computed. `false` starts a new conversation.
    pub keep: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            chat: false,
            max_tokens: 64,
            sampler: SamplerConfig::default(),
            keep: false,
        }
    }
}

pub(super) struct Generation {
    /// The tokens to feed before the first generated one (the part of the conversation the
    /// cache does not hold).
    pub(super) prompt: Vec<u32>,
    /// The user's text of this turn and the text generated so far, for the next turn.
    pub(super) user: String,
    pub(super) text: String,
    /// The conversation before this turn as plain text (no chat template).
    pub(super) before: String,
    pub(super) options: GenerateOptions,
    pub(super) sampler: Sampler,
    pub(super) stream: TextStream,
    /// How many of `prompt` the model has been fed (the prefill runs in chunks of
    /// [`PREFILL_CHUNK`] tokens), the time those chunks took, and the logits of the prompt's
    /// last token once all of it is fed (the first new token is sampled from them).
    pub(super) fed: usize,
    pub(super) prefill_ms: f64,
    pub(super) prefill_logits: Option<Vec<f32>>,
    /// The sampled token not yet fed through the model.
    pub(super) pending: Option<u32>,
    pub(super) started_ms: f64,
    pub(super) first_token_ms: Option<f64>,
    pub(super) finished: bool,
}

/// Prompt tokens fed to the model per call of [`Engine::prefill_chunk`]: a long prompt's prefill
/// is split so that a caller (the page's worker) can show its progress and stop between chunks.
/// Chunks end where the cache reaches a multiple of this many tokens (so a turn that continues
/// a conversation may start with a shorter one). The chunks' results are bit for bit those of
/// one call: each chunk's keys and values go into the cache before its attention reads them, as
/// within a call, and no chunk boundary falls inside a kivi4 key block (32 tokens, quantized
/// once full with scales over the whole block, so a boundary inside one would change which
/// tokens a query reads quantized). 64 tokens keep the matrix products batched (weights read
/// once per 64 rows) and a chunk short (well under a second for the default model in a browser).
pub const PREFILL_CHUNK: usize = 64;
const _: () = assert!(PREFILL_CHUNK.is_multiple_of(edgefit_estimate::KIVI_BLOCK as usize));

/// How far the prefill of the generation in progress has got: `done` of `total` prompt tokens
/// fed (the tokens the cache already held from earlier turns are not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PrefillProgress {
    pub done: usize,
    pub total: usize,
}

impl PrefillProgress {
    /// All of the prompt is in the cache: the next [`Engine::step`] samples the first token.
    pub fn finished(&self) -> bool {
        self.done == self.total
    }
}

impl Engine {
    /// Feeds the next chunk of the prompt ([`PREFILL_CHUNK`] tokens) through the model and
    /// returns the prefill's progress. Once all of it is fed (or when the generation has
    /// finished) it does nothing and returns the same. [`step`](Self::step) finishes any prefill
    /// left, so calling this is optional: it lets a caller report progress and stop mid-prefill.
    /// Stopping there keeps what was fed: the cache holds it and the next kept turn reuses it.
    pub fn prefill_chunk(&mut self) -> Result<PrefillProgress> {
        let gen = self.generation.as_mut().ok_or(EngineError::NotStarted)?;
        let total = gen.prompt.len();
        if gen.finished || gen.fed == total {
            return Ok(PrefillProgress {
                done: gen.fed,
                total,
            });
        }
        let t0 = self.platform.now_ms();
        let end = (gen.fed + PREFILL_CHUNK - self.cache.len() % PREFILL_CHUNK).min(total);
        // The whole prompt's last position decides LongRoPE's factors for every chunk of it.
        let prompt_end = self.cache.len() + (total - gen.fed);
        self.model.plan_positions(&mut self.cache, prompt_end);
        let chunk = &gen.prompt[gen.fed..end];
        // Only the prompt's last chunk needs logits (the first new token is sampled from them).
        let which = if end == total {
            Logits::Last
        } else {
            Logits::None
        };
        let logits = self.model.forward(chunk, &mut self.cache, which)?;
        gen.fed = end;
        gen.prefill_ms += self.platform.now_ms() - t0;
        if end == total {
            gen.prefill_logits = Some(logits);
            self.metrics.prefill_tok_s = rate(total, gen.prefill_ms);
            // Memory peaks at load and prefill; reading it (natively: /proc) is kept out of
            // the decode loop and done again when the generation ends.
            self.metrics.read_memory(self.platform.as_ref());
        }
        self.refresh_kv();
        Ok(PrefillProgress { done: end, total })
    }

    /// Produces the next piece of text: the first call runs whatever is left of the prefill
    /// ([`prefill_chunk`](Self::prefill_chunk) until the prompt is fed). Returns `None` once the
    /// generation has finished (stop token or `max_tokens`); the piece may be empty while a
    /// multi-byte character is incomplete.
    pub fn step(&mut self) -> Result<Option<String>> {
        if self
            .generation
            .as_ref()
            .ok_or(EngineError::NotStarted)?
            .finished
        {
            return Ok(None);
        }
        // Each call feeds a chunk, so this ends after at most prompt / PREFILL_CHUNK + 1 calls.
        while !self.prefill_chunk()?.finished() {}
        let gen = self.generation.as_mut().ok_or(EngineError::NotStarted)?;
        let t0 = self.platform.now_ms();
        let logits = match gen.pending {
            None => gen.prefill_logits.take().ok_or(EngineError::NotStarted)?,
            Some(tok) => self.model.forward(&[tok], &mut self.cache, Logits::Last)?,
        };
        let next = gen.sampler.sample(&logits);
        let now = self.platform.now_ms();
        match gen.first_token_ms {
            None => {
                gen.first_token_ms = Some(now);
                self.metrics.ttft_ms = now - gen.started_ms;
            }
            Some(first) => {
                self.metrics.token_ms.push(now - t0);
                // Decode rate counts the tokens after the first over the time since it.
                self.metrics.decode_tok_s = rate(self.metrics.generated_tokens, now - first);
            }
        }
        self.refresh_kv();
        let gen = self.generation.as_mut().ok_or(EngineError::NotStarted)?;
        if self.tokenizer.is_stop(next) {
            gen.finished = true;
            self.metrics.finish_reason = Some(FinishReason::Stop);
            self.metrics.read_memory(self.platform.as_ref());
            let rest = gen.stream.flush(&self.tokenizer)?;
            gen.text.push_str(&rest);
            return Ok(if rest.is_empty() { None } else { Some(rest) });
        }
        self.metrics.generated_tokens += 1;
        let mut piece = gen.stream.push(&self.tokenizer, next)?;
        if self.metrics.generated_tokens >= gen.options.max_tokens {
            gen.finished = true;
            self.metrics.finish_reason = Some(FinishReason::Length);
            self.metrics.read_memory(self.platform.as_ref());
            piece.push_str(&gen.stream.flush(&self.tokenizer)?);
        } else {
            gen.pending = Some(next);
        }
        gen.text.push_str(&piece);
        Ok(Some(piece))
    }

    /// Runs [`start`](Self::start) then [`step`](Self::step) to the end, calling `on_piece`
    /// with each piece of text; returns the whole text.
    pub fn generate(
        &mut self,
        prompt: &str,
        options: GenerateOptions,
        on_piece: &mut dyn FnMut(&str),
    ) -> Result<String> {
        self.start(prompt, options)?;
        let mut text = String::new();
        while let Some(piece) = self.step()? {
            on_piece(&piece);
            text.push_str(&piece);
        }
        Ok(text)
    }
}
