//! A loaded model ready to generate, one token per [`Engine::step`], with measurements.
//!
//! The engine never reads a clock itself: the caller injects a [`Platform`] (`Instant` and
//! peak RSS natively, `performance.now()` and the wasm memory size in the browser), so the same
//! code measures the same things everywhere.

use std::io::{Read, Seek};

use edgefit_kernels::Kernel;
use serde::Serialize;

use crate::config::LlamaConfig;
use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::{Logits, Model};
pub use crate::platform::Platform;
use crate::prune::{ActivationStats, Calibration, PrunePlan, PruneReport};
use crate::sampler::{Sampler, SamplerConfig};
use crate::tokenizer::{TextStream, TextTokenizer, TokenizerInfo};
use crate::weights::{LoadOptions, WeightsSummary};

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

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The model produced a stop token.
    Stop,
    /// `max_tokens` were generated.
    Length,
}

/// Measurements of the model load and the latest generation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Metrics {
    pub load_ms: f64,
    /// Tokens this turn fed through the model before the first generated one (the new part of
    /// the conversation when earlier turns are kept).
    pub prompt_tokens: usize,
    /// Tokens of earlier turns the KV cache already held and this turn did not recompute.
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    /// From `start` to the first generated token (tokenize + prefill + sample).
    pub ttft_ms: f64,
    /// Prompt tokens per second of the prefill forward pass.
    pub prefill_tok_s: f64,
    /// Generated tokens after the first, per second of decoding them.
    pub decode_tok_s: f64,
    pub weights_bytes: u64,
    /// The linear layers' weight format (`w4g32`, `f32`, ...).
    pub weights: String,
    /// The embedding / output head's format.
    pub embedding: String,
    /// The kernel the matrix products ran on (`simd128`, `avx2`, `portable`, `scalar`).
    pub kernel: String,
    /// Threads the matrix products and attention heads were split across.
    pub threads: usize,
    /// The KV cache's format (`f32`, `f16`, `k8v16`, `int8`, `int4g32`).
    pub kv_format: String,
    /// Tokens the KV cache holds.
    pub kv_tokens: usize,
    /// Bytes of KV cache holding the tokens held, scales included: exactly
    /// `kv_bytes_per_token(spec, kv_format) × kv_tokens` of the estimator.
    pub kv_bytes: u64,
    /// Bytes of KV cache allocated.
    pub kv_reserved_bytes: u64,
    /// The most tokens the KV cache may hold (the model's context): a turn that would need more
    /// fails with "context full" (see [`Engine::start`]).
    pub kv_limit: usize,
    pub peak_bytes: u64,
    /// Heap in use when the metrics were last read ([`Platform::heap_bytes`]); absent where the
    /// platform does not count it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<u64>,
    pub finish_reason: Option<FinishReason>,
    /// Milliseconds of each decode step (forward + sample), in order.
    pub token_ms: Vec<f64>,
}

/// The model's shape and tokenizer summary, for display. The shape's fields are inlined in
/// the JSON (`n_layers`, `hidden`, ...).
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    #[serde(flatten)]
    pub config: LlamaConfig,
    pub params: u64,
    pub weights_bytes: u64,
    /// Formats the weights are stored in.
    pub weights: WeightsSummary,
    /// The kernel matrix products run on.
    pub kernel: String,
    /// Every kernel this build can run here (for the page's and the CLI's choice).
    pub kernels: Vec<String>,
    pub chat_template: bool,
    pub tokenizer: TokenizerInfo,
    /// What this architecture can have pruned and exported ([`crate::prune::limits`]).
    pub limits: crate::prune::PruneLimits,
}

