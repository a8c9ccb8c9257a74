//! Device profiles: what a device offers (memory, per-unit compute and bandwidth, power, heat).
//!
//! Profiles live as JSON in `models/devices/*.json` and are embedded here. Each file carries a
//! `sources` map (field path → where the figure comes from) and an `estimates` list (fields
//! that are our estimates, not published figures). `this-browser` is a template: the wasm
//! facade measures bandwidth and kernel throughput in the tab and calls
//! [`DeviceProfile::this_browser`] with the results.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::deploy::Loader;
use crate::deploy::Runtime;
use crate::deploy::Thresholds;
use crate::error::{json_error_in, EstimateError, Result};
use crate::format::{ComputeDtype, ComputeUnit, WeightFormat};

/// Memory the device offers one app.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryProfile {
    /// Physical memory.
    pub total_bytes: u64,
    /// What one app may use before the OS kills it (or the tab's practical limit).
    pub usable_bytes: u64,
    /// Runtime, libraries, tokenizer, app (or wasm module and JS heap) resident besides the model.
    pub runtime_overhead_bytes: u64,
    /// Fragmentation allowance as a fraction of weights + KV (0.32 is the report's unmitigated
    /// sandbox figure; chunked loading brings it down).
    pub fragmentation: f64,
    /// Default loader.
    pub loader: Loader,
    /// Chunk size for [`Loader::Chunked`].
    #[serde(default)]
    pub loader_chunk_bytes: u64,
    /// wasm32 linear-memory limit, when the model runs in wasm (weights + KV + activations
    /// must fit in it).
    #[serde(default)]
    pub wasm_limit_bytes: Option<u64>,
    /// Theoretical DRAM bandwidth, GB/s: transfer rate × bus width (e.g. LPDDR5X-8533 on a
    /// 64-bit bus = 68.3 GB/s). Runtime profiles give achieved fractions of it; absent, the
    /// default unit's `bandwidth_gbs` stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theoretical_bandwidth_gbs: Option<f64>,
    /// Memory channels × width, as text for the explanation (e.g. `4 × 16-bit LPDDR5X-8533`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<String>,
}

/// One CPU cluster: identical cores at one top frequency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCluster {
    /// Core name, e.g. `Cortex-X4`.
    pub core: String,
    /// Cores in the cluster.
    pub cores: u32,
    /// Top frequency, MHz.
    pub freq_mhz: f64,
    /// f32 FLOPs per cycle per core (FMA counts 2): 16 for two 128-bit FMA pipes, 32 for four.
    pub f32_flops_per_cycle: f64,
}

/// Arithmetic features of a CPU that decide the precision a runtime's kernels reach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuFeatures {
    /// Armv8.2 dot product (SDOT/UDOT): int8 at 4× the f32 FMA rate.
    pub sdot: bool,
    /// Armv8.6 int8 matrix multiply (SMMLA): int8 at 8× the f32 FMA rate.
    pub i8mm: bool,
    /// Armv8.2 half-precision arithmetic: f16 at 2× the f32 rate.
    pub fp16: bool,
}

/// One compute unit (CPU cluster, GPU, NPU).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitProfile {
    /// Peak throughput at the top frequency, GFLOP/s (or GOP/s for int8), by compute dtype.
    /// `bf16` falls back to `f16` when absent.
    pub peak_gflops: BTreeMap<ComputeDtype, f64>,
    /// Fraction of the peak a good GEMM reaches (prefill).
    pub compute_efficiency: f64,
    /// Sustained memory bandwidth this unit reaches, GB/s (10^9 bytes/s).
    pub bandwidth_gbs: f64,
    /// How much of the bandwidth follows the unit's clock: the bandwidth at frequency `f` is
    /// `bandwidth_gbs · (1 − s + s · f/f_max)`. 0 = DRAM-bound regardless of the unit's clock.
    /// The domain notes' NPU figure (700 → 450 MHz costs 15% of memory-bound throughput) gives
    /// `s ≈ 0.42`.
    #[serde(default)]
    pub bandwidth_freq_sensitivity: f64,
    /// Optional third roof: weights per second (10^9) the unit's kernel for a format can
    /// decode and multiply, when it is instruction-bound (wasm int4 GEMV), at top frequency.
    #[serde(default)]
    pub weight_rate_gws: BTreeMap<WeightFormat, f64>,
    /// Optional kernel roof of a prompt-sized GEMM (prefill), by weight format: weight·rows per
    /// second (10^9), i.e. `m · N · K / time` of an `m`-row product (the tab measures `m = 64`).
    /// A matmul of `rows ≥ 64` activation rows takes `rows · weights / rate` on this roof (fewer
    /// rows: linear between the GEMV's time and the 64-row time, see `latency`); without it,
    /// `weight_rate_gws` (one pass over the weights) applies.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prefill_weight_rate_gws: BTreeMap<WeightFormat, f64>,
    /// Optional roof of the ops other than the matrix products (norms, the MLP activation, the
    /// attention: scores, softmax, weighted values), GFLOP/s of the FLOPs the op table counts
    /// for them: attention over a quantized cache and code that runs one value at a time
    /// (square roots, exponentials), far below a GEMM's rate. The tab measures it on the
    /// engine's own ops, whose RoPE, cache writes and residual adds (not rows of the op table)
    /// it folds in. Without it those ops run at the compute roof. A figure of this engine's
    /// ops: it applies where the device's own figures do (the `edgefit` runtime), not under
    /// another runtime's profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_gflops: Option<f64>,
    /// CPU clusters (CPU units only). With them, a runtime's peak is computed from the cores
    /// its threads use; without, `peak_gflops` stands for the whole unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<CpuCluster>,
    /// CPU arithmetic features (CPU units only).
    #[serde(default)]
    pub features: CpuFeatures,
    /// Threads a runtime uses by default on this CPU (the performance cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_threads: Option<u32>,
    /// Cores that together saturate DRAM: decode bandwidth with `t` threads is
    /// `BW · min(1, t / t_sat)` (default 1: one thread saturates, i.e. no thread dependence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_saturation_cores: Option<f64>,
    /// GPU only: the programming interface GPU runtimes drive it through (`metal` on Apple
    /// GPUs, `opencl` on Adreno): a runtime's kernels per interface are different code (ggml's
    /// Metal and OpenCL backends), so a runtime profile may give its fractions per interface
    /// ([`crate::runtime::RuntimeUnit::api_fractions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Fixed cost per operation (dispatch, synchronisation), microseconds.
    pub op_overhead_us: f64,
    /// DVFS frequency table, MHz, highest first. The governor steps along it.
    pub freq_mhz: Vec<f64>,
    /// Power of the unit when busy at the top frequency, W (DRAM excluded).
    pub active_power_w: f64,
    /// Busy power scales as `(f/f_max)^exponent`.
    pub power_freq_exponent: f64,
}

