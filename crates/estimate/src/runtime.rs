//! Runtimes: how efficiently a given inference runtime uses a given compute unit.
//!
//! The same chip runs a model at very different speeds under llama.cpp, ExecuTorch, LiteRT,
//! MLC, QNN/Genie, Core ML or MLX: each picks its own compute precision per weight format (int8
//! dot products for a 4-bit GGUF on a CPU with SDOT/i8mm, f16 on a GPU, int8/int4 on an NPU),
//! reaches its own fraction of the unit's peak and of the DRAM bandwidth, and pays its own
//! fixed cost per op (kernel launch, thread barrier) and per forward pass (graph scheduling,
//! sampling). Each runtime is a small JSON profile in `models/runtimes/<id>.json`, bundled here,
//! with a `sources` map and lists of `estimates` and `fitted` fields.
//!
//! # What a runtime profile gives per unit ([`RuntimeUnit`])
//! - `compute`: weight format → compute precision of the matrix products (`default_compute`
//!   for formats not listed);
//! - `compute_fraction` `η_c`: achieved fraction of the unit's peak at that precision (over the
//!   cores used, for a CPU) in prefill GEMMs — **fitted** on the validation set, see
//!   [`crate::validate`];
//! - `decode_bandwidth_fraction` `η_d` and `prefill_bandwidth_fraction` `η_p`: achieved
//!   fractions of the device's theoretical DRAM bandwidth (`memory.theoretical_bandwidth_gbs`)
//!   — `η_d` is **fitted**;
//! - `op_overhead_us` `o`: fixed cost per op of the estimator's op table (≈ one kernel launch
//!   or one thread barrier) — **fitted** where the profile lists it (LiteRT's CPU: XNNPACK's
//!   dispatch per operator and the activations' dynamic quantization before each int8 product;
//!   see [`crate::validate`]), else cited or estimated — and `token_overhead_us` `τ`: fixed
//!   cost per forward pass;
//! - `decode_weights_per_cycle` `ρ` (CPU only): weights per cycle per core that its decode
//!   GEMV kernel's instructions retire for quantized formats (it unpacks every weight and
//!   scales every block before the dot product) — **fitted**. On a CPU this instruction time
//!   **adds** to the time of the op's bytes (`t = bytes / BW + weights / rate`), where a GPU
//!   takes the longer of the two: a core issues its loads and its unpacking from one
//!   instruction stream and a DRAM miss outlasts what its out-of-order window covers, so the
//!   two do not overlap (the Execution-Cache-Memory model of Treibig and Hager, which adds the
//!   in-core and the data-transfer times of a loop on CPUs); a GPU hides memory latency behind
//!   thousands of threads in flight. On the set, adding them moved the CPU decode LOSO from
//!   23.3% to 17.6% (the Apple M-series Macs' 8-thread decodes, which the longer-of rule could
//!   not reach with one ρ for every core, from −55..−75% to −35..+36%). The roof is per cycle of
//!   the cores used, not per SIMD lane (the roof per lane split the published decodes of
//!   2-pipe and 4-pipe cores by two);
//! - `decode_weights_per_flop` `κ` (GPU and NPU; per interface in `api_fractions` where the
//!   runtime has one kernel set per GPU API): weights per FLOP of the GPU's f32 peak (the vector
//!   ALUs that unpack and convert, not a matrix unit's f16 rate) that its dequantizing decode
//!   GEMV retires for quantized formats, rate = κ · peak_f32
//!   — **fitted** (llama.cpp: ggml-metal and ggml-opencl). A GEMV unpacks, scales and converts
//!   every weight before its one multiply-add, so a GPU whose bandwidth is large beside its
//!   ALUs reaches this roof first with 4-bit weights: in the set the M1 Max and M3 Max decode
//!   Q4_K at a smaller fraction of their bandwidth than F16, the M1 (68 GB/s) reaches its
//!   bandwidth with either, and the Adreno 840 decodes Q8_0 as fast as Q4_0. The runtimes whose
//!   GPU points hold no unquantized format (MLX, Core ML, LiteRT, MLC) have no such roof: their
//!   points cannot tell it from the bandwidth fraction. On an NPU (QNN) the same roof, counted on
//!   the peak of the activations' precision, binds only a deployment whose `compute` is a float
//!   (AI Hub's "w4": fp16 activations, every weight converted before the matrix unit multiplies;
//!   integer activations, w4a16, multiply the weights as they are), fitted on those points;
//! - `default_threads` (CPU only; `null` = the device's `default_threads`);
//! - `api_fractions` (GPU): `η_c` and `η_d` per GPU programming interface (the device unit's
//!   `api`: `metal`, `opencl`, `vulkan`), for a runtime whose backends per interface are
//!   separate kernel sets (llama.cpp: ggml-metal on Apple GPUs, ggml-opencl on Adreno); each
//!   pair is **fitted** on the points of devices with that interface, and a device whose
//!   interface has no entry takes the unit-level pair;
//! - `static_context`: the runtime runs graphs compiled with static shapes for the whole
//!   context `C` (QNN / Genie context binaries; LiteRT's models, exported by ai-edge-torch with
//!   a KV cache of `kv_cache_max` positions per layer), so each step's attention reads all `C`
//!   cached positions and computes over them (`S = n·C`, KV read `C` tokens), not the `p + n`
//!   filled;
//! - `kv_cache`: the KV-cache format the runtime's exported models hold, where the runtime
//!   fixes it (LiteRT: `f32`, ai-edge-torch's `KVCache` default dtype, the cache being an input
//!   and output tensor of every signature). The validation set estimates that runtime's points
//!   with it (else f16); `edgefit estimate` keeps the deployment's `--kv`.
//!
//! # The roofs it gives the time model (per phase, at the top frequency)
//! ```text
//! peak     = CPU: Σ over the t fastest cores of f_core · FLOP/cycle_f32 · m(precision)
//!            (m = 1 f32, 2 f16 with fp16 arithmetic, 4 int8 with SDOT, 8 with i8mm);
//!            other units: the profile's peak_gflops[precision]
//! compute  = peak · η_c in prefill; peak in decode (a batch-1 GEMV is bound by bytes or by
//!            the CPU's unpacking kernel, not by GEMM efficiency)
//! BW_phase = BW_theoretical · η_phase · min(1, t / t_sat)        (t_sat: cores that saturate DRAM)
//! rate     = decode of a quantized format on a CPU (weights/s): ρ · Σ f_core over the t
//!            cores used (the t fastest, as for the peak), whatever their SIMD width or i8mm;
//!            on a GPU: κ · peak_f32; on an NPU with float activations: κ · peak_compute
//! t_op     = max(FLOPs / compute, bytes / BW_phase, weights / rate) + o   (GPU, NPU)
//!            max(FLOPs / compute, bytes / BW_phase + weights / rate) + o   (CPU)
//! t_pass   = Σ ops t_op + τ
//! ```
//! The `edgefit` runtime is this engine: it keeps the device unit's own figures
//! (`compute_efficiency`, `bandwidth_gbs`, `op_overhead_us`, `weight_rate_gws`,
//! `prefill_weight_rate_gws`), which the page replaces with the tab's own measurements.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deploy::Deployment;
pub use crate::deploy::Runtime;
use crate::device::DeviceProfile;
use crate::error::{json_error_in, out_of_range, EstimateError, Result};
use crate::format::{ComputeDtype, ComputeUnit, KvFormat, WeightFormat};
use crate::latency::{FormatRates, PhaseRoof};
use crate::spec::ModelSpec;

