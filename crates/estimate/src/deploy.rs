//! Deployment knobs: how the model is stored and run (weight, KV and compute formats, the
//! [`Runtime`] and [`Loader`] it names), the thermal [`Policy`] and the acceptance thresholds.
//! Plain data at the bottom of the module graph (it names only `error`, `format` and `macros`):
//! device profiles, runtime profiles and every computation name these types, never the reverse.

use serde::{Deserialize, Serialize};

use crate::error::{out_of_range, Result};
use crate::format::{ComputeDtype, ComputeUnit, KvFormat, WeightFormat};
use crate::macros::named_enum;

/// Longest context the estimator accepts (2^21 tokens); beyond is a typo, not a deployment.
pub const MAX_CONTEXT: u32 = 1 << 21;
/// Largest batch accepted.
pub const MAX_BATCH: u32 = 256;
/// Longest thermal simulation, minutes (one day).
pub const MAX_MINUTES: f64 = 1440.0;

named_enum! {
    /// An inference runtime.
    Runtime, "runtime" {
        /// llama.cpp (ggml): CPU NEON kernels, OpenCL/Vulkan/Metal GPU backends.
        Llamacpp = "llamacpp",
        /// PyTorch ExecuTorch: XNNPACK on the CPU, QNN / Core ML / MediaTek delegates on NPUs.
        Executorch = "executorch",
        /// Google LiteRT (TensorFlow Lite) / LiteRT-LM: XNNPACK CPU, ML Drift GPU, NPU delegates.
        Litert = "litert",
        /// MLC LLM (TVM-compiled OpenCL / Metal / Vulkan kernels).
        Mlc = "mlc",
        /// Qualcomm QNN / Genie on the Hexagon NPU.
        Qnn = "qnn",
        /// Apple Core ML.
        Coreml = "coreml",
        /// Apple MLX.
        Mlx = "mlx",
        /// This engine (edgefit): the device unit's own figures.
        Edgefit = "edgefit",
    }
}

/// How the runtime gets the weights from the file into memory; decides the loader duplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loader {
    /// The file is memory-mapped and used in place: no second copy.
    Mmap,
    /// The file is read in chunks of `loader_chunk_bytes` and unpacked: one chunk extra.
    Chunked,
    /// The whole file is held as bytes while the unpacked weights are built (a browser given a
    /// `Uint8Array`): a full second copy at peak.
    Copy,
}

/// How work is scheduled over time in the thermal simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Back-to-back work at whatever frequency the governor allows.
    FlatOut,
    /// Work in chunks of at most `pacing_work_ms` with `pacing_idle_ms` idle between them.
    Paced,
    /// Never above `freq_cap_mhz` (default: the second step of the unit's table).
    Capped,
}

impl std::str::FromStr for Policy {
    type Err = crate::EstimateError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "flat-out" => Ok(Policy::FlatOut),
            "paced" => Ok(Policy::Paced),
            "capped" => Ok(Policy::Capped),
            _ => Err(crate::EstimateError::UnknownName {
                kind: "policy",
                value: s.to_string(),
                expected: "flat-out, paced, capped".into(),
            }),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Policy::FlatOut => "flat-out",
            Policy::Paced => "paced",
            Policy::Capped => "capped",
        })
    }
}

/// The golden-four acceptance thresholds and the reading-speed experience line.
///
/// They belong to the device class: a board with an active cooler is not held to a phone's
/// skin-temperature rise. [`Thresholds::for_kind`] gives the defaults per `kind` (the table
/// below); a device profile may carry its own `thresholds`; a deployment may override both.
///
/// | kind | peak memory | TTFT | sustained | temperature rise | why the rise |
/// |---|---|---|---|---|---|
/// | `phone` | 5.2 GB | 800 ms | 25 tok/s | 12 °C | skin of a hand-held device (body node) |
/// | `tablet` | 6.5 GB | 800 ms | 25 tok/s | 15 °C | larger body, still hand-held |
/// | `board` | usable memory | 800 ms | 25 tok/s | 50 °C | no skin: the body node is the board and heatsink; 25 °C ambient + 50 = 75 °C stays below the usual 80 °C soft throttle |
/// | `laptop` | usable memory | 800 ms | 25 tok/s | 20 °C | palm rest / underside comfort |
/// | `browser` | usable memory | 800 ms | 25 tok/s | 20 °C | a desktop or laptop tab |
///
/// "usable memory" is the profile's `memory.usable_bytes` (the phone figure, 5.2 GB, is what a
/// 12 GB phone lets one app keep without being killed under pressure).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// Peak memory must be at most this (bytes; default 5.2 GB = 5.2·10^9).
    pub peak_memory_bytes: u64,
    /// TTFT must be below this (default 800 ms).
    pub ttft_ms: f64,
    /// Sustained decode must be at least this (default 25 tok/s).
    pub sustained_tok_s: f64,
    /// Temperature rise must be below this (default 12 °C).
    pub temp_rise_c: f64,
    /// Slowest reading speed, tokens/s (default 4: ~4–8 English tokens/s).
    pub reading_low_tok_s: f64,
    /// Fastest reading speed, tokens/s (default 8).
    pub reading_high_tok_s: f64,
    /// Generation that "feels instant", tokens/s (default 50).
    pub instant_tok_s: f64,
}