struct Generation {
    /// The tokens to feed before the first generated one (the part of the conversation the
    /// cache does not hold).
    prompt: Vec<u32>,
    /// The user's text of this turn and the text generated so far, for the next turn.
    user: String,
    text: String,
    /// The conversation before this turn as plain text (no chat template).
    before: String,
    options: GenerateOptions,
    sampler: Sampler,
    stream: TextStream,
    /// How many of `prompt` the model has been fed (the prefill runs in chunks of
    /// [`PREFILL_CHUNK`] tokens), the time those chunks took, and the logits of the prompt's
    /// last token once all of it is fed (the first new token is sampled from them).
    fed: usize,
    prefill_ms: f64,
    prefill_logits: Option<Vec<f32>>,
    /// The sampled token not yet fed through the model.
    pending: Option<u32>,
    started_ms: f64,
    first_token_ms: Option<f64>,
    finished: bool,
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

/// A model, its tokenizer, a KV cache and the generation in progress.
pub struct Engine {
    model: Model,
    tokenizer: TextTokenizer,
    cache: KvCache,
    platform: Box<dyn Platform>,
    generation: Option<Generation>,
    metrics: Metrics,
    /// The tokens whose keys and values the cache holds, in order (`cache.len()` of them).
    held: Vec<u32>,
    /// Earlier turns of the conversation as (role, text), for the chat template.
    history: Vec<(&'static str, String)>,
    /// The conversation so far as plain text, for generation without a chat template.
    transcript: String,
    /// The model as loaded, kept while a pruned one runs ([`Engine::prune`]); `None` while the
    /// loaded model itself runs.
    unpruned: Option<Model>,
}

impl Engine {
    /// Wraps a loaded model. `load_ms` is how long loading took, as measured by the caller.
    pub fn new(
        model: Model,
        tokenizer: TextTokenizer,
        platform: Box<dyn Platform>,
        load_ms: f64,
    ) -> Self {
        let mut model = model;
        // Generation runs with the default KV format ([`edgefit_estimate::DEFAULT_KV_FORMAT`])
        // until `set_kv_format` says otherwise; `Model` alone keeps f32 (the reference).
        model.kv_format = edgefit_estimate::DEFAULT_KV_FORMAT;
        let cache = model.new_cache(model.config.context_length);
        let metrics = Metrics {
            load_ms,
            peak_bytes: platform.peak_bytes(),
            heap_bytes: platform.heap_bytes(),
            ..Metrics::for_model(&model)
        };
        let mut engine = Engine {
            model,
            tokenizer,
            cache,
            platform,
            generation: None,
            metrics,
            held: Vec::new(),
            history: Vec::new(),
            transcript: String::new(),
            unpruned: None,
        };
        engine.refresh_kv();
        engine
    }

    /// Loads a GGUF model, timing the load with `platform`'s clock.
    pub fn load_gguf<R: Read + Seek>(
        reader: &mut R,
        platform: Box<dyn Platform>,
        options: LoadOptions,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        Self::load_gguf_within(reader, platform, options, None, progress)
    }

    /// [`load_gguf`](Self::load_gguf) under a memory budget: a model needing more than
    /// `memory_budget` bytes is refused before any tensor is allocated
    /// ([`crate::gguf::load_gguf_within`]).
    pub fn load_gguf_within<R: Read + Seek>(
        reader: &mut R,
        platform: Box<dyn Platform>,
        options: LoadOptions,
        memory_budget: Option<u64>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        let t0 = platform.now_ms();
        let (model, tokenizer) =
            crate::gguf::load_gguf_within(reader, options, memory_budget, progress)?;
        let load_ms = platform.now_ms() - t0;
        Ok(Engine::new(model, tokenizer, platform, load_ms))
    }

