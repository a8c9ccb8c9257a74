//! # edgefit-estimate
//!
//! Owns the pure budget estimator and the device thermal model: given a model's shape
//! ([`ModelSpec`]), a deployment ([`Deployment`]: weight format, KV format, context, prompt and
//! generated tokens, compute unit, thermal policy) and a device profile ([`DeviceProfile`]), it
//! predicts memory, time-to-first-token, decode speed as the cache grows (each with a range),
//! heat and throttling
//! over minutes, and the golden-four verdicts, and explains every number
//! ([`Report::explain`]).
//!
//! Why a crate of its own: the question "will this model, shaped this way, fit and run well on
//! that phone, and for how long before it throttles?" must be answerable before anything is
//! ported, identically in the CLI, the page and the engine's reports. So this crate has no
//! clock, no I/O and no dependency on the engine (serde, serde_json and thiserror only; JSON is
//! parsed from strings), and builds for wasm32 as it is.
//!
//! It is exact where arithmetic can be exact and honest where it is a model:
//! - **bytes are exact**: [`WeightFormat::matrix_bytes`] and [`kv_bytes_per_token`] are the
//!   single source of truth for weight and KV-cache sizes; the engine allocates with them, so
//!   the estimated KV bytes equal the allocated ones by construction ([`format`](mod@format)
//!   documents every layout);
//! - **parameter counts are exact** for llama, mistral, qwen2, gemma, gemma2 and phi3 shapes,
//!   including grouped-query attention, decoupled head dims and pruned per-layer shapes
//!   ([`spec`]); the bundled presets match the published totals to the parameter;
//! - **time is a roofline** per op (compute, memory and an optional instruction-bound kernel
//!   roof) with the efficiencies of the runtime that runs it on that unit ([`runtime`]:
//!   llama.cpp, ExecuTorch, LiteRT, MLC, QNN, Core ML, MLX, or edgefit with the device's own
//!   figures) ([`latency`]);
//! - **validated in public**: [`validate`] estimates the committed published measurements
//!   (`models/validation/`), fits two or three numbers per runtime × unit deterministically and
//!   reports in-sample and leave-one-source-out errors; [`uncertainty`] turns those residuals
//!   into the `[low, high]` range every latency and throughput carries;
//! - **heat is a lumped two-node RC model** with a step-wise governor ([`thermal`]).
//!
//! ## Entry points
//! ```
//! use edgefit_estimate::{device, estimate, preset, Deployment, WeightFormat};
//! let spec = preset("llama-3.2-1b")?;
//! let phone = device("snapdragon-8-gen3")?;
//! let dep = Deployment { weights: WeightFormat::W4g32, ..Deployment::default() };
//! let report = estimate(&spec, &dep, &phone)?;
//! assert!(report.memory.total_bytes > report.memory.weights_bytes);
//! # Ok::<(), edgefit_estimate::EstimateError>(())
//! ```
//! [`fit()`] searches models × formats × pruning × context for what passes on one device.
//! Model shapes also come from [`ModelSpec::from_hf_config`], [`GgufMetadata::to_spec`] and
//! [`ModelSpec::pruned`]; devices from [`DeviceProfile::from_json`] and, in a browser tab,
//! [`DeviceProfile::this_browser`] with measured figures.

pub mod band;
pub mod compare;
pub mod deploy;
pub mod device;
pub mod error;
pub mod explain;
pub mod fit;
pub mod format;
pub mod gguf;
pub mod governor;
pub mod hf;
pub mod latency;
mod macros;
pub mod memory;
pub mod report;
pub mod runtime;
pub mod source;
pub mod spec;
mod speed;
pub mod thermal;
pub mod uncertainty;
pub mod validate;
pub mod verdict;

pub use deploy::{
    Deployment, Policy, Thresholds, DEVICE_KINDS, MAX_BATCH, MAX_CONTEXT, MAX_THREADS,
};
pub use device::{
    device, device_ids, BrowserMeasurements, CpuCluster, CpuFeatures, DeviceProfile, Loader,
    UnitProfile,
};
pub use error::{EstimateError, Result};
pub use explain::Explanation;
pub use fit::{fit, FailCounts, FitModel, FitRequest, FitResult, FitRow, FitSearch};
pub use format::{
    kv_bytes, kv_bytes_per_token, BlockMatrix, ComputeDtype, ComputeUnit, KQuantRecipe, KvFormat,
    LayerMix, WeightFormat, DEFAULT_KV_FORMAT, KIVI_BLOCK,
};
pub use gguf::{GgufFileType, GgufMetadata, GgufTensorInfo, GgufValue};
pub use governor::GovernorParams;
pub use hf::{preset, preset_ids, preset_info, rope_from_hf_config, HfRope, PresetInfo};
pub use memory::{weight_bytes, weight_bytes_mixed, ComponentBytes, MemoryReport};
pub use report::{estimate, Report};
pub use runtime::{runtime_profile, runtime_profiles, Runtime, RuntimeProfile, RuntimeUnit};
pub use spec::{
    longrope_attention_factor, yarn_mscale, Family, LayerPrune, LayerSpec, ModelSpec,
    ParamBreakdown, PruneRatios, Pruning, RopeScaling,
};
pub use thermal::{
    all_thermal_traces, thermal_traces, trace_views, ThermalTrace, TraceFraction, TracePoint,
    TraceSample, TraceView,
};
pub use verdict::{Experience, Verdict, Verdicts};