/// What one runtime does on one compute unit (see the module docs for the formulas).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeUnit {
    /// Use the device unit's own figures (`compute_efficiency`, `bandwidth_gbs`,
    /// `op_overhead_us`, kernel rates) instead of the fractions below: the `edgefit` runtime,
    /// whose figures the page measures in the tab.
    #[serde(default)]
    pub device_figures: bool,
    /// Compute precision of the matrix products per weight format.
    #[serde(default)]
    pub compute: BTreeMap<WeightFormat, ComputeDtype>,
    /// Precision for weight formats not in `compute`.
    pub default_compute: ComputeDtype,
    /// Achieved fraction of peak compute at that precision in prefill GEMMs.
    pub compute_fraction: f64,
    /// Achieved fraction of the theoretical DRAM bandwidth in prefill.
    pub prefill_bandwidth_fraction: f64,
    /// Achieved fraction of the theoretical DRAM bandwidth in decode.
    pub decode_bandwidth_fraction: f64,
    /// Fixed cost per op of the op table, µs.
    pub op_overhead_us: f64,
    /// Fixed cost per forward pass (decode step or prefill chunk), µs.
    pub token_overhead_us: f64,
    /// CPU only: weights per cycle per core `ρ` that the runtime's decode GEMV kernel retires
    /// for quantized formats (everything but f32/f16/bf16): the instruction-bound kernel roof
    /// `ρ · Σ_t f_core` weights/s of a CPU decode over the `t` cores used. `None`: no such roof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_weights_per_cycle: Option<f64>,
    /// GPU only: weights per FLOP of the unit's f32 peak `κ` that the runtime's dequantizing
    /// decode GEMV retires for quantized formats: the kernel roof `κ · peak_f32` weights/s of a
    /// GPU decode (a GEMV unpacks, scales and converts every weight
    /// before its one multiply-add, so a large GPU reaches this roof before its bandwidth with
    /// 4-bit weights; a small one stays bandwidth-bound). `None`: no such roof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_weights_per_flop: Option<f64>,
    /// CPU only: whether its int8 kernels use the i8mm matrix instructions (SMMLA, 8× the f32
    /// rate) where the CPU has them; `false`: SDOT dot products (4×) at best.
    #[serde(default = "yes")]
    pub int8_i8mm: bool,
    /// CPU only: weight formats whose int8 kernels use i8mm even when `int8_i8mm` is `false`
    /// (e.g. llama.cpp's repacked layouts: q4_0, q4_K, q8_0 run SMMLA GEMMs; q6_K keeps SDOT).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub int8_i8mm_formats: Vec<WeightFormat>,
    /// Threads by default on a CPU (`None`: the device's `default_threads`).
    #[serde(default)]
    pub default_threads: Option<u32>,
    /// GPU only: `compute_fraction` and `decode_bandwidth_fraction` per programming
    /// interface of the device's GPU (`UnitProfile::api`), replacing the unit-level pair on
    /// devices with that interface.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub api_fractions: BTreeMap<String, ApiFractions>,
    /// Graphs compiled ahead of time with static shapes for the deployment's whole `context`
    /// (e.g. QNN / Genie context binaries, LiteRT's fixed-size caches): every step's attention
    /// reads the whole KV buffer and computes over it, whatever the cache holds (see
    /// [`crate::latency`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub static_context: bool,
    /// The KV-cache format the runtime's exported models hold, where the runtime fixes it
    /// (LiteRT's `f32`); `None`: the deployment's. The validation set estimates this
    /// runtime's points with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<KvFormat>,
}