    /// Runs the matrix products on `kernel` from now on; a kernel this build cannot run here is
    /// an error naming the ones it can.
    pub fn set_kernel(&mut self, kernel: Kernel) -> Result<()> {
        if !kernel.is_available() {
            return Err(EngineError::Setting {
                name: "kernel",
                value: kernel.name().to_string(),
                expected: format!(
                    "one this build can run here: {}",
                    Kernel::available()
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        self.model.kernel = kernel;
        self.metrics.kernel = kernel.name().to_string();
        Ok(())
    }

    /// Splits the matrix products and attention heads across `threads` threads from now on
    /// (the outputs are the same bits for any count). 0, more than the pool allows, or more
    /// than 1 in a build without threads (wasm) is an error naming what is accepted.
    pub fn set_threads(&mut self, threads: usize) -> Result<()> {
        if threads != self.model.pool.threads() {
            let pool = edgefit_kernels::Pool::new(threads).map_err(|e| EngineError::Setting {
                name: "threads",
                value: threads.to_string(),
                expected: match e {
                    // "a thread count from 1 to 256" (or wasm's "1: ..."): the range alone.
                    edgefit_kernels::KernelError::Threads { expected, .. } => expected,
                    other => other.to_string(),
                },
            })?;
            self.model.pool = pool.clone();
            if let Some(m) = &mut self.unpruned {
                m.pool = pool;
            }
        }
        self.metrics.threads = threads;
        Ok(())
    }

    /// Stores the KV cache in `format` from the next generation on (the cache is rebuilt empty;
    /// a kept conversation continues, recomputed in the new format on its next turn).
    pub fn set_kv_format(&mut self, format: edgefit_estimate::KvFormat) {
        self.model.kv_format = format;
        self.cache = self.model.new_cache(self.model.config.context_length);
        self.held.clear();
        // The turn in progress ends here (it stays in the conversation for a kept next turn).
        if let Some(g) = &mut self.generation {
            g.finished = true;
        }
        self.metrics.kv_format = format.to_string();
        self.refresh_kv();
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The estimator's description of the loaded model.
    pub fn model_spec(&self) -> edgefit_estimate::ModelSpec {
        self.model.config.to_spec()
    }

    /// Shape and tokenizer summary.
    pub fn info(&self) -> ModelInfo {
        ModelInfo {
            config: self.model.config.clone(),
            params: self.model.config.params(),
            weights_bytes: self.model.weights.bytes(),
            weights: self.model.weights.summary(),
            kernel: self.model.kernel.name().to_string(),
            kernels: Kernel::available()
                .into_iter()
                .map(|k| k.name().to_string())
                .collect(),
            chat_template: self.tokenizer.has_chat_template(),
            tokenizer: self.tokenizer.info(),
            limits: crate::prune::limits(&self.model.config),
        }
    }

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
            let same = self
                .held
                .iter()
                .zip(&tokens)
                .take_while(|(a, b)| a == b)
                .count();
            same.min(tokens.len() - 1)
        } else {
            0
        };
        let kept = self.cache.truncate(shared);
        self.held.truncate(kept);
        self.history = history;
        self.transcript = transcript;
        self.generation = None;
        self.metrics = Metrics {
            load_ms: self.metrics.load_ms,
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
        let chunk = &gen.prompt[gen.fed..end];
        let logits = self.model.forward(chunk, &mut self.cache, Logits::Last)?;
        self.held.extend_from_slice(chunk);
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
            Some(tok) => {
                let l = self.model.forward(&[tok], &mut self.cache, Logits::Last)?;
                self.held.push(tok);
                l
            }
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

    /// The model as loaded: the one [`prune`](Self::prune) starts from and calibration
    /// statistics must be collected on (the running model itself until a prune).
    pub fn unpruned_model(&self) -> &Model {
        self.unpruned.as_ref().unwrap_or(&self.model)
    }

    /// Whether a pruned model runs (the loaded one is kept for [`restore`](Self::restore)).
    pub fn is_pruned(&self) -> bool {
        self.unpruned.is_some()
    }

    /// The calibration tokens of `text` for [`calibrate_tokens`](Self::calibrate_tokens): the
    /// first `max_tokens` of its tokenization (BOS first when the tokenizer adds one).
    pub fn calibration_tokens(&self, text: &str, max_tokens: usize) -> Result<Vec<u32>> {
        let mut tokens = self.tokenizer.encode(text)?;
        tokens.truncate(max_tokens);
        if tokens.is_empty() {
            return Err(EngineError::Setting {
                name: "calibration",
                value: format!("{} characters, max_tokens {max_tokens}", text.len()),
                expected: "a text of at least one token and max_tokens of at least 1".into(),
            });
        }
        Ok(tokens)
    }

    /// Calibration statistics of the loaded (unpruned) model over the first `max_tokens`
    /// tokens of `text`, run in windows of `window` ([`crate::prune::collect_stats`]).
    pub fn calibrate(
        &self,
        text: &str,
        max_tokens: usize,
        window: usize,
    ) -> Result<ActivationStats> {
        let tokens = self.calibration_tokens(text, max_tokens)?;
        crate::prune::collect_stats(self.unpruned_model(), &tokens, window)
    }

    /// [`collect_stats`](crate::prune::collect_stats) of the loaded (unpruned) model over
    /// `tokens`, to run a long calibration piece by piece: statistics of consecutive pieces,
    /// each a whole number of windows (the last may be shorter), merged with
    /// [`merge_stats`](crate::prune::merge_stats) equal those of one run over all of them.
    pub fn calibrate_tokens(&self, tokens: &[u32], window: usize) -> Result<ActivationStats> {
        crate::prune::collect_stats(self.unpruned_model(), tokens, window)
    }

    /// Begins a calibration of the loaded (unpruned) model on the first `max_tokens` tokens of
    /// `text` ([`calibration_tokens`](Self::calibration_tokens)) in windows of `window`, to run
    /// with [`calibrate_step`](Self::calibrate_step) a few windows at a time.
    pub fn begin_calibration(
        &self,
        text: &str,
        max_tokens: usize,
        window: usize,
    ) -> Result<Calibration> {
        let tokens = self.calibration_tokens(text, max_tokens)?;
        Calibration::new(self.unpruned_model(), tokens, window)
    }

    /// Runs the next `windows` windows of `calibration` on the loaded (unpruned) model
    /// ([`Calibration::step`]); returns the tokens run so far.
    pub fn calibrate_step(&self, calibration: &mut Calibration, windows: usize) -> Result<usize> {
        calibration.step(self.unpruned_model(), windows)
    }

    /// Prunes the loaded model as `plan` says (`stats` from [`calibrate`](Self::calibrate) for
    /// activation importance) and runs the result from now on, in the formats, kernel and KV
    /// format the engine used: each pruned layer is converted back to the loaded weight format
    /// as soon as it is built ([`crate::prune::prune_into`]: no whole f32 copy of the model). Each call starts from the model
    /// as loaded, not from an earlier pruning (which is kept meanwhile, so
    /// [`restore`](Self::restore) brings it back and calibration statistics stay valid). The KV
    /// cache is rebuilt empty and the conversation cleared. On error nothing changes.
    pub fn prune(
        &mut self,
        plan: &PrunePlan,
        stats: Option<&ActivationStats>,
    ) -> Result<PruneReport> {
        let t0 = self.platform.now_ms();
        let base = self.unpruned_model();
        let options = LoadOptions {
            weights: base.weights.options.weights,
            embedding: Some(base.weights.options.embedding_format()),
            requantize: false,
        };
        let (kernel, kv_format) = (self.model.kernel, self.model.kv_format);
        let (mut model, report) = crate::prune::prune_into(base, plan, stats, options)?;
        model.kernel = kernel;
        model.kv_format = kv_format;
        model.pool = self.model.pool.clone();
        let old = std::mem::replace(&mut self.model, model);
        if self.unpruned.is_none() {
            self.unpruned = Some(old);
        }
        self.model_changed(t0);
        Ok(report)
    }

    /// Runs the model as loaded again after [`prune`](Self::prune); `false` (and nothing
    /// changes) when it already runs. The KV cache is rebuilt empty and the conversation
    /// cleared.
    pub fn restore(&mut self) -> bool {
        let t0 = self.platform.now_ms();
        match self.unpruned.take() {
            Some(mut model) => {
                model.kernel = self.model.kernel;
                model.kv_format = self.model.kv_format;
                model.pool = self.model.pool.clone();
                self.model = model;
                self.model_changed(t0);
                true
            }
            None => false,
        }
    }

    /// After the running model changed at `t0`: a fresh cache, no conversation, metrics for the
    /// new model (`load_ms` = the time the change took).
    fn model_changed(&mut self, t0: f64) {
        self.cache = self.model.new_cache(self.model.config.context_length);
        self.generation = None;
        self.held.clear();
        self.history.clear();
        self.transcript.clear();
        self.metrics = Metrics {
            load_ms: self.platform.now_ms() - t0,
            peak_bytes: self.platform.peak_bytes(),
            heap_bytes: self.platform.heap_bytes(),
            ..Metrics::for_model(&self.model)
        };
        self.refresh_kv();
    }

    /// Measurements so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn refresh_kv(&mut self) {
        self.metrics.kv_limit = self.cache.max_tokens();
        self.metrics.kv_tokens = self.cache.len();
        self.metrics.kv_bytes = self.cache.bytes();
        self.metrics.kv_reserved_bytes = self.cache.reserved_bytes();
    }
}

impl Metrics {
    /// Empty measurements naming `model`'s weights and kernel.
    /// Reads the platform's memory figures: the peak, and the heap in use.
    fn read_memory(&mut self, platform: &dyn Platform) {
        self.peak_bytes = platform.peak_bytes();
        self.heap_bytes = platform.heap_bytes();
    }

    fn for_model(model: &Model) -> Metrics {
        Metrics {
            weights_bytes: model.weights.bytes(),
            weights: model.weights.linear_format_name(),
            embedding: model.weights.embedding_format_name(),
            kernel: model.kernel.name().to_string(),
            threads: model.pool.threads(),
            kv_format: model.kv_format.to_string(),
            ..Metrics::default()
        }
    }
}

fn rate(tokens: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        tokens as f64 * 1000.0 / ms
    } else {
        0.0
    }
}
