//! A loaded model ready to generate, one token per [`Engine::step`], with measurements.
//! [`Engine`] here owns the lifecycle: loading, the kernel, thread and KV-format settings,
//! calibration, pruning and restoring the loaded model. The rest is split by what it does:
//! `session.rs` (one generation: settings, the prefill in chunks, the step loop),
//! `conversation.rs` (history, transcript and reuse of the tokens the KV cache holds) and
//! `metrics.rs` (what is measured), `warm.rs` (running the loaded model on a throwaway input
//! before the first measured run); their public items are re-exported here. The engine never reads a clock itself: it asks the injected
//! [`Platform`] ([`crate::platform`]).

use std::io::{Read, Seek};

use edgefit_kernels::Kernel;
use serde::Serialize;

use crate::config::LlamaConfig;
use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::Model;
pub use crate::platform::Platform;
use crate::prune::{ActivationStats, Calibration, PrunePlan, PruneReport};
use crate::tokenizer::{TextTokenizer, TokenizerInfo};
use crate::weights::{LoadOptions, WeightsSummary};
pub use metrics::{FinishReason, Metrics};
use session::Generation;
pub use session::{GenerateOptions, PrefillProgress, PREFILL_CHUNK};
pub use warm::{WarmUp, MAX_WARM_MS, MIN_WARM_PASSES, WARM_DECODE_STEPS, WARM_PROMPT_TOKENS};

mod conversation;
mod metrics;
mod session;
mod warm;

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

/// A model, its tokenizer, a KV cache and the generation in progress.
pub struct Engine {
    model: Model,
    tokenizer: TextTokenizer,
    cache: KvCache,
    platform: Box<dyn Platform>,
    generation: Option<Generation>,
    metrics: Metrics,
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

    /// Runs on `pool` from now on (as [`set_threads`](Self::set_threads) with its count, without
    /// starting new threads): the micro-benchmarks time the synthetic engine on the pool their
    /// other probes use, which the threaded wasm build has already started.
    pub(crate) fn use_pool(&mut self, pool: edgefit_kernels::Pool) {
        self.metrics.threads = pool.threads();
        if let Some(m) = &mut self.unpruned {
            m.pool = pool.clone();
        }
        self.model.pool = pool;
    }

    /// Stores the KV cache in `format` from the next generation on (the cache is rebuilt empty;
    /// a kept conversation continues, recomputed in the new format on its next turn).
    pub fn set_kv_format(&mut self, format: edgefit_estimate::KvFormat) {
        self.model.kv_format = format;
        self.cache = self.model.new_cache(self.model.config.context_length);
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
}
