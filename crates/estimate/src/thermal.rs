//! The device thermal model: a lumped two-node RC network, power from utilisation and
//! frequency, a step-wise governor, and three scheduling policies.
//!
//! # Model
//! ```text
//! C_d · dT_d/dt = P(t) − (T_d − T_b)/R_db            (die: SoC and package)
//! C_b · dT_b/dt = (T_d − T_b)/R_db − (T_b − T_a)/R_ba (body: frame, battery, skin)
//! P(t) = P_idle + u · [P_unit · (f/f_max)^k + E_dram · bytes_per_step / t_step(f)]
//! ```
//! `u` is the utilisation (1 flat-out; `w/(w + i)` paced, with `w` the work chunk rounded down to
//! whole decode steps, at least one step; `i` the idle gap), `f` the current frequency level,
//! `t_step(f)` the mean decode step at `f` from the roofline model (compute scales with `f`,
//! bandwidth does not). Integrated with explicit Euler at `dt = min(0.1 s, τ/10)` (τ the
//! shortest RC time constant), which is stable and accurate to well under 0.1 °C here.
//!
//! Governor (step-wise, as Android's thermal-engine): every `poll_s`, if `T_d ≥ trip` step one
//! level down the frequency table; if `T_d < trip − hysteresis` step one level up (never above
//! the policy's ceiling). `capped` sets the ceiling to the highest level `≤ freq_cap_mhz`
//! (default: the second level).
//!
//! # Workload
//! Continuous generation: back-to-back decode steps over the deployment's cache range
//! `[P, P + G − 1)`, i.e. one long answer after another; prefill is not included (it is short
//! against minutes). Tokens/s at a moment = `u · b / t_step(f)`.
//!
//! # Outputs
//! time to first throttle (the first governor step down, `None` if never), sustained tok/s (mean
//! over the last 60 s), temperature rise (max body temperature − ambient: what the hand feels;
//! the die maximum is reported too), energy per token (all device energy / tokens), battery
//! drain per hour (mean power / battery capacity).

use serde::{Deserialize, Serialize};

use crate::deploy::Policy;
use crate::device::{DeviceProfile, UnitProfile};

/// Decode performance at one frequency level, from the time model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelPerf {
    /// Frequency, MHz.
    pub freq_mhz: f64,
    /// Mean decode step time, s.
    pub step_s: f64,
    /// Mean bytes moved per step.
    pub bytes_per_step: f64,
    /// Sequences per step (batch).
    pub batch: f64,
}

/// One sample of the simulated time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThermalSample {
    /// Time since start, s.
    pub t_s: f64,
    /// Die temperature, °C.
    pub die_c: f64,
    /// Body temperature, °C.
    pub body_c: f64,
    /// Frequency, MHz.
    pub freq_mhz: f64,
    /// Tokens per second at this moment.
    pub tok_s: f64,
    /// Device power, W.
    pub power_w: f64,
}

/// Thermal side of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThermalReport {
    /// Policy simulated.
    pub policy: Policy,
    /// Simulated duration, s.
    pub duration_s: f64,
    /// Room temperature, °C.
    pub ambient_c: f64,
    /// First governor step down, s (`null` if never).
    pub time_to_throttle_s: Option<f64>,
    /// Mean tokens/s over the last 60 s of the simulation.
    pub sustained_tok_s: f64,
    /// Tokens/s at the start (top allowed frequency, with the policy's utilisation).
    pub initial_tok_s: f64,
    /// Max body temperature − ambient, °C.
    pub temp_rise_c: f64,
    /// Max die temperature, °C.
    pub die_max_c: f64,
    /// Max body temperature, °C.
    pub body_max_c: f64,
    /// Device energy per generated token, J.
    pub energy_per_token_j: f64,
    /// Mean device power, W.
    pub avg_power_w: f64,
    /// Battery percent per hour at the mean power (`null` on mains).
    pub battery_pct_per_hour: Option<f64>,
    /// Utilisation at the top level (1 for flat-out and capped).
    pub utilisation: f64,
    /// Tokens generated over the simulation.
    pub tokens: f64,
    /// Time series, sampled at most ~600 times.
    pub series: Vec<ThermalSample>,
}