/// Power figures shared by all units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerProfile {
    /// Whole-device power with the screen on and the model idle, W.
    pub idle_w: f64,
    /// DRAM energy per byte moved, pJ.
    pub dram_pj_per_byte: f64,
    /// Battery capacity, Wh (null: mains powered).
    #[serde(default)]
    pub battery_wh: Option<f64>,
}

/// The lumped thermal RC network and the governor.
///
/// Two nodes: the die (SoC and package) and the body (frame, battery, skin), to ambient:
/// ```text
///  P ─► [die, C_d] ──R_db── [body, C_b] ──R_ba── ambient
/// ```
/// Step-wise governor (as Android's thermal-engine `step_wise`): every `poll_s`, if the die is
/// at or above `trip_c` step one frequency level down; if below `trip_c − hysteresis_c`, step
/// one level up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThermalProfile {
    /// Room temperature, °C.
    pub ambient_c: f64,
    /// Die heat capacity, J/K.
    pub die_capacity_j_per_k: f64,
    /// Body heat capacity, J/K.
    pub body_capacity_j_per_k: f64,
    /// Die-to-body thermal resistance, K/W.
    pub die_to_body_k_per_w: f64,
    /// Body-to-ambient thermal resistance, K/W.
    pub body_to_ambient_k_per_w: f64,
    /// Trip temperature of the die, °C.
    pub trip_c: f64,
    /// Hysteresis, °C.
    pub hysteresis_c: f64,
    /// Governor polling interval, s.
    pub poll_s: f64,
    /// The governor's skin limit, static power share and memory scaling (absent: the defaults
    /// of the device's kind, [`GovernorParams::for_kind`](crate::governor::GovernorParams::for_kind)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<crate::governor::GovernorParams>,
}

/// Everything the estimator knows about a device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// File stem, e.g. `snapdragon-8-gen3`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// `phone`, `tablet`, `board`, `laptop` or `browser` (decides the default thresholds).
    pub kind: String,
    /// Memory.
    pub memory: MemoryProfile,
    /// Compute units.
    pub units: BTreeMap<ComputeUnit, UnitProfile>,
    /// The unit used when the deployment does not say.
    pub default_unit: ComputeUnit,
    /// Power.
    pub power: PowerProfile,
    /// Heat.
    pub thermal: ThermalProfile,
    /// The runtime used on each unit when the deployment does not say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub default_runtime: BTreeMap<ComputeUnit, Runtime>,
    /// Acceptance thresholds for this device (default: those of its `kind`, see
    /// [`Thresholds::for_kind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
    /// Field path → source (datasheet, paper, benchmark).
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Field paths whose values are estimates rather than published figures.
    #[serde(default)]
    pub estimates: Vec<String>,
}

macro_rules! devices {
    ($($id:literal),+ $(,)?) => {
        pub(crate) const DEVICE_FILES: &[(&str, &str)] = &[
            $(($id, include_str!(concat!("../../../models/devices/", $id, ".json")))),+
        ];
    };
}