/// The two fitted fractions of a runtime on one GPU programming interface.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiFractions {
    /// Achieved fraction of peak compute in prefill GEMMs.
    pub compute_fraction: f64,
    /// Achieved fraction of the theoretical DRAM bandwidth in decode.
    pub decode_bandwidth_fraction: f64,
    /// The decode kernel roof `κ` on this interface (replaces the unit's
    /// `decode_weights_per_flop`; absent: the unit's applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_weights_per_flop: Option<f64>,
}

/// A runtime profile: `models/runtimes/<id>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeProfile {
    /// The id (file stem).
    pub id: Runtime,
    /// Display name.
    pub name: String,
    /// The units it runs on, and how well.
    pub units: BTreeMap<ComputeUnit, RuntimeUnit>,
    /// Field path → source.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Field paths that are our estimates.
    #[serde(default)]
    pub estimates: Vec<String>,
    /// Field paths refitted on the validation set by [`crate::validate::fit_runtimes`] (the
    /// file's value is the prior used where no validation point constrains it).
    #[serde(default)]
    pub fitted: Vec<String>,
    /// The format the runtime's quantized files hold the output head in (and a tied
    /// embedding), where a deployment does not name one ([`QuantizedHead`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantized_head: Option<QuantizedHead>,
    /// How the runtime's quantizer stores the layer matrices of a file in one format
    /// ([`FileLayers`]); absent: every matrix in the layer format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_layers: Option<FileLayers>,
}

/// How a runtime's quantizer lays out the layers of its files (llama.cpp's `llama-quantize`,
/// see [`crate::format::LayerMix`]): per layer format, the format of `attn_v` and `ffn_down` in
/// the layers `use_more_bits` picks (`q4_k` → `q6_k`: the Q4_K_M files published as "q4_k"),
/// whether K-quant rows that do not fill a 256-wide block fall back to a 32-wide format, and the
/// layer formats whose files follow a low-bit recipe ([`crate::format::KQuantRecipe`]: `q3_k`
/// as Q3_K_M, `q2_k` as Q2_K).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLayers {
    #[serde(default)]
    pub more_bits: BTreeMap<WeightFormat, WeightFormat>,
    #[serde(default)]
    pub block_fallback: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipes: Vec<WeightFormat>,
}

/// How a runtime's quantizer stores the output head of a model whose layers are in one of
/// `layer_formats` (llama.cpp's `llama-quantize`: Q6_K, or Q8_0 when the rows' width is not a
/// multiple of Q6_K's 256-wide blocks): `format` when the hidden size is a multiple of
/// `row_block`, else `otherwise`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantizedHead {
    pub format: WeightFormat,
    pub row_block: u32,
    pub otherwise: WeightFormat,
    pub layer_formats: Vec<WeightFormat>,
}

impl RuntimeProfile {
    /// The output head's format for layers in `weights` and hidden size `hidden`, when the
    /// runtime's files fix it ([`RuntimeProfile::quantized_head`]); `None`: the layers'.
    pub fn head_format(&self, weights: WeightFormat, hidden: u32) -> Option<WeightFormat> {
        let q = self.quantized_head.as_ref()?;
        q.layer_formats.contains(&weights).then(|| {
            if q.row_block > 0 && hidden.is_multiple_of(q.row_block) {
                q.format
            } else {
                q.otherwise
            }
        })
    }
}

/// How the runtime's files store the layer matrices of a deployment in `dep.weights`
/// ([`RuntimeProfile::file_layers`]; the default, a pure file, for runtimes without one).
/// An untied token embedding stays in the layers' format where the runtime's quantizer fixes
/// the head's alone (`quantized_head` names the layer format and the deployment names no
/// embedding format): llama.cpp's `token_embd` in a Q4_K_M file is Q4_K (Q5_0 when the hidden
/// size does not fill a 256-wide block), its `output` Q6_K.
pub(crate) fn layer_mix(
    dep: &Deployment,
    rt: &RuntimeProfile,
    spec: &ModelSpec,
) -> crate::format::LayerMix {
    let token_embd = match &rt.quantized_head {
        Some(q) if dep.embedding_weights.is_none() && q.layer_formats.contains(&dep.weights) => {
            Some(dep.weights.ggml_fallback(u64::from(spec.hidden_size)))
        }
        _ => None,
    };
    let file = rt.file_layers.as_ref();
    let recipe = match (file, spec.layers.first()) {
        (Some(f), Some(l)) if f.recipes.contains(&dep.weights) => {
            crate::format::KQuantRecipe::for_format(dep.weights, l.num_heads, l.num_kv_heads)
        }
        _ => None,
    };
    crate::format::LayerMix {
        more_bits: file.and_then(|f| f.more_bits.get(&dep.weights).copied()),
        block_fallback: file.is_some_and(|f| f.block_fallback),
        token_embd,
        recipe,
    }
}

/// The format of a deployment's embedding and output head: the one it names, else the runtime's
/// for its layer format ([`RuntimeProfile::head_format`]), else the layers'.
pub(crate) fn head_weights(
    dep: &Deployment,
    rt: &RuntimeProfile,
    spec: &ModelSpec,
) -> WeightFormat {
    dep.embedding_weights
        .or_else(|| rt.head_format(dep.weights, spec.hidden_size))
        .unwrap_or(dep.weights)
}

macro_rules! runtimes {
    ($($id:literal),+ $(,)?) => {
        pub(crate) const RUNTIME_FILES: &[(&str, &str)] = &[
            $(($id, include_str!(concat!("../../../models/runtimes/", $id, ".json")))),+
        ];
    };
}