/// The device kinds the estimator knows (`sbc` is accepted as an older name of `board`).
pub const DEVICE_KINDS: &[&str] = &["phone", "tablet", "board", "laptop", "browser"];

pub(crate) fn check_kind(device: &str, kind: &str) -> Result<()> {
    if DEVICE_KINDS.contains(&kind) || kind == "sbc" {
        Ok(())
    } else {
        Err(crate::EstimateError::InvalidDevice {
            device: device.to_string(),
            field: "kind".into(),
            reason: format!("{kind:?} is not one of {}", DEVICE_KINDS.join(", ")),
        })
    }
}

impl Thresholds {
    /// The defaults of a device kind (see the table above); `usable_bytes` is the device's
    /// usable memory, the memory threshold of kinds that are not hand-held.
    pub fn for_kind(kind: &str, usable_bytes: u64) -> Thresholds {
        let base = Thresholds::default();
        match kind {
            "tablet" => Thresholds {
                peak_memory_bytes: 6_500_000_000,
                temp_rise_c: 15.0,
                ..base
            },
            "board" | "sbc" => Thresholds {
                peak_memory_bytes: usable_bytes.max(1),
                temp_rise_c: 50.0,
                ..base
            },
            "laptop" | "browser" => Thresholds {
                peak_memory_bytes: usable_bytes.max(1),
                temp_rise_c: 20.0,
                ..base
            },
            _ => base,
        }
    }

    /// Refuses absurd thresholds with an error naming the field.
    pub fn validate(&self) -> Result<()> {
        let t = self;
        if t.peak_memory_bytes == 0 {
            return Err(out_of_range(
                "thresholds.peak_memory_bytes",
                0,
                "must be positive",
            ));
        }
        finite_in("thresholds.ttft_ms", t.ttft_ms, 0.0, 1e9, true)?;
        finite_in(
            "thresholds.sustained_tok_s",
            t.sustained_tok_s,
            0.0,
            1e9,
            true,
        )?;
        finite_in("thresholds.temp_rise_c", t.temp_rise_c, 0.0, 1000.0, true)?;
        finite_in(
            "thresholds.reading_low_tok_s",
            t.reading_low_tok_s,
            0.0,
            1e6,
            true,
        )?;
        finite_in(
            "thresholds.reading_high_tok_s",
            t.reading_high_tok_s,
            t.reading_low_tok_s,
            1e6,
            false,
        )?;
        finite_in(
            "thresholds.instant_tok_s",
            t.instant_tok_s,
            t.reading_high_tok_s,
            1e6,
            false,
        )?;
        Ok(())
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            peak_memory_bytes: 5_200_000_000,
            ttft_ms: 800.0,
            sustained_tok_s: 25.0,
            temp_rise_c: 12.0,
            reading_low_tok_s: 4.0,
            reading_high_tok_s: 8.0,
            instant_tok_s: 50.0,
        }
    }
}

/// Every knob of a deployment. Unset fields take the defaults below (so the page may send a
/// partial object). [`Deployment::validate`] refuses absurd values; nothing is clamped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Deployment {
    /// Format of the linear layers (default `w4g32`).
    pub weights: WeightFormat,
    /// Format of the embedding and output head (default: same as `weights`).
    pub embedding_weights: Option<WeightFormat>,
    /// Activation / compute dtype (default: `f16` if the unit lists it, else `f32`).
    pub compute: Option<ComputeDtype>,
    /// KV-cache format (default `f16`).
    pub kv: KvFormat,
    /// Context length the KV cache is sized for (default 2048).
    pub context: u32,
    /// Prompt tokens (default 128).
    pub prompt_tokens: u32,
    /// Generated tokens (default 128).
    pub gen_tokens: u32,
    /// Sequences decoded together (default 1).
    pub batch: u32,
    /// Compute unit (default: the device's `default_unit`).
    pub unit: Option<ComputeUnit>,
    /// Prefill chunk in tokens (default: the whole prompt at once).
    pub prefill_chunk: Option<u32>,
    /// Loader (default: the device's).
    pub loader: Option<Loader>,
    /// Thermal policy (default `flat-out`).
    pub policy: Policy,
    /// Frequency ceiling for `capped`, MHz.
    pub freq_cap_mhz: Option<f64>,
    /// Paced: longest work chunk, ms (default 180).
    pub pacing_work_ms: f64,
    /// Paced: idle between chunks, ms (default 50).
    pub pacing_idle_ms: f64,
    /// Length of the thermal simulation, minutes (default 15).
    pub minutes: f64,
    /// Room temperature, °C (default: the device's).
    pub ambient_c: Option<f64>,
    /// Runtime (default: the device's `default_runtime` for the unit; `edgefit` in a browser,
    /// else `llamacpp` on a CPU or GPU). See [`crate::runtime`].
    pub runtime: Option<Runtime>,
    /// CPU threads (default: the runtime's, else the device's `default_threads`). Only the CPU
    /// unit uses threads.
    pub threads: Option<u32>,
    /// Acceptance thresholds (default: the device profile's, else its kind's:
    /// [`Thresholds::for_kind`]).
    pub thresholds: Option<Thresholds>,
}