/// Inputs of [`simulate`] besides the device.
#[derive(Clone, Debug)]
pub struct ThermalInputs {
    /// Performance per level of the unit's frequency table (same order, highest first).
    pub levels: Vec<LevelPerf>,
    /// Index of the highest level allowed.
    pub ceiling: usize,
    /// Policy.
    pub policy: Policy,
    /// Paced work chunk, ms.
    pub work_ms: f64,
    /// Paced idle, ms.
    pub idle_ms: f64,
    /// Duration, s.
    pub duration_s: f64,
    /// Ambient, °C.
    pub ambient_c: f64,
}

/// Utilisation of a level under the policy: 1, or `w/(w + idle)` with `w` the largest whole
/// number of steps fitting in `work_ms` (at least one step).
pub fn utilisation(policy: Policy, step_s: f64, work_ms: f64, idle_ms: f64) -> f64 {
    match policy {
        Policy::Paced => {
            let steps = (work_ms / 1e3 / step_s).floor().max(1.0);
            let w = steps * step_s;
            w / (w + idle_ms / 1e3)
        }
        Policy::FlatOut | Policy::Capped => 1.0,
    }
}

/// Busy power at a level, W: `P_idle + P_unit·(f/f_max)^k + E_dram·bytes/step`.
pub fn busy_power(device: &DeviceProfile, unit: &UnitProfile, lv: &LevelPerf) -> f64 {
    let fr = lv.freq_mhz / unit.f_max();
    device.power.idle_w
        + unit.active_power_w * fr.powf(unit.power_freq_exponent)
        + device.power.dram_pj_per_byte * 1e-12 * lv.bytes_per_step / lv.step_s
}

/// Runs the simulation (see the module docs).
pub fn simulate(device: &DeviceProfile, unit: &UnitProfile, inp: &ThermalInputs) -> ThermalReport {
    let th = &device.thermal;
    let (cd, cb) = (th.die_capacity_j_per_k, th.body_capacity_j_per_k);
    let (rdb, rba) = (th.die_to_body_k_per_w, th.body_to_ambient_k_per_w);
    let tau = (cd * rdb).min(cb * rba).min(cd * rba);
    let dt = (tau / 10.0).min(0.1);
    let steps = (inp.duration_s / dt).ceil().max(1.0) as u64;
    let sample_every = (steps / 600).max(1);
    let ta = inp.ambient_c;
    let (mut td, mut tb) = (ta, ta);
    let ceiling = inp.ceiling.min(inp.levels.len().saturating_sub(1));
    let mut level = ceiling;
    let mut next_poll = th.poll_s;
    let mut throttle_at = None;
    let mut energy = 0.0;
    let mut tokens = 0.0;
    let (mut die_max, mut body_max) = (ta, ta);
    let mut series = Vec::new();
    let tail_from = (inp.duration_s - 60.0).max(0.0);
    let (mut tail_tokens, mut tail_time) = (0.0, 0.0);
    let perf = |i: usize| -> (f64, f64) {
        let lv = &inp.levels[i];
        let u = utilisation(inp.policy, lv.step_s, inp.work_ms, inp.idle_ms);
        let p_busy = busy_power(device, unit, lv);
        let p = device.power.idle_w + u * (p_busy - device.power.idle_w);
        (p, u * lv.batch / lv.step_s)
    };
    let initial_tok_s = perf(ceiling).1;
    for k in 0..steps {
        let t = k as f64 * dt;
        let (p, tok_s) = perf(level);
        if k % sample_every == 0 {
            series.push(ThermalSample {
                t_s: t,
                die_c: td,
                body_c: tb,
                freq_mhz: inp.levels[level].freq_mhz,
                tok_s,
                power_w: p,
            });
        }
        let h = dt.min(inp.duration_s - t);
        let q_db = (td - tb) / rdb;
        let q_ba = (tb - ta) / rba;
        td += h * (p - q_db) / cd;
        tb += h * (q_db - q_ba) / cb;
        energy += p * h;
        tokens += tok_s * h;
        if t + h > tail_from {
            let part = (t + h - tail_from.max(t)).min(h);
            tail_tokens += tok_s * part;
            tail_time += part;
        }
        die_max = die_max.max(td);
        body_max = body_max.max(tb);
        if t + h >= next_poll {
            next_poll += th.poll_s;
            if td >= th.trip_c {
                if level + 1 < inp.levels.len() {
                    level += 1;
                    if throttle_at.is_none() {
                        throttle_at = Some(t + h);
                    }
                }
            } else if td < th.trip_c - th.hysteresis_c && level > ceiling {
                level -= 1;
            }
        }
    }
    let avg_power = energy / inp.duration_s;
    ThermalReport {
        policy: inp.policy,
        duration_s: inp.duration_s,
        ambient_c: ta,
        time_to_throttle_s: throttle_at,
        sustained_tok_s: if tail_time > 0.0 {
            tail_tokens / tail_time
        } else {
            initial_tok_s
        },
        initial_tok_s,
        temp_rise_c: body_max - ta,
        die_max_c: die_max,
        body_max_c: body_max,
        energy_per_token_j: if tokens > 0.0 {
            energy / tokens
        } else {
            f64::INFINITY
        },
        avg_power_w: avg_power,
        battery_pct_per_hour: device.power.battery_wh.map(|wh| avg_power / wh * 100.0),
        utilisation: perf(ceiling).1 / (inp.levels[ceiling].batch / inp.levels[ceiling].step_s),
        tokens,
        series,
    }
}