runtimes!(
    "llamacpp",
    "executorch",
    "litert",
    "mlc",
    "qnn",
    "coreml",
    "mlx",
    "edgefit"
);

/// The bundled profile of `id`, as committed (the priors; see [`crate::validate`] for the fit).
pub fn runtime_profile(id: Runtime) -> Result<RuntimeProfile> {
    let text = RUNTIME_FILES
        .iter()
        .find(|(i, _)| *i == id.as_str())
        .map(|(_, t)| *t)
        .ok_or_else(|| EstimateError::UnknownName {
            kind: "runtime",
            value: id.to_string(),
            expected: Runtime::ALL
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    RuntimeProfile::from_json(text)
}

/// Every bundled runtime profile, as committed.
pub fn runtime_profiles() -> Result<Vec<RuntimeProfile>> {
    Runtime::ALL.iter().map(|r| runtime_profile(*r)).collect()
}

impl RuntimeProfile {
    /// Parses and validates a runtime profile.
    pub fn from_json(text: &str) -> Result<RuntimeProfile> {
        let p: RuntimeProfile =
            serde_json::from_str(text).map_err(|e| json_error_in("runtime profile", text, e))?;
        p.validate()?;
        Ok(p)
    }

    /// Every fraction in (0, 1], overheads finite and non-negative, threads ≥ 1.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: String, reason: String| EstimateError::InvalidRuntime {
            runtime: self.id.to_string(),
            field,
            reason,
        };
        if self.units.is_empty() {
            return Err(bad("units".into(), "no compute unit".into()));
        }
        for (u, r) in &self.units {
            let api = r.api_fractions.iter().flat_map(|(a, f)| {
                [
                    (
                        format!("api_fractions.{a}.compute_fraction"),
                        f.compute_fraction,
                    ),
                    (
                        format!("api_fractions.{a}.decode_bandwidth_fraction"),
                        f.decode_bandwidth_fraction,
                    ),
                ]
            });
            for (name, v) in [
                ("compute_fraction".to_string(), r.compute_fraction),
                (
                    "prefill_bandwidth_fraction".to_string(),
                    r.prefill_bandwidth_fraction,
                ),
                (
                    "decode_bandwidth_fraction".to_string(),
                    r.decode_bandwidth_fraction,
                ),
            ]
            .into_iter()
            .chain(api)
            {
                if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                    return Err(bad(
                        format!("units.{u}.{name}"),
                        format!("{v} must be in (0, 1]"),
                    ));
                }
            }
            if !r.api_fractions.is_empty() && *u != ComputeUnit::Gpu {
                return Err(bad(
                    format!("units.{u}.api_fractions"),
                    "only a gpu unit has programming interfaces".into(),
                ));
            }
            for (name, v) in [
                ("op_overhead_us", r.op_overhead_us),
                ("token_overhead_us", r.token_overhead_us),
            ] {
                if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                    return Err(bad(
                        format!("units.{u}.{name}"),
                        format!("{v} must be in [0, 1e6] µs"),
                    ));
                }
            }
            if let Some(w) = r.decode_weights_per_cycle {
                if !(w.is_finite() && w > 0.0 && w <= MAX_WEIGHTS_PER_CYCLE) {
                    return Err(bad(
                        format!("units.{u}.decode_weights_per_cycle"),
                        format!("{w} must be in (0, {MAX_WEIGHTS_PER_CYCLE}]"),
                    ));
                }
            }
            let kappas = std::iter::once((
                "decode_weights_per_flop".to_string(),
                r.decode_weights_per_flop,
            ))
            .chain(r.api_fractions.iter().map(|(a, f)| {
                (
                    format!("api_fractions.{a}.decode_weights_per_flop"),
                    f.decode_weights_per_flop,
                )
            }));
            for (name, k) in kappas {
                let Some(k) = k else { continue };
                if *u == ComputeUnit::Cpu {
                    return Err(bad(
                        format!("units.{u}.{name}"),
                        "a cpu's decode kernel roof is decode_weights_per_cycle".into(),
                    ));
                }
                if !(k.is_finite() && k > 0.0 && k <= MAX_WEIGHTS_PER_FLOP) {
                    return Err(bad(
                        format!("units.{u}.{name}"),
                        format!("{k} must be in (0, {MAX_WEIGHTS_PER_FLOP}]"),
                    ));
                }
            }
            if r.default_threads == Some(0) {
                return Err(bad(
                    format!("units.{u}.default_threads"),
                    "0 must be at least 1".into(),
                ));
            }
        }
        Ok(())
    }

    /// The profile of `unit`, or an error naming the units this runtime runs on.
    pub fn unit(&self, unit: ComputeUnit) -> Result<&RuntimeUnit> {
        self.units
            .get(&unit)
            .ok_or_else(|| EstimateError::RuntimeUnitUnsupported {
                runtime: self.id.to_string(),
                unit: unit.to_string(),
                supported: self
                    .units
                    .keys()
                    .map(|u| u.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl RuntimeUnit {
    /// The precision the runtime multiplies `weights` in.
    pub fn compute_for(&self, weights: WeightFormat) -> ComputeDtype {
        self.compute
            .get(&weights)
            .copied()
            .unwrap_or(self.default_compute)
    }

    /// The entry of `api_fractions` that applies to a GPU programmed through `api`, if any.
    pub fn api_entry(&self, api: Option<&str>) -> Option<(&str, &ApiFractions)> {
        let a = api?;
        self.api_fractions
            .get_key_value(a)
            .map(|(k, f)| (k.as_str(), f))
    }
}

/// Largest `decode_weights_per_cycle` a profile may give (and the fit may reach): 64 weights a
/// cycle is four 128-bit SDOT pipes each taking 16 int8 weights, with no unpacking at all.
pub const MAX_WEIGHTS_PER_CYCLE: f64 = 64.0;

/// Largest `decode_weights_per_flop` a profile may give (and the fit may reach): a GEMV does
/// one multiply-add (2 FLOPs) per weight, so a kernel that did nothing else would retire 0.5.
pub const MAX_WEIGHTS_PER_FLOP: f64 = 0.5;

fn yes() -> bool {
    true
}

/// The peak (GFLOP/s) a dequantizing decode GEMV's `decode_weights_per_flop` counts on: a
/// GPU's f32 (else `compute`'s) peak; an NPU's peak of `compute` when that is a float
/// precision (integer activations are multiplied without converting the weights: no roof);
/// none on a CPU (its roof is per cycle).
pub(crate) fn dequantizing_peak(
    unit_id: ComputeUnit,
    unit: &crate::device::UnitProfile,
    compute: ComputeDtype,
) -> Option<f64> {
    match unit_id {
        ComputeUnit::Gpu => unit.peak_for(ComputeDtype::F32).or(unit.peak_for(compute)),
        ComputeUnit::Npu if compute != ComputeDtype::Int8 => unit.peak_for(compute),
        _ => None,
    }
}

/// Weights that a kernel must unpack (every format but f32, f16 and bf16).
pub fn is_quantized(w: WeightFormat) -> bool {
    !matches!(
        w,
        WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16
    )
}

/// The runtime a deployment on `unit` of `device` uses when it does not name one: the
/// profile's `default_runtime[unit]`, else `edgefit` in a browser, else `llamacpp` on a CPU or
/// GPU. An NPU has no runtime-independent default: the error asks for one.
pub fn default_runtime(device: &DeviceProfile, unit: ComputeUnit) -> Result<Runtime> {
    if let Some(r) = device.default_runtime.get(&unit) {
        return Ok(*r);
    }
    match unit {
        _ if device.kind == "browser" => Ok(Runtime::Edgefit),
        ComputeUnit::Cpu | ComputeUnit::Gpu => Ok(Runtime::Llamacpp),
        ComputeUnit::Npu => Err(EstimateError::UnknownName {
            kind: "runtime (the device profile names no default for its npu)",
            value: String::new(),
            expected: "qnn, coreml, litert, executorch".into(),
        }),
    }
}

/// How a runtime runs on one unit of one device: the resolved threads, precision and the roofs
/// of both phases at the top frequency.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Exec {
    pub runtime: Runtime,
    pub threads: Option<u32>,
    pub compute: ComputeDtype,
    pub prefill: PhaseRoof,
    pub decode: PhaseRoof,
    /// The runtime's graphs attend over the whole compiled context ([`RuntimeUnit::static_context`]).
    pub static_context: bool,
    pub warnings: Vec<String>,
}

/// Resolves `runtime` (profile `rt`, possibly refitted) on `unit_id` of `device` for `dep`.
pub(crate) fn resolve(
    device: &DeviceProfile,
    unit_id: ComputeUnit,
    dep: &Deployment,
    rt: &RuntimeProfile,
) -> Result<Exec> {
    let unit = device.unit(unit_id)?;
    let ru = rt.unit(unit_id)?;
    let mut warnings = Vec::new();
    let dtype_err = |dtype: ComputeDtype| EstimateError::DtypeUnavailable {
        device: device.id.clone(),
        unit: unit_id.to_string(),
        dtype: dtype.to_string(),
        available: unit
            .peak_gflops
            .keys()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    // Threads: CPU only.
    let cores = unit.cores();
    let threads = if unit_id == ComputeUnit::Cpu {
        let t = dep
            .threads
            .or(ru.default_threads)
            .or(unit.default_threads)
            .or((cores > 0).then_some(cores));
        if let (Some(t), true) = (t, cores > 0) {
            if t > cores {
                return Err(out_of_range(
                    "threads",
                    t,
                    format!("{} has {cores} CPU cores", device.id),
                ));
            }
        }
        t
    } else {
        if let Some(t) = dep.threads {
            warnings.push(format!(
                "threads = {t} ignored: only the cpu unit runs on threads, this runs on the {unit_id}"
            ));
        }
        None
    };
    if ru.device_figures {
        let compute = match dep.compute {
            Some(c) => c,
            None if unit.peak_for(ComputeDtype::F16).is_some() => ComputeDtype::F16,
            None => ComputeDtype::F32,
        };
        let peak = unit.peak_for(compute).ok_or_else(|| dtype_err(compute))?;
        // The GEMV roof applies to one-row products in both phases; a prompt-sized GEMM roof
        // (weight·rows/s, measured at GEMM_ROWS rows) to prefill's many-row products.
        // Every matrix takes the roofs measured for its own format (`FormatRates`): a mixed
        // file's q5_0 / q6_k matrices and the output head's format their own, any other the
        // layer format's.
        let rates = FormatRates::measured(&unit.weight_rate_gws, &unit.prefill_weight_rate_gws);
        let (decode_rate, gemm_rate) = rates.get(dep.weights);
        let phase = |gemm, rates| PhaseRoof {
            peak_gflops: peak,
            compute_fraction: unit.compute_efficiency,
            bandwidth_gbs: unit.bandwidth_gbs,
            weight_rate_gws: decode_rate,
            gemm_rate_gws: gemm,
            format_rates: rates,
            vector_gflops: unit.vector_gflops,
            op_overhead_us: unit.op_overhead_us,
            pass_overhead_us: 0.0,
            kernel_adds_to_memory: false,
        };
        return Ok(Exec {
            runtime: rt.id,
            threads,
            compute,
            prefill: phase(gemm_rate, rates),
            decode: phase(None, rates.gemv_only()),
            static_context: ru.static_context,
            warnings,
        });
    }
    // Per-interface fractions (llama.cpp's Metal vs OpenCL kernels) replace the unit's pair.
    let with_api;
    let ru = match ru.api_entry(unit.api.as_deref()) {
        Some((_, f)) => {
            let mut r = ru.clone();
            r.compute_fraction = f.compute_fraction;
            r.decode_bandwidth_fraction = f.decode_bandwidth_fraction;
            if f.decode_weights_per_flop.is_some() {
                r.decode_weights_per_flop = f.decode_weights_per_flop;
            }
            with_api = r;
            &with_api
        }
        None => ru,
    };
    let compute = dep.compute.unwrap_or(ru.compute_for(dep.weights));
    let sdot_only;
    // i8mm where the runtime's kernel for this format uses it and the CPU has it, else SDOT.
    let i8mm = ru.int8_i8mm || ru.int8_i8mm_formats.contains(&dep.weights);
    let cpu = if i8mm || !unit.features.i8mm {
        unit
    } else {
        let mut u = unit.clone();
        u.features.i8mm = false;
        sdot_only = u;
        &sdot_only
    };
    let cluster_peak = threads.and_then(|t| cpu.cluster_peak(compute, t));
    let peak = match cluster_peak {
        Some(p) => p,
        None => unit.peak_for(compute).ok_or_else(|| dtype_err(compute))?,
    };
    let base_bw = device
        .memory
        .theoretical_bandwidth_gbs
        .unwrap_or(unit.bandwidth_gbs);
    let thread_bw = match threads {
        Some(t) => (f64::from(t) / unit.bandwidth_saturation_cores.unwrap_or(1.0)).min(1.0),
        None => 1.0,
    };
    let phase = |bw_fraction: f64| PhaseRoof {
        peak_gflops: peak,
        compute_fraction: ru.compute_fraction,
        bandwidth_gbs: base_bw * bw_fraction * thread_bw,
        weight_rate_gws: None,
        gemm_rate_gws: None,
        format_rates: FormatRates::default(),
        vector_gflops: None,
        op_overhead_us: ru.op_overhead_us,
        pass_overhead_us: ru.token_overhead_us,
        kernel_adds_to_memory: unit_id == ComputeUnit::Cpu,
    };
    // Decode's compute roof is the unit's peak: η_c is a GEMM figure, and a batch-1 GEMV is
    // bound by the bytes it moves or, on a CPU, by the unpacking kernel (the rate below).
    let mut decode = PhaseRoof {
        compute_fraction: 1.0,
        ..phase(ru.decode_bandwidth_fraction)
    };
    // The decode GEMV's instruction roof: ρ weights per cycle on each core used, at its top
    // clock: rate = ρ · Σ_t f_core. Per cycle, not per SIMD lane or i8mm: a batch-1 GEMV has
    // one activation row (SMMLA multiplies two-row blocks, so the GEMV kernels multiply with
    // SDOT: ggml-cpu's repacked q4_0 GEMV, `ggml_gemv_q4_0_4x8_q8_0`, is built on
    // `vdotq_s32`), and the published decodes retire about the same weights per cycle on 2-pipe
    // and 4-pipe cores (see the module docs).
    if is_quantized(dep.weights) {
        if let (Some(w), Some(ghz)) = (
            ru.decode_weights_per_cycle,
            threads.and_then(|t| unit.cluster_ghz(t)),
        ) {
            decode.weight_rate_gws = Some(w * ghz);
        }
        // A dequantizing GEMV: κ weights per FLOP, rate = κ · peak (GFLOP/s → 10^9
        // weights/s). On a GPU the peak is its f32 one (the vector ALUs, which unpack, scale
        // and convert; not a matrix unit's f16 rate); on an NPU the roof applies only when its
        // activations are float (`compute` f16: the weights are converted before the matrix
        // unit multiplies, where integer activations multiply the integers as they are), on
        // the peak of that precision.
        if let (Some(k), Some(peak)) = (
            ru.decode_weights_per_flop,
            dequantizing_peak(unit_id, unit, compute),
        ) {
            decode.weight_rate_gws = Some(k * peak);
        }
    }
    Ok(Exec {
        runtime: rt.id,
        threads,
        compute,
        prefill: phase(ru.prefill_bandwidth_fraction),
        decode,
        static_context: ru.static_context,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_runtimes_parse_and_hostile_ones_are_named_errors() {
        for r in Runtime::ALL {
            let p = runtime_profile(*r).unwrap();
            assert_eq!(p.id, *r);
        }
        let mut v = serde_json::to_value(runtime_profile(Runtime::Llamacpp).unwrap()).unwrap();
        v["units"]["cpu"]["compute_fraction"] = 1.5.into();
        let msg = RuntimeProfile::from_json(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("units.cpu.compute_fraction") && msg.contains("1.5"),
            "{msg}"
        );
        let msg = runtime_profile(Runtime::Qnn)
            .unwrap()
            .unit(ComputeUnit::Cpu)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("qnn") && msg.contains("npu"), "{msg}");
        assert!("tensorrt".parse::<Runtime>().is_err());
    }

    /// A GPU whose programming interface has its own entry in `api_fractions` takes that
    /// pair (llama.cpp's Metal vs OpenCL kernels); one without (or another api) takes the
    /// unit's; an entry outside the gpu unit or out of (0, 1] is a named error.
    #[test]
    fn gpu_fractions_follow_the_device_programming_interface() {
        let mut rt = runtime_profile(Runtime::Llamacpp).unwrap();
        let gpu = rt.units.get_mut(&ComputeUnit::Gpu).unwrap();
        gpu.compute_fraction = 0.5;
        gpu.api_fractions.insert(
            "opencl".into(),
            ApiFractions {
                compute_fraction: 0.1,
                decode_bandwidth_fraction: 0.25,
                decode_weights_per_flop: None,
            },
        );
        let dep = Deployment {
            weights: WeightFormat::Q4_0,
            unit: Some(ComputeUnit::Gpu),
            runtime: Some(Runtime::Llamacpp),
            ..Deployment::default()
        };
        let mut d = crate::device::device("snapdragon-8-elite-gen5").unwrap();
        assert_eq!(d.units[&ComputeUnit::Gpu].api.as_deref(), Some("opencl"));
        let e = resolve(&d, ComputeUnit::Gpu, &dep, &rt).unwrap();
        assert_eq!(e.prefill.compute_fraction, 0.1);
        let bw = d.memory.theoretical_bandwidth_gbs.unwrap();
        assert!((e.decode.bandwidth_gbs - 0.25 * bw).abs() < 1e-9);
        d.units.get_mut(&ComputeUnit::Gpu).unwrap().api = Some("vulkan".into());
        let e = resolve(&d, ComputeUnit::Gpu, &dep, &rt).unwrap();
        assert_eq!(e.prefill.compute_fraction, 0.5);
        let mut v = serde_json::to_value(&rt).unwrap();
        v["units"]["gpu"]["api_fractions"]["opencl"]["compute_fraction"] = 0.0.into();
        let msg = RuntimeProfile::from_json(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("api_fractions.opencl.compute_fraction"),
            "{msg}"
        );
        let mut v = serde_json::to_value(&rt).unwrap();
        v["units"]["cpu"]["api_fractions"] = v["units"]["gpu"]["api_fractions"].clone();
        let msg = RuntimeProfile::from_json(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("units.cpu.api_fractions"), "{msg}");
    }

    /// The CPU decode kernel roof is ρ weights per cycle on each core used: ρ · Σ f_core over
    /// the threads' cores, so a faster clock raises it in proportion and neither twice the SIMD
    /// width nor i8mm does (a one-row GEMV multiplies with SDOT), while i8mm doubles the
    /// prefill peak of the formats whose GEMM kernels use it (llama.cpp: q4_0, not q6_k).
    #[test]
    fn cpu_decode_kernel_roof_is_per_cycle_of_the_cores_used() {
        let rt = runtime_profile(Runtime::Llamacpp).unwrap();
        let w = rt.units[&ComputeUnit::Cpu]
            .decode_weights_per_cycle
            .unwrap();
        let dep = |w| Deployment {
            weights: w,
            unit: Some(ComputeUnit::Cpu),
            runtime: Some(Runtime::Llamacpp),
            threads: Some(2),
            ..Deployment::default()
        };
        let rate = |d: &DeviceProfile, w| {
            resolve(d, ComputeUnit::Cpu, &dep(w), &rt)
                .unwrap()
                .decode
                .weight_rate_gws
                .unwrap()
        };
        let pi = crate::device::device("raspberry-pi-5").unwrap();
        // Two Cortex-A76 at 2.4 GHz.
        assert!((rate(&pi, WeightFormat::Q4_0) - w * 2.0 * 2.4).abs() < 1e-9);
        let mut wide = pi.clone();
        for c in &mut wide.units.get_mut(&ComputeUnit::Cpu).unwrap().clusters {
            c.f32_flops_per_cycle *= 2.0;
        }
        let r = rate(&wide, WeightFormat::Q4_0) / rate(&pi, WeightFormat::Q4_0);
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        let mut fast = pi.clone();
        for c in &mut fast.units.get_mut(&ComputeUnit::Cpu).unwrap().clusters {
            c.freq_mhz *= 1.5;
        }
        let r = rate(&fast, WeightFormat::Q4_0) / rate(&pi, WeightFormat::Q4_0);
        assert!((r - 1.5).abs() < 1e-9, "{r}");
        // i8mm doubles the prefill peak of the formats whose GEMM uses it (q4_0), but not the
        // decode GEMV roof: one activation row multiplies with SDOT.
        let mut mm = pi.clone();
        mm.units.get_mut(&ComputeUnit::Cpu).unwrap().features.i8mm = true;
        let r = rate(&mm, WeightFormat::Q4_0) / rate(&pi, WeightFormat::Q4_0);
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        let prefill_peak = |d: &DeviceProfile| {
            resolve(d, ComputeUnit::Cpu, &dep(WeightFormat::Q4_0), &rt)
                .unwrap()
                .prefill
                .peak_gflops
        };
        let r = prefill_peak(&mm) / prefill_peak(&pi);
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        // A hostile value is a named error.
        let mut v = serde_json::to_value(&rt).unwrap();
        v["units"]["cpu"]["decode_weights_per_cycle"] = 100.0.into();
        let msg = RuntimeProfile::from_json(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("units.cpu.decode_weights_per_cycle"), "{msg}");
        // Unquantized weights have no unpacking kernel, so no such roof.
        let d = resolve(&pi, ComputeUnit::Cpu, &dep(WeightFormat::F16), &rt).unwrap();
        assert_eq!(d.decode.weight_rate_gws, None);
    }

    /// A GPU's decode kernel roof is κ · the f32 peak, the interface's κ
    /// replacing the unit's; none for unquantized weights; a κ on a CPU or beyond 0.5 weights
    /// per FLOP is a named error.
    #[test]
    fn gpu_kernel_roof_is_kappa_times_the_peak_per_interface() {
        let dev = crate::device::device("snapdragon-8-gen3").unwrap();
        let peak = dev.units[&ComputeUnit::Gpu]
            .peak_for(ComputeDtype::F32)
            .unwrap();
        let api = dev.units[&ComputeUnit::Gpu].api.clone().unwrap();
        let mut rt = runtime_profile(Runtime::Llamacpp).unwrap();
        let gpu = rt.units.get_mut(&ComputeUnit::Gpu).unwrap();
        gpu.decode_weights_per_flop = Some(0.01);
        gpu.api_fractions
            .get_mut(&api)
            .unwrap()
            .decode_weights_per_flop = None;
        let dep = |w| Deployment {
            weights: w,
            unit: Some(ComputeUnit::Gpu),
            ..Deployment::default()
        };
        let d = resolve(&dev, ComputeUnit::Gpu, &dep(WeightFormat::Q4_0), &rt).unwrap();
        let r = d.decode.weight_rate_gws.unwrap();
        assert!((r - 0.01 * peak).abs() < 1e-9 * r, "{r} vs {peak}");
        let gpu = rt.units.get_mut(&ComputeUnit::Gpu).unwrap();
        gpu.api_fractions
            .get_mut(&api)
            .unwrap()
            .decode_weights_per_flop = Some(0.03);
        let d = resolve(&dev, ComputeUnit::Gpu, &dep(WeightFormat::Q4_0), &rt).unwrap();
        let r = d.decode.weight_rate_gws.unwrap();
        assert!((r - 0.03 * peak).abs() < 1e-9 * r, "{r} vs {peak}");
        let d = resolve(&dev, ComputeUnit::Gpu, &dep(WeightFormat::F16), &rt).unwrap();
        assert_eq!(d.decode.weight_rate_gws, None);
        for (path, value) in [
            (["units", "cpu", "decode_weights_per_flop"], 0.01),
            (["units", "gpu", "decode_weights_per_flop"], 0.6),
        ] {
            let mut v = serde_json::to_value(&rt).unwrap();
            v[path[0]][path[1]][path[2]] = value.into();
            let msg = RuntimeProfile::from_json(&v.to_string())
                .unwrap_err()
                .to_string();
            assert!(msg.contains(&path.join(".")), "{msg}");
        }
    }

    /// The decode kernel time adds to the bytes' time on a CPU under a runtime profile, not on a
    /// GPU and not under this engine's own measured figures (its GEMV rates are measured on
    /// streamed weights, bytes included).
    #[test]
    fn only_a_cpu_runtime_adds_kernel_and_memory_time() {
        let dev = crate::device::device("snapdragon-8-gen3").unwrap();
        let dep = |unit| Deployment {
            weights: WeightFormat::Q4_0,
            unit: Some(unit),
            ..Deployment::default()
        };
        let rt = runtime_profile(Runtime::Llamacpp).unwrap();
        let cpu = resolve(&dev, ComputeUnit::Cpu, &dep(ComputeUnit::Cpu), &rt).unwrap();
        assert!(cpu.decode.kernel_adds_to_memory);
        let gpu = resolve(&dev, ComputeUnit::Gpu, &dep(ComputeUnit::Gpu), &rt).unwrap();
        assert!(!gpu.decode.kernel_adds_to_memory);
        let browser = crate::device::device("this-browser").unwrap();
        let own = runtime_profile(Runtime::Edgefit).unwrap();
        let e = resolve(&browser, ComputeUnit::Cpu, &dep(ComputeUnit::Cpu), &own).unwrap();
        assert!(!e.decode.kernel_adds_to_memory);
    }

    /// On an NPU the dequantizing roof binds only a model with float activations (AI Hub's
    /// "w4": its weights converted to fp16 before the multiply), on the peak of that
    /// precision; integer activations (w4a16) multiply the integers as they are: no roof.
    #[test]
    fn npu_kernel_roof_binds_only_float_activations() {
        let dev = crate::device::device("snapdragon-8-elite").unwrap();
        let f16 = dev.units[&ComputeUnit::Npu]
            .peak_for(ComputeDtype::F16)
            .unwrap();
        let mut rt = runtime_profile(Runtime::Qnn).unwrap();
        let npu = rt.units.get_mut(&ComputeUnit::Npu).unwrap();
        npu.decode_weights_per_flop = Some(0.003);
        let dep = |compute| Deployment {
            weights: WeightFormat::W4g128,
            compute,
            unit: Some(ComputeUnit::Npu),
            ..Deployment::default()
        };
        let d = resolve(&dev, ComputeUnit::Npu, &dep(Some(ComputeDtype::F16)), &rt).unwrap();
        let r = d.decode.weight_rate_gws.unwrap();
        assert!((r - 0.003 * f16).abs() < 1e-9 * r, "{r} vs {f16}");
        let d = resolve(&dev, ComputeUnit::Npu, &dep(None), &rt).unwrap();
        assert_eq!(d.compute, ComputeDtype::Int8);
        assert_eq!(d.decode.weight_rate_gws, None);
    }
}