devices!(
    "snapdragon-8-gen3",
    "snapdragon-8-gen2",
    "snapdragon-8-gen1",
    "snapdragon-7-gen3",
    "dimensity-9300",
    "apple-a17-pro",
    "apple-a18-pro",
    "tensor-g4",
    "raspberry-pi-5",
    "apple-m2",
    "snapdragon-8-elite",
    "snapdragon-8-elite-gen5",
    "apple-m3",
    "apple-m3-max",
    "apple-m1",
    "apple-m1-max",
    "apple-m4",
    "apple-m4-max",
    "apple-m5",
    "apple-a19-pro",
    "tensor-g3",
    "rockchip-rk3588",
    "exynos-2400",
    "dimensity-9400",
    "dimensity-8400",
    "snapdragon-8s-gen3",
    "apple-a16",
    "tensor-g2",
    "kirin-9000e",
    "this-browser",
);

/// Ids of the bundled device profiles.
pub fn device_ids() -> Vec<&'static str> {
    DEVICE_FILES.iter().map(|(id, _)| *id).collect()
}

/// The bundled profile `id`.
pub fn device(id: &str) -> Result<DeviceProfile> {
    let text = DEVICE_FILES
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, t)| *t)
        .ok_or_else(|| EstimateError::UnknownName {
            kind: "device",
            value: id.to_string(),
            expected: device_ids().join(", "),
        })?;
    DeviceProfile::from_json(text)
}

/// What the micro-benchmarks (`edgefit_engine::microbench`) measured in this tab, with the
/// engine's own kernels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrowserMeasurements {
    /// Streaming read bandwidth, GB/s.
    pub read_bandwidth_gbs: f64,
    /// f32 GEMM throughput, GFLOP/s.
    pub f32_gflops: f64,
    /// Weights per second (10^9) of the engine's GEMV (one activation row, as in decode), by
    /// weight format (at least `f32` and `w4g32`), with the weights streamed from memory as a
    /// decode step streams them (a working set larger than the caches; a cache-resident GEMV
    /// runs ~2× faster and made the tab's decode estimate ~2× optimistic).
    pub weight_rate_gws: BTreeMap<WeightFormat, f64>,
    /// Weight·rows per second (10^9) of the engine's GEMM on a prompt-sized block of rows (64,
    /// the engine's prefill chunk), by weight format: `64 · N · K / time`.
    #[serde(default)]
    pub prefill_weight_rate_gws: BTreeMap<WeightFormat, f64>,
    /// The kernel the rates were measured with (`simd128`, `scalar`, ...), if known.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The engine's fixed cost per op, µs: a decode step of a model too small for its arithmetic
    /// to matter, divided by the ops the estimator counts in that step.
    #[serde(default)]
    pub op_overhead_us: Option<f64>,
    /// The engine's ops between its matrix products (RMSNorm, RoPE, attention over an int8
    /// KV cache, SiLU × up, residual adds) on a prompt chunk of a reference layer, GFLOP/s of
    /// the FLOPs the estimator counts for them (norms, MLP activation, attention):
    /// `UnitProfile::vector_gflops`.
    #[serde(default)]
    pub vector_gflops: Option<f64>,
    /// The wasm memory limit the tab gives (bytes), if known.
    #[serde(default)]
    pub wasm_limit_bytes: Option<u64>,
    /// The threads every probe ran on (the engine's pool; absent: one). The figures hold for a
    /// run on that many threads only: the page keeps one set per thread count.
    #[serde(default)]
    pub threads: Option<u32>,
    /// Measured by a native build of the engine (the CLI's `generate --estimate this-browser`),
    /// not in a browser tab: the profile is then named "This machine (native, …)".
    #[serde(default)]
    pub native: bool,
}

impl DeviceProfile {
    /// Parses and validates a profile (the JSON form of the files in `models/devices/`).
    pub fn from_json(text: &str) -> Result<DeviceProfile> {
        let p: DeviceProfile =
            serde_json::from_str(text).map_err(|e| json_error_in("device profile", text, e))?;
        p.validate()?;
        Ok(p)
    }