/// One sample of a published sustained-load trace (fields the source does not give are `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSample {
    /// Seconds since the start of the load, if the source states it.
    #[serde(default)]
    pub t_s: Option<f64>,
    /// Iteration label (sources that report per-iteration means).
    #[serde(default, deserialize_with = "any_text")]
    pub iteration: Option<String>,
    /// Tokens per second.
    #[serde(default)]
    pub tok_s: Option<f64>,
    /// Throughput as a fraction of the run's own peak.
    #[serde(default)]
    pub fraction_of_peak: Option<f64>,
    /// Temperature, °C (which sensor: see the source's `temp_kind`).
    #[serde(default)]
    pub temp_c: Option<f64>,
    /// The OS thermal state, if reported.
    #[serde(default)]
    pub thermal_state: Option<String>,
}

fn any_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.map(|v| match v {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }))
}

/// A published sustained-load trace (tok/s, and temperature where given, over minutes), as
/// committed in `models/validation/thermal/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThermalTrace {
    /// Where it comes from.
    pub source: crate::validate::Source,
    /// Device as published.
    pub device: String,
    /// SoC slug = the device profile id.
    pub soc: String,
    /// Model slug.
    pub model: String,
    /// Runtime id.
    pub runtime: String,
    /// Unit id.
    pub unit: String,
    /// Room temperature, °C, if stated.
    #[serde(default)]
    pub ambient_c: Option<f64>,
    /// The samples.
    pub samples: Vec<TraceSample>,
}

const TRACE_FILES: &[(&str, &str)] = &[
    (
        "thermal-arxiv-2603.23640-iphone16pro",
        include_str!("../../../models/validation/thermal/thermal-arxiv-2603.23640-iphone16pro.json"),
    ),
    (
        "thermal-arxiv-2603.23640-s24ultra",
        include_str!("../../../models/validation/thermal/thermal-arxiv-2603.23640-s24ultra.json"),
    ),
    (
        "thermal-devto-iphone17pro-gemma4-e2b-coreml-ane",
        include_str!(
            "../../../models/validation/thermal/thermal-devto-iphone17pro-gemma4-e2b-coreml-ane.json"
        ),
    ),
    (
        "thermal-devto-iphone17pro-gemma4-e2b-litert",
        include_str!(
            "../../../models/validation/thermal/thermal-devto-iphone17pro-gemma4-e2b-litert.json"
        ),
    ),
    (
        "thermal-devto-iphone17pro-gemma4-e2b-mlx",
        include_str!("../../../models/validation/thermal/thermal-devto-iphone17pro-gemma4-e2b-mlx.json"),
    ),
];

/// Every committed trace.
pub fn all_thermal_traces() -> crate::Result<Vec<ThermalTrace>> {
    TRACE_FILES
        .iter()
        .map(|(id, text)| {
            serde_json::from_str(text).map_err(|e| {
                crate::error::json_error_in(format!("thermal trace {id}.json"), text, e)
            })
        })
        .collect()
}

/// The committed traces measured on `device_id` (a device profile id), for the page's thermal
/// chart; empty when none exists for it.
pub fn thermal_traces(device_id: &str) -> crate::Result<Vec<ThermalTrace>> {
    Ok(all_thermal_traces()?
        .into_iter()
        .filter(|t| t.soc == device_id)
        .collect())
}
