//! The conversation: earlier turns as history (for the chat template) and as a plain
//! transcript, and the tokens the KV cache holds, so a kept turn reuses the longest run of them
//! that its rendering starts with ([`Engine::start`]).

use super::metrics::Metrics;
use super::session::{GenerateOptions, Generation};
use super::Engine;
use crate::error::{EngineError, Result};
use crate::sampler::Sampler;
use crate::tokenizer::TextStream;

impl Engine {
    /// Begins a generation: validates the options, renders and tokenizes the prompt. The
    /// prefill runs on the first [`step`](Self::step).
    ///
    /// Multi-turn policy: with `options.keep` the prompt continues the conversation: the engine
    /// renders all of it (earlier user turns and the answers, a stopped answer as far as it got,
    /// then the new prompt), keeps the longest run of tokens the cache already holds that
    /// matches the rendering, drops the rest of the cache and feeds only what follows. Without
    /// `keep` the conversation and the cache start empty. If the whole conversation plus
    /// `max_tokens` would exceed the context, `start` fails with
    /// [`EngineError::ContextFull`] and changes nothing: nothing is silently dropped or slid
    /// out; the caller starts a new conversation (or asks for fewer tokens).
    pub fn start(&mut self, prompt: &str, options: GenerateOptions) -> Result<()> {
        let started_ms = self.platform.now_ms();
        // Whatever happens next, the generation in progress ends here (a refused start leaves
        // it finished and part of the conversation).
        if let Some(g) = &mut self.generation {
            g.finished = true;
        }
        let sampler = Sampler::new(options.sampler)?;
        if options.max_tokens == 0 {
            return Err(EngineError::Setting {
                name: "max_tokens",
                value: "0".to_string(),
                expected: "at least 1".to_string(),
            });
        }
        // The turn in progress (finished or not) becomes history.
        let (mut history, mut transcript) = if options.keep {
            (self.history.clone(), self.transcript.clone())
        } else {
            (Vec::new(), String::new())
        };
        if let (true, Some(g)) = (options.keep, &self.generation) {
            history.push(("user", g.user.clone()));
            history.push(("assistant", g.text.clone()));
            transcript = format!("{}{}", g.before, g.text);
        }
        let text = if options.chat {
            let mut messages = history.clone();
            messages.push(("user", prompt.to_string()));
            self.tokenizer.apply_chat_template_messages(&messages)?
        } else {
            format!("{transcript}{prompt}")
        };
        let tokens = self.tokenizer.encode(&text)?;
        if tokens.is_empty() {
            return Err(EngineError::Setting {
                name: "prompt",
                value: "\"\"".to_string(),
                expected: "at least one token of text".to_string(),
            });
        }
        // The last generated token is never fed back, hence the − 1.
        let needed = tokens.len() + options.max_tokens - 1;
        if needed > self.cache.max_tokens() {
            return Err(EngineError::ContextFull {
                needed,
                limit: self.cache.max_tokens(),
            });
        }
        // Reuse the cached tokens the new rendering starts with, but feed at least one token:
        // the logits of the last one are what the first new token is sampled from.
        let shared = if options.keep {
            // The cache's tokens: those its keys and values hold, in order.
            let same = self
                .cache
                .tokens()
                .iter()
                .zip(&tokens)
                .take_while(|(a, b)| a == b)
                .count();
            same.min(tokens.len() - 1)
        } else {
            0
        };
        let kept = self.cache.truncate(shared);
        self.history = history;
        self.transcript = transcript;
        self.generation = None;
        self.metrics = Metrics {
            load_ms: self.metrics.load_ms,
            warm_up: self.metrics.warm_up.take(),
            prompt_tokens: tokens.len() - kept,
            reused_tokens: kept,
            ..Metrics::for_model(&self.model)
        };
        self.generation = Some(Generation {
            prompt: tokens[kept..].to_vec(),
            user: prompt.to_string(),
            text: String::new(),
            before: format!("{}{prompt}", self.transcript),
            options,
            sampler,
            stream: TextStream::default(),
            fed: 0,
            prefill_ms: 0.0,
            prefill_logits: None,
            pending: None,
            started_ms,
            first_token_ms: None,
            finished: false,
        });
        self.refresh_kv();
        self.metrics.read_memory(self.platform.as_ref());
        Ok(())
    }
}