/// Most threads accepted.
pub const MAX_THREADS: u32 = 256;

impl Default for Deployment {
    fn default() -> Self {
        Deployment {
            weights: WeightFormat::W4g32,
            embedding_weights: None,
            compute: None,
            kv: crate::format::DEFAULT_KV_FORMAT,
            context: 2048,
            prompt_tokens: 128,
            gen_tokens: 128,
            batch: 1,
            unit: None,
            prefill_chunk: None,
            loader: None,
            policy: Policy::FlatOut,
            freq_cap_mhz: None,
            pacing_work_ms: 180.0,
            pacing_idle_ms: 50.0,
            minutes: 15.0,
            ambient_c: None,
            runtime: None,
            threads: None,
            thresholds: None,
        }
    }
}

fn finite_in(what: &str, v: f64, lo: f64, hi: f64, lo_open: bool) -> Result<()> {
    let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v <= hi;
    if ok {
        Ok(())
    } else {
        let l = if lo_open { "(" } else { "[" };
        Err(out_of_range(
            what,
            v,
            format!("must be a finite number in {l}{lo}, {hi}]"),
        ))
    }
}

impl Deployment {
    /// Refuses absurd knob values with an error naming the knob and the value.
    pub fn validate(&self) -> Result<()> {
        if self.context == 0 || self.context > MAX_CONTEXT {
            return Err(out_of_range(
                "context",
                self.context,
                format!("must be in 1..={MAX_CONTEXT} tokens"),
            ));
        }
        if self.prompt_tokens == 0 {
            return Err(out_of_range("prompt_tokens", 0, "must be at least 1"));
        }
        if self.gen_tokens == 0 {
            return Err(out_of_range("gen_tokens", 0, "must be at least 1"));
        }
        let used = u64::from(self.prompt_tokens) + u64::from(self.gen_tokens);
        if used > u64::from(self.context) {
            return Err(out_of_range(
                "prompt_tokens + gen_tokens",
                used,
                format!("must fit in the context of {} tokens", self.context),
            ));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(out_of_range(
                "batch",
                self.batch,
                format!("must be in 1..={MAX_BATCH}"),
            ));
        }
        if let Some(c) = self.prefill_chunk {
            if c == 0 || c > self.context {
                return Err(out_of_range(
                    "prefill_chunk",
                    c,
                    format!("must be in 1..=context ({})", self.context),
                ));
            }
        }
        finite_in("minutes", self.minutes, 0.0, MAX_MINUTES, true)?;
        finite_in("pacing_work_ms", self.pacing_work_ms, 0.0, 60_000.0, true)?;
        finite_in("pacing_idle_ms", self.pacing_idle_ms, 0.0, 60_000.0, false)?;
        if let Some(a) = self.ambient_c {
            finite_in("ambient_c", a, -40.0, 60.0, false)?;
        }
        match (self.policy, self.freq_cap_mhz) {
            (Policy::Capped, Some(f)) => finite_in("freq_cap_mhz", f, 0.0, 100_000.0, true)?,
            (Policy::Capped, None) => {}
            (p, Some(f)) => {
                return Err(out_of_range(
                    "freq_cap_mhz",
                    f,
                    format!("a frequency cap needs policy capped, not {p}"),
                ))
            }
            (_, None) => {}
        }
        if let Some(t) = self.threads {
            if t == 0 || t > MAX_THREADS {
                return Err(out_of_range(
                    "threads",
                    t,
                    format!("must be in 1..={MAX_THREADS}"),
                ));
            }
        }
        if let Some(t) = &self.thresholds {
            t.validate()?;
        }
        Ok(())
    }
}