    /// `this-browser` with the bundled defaults replaced by the figures measured in this tab.
    ///
    /// Weight rates are *merged*: a format the tab measured replaces the bundled figure, a
    /// format it did not measure keeps the bundled one (still an estimate, from another
    /// machine). `sources` marks as measured only what was measured.
    ///
    /// The matrix products of this tab are bound by the engine's own kernels, per format and per
    /// phase (`weight_rate_gws` for decode, `prefill_weight_rate_gws` for a prompt-sized GEMM),
    /// not by an f32 GEMM: an int4 or int8 kernel does its arithmetic in integers and can beat
    /// it. So the f32 compute roof is set to
    /// `peak = max(f32 GEMM, 2 · max over formats of the measured kernel rates)` (2 FLOPs per
    /// weight·row): it never caps a format below its own measured kernel, and each format's
    /// matmuls take `max(bytes / bandwidth, weights · rows / rate)`. The ops without a kernel
    /// roof (attention, norms, activations) use that peak and the bandwidth.
    pub fn this_browser(m: &BrowserMeasurements) -> Result<DeviceProfile> {
        const MEASURED: &str = "measured in this tab by the wasm micro-benchmarks";
        let bad = |field: &str, v: f64| EstimateError::InvalidDevice {
            device: "this-browser".into(),
            field: format!("measurements.{field}"),
            reason: format!("{v} must be a positive finite number"),
        };
        let check = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(bad(field, v))
            }
        };
        check("read_bandwidth_gbs", m.read_bandwidth_gbs)?;
        check("f32_gflops", m.f32_gflops)?;
        for (f, v) in &m.weight_rate_gws {
            check(&format!("weight_rate_gws.{f}"), *v)?;
        }
        for (f, v) in &m.prefill_weight_rate_gws {
            check(&format!("prefill_weight_rate_gws.{f}"), *v)?;
        }
        if let Some(v) = m.op_overhead_us {
            check("op_overhead_us", v)?;
        }
        if let Some(v) = m.vector_gflops {
            check("vector_gflops", v)?;
        }
        let threads = m.threads.unwrap_or(1);
        if !(1..=crate::deploy::MAX_THREADS).contains(&threads) {
            return Err(EstimateError::InvalidDevice {
                device: "this-browser".into(),
                field: "measurements.threads".into(),
                reason: format!(
                    "{threads} must be a thread count from 1 to {}",
                    crate::deploy::MAX_THREADS
                ),
            });
        }
        let on = if threads == 1 {
            "one thread".to_string()
        } else {
            format!("{threads} threads")
        };
        let mut p = device("this-browser")?;
        let place = if m.native {
            "This machine (native"
        } else {
            "This browser tab (wasm32"
        };
        if let Some(k) = &m.kernel {
            p.name = format!("{place}, {k} kernel, {on})");
        } else if threads != 1 || m.native {
            p.name = format!("{place}, {on})");
        }
        let cpu =
            p.units
                .get_mut(&ComputeUnit::Cpu)
                .ok_or_else(|| EstimateError::InvalidDevice {
                    device: "this-browser".into(),
                    field: "units.cpu".into(),
                    reason: "missing".into(),
                })?;
        cpu.bandwidth_gbs = m.read_bandwidth_gbs;
        // The figures are those of `threads` threads: the estimate runs at that count by default.
        cpu.default_threads = m.threads;
        let fastest_kernel = m
            .weight_rate_gws
            .values()
            .chain(m.prefill_weight_rate_gws.values())
            .fold(0.0f64, |a, &b| a.max(b));
        let peak = m.f32_gflops.max(2.0 * fastest_kernel);
        cpu.peak_gflops.insert(ComputeDtype::F32, peak);
        cpu.compute_efficiency = 1.0;
        for (format, rate) in &m.weight_rate_gws {
            cpu.weight_rate_gws.insert(*format, *rate);
        }
        for (format, rate) in &m.prefill_weight_rate_gws {
            cpu.prefill_weight_rate_gws.insert(*format, *rate);
        }
        if let Some(us) = m.op_overhead_us {
            cpu.op_overhead_us = us;
        }
        if let Some(v) = m.vector_gflops {
            cpu.vector_gflops = Some(v);
        }
        let unmeasured: Vec<WeightFormat> = cpu
            .weight_rate_gws
            .keys()
            .filter(|f| !m.weight_rate_gws.contains_key(f))
            .copied()
            .collect();
        if let Some(limit) = m.wasm_limit_bytes {
            p.memory.wasm_limit_bytes = Some(limit);
        }
        let kernel = m.kernel.as_deref().unwrap_or("the default");
        let kernel = &if threads == 1 {
            kernel.to_string()
        } else {
            format!("{kernel} (on {threads} threads)")
        };
        let mut measured = vec![
            (
                "units.cpu.bandwidth_gbs".to_string(),
                if threads == 1 {
                    MEASURED.to_string()
                } else {
                    format!("{MEASURED}: {threads} threads streaming one slice of the buffer each")
                },
            ),
            (
                "units.cpu.peak_gflops.f32".to_string(),
                format!(
                    "{MEASURED}: max(f32 GEMM {:.1} GFLOP/s, 2 x the fastest {kernel} kernel rate {fastest_kernel:.2} G weights/s), so no format is capped below its own kernel",
                    m.f32_gflops
                ),
            ),
        ];
        if m.op_overhead_us.is_some() {
            measured.push((
                "units.cpu.op_overhead_us".to_string(),
                format!("{MEASURED}: a decode step of a 2-layer 64-wide model (its arithmetic is negligible) / the ops the estimator counts in it"),
            ));
        }
        if m.vector_gflops.is_some() {
            measured.push((
                "units.cpu.vector_gflops".to_string(),
                format!("{MEASURED}: the engine's ops between its matrix products (RMSNorm, RoPE, attention over an int8 KV cache, SiLU x up, residual adds) on a 64-token chunk of a SmolLM2-135M layer (one thread) / the FLOPs the estimator counts for its norms, MLP activation and attention"),
            ));
        }
        measured.extend(m.weight_rate_gws.keys().map(|f| {
            (
                format!("units.cpu.weight_rate_gws.{f}"),
                format!("{MEASURED}: the engine's {kernel} GEMV (1 row)"),
            )
        }));
        measured.extend(m.prefill_weight_rate_gws.keys().map(|f| {
            (
                format!("units.cpu.prefill_weight_rate_gws.{f}"),
                format!("{MEASURED}: the engine's {kernel} GEMM (64 rows)"),
            )
        }));
        for (f, src) in &measured {
            p.sources.insert(f.clone(), src.clone());
            p.estimates.retain(|e| e != f);
        }
        // The bundled list marks all weight rates as estimates; keep that only for the formats
        // the tab did not measure.
        if p.estimates.iter().any(|e| e == "units.cpu.weight_rate_gws") {
            p.estimates.retain(|e| e != "units.cpu.weight_rate_gws");
            p.estimates.extend(
                unmeasured
                    .iter()
                    .map(|f| format!("units.cpu.weight_rate_gws.{f}")),
            );
        }
        p.validate()?;
        Ok(p)
    }

    /// Checks every figure is finite and in a sensible range (positive where it must be).
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, reason: String| EstimateError::InvalidDevice {
            device: self.id.clone(),
            field: field.to_string(),
            reason,
        };
        let pos = |field: &str, v: f64| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(bad(field, format!("{v} must be a positive finite number")))
            }
        };
        let frac = |field: &str, v: f64, lo: f64| -> Result<()> {
            if v.is_finite() && v >= lo && v <= 1.0 {
                Ok(())
            } else {
                Err(bad(field, format!("{v} must be in [{lo}, 1]")))
            }
        };
        if self.memory.usable_bytes == 0 || self.memory.usable_bytes > self.memory.total_bytes {
            return Err(bad(
                "memory.usable_bytes",
                format!(
                    "{} must be in 1..=total_bytes ({})",
                    self.memory.usable_bytes, self.memory.total_bytes
                ),
            ));
        }
        frac("memory.fragmentation", self.memory.fragmentation, 0.0)?;
        if self.memory.loader == Loader::Chunked && self.memory.loader_chunk_bytes == 0 {
            return Err(bad(
                "memory.loader_chunk_bytes",
                "0 with the chunked loader".into(),
            ));
        }
        if self.units.is_empty() {
            return Err(bad("units", "no compute unit".into()));
        }
        if !self.units.contains_key(&self.default_unit) {
            return Err(bad(
                "default_unit",
                format!("{} is not among the units", self.default_unit),
            ));
        }
        for (u, p) in &self.units {
            let f = |s: &str| format!("units.{u}.{s}");
            if p.peak_gflops.is_empty() {
                return Err(bad(&f("peak_gflops"), "empty".into()));
            }
            for (dt, v) in &p.peak_gflops {
                pos(&f(&format!("peak_gflops.{dt}")), *v)?;
            }
            for (wf, v) in &p.prefill_weight_rate_gws {
                pos(&f(&format!("prefill_weight_rate_gws.{wf}")), *v)?;
            }
            for (wf, v) in &p.weight_rate_gws {
                pos(&f(&format!("weight_rate_gws.{wf}")), *v)?;
            }
            if let Some(v) = p.vector_gflops {
                pos(&f("vector_gflops"), v)?;
            }
            frac(&f("compute_efficiency"), p.compute_efficiency, 0.01)?;
            pos(&f("bandwidth_gbs"), p.bandwidth_gbs)?;
            frac(
                &f("bandwidth_freq_sensitivity"),
                p.bandwidth_freq_sensitivity,
                0.0,
            )?;
            if !(p.op_overhead_us.is_finite() && p.op_overhead_us >= 0.0) {
                return Err(bad(
                    &f("op_overhead_us"),
                    format!("{} must be >= 0", p.op_overhead_us),
                ));
            }
            if p.freq_mhz.is_empty() {
                return Err(bad(&f("freq_mhz"), "empty frequency table".into()));
            }
            for w in p.freq_mhz.windows(2) {
                if w[1] >= w[0] {
                    return Err(bad(
                        &f("freq_mhz"),
                        format!("{:?} is not strictly decreasing", p.freq_mhz),
                    ));
                }
            }
            for v in &p.freq_mhz {
                pos(&f("freq_mhz"), *v)?;
            }
            for (wf, v) in &p.prefill_weight_rate_gws {
                pos(&f(&format!("prefill_weight_rate_gws.{wf}")), *v)?;
            }
            for (i, c) in p.clusters.iter().enumerate() {
                if c.cores == 0 || c.cores > 256 {
                    return Err(bad(
                        &f(&format!("clusters[{i}].cores")),
                        format!("{} must be in 1..=256", c.cores),
                    ));
                }
                pos(&f(&format!("clusters[{i}].freq_mhz")), c.freq_mhz)?;
                pos(
                    &f(&format!("clusters[{i}].f32_flops_per_cycle")),
                    c.f32_flops_per_cycle,
                )?;
            }
            if let Some(t) = p.default_threads {
                let cores = p.cores();
                if t == 0 || (cores > 0 && t > cores) {
                    return Err(bad(
                        &f("default_threads"),
                        format!("{t} must be in 1..={}", cores.max(1)),
                    ));
                }
            }
            if let Some(s) = p.bandwidth_saturation_cores {
                if !(s.is_finite() && (1.0..=256.0).contains(&s)) {
                    return Err(bad(
                        &f("bandwidth_saturation_cores"),
                        format!("{s} must be in [1, 256]"),
                    ));
                }
            }
            pos(&f("active_power_w"), p.active_power_w)?;
            if !(p.power_freq_exponent.is_finite() && (0.0..=4.0).contains(&p.power_freq_exponent))
            {
                return Err(bad(
                    &f("power_freq_exponent"),
                    format!("{} must be in [0, 4]", p.power_freq_exponent),
                ));
            }
        }
        if let Some(bw) = self.memory.theoretical_bandwidth_gbs {
            pos("memory.theoretical_bandwidth_gbs", bw)?;
        }
        crate::deploy::check_kind(&self.id, &self.kind)?;
        if let Some(t) = &self.thresholds {
            t.validate().map_err(|e| bad("thresholds", e.to_string()))?;
        }
        pos("power.idle_w", self.power.idle_w)?;
        if !(self.power.dram_pj_per_byte.is_finite() && self.power.dram_pj_per_byte >= 0.0) {
            return Err(bad(
                "power.dram_pj_per_byte",
                format!("{} must be >= 0", self.power.dram_pj_per_byte),
            ));
        }
        if let Some(b) = self.power.battery_wh {
            pos("power.battery_wh", b)?;
        }
        let t = &self.thermal;
        if !(t.ambient_c.is_finite() && (-40.0..=60.0).contains(&t.ambient_c)) {
            return Err(bad(
                "thermal.ambient_c",
                format!("{} must be in [-40, 60]", t.ambient_c),
            ));
        }
        pos("thermal.die_capacity_j_per_k", t.die_capacity_j_per_k)?;
        pos("thermal.body_capacity_j_per_k", t.body_capacity_j_per_k)?;
        pos("thermal.die_to_body_k_per_w", t.die_to_body_k_per_w)?;
        pos("thermal.body_to_ambient_k_per_w", t.body_to_ambient_k_per_w)?;
        pos("thermal.poll_s", t.poll_s)?;
        // The simulation steps by a tenth of the fastest time constant (at most 0.1 s): a
        // hostile profile with near-zero constants would make it take billions of steps, so
        // each figure has a physical range and the fastest constant is at least 0.1 s (real
        // phones: seconds to minutes), which bounds a day's simulation to 8.64 million steps.
        for (field, v, lo, hi) in [
            (
                "thermal.die_capacity_j_per_k",
                t.die_capacity_j_per_k,
                0.01,
                1e5,
            ),
            (
                "thermal.body_capacity_j_per_k",
                t.body_capacity_j_per_k,
                0.01,
                1e5,
            ),
            (
                "thermal.die_to_body_k_per_w",
                t.die_to_body_k_per_w,
                0.01,
                1e3,
            ),
            (
                "thermal.body_to_ambient_k_per_w",
                t.body_to_ambient_k_per_w,
                0.01,
                1e3,
            ),
            ("thermal.poll_s", t.poll_s, 0.01, 3600.0),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err(bad(field, format!("{v} must be in [{lo}, {hi}]")));
            }
        }
        let tau = (t.die_capacity_j_per_k * t.die_to_body_k_per_w)
            .min(t.body_capacity_j_per_k * t.body_to_ambient_k_per_w)
            .min(t.die_capacity_j_per_k * t.body_to_ambient_k_per_w);
        if tau < 0.1 {
            return Err(bad(
                "thermal",
                format!(
                    "fastest time constant {tau} s (capacity × resistance) must be at least 0.1 s"
                ),
            ));
        }
        if !(t.hysteresis_c.is_finite() && t.hysteresis_c >= 0.0) {
            return Err(bad(
                "thermal.hysteresis_c",
                format!("{} must be >= 0", t.hysteresis_c),
            ));
        }
        if !(t.trip_c.is_finite() && t.trip_c > t.ambient_c) {
            return Err(bad(
                "thermal.trip_c",
                format!("{} must be above ambient {}", t.trip_c, t.ambient_c),
            ));
        }
        if let Some(g) = &t.governor {
            g.validate(&self.id)?;
        }
        Ok(())
    }

    /// The profile of `unit`, or an error naming the units the device has.
    pub fn unit(&self, unit: ComputeUnit) -> Result<&UnitProfile> {
        self.units
            .get(&unit)
            .ok_or_else(|| EstimateError::UnitUnavailable {
                device: self.id.clone(),
                unit: unit.to_string(),
                available: self
                    .units
                    .keys()
                    .map(|u| u.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl UnitProfile {
    /// Peak GFLOP/s for `dtype` at the top frequency (`bf16` falls back to `f16`), or `None`.
    pub fn peak_for(&self, dtype: ComputeDtype) -> Option<f64> {
        self.peak_gflops.get(&dtype).copied().or(match dtype {
            ComputeDtype::Bf16 => self.peak_gflops.get(&ComputeDtype::F16).copied(),
            _ => None,
        })
    }

    /// The top frequency, MHz.
    pub fn f_max(&self) -> f64 {
        self.freq_mhz.first().copied().unwrap_or(1.0)
    }

    /// Cores over all clusters (0 when the profile lists none).
    pub fn cores(&self) -> u32 {
        self.clusters.iter().map(|c| c.cores).sum()
    }

    /// Σ of the top frequencies (GHz) of the `threads` fastest cores. `None` without clusters.
    pub fn cluster_ghz(&self, threads: u32) -> Option<f64> {
        if self.clusters.is_empty() {
            return None;
        }
        let mut cores: Vec<(f64, f64)> = self
            .clusters
            .iter()
            .flat_map(|c| {
                std::iter::repeat_n(
                    (c.freq_mhz * 1e-3 * c.f32_flops_per_cycle, c.freq_mhz * 1e-3),
                    c.cores as usize,
                )
            })
            .collect();
        cores.sort_by(|a, b| b.0.total_cmp(&a.0));
        Some(cores.iter().take(threads as usize).map(|c| c.1).sum())
    }

    /// Peak GOP/s at `dtype` of the `threads` fastest cores, from the clusters:
    /// `Σ f_core · FLOP/cycle_f32 · m`, `m` = 1 (f32), 2 (f16/bf16 with fp16 arithmetic, else 1),
    /// 8 (int8 with i8mm), 4 (int8 with SDOT), 1 (int8 without either). `None` without clusters.
    pub fn cluster_peak(&self, dtype: ComputeDtype, threads: u32) -> Option<f64> {
        if self.clusters.is_empty() {
            return None;
        }
        let m = match dtype {
            ComputeDtype::F32 => 1.0,
            ComputeDtype::F16 | ComputeDtype::Bf16 if self.features.fp16 => 2.0,
            ComputeDtype::F16 | ComputeDtype::Bf16 => 1.0,
            ComputeDtype::Int8 if self.features.i8mm => 8.0,
            ComputeDtype::Int8 if self.features.sdot => 4.0,
            ComputeDtype::Int8 => 1.0,
        };
        let mut cores: Vec<f64> = self
            .clusters
            .iter()
            .flat_map(|c| {
                std::iter::repeat_n(c.freq_mhz * 1e-3 * c.f32_flops_per_cycle, c.cores as usize)
            })
            .collect();
        cores.sort_by(|a, b| b.total_cmp(a));
        Some(cores.iter().take(threads as usize).sum::<f64>() * m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile profiles (the JSON a user gives `--device`): each refused with an error naming
    /// the field and the value, and a thermal model that would take billions of simulation
    /// steps is among them.
    #[test]
    fn hostile_device_profiles_are_named_errors() {
        let base = serde_json::to_value(device("snapdragon-8-gen3").unwrap()).unwrap();
        DeviceProfile::from_json(&base.to_string()).unwrap();
        let cases: [(&str, &str, serde_json::Value, &[&str]); 9] = [
            (
                "thermal",
                "die_capacity_j_per_k",
                1e-9.into(),
                &["thermal.die_capacity_j_per_k", "0.000000001 must be in"],
            ),
            ("thermal", "poll_s", 0.into(), &["thermal.poll_s", "0"]),
            (
                "thermal",
                "body_to_ambient_k_per_w",
                1e300.into(),
                &["thermal.body_to_ambient_k_per_w"],
            ),
            (
                "thermal",
                "trip_c",
                (-1000).into(),
                &["thermal.trip_c", "-1000"],
            ),
            (
                "memory",
                "usable_bytes",
                0.into(),
                &["memory.usable_bytes", "0 must be"],
            ),
            (
                "memory",
                "fragmentation",
                7.into(),
                &["memory.fragmentation", "7"],
            ),
            ("power", "idle_w", (-2).into(), &["power.idle_w", "-2"]),
            (
                "memory",
                "usable_bytes",
                (-5).into(),
                &["device profile", "-5", "field \"usable_bytes\""],
            ),
            (
                "power",
                "idle_w",
                "lots".into(),
                &["device profile", "lots", "field \"idle_w\""],
            ),
        ];
        for (section, field, value, needles) in cases {
            let mut v = base.clone();
            v[section][field] = value.clone();
            let err = DeviceProfile::from_json(&v.to_string())
                .expect_err(&format!("{section}.{field} = {value}"));
            let msg = err.to_string();
            for n in needles {
                assert!(
                    msg.contains(n),
                    "{section}.{field} = {value}: `{n}` not in {msg}"
                );
            }
        }
        // A fast but physical thermal model: each figure in range, the product too small.
        let mut v = base.clone();
        v["thermal"]["die_capacity_j_per_k"] = 0.05.into();
        v["thermal"]["die_to_body_k_per_w"] = 0.05.into();
        let msg = DeviceProfile::from_json(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("time constant"), "{msg}");
        for garbage in ["", "{", "[]", "null", "{\"id\": 5}"] {
            assert!(DeviceProfile::from_json(garbage).is_err(), "{garbage:?}");
        }
        // Bundled profiles pass.
        for id in device_ids() {
            device(id).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn this_browser_merges_measured_weight_rates_into_the_bundled_ones() {
        let bundled = device("this-browser").unwrap();
        let bundled_cpu = bundled.unit(ComputeUnit::Cpu).unwrap();
        let w4_bundled = bundled_cpu.weight_rate_gws[&WeightFormat::W4g32];
        let m = BrowserMeasurements {
            read_bandwidth_gbs: 11.0,
            f32_gflops: 7.5,
            weight_rate_gws: [(WeightFormat::F32, 1.25)].into(),
            prefill_weight_rate_gws: [(WeightFormat::F32, 3.0)].into(),
            kernel: Some("scalar".into()),
            op_overhead_us: Some(4.5),
            vector_gflops: Some(1.5),
            wasm_limit_bytes: Some(4 << 30),
            threads: None,
            native: false,
        };
        let p = DeviceProfile::this_browser(&m).unwrap();
        assert!(p.name.contains("one thread"), "{}", p.name);
        assert!(p.name.starts_with("This browser tab (wasm32"), "{}", p.name);
        // Measured by a native build: named as this machine's, with or without a kernel name.
        for kernel in [Some("avx2".to_string()), None] {
            let native = DeviceProfile::this_browser(&BrowserMeasurements {
                native: true,
                kernel: kernel.clone(),
                ..m.clone()
            })
            .unwrap();
            assert!(
                native.name.starts_with("This machine (native, ")
                    && native.name.contains("one thread"),
                "{}",
                native.name
            );
            assert_eq!(native.name.contains("avx2 kernel"), kernel.is_some());
        }
        // Figures measured on 2 threads: the profile says so and runs at 2 threads by default;
        // a thread count outside 1..=256 is refused, naming the field.
        let two = DeviceProfile::this_browser(&BrowserMeasurements {
            threads: Some(2),
            ..m.clone()
        })
        .unwrap();
        assert!(
            two.name.contains("scalar kernel, 2 threads"),
            "{}",
            two.name
        );
        assert_eq!(two.unit(ComputeUnit::Cpu).unwrap().default_threads, Some(2));
        assert!(two.sources["units.cpu.weight_rate_gws.f32"].contains("on 2 threads"));
        for bad in [0, 257] {
            let e = DeviceProfile::this_browser(&BrowserMeasurements {
                threads: Some(bad),
                ..m.clone()
            })
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("measurements.threads") && e.contains(&bad.to_string()),
                "{e}"
            );
        }
        let cpu = p.unit(ComputeUnit::Cpu).unwrap();
        // Measured: replaced.
        assert_eq!(cpu.weight_rate_gws[&WeightFormat::F32], 1.25);
        assert_eq!(cpu.bandwidth_gbs, 11.0);
        assert_eq!(cpu.peak_gflops[&ComputeDtype::F32], 7.5);
        assert_eq!(cpu.prefill_weight_rate_gws[&WeightFormat::F32], 3.0);
        assert_eq!(cpu.op_overhead_us, 4.5);
        assert_eq!(cpu.vector_gflops, Some(1.5));
        assert_eq!(
            bundled_cpu.vector_gflops, None,
            "the bundled profile has no vector roof"
        );
        assert!(p.name.contains("scalar kernel"), "{}", p.name);
        // Not measured: the bundled figures stay.
        assert_eq!(cpu.weight_rate_gws[&WeightFormat::W4g32], w4_bundled);
        for (f, v) in &bundled_cpu.weight_rate_gws {
            if *f != WeightFormat::F32 {
                assert_eq!(cpu.weight_rate_gws[f], *v, "{f} keeps its bundled rate");
            }
        }
        // Sources: measured only for what was measured.
        let measured = |k: &str| {
            p.sources
                .get(k)
                .is_some_and(|s| s.contains("measured in this tab"))
        };
        assert!(measured("units.cpu.weight_rate_gws.f32"));
        assert!(measured("units.cpu.prefill_weight_rate_gws.f32"));
        assert!(measured("units.cpu.op_overhead_us"));
        assert!(measured("units.cpu.vector_gflops"));
        assert!(measured("units.cpu.bandwidth_gbs"));
        assert!(measured("units.cpu.peak_gflops.f32"));
        assert!(!measured("units.cpu.weight_rate_gws.w4g32"));
        assert!(!measured("units.cpu.weight_rate_gws"));
        // Estimates: the unmeasured rates are still listed as estimates, the measured are not.
        assert!(p
            .estimates
            .iter()
            .any(|e| e == "units.cpu.weight_rate_gws.w4g32"));
        assert!(!p
            .estimates
            .iter()
            .any(|e| e == "units.cpu.weight_rate_gws.f32"));
        assert!(!p.estimates.iter().any(|e| e == "units.cpu.weight_rate_gws"));
        assert!(!p.estimates.iter().any(|e| e == "units.cpu.bandwidth_gbs"));
    }
}
