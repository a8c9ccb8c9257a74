//! The device thermal model: a lumped two-node RC network, power per DVFS level, and a
//! power-capping governor that holds the die at its trip and the body at its skin limit.
//!
//! # Why phones throttle so much under an LLM
//! A phone has no fan: in steady state everything it draws leaves through its surface,
//! `P_sus = (T_skin − T_a)/R_ba`, about 2.8 W for a phone body held at 33.5 °C in a 25 °C room (see
//! [`GovernorParams`]). A decode at full clock draws more (unit + DRAM traffic + the rest of the
//! device). The governor (Linux's power allocator, Qualcomm's thermal-engine, Apple's CLPC) then
//! caps the power. Decode is memory-bound, and the memory clock follows the unit's DVFS level
//! (each Adreno GPU power level carries its DDR bandwidth vote), so tokens per second fall with
//! the power budget: with a part of the unit's power that does not scale with the clock
//! (leakage, uncore) the energy per token hardly improves at lower levels, and the throughput
//! kept is about `(P_sus − P_idle)/(P_burst − P_idle)` — 0.4-0.7 of the burst on a phone.
//!
//! # Model
//! ```text
//! C_d · dT_d/dt = P(t) − (T_d − T_b)/R_db            (die: SoC, package, local spreader)
//! C_b · dT_b/dt = (T_d − T_b)/R_db − (T_b − T_a)/R_ba (body: frame, battery, skin)
//! P_i = P_idle + u_i · [P_unit · (σ + (1 − σ)·(f_i/f_max)^k) + E_dram · bytes_i / t_step,i]
//! r_i = u_i · b / t_step,i                             (tokens/s at level i)
//! ```
//! `u` is the utilisation (1 flat-out; `w/(w + i)` paced, with `w` the work chunk rounded down
//! to whole decode steps, at least one step; `i` the idle gap), `f_i` the level's frequency,
//! `t_step,i` the mean decode step at `f_i` from the roofline model, with the memory bandwidth
//! following the clock by the governor's `memory_follows` (compute scales with `f`), `σ` the
//! static share of the unit's power. Integrated with explicit Euler at `dt = min(0.1 s, τ/10)`
//! (τ the shortest RC time constant), stable and accurate to well under 0.1 °C here.
//!
//! Governor (power capping, as Linux's `power_allocator`): every `poll_s` it sets the budget
//! ```text
//! P_cap = min( (T_trip − T_b)/R_db + C_d·(T_trip − T_d)/poll_s,            die at its trip
//!              (T_skin − T_a)/R_ba + C_b·(T_skin − T_b)/(C_d·R_db + poll_s) ) body at its limit
//! ```
//! (each the power that holds the node at its limit in steady state, plus a proportional term
//! that closes the gap within one poll for the die, within one die time constant for the body,
//! whose heat arrives through the die), and runs at the most tokens/s the budget buys by
//! time-sharing DVFS levels and idle: the upper concave hull of the points `(P_i, r_i)` of the
//! levels from the policy's ceiling down, and `(P_idle, 0)` (idle injection below the lowest
//! level). `capped` sets the ceiling to the highest level `≤ freq_cap_mhz` (default: the second
//! level). `hysteresis_c` is not used: the budget is continuous.
//!
//! # Workload
//! Continuous generation: back-to-back decode steps over the deployment's cache range
//! `[P, P + G − 1)`, i.e. one long answer after another; prefill is not included (it is short
//! against minutes). Tokens/s at a moment = the time-shared `r` above.
//!
//! # Outputs
//! time to first throttle (the first poll whose budget is below the ceiling's power, `None` if
//! never), sustained tok/s (mean over the last 60 s), temperature rise (max body temperature −
//! ambient: what the hand feels; the die maximum is reported too), energy per token (all device
//! energy / tokens), battery drain per hour (mean power / battery capacity).
//!
//! # Checked against published traces
//! `tests/thermal_traces.rs` runs the model against the sustained-load traces committed in
//! `models/validation/thermal/` (tok/s kept over 10 minutes on iPhones, per-iteration means on
//! an iPhone 16 Pro and a Galaxy S24 Ultra): the model's kept fraction of its own peak must be
//! within ±0.35 of the trace's at every timed sample. The phone class's two fitted parameters
//! ([`PHONE_SKIN_LIMIT_C`], [`PHONE_DIE_TO_BODY_K_PER_W`]) are the test's least-squares fit over
//! all traces, and it refits them without each trace in turn and checks the held-out trace.
//! Not captured: the GPU traces lose their first 10% within 5-13 s, faster than the die node's
//! time constant (`C_d·R_db` ≈ 19 s) lets the model throttle.

use serde::{Deserialize, Serialize};

use crate::deploy::Policy;
use crate::device::{DeviceProfile, UnitProfile};
use crate::error::Result;
pub use crate::governor::{GovernorParams, PHONE_SKIN_LIMIT_C, PHONE_STATIC_SHARE};

/// Die-to-body thermal resistance of a phone, K/W (SoC package, board and spreader to the
/// frame), every phone profile's `thermal.die_to_body_k_per_w`. **Fitted** with
/// [`PHONE_SKIN_LIMIT_C`] (grid 8-11 K/W by 0.5): it sets how soon the die trip binds, which
/// the GPU traces show within the first minute.
pub const PHONE_DIE_TO_BODY_K_PER_W: f64 = 9.5;

/// Heat capacity of a phone's die node, J/K (SoC die, package with the stacked DRAM, the local
/// spreader: a few grams at ~0.7-0.9 J/(g·K)), every phone profile's
/// `thermal.die_capacity_j_per_k`. **Estimate**; not fitted.
pub const PHONE_DIE_CAPACITY_J_PER_K: f64 = 2.0;

impl GovernorParams {
    /// The profile's override, else the defaults of its kind.
    pub fn of(device: &DeviceProfile) -> GovernorParams {
        device
            .thermal
            .governor
            .unwrap_or_else(|| GovernorParams::for_kind(&device.kind))
    }
}

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
    /// Frequency, MHz (time-weighted over the levels the governor shares; idle excluded).
    pub freq_mhz: f64,
    /// Tokens per second at this moment.
    pub tok_s: f64,
    /// Device power, W.
    pub power_w: f64,
    /// Fraction of the time the unit runs (below 1 when the budget is under the lowest level's
    /// power: idle injection).
    #[serde(default = "one")]
    pub duty: f64,
    /// The governor's power budget, W (`null`: no limit binds yet).
    #[serde(default)]
    pub budget_w: Option<f64>,
}

fn one() -> f64 {
    1.0
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
    /// First poll whose budget is below the ceiling's power, s (`null` if never).
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
    /// The governor parameters used (class defaults or the profile's override).
    #[serde(default = "no_governor")]
    pub governor: GovernorParams,
    /// Steady-state power the body sheds at its skin limit, `(T_skin − T_a)/R_ba`, W (`null`
    /// without a skin limit).
    #[serde(default)]
    pub sustainable_power_w: Option<f64>,
    /// Time series, sampled at most ~600 times.
    pub series: Vec<ThermalSample>,
}

fn no_governor() -> GovernorParams {
    GovernorParams::for_kind("")
}

/// Inputs of [`simulate`] besides the device.
#[derive(Clone, Debug)]
pub struct ThermalInputs {
    /// Performance per level of the unit's frequency table (same order, highest first), with
    /// the memory bandwidth following the clock by the governor's `memory_follows`.
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
    /// Governor parameters.
    pub governor: GovernorParams,
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

/// Busy power at a level, W:
/// `P_idle + P_unit·(σ + (1 − σ)·(f/f_max)^k) + E_dram·bytes/step`.
pub fn busy_power(
    device: &DeviceProfile,
    unit: &UnitProfile,
    lv: &LevelPerf,
    static_share: f64,
) -> f64 {
    let fr = lv.freq_mhz / unit.f_max();
    device.power.idle_w
        + unit.active_power_w
            * (static_share + (1.0 - static_share) * fr.powf(unit.power_freq_exponent))
        + device.power.dram_pj_per_byte * 1e-12 * lv.bytes_per_step / lv.step_s
}

/// One operating point: power, tokens/s, frequency.
#[derive(Clone, Copy, Debug)]
struct Point {
    p: f64,
    r: f64,
    f: f64,
}

/// The upper concave hull of `pts` (sorted by power), from the idle point to the ceiling.
fn hull(mut pts: Vec<Point>) -> Vec<Point> {
    pts.sort_by(|a, b| a.p.total_cmp(&b.p).then(a.r.total_cmp(&b.r)));
    let mut h: Vec<Point> = Vec::new();
    for q in pts {
        // Drop points that cost more power for no more tokens.
        if h.last().is_some_and(|l| q.r <= l.r) {
            continue;
        }
        while h.len() >= 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            // b is under the chord a-q (or on it): time-sharing a and q does at least as well.
            if (b.r - a.r) * (q.p - a.p) <= (q.r - a.r) * (b.p - a.p) {
                h.pop();
            } else {
                break;
            }
        }
        h.push(q);
    }
    h
}

/// The operating point under `cap` on the hull `h`: `(power, tok/s, freq, duty)`.
fn operate(h: &[Point], cap: f64) -> (f64, f64, f64, f64) {
    let top = h[h.len() - 1];
    if cap >= top.p {
        return (top.p, top.r, top.f, 1.0);
    }
    let idle = h[0];
    if cap <= idle.p || h.len() == 1 {
        return (idle.p, 0.0, h.get(1).map_or(top.f, |x| x.f), 0.0);
    }
    let i = h.iter().position(|q| q.p > cap).unwrap_or(h.len() - 1);
    let (a, b) = (h[i - 1], h[i]);
    let w = (cap - a.p) / (b.p - a.p);
    let r = a.r + w * (b.r - a.r);
    if a.r == 0.0 {
        // Idle injection below the lowest running point.
        (cap, r, b.f, w)
    } else {
        (cap, r, a.f + w * (b.f - a.f), 1.0)
    }
}

/// Runs the simulation (see the module docs).
pub fn simulate(device: &DeviceProfile, unit: &UnitProfile, inp: &ThermalInputs) -> ThermalReport {
    let th = &device.thermal;
    let gov = inp.governor;
    let (cd, cb) = (th.die_capacity_j_per_k, th.body_capacity_j_per_k);
    let (rdb, rba) = (th.die_to_body_k_per_w, th.body_to_ambient_k_per_w);
    let tau = (cd * rdb).min(cb * rba).min(cd * rba);
    let dt = (tau / 10.0).min(0.1);
    let steps = (inp.duration_s / dt).ceil().max(1.0) as u64;
    let sample_every = (steps / 600).max(1);
    let ta = inp.ambient_c;
    let (mut td, mut tb) = (ta, ta);
    let ceiling = inp.ceiling.min(inp.levels.len().saturating_sub(1));
    let idle_w = device.power.idle_w;
    let point = |lv: &LevelPerf| -> Point {
        let u = utilisation(inp.policy, lv.step_s, inp.work_ms, inp.idle_ms);
        let p_busy = busy_power(device, unit, lv, gov.static_share);
        Point {
            p: idle_w + u * (p_busy - idle_w),
            r: u * lv.batch / lv.step_s,
            f: lv.freq_mhz,
        }
    };
    let top = point(&inp.levels[ceiling]);
    let mut pts: Vec<Point> = inp.levels[ceiling..].iter().map(point).collect();
    pts.push(Point {
        p: idle_w,
        r: 0.0,
        f: 0.0,
    });
    let h = hull(pts);
    let initial_tok_s = top.r;
    let skin_term = (cd * rdb + th.poll_s).max(dt);
    let budget = |td: f64, tb: f64| -> Option<f64> {
        let die = (th.trip_c - tb) / rdb + cd * (th.trip_c - td) / th.poll_s;
        let skin = gov
            .skin_limit_c
            .map(|ts| (ts - ta) / rba + cb * (ts - tb) / skin_term);
        let cap = skin.map_or(die, |s| s.min(die));
        (cap < top.p).then_some(cap)
    };
    let mut cap = budget(td, tb);
    let mut op = operate(&h, cap.unwrap_or(f64::INFINITY));
    let mut next_poll = th.poll_s;
    let mut throttle_at = None;
    let mut energy = 0.0;
    let mut tokens = 0.0;
    let (mut die_max, mut body_max) = (ta, ta);
    let mut series = Vec::new();
    let tail_from = (inp.duration_s - 60.0).max(0.0);
    let (mut tail_tokens, mut tail_time) = (0.0, 0.0);
    for k in 0..steps {
        let t = k as f64 * dt;
        let (p, tok_s, freq, duty) = op;
        if k % sample_every == 0 {
            series.push(ThermalSample {
                t_s: t,
                die_c: td,
                body_c: tb,
                freq_mhz: freq,
                tok_s,
                power_w: p,
                duty,
                budget_w: cap,
            });
        }
        let h_dt = dt.min(inp.duration_s - t);
        let q_db = (td - tb) / rdb;
        let q_ba = (tb - ta) / rba;
        td += h_dt * (p - q_db) / cd;
        tb += h_dt * (q_db - q_ba) / cb;
        energy += p * h_dt;
        tokens += tok_s * h_dt;
        if t + h_dt > tail_from {
            let part = (t + h_dt - tail_from.max(t)).min(h_dt);
            tail_tokens += tok_s * part;
            tail_time += part;
        }
        die_max = die_max.max(td);
        body_max = body_max.max(tb);
        if t + h_dt >= next_poll {
            next_poll += th.poll_s;
            cap = budget(td, tb);
            op = operate(&h, cap.unwrap_or(f64::INFINITY));
            if cap.is_some() && throttle_at.is_none() {
                throttle_at = Some(t + h_dt);
            }
        }
    }
    let avg_power = energy / inp.duration_s;
    let top_level = &inp.levels[ceiling];
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
        utilisation: utilisation(inp.policy, top_level.step_s, inp.work_ms, inp.idle_ms),
        tokens,
        governor: gov,
        sustainable_power_w: gov.skin_limit_c.map(|ts| (ts - ta) / rba),
        series,
    }
}

/// One sample of a published sustained-load trace (fields the source does not give are `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSample {
    /// Seconds since the start of the load, if the source states it.
    #[serde(default)]
    pub t_s: Option<f64>,
    /// Start of the span the sample averages over, s since the start of the load (sources that
    /// report per-iteration means; derived from the stated durations, see the trace's
    /// `time_derivation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_from_s: Option<f64>,
    /// End of that span, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_to_s: Option<f64>,
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
    pub source: crate::source::Source,
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
    /// The run's peak tokens/s when the source states one apart from the samples (else the
    /// first sample's `tok_s` is the reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_tok_s: Option<f64>,
    /// How `t_from_s`/`t_to_s` were derived from the stated figures, when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_derivation: Option<String>,
    /// The samples.
    pub samples: Vec<TraceSample>,
}

/// One trace sample next to the model: the fraction of its peak each keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    /// Time of the sample (or the middle of its span), s.
    pub t_s: f64,
    /// Start and end of the span the sample averages over, s (equal for a point in time).
    pub span_s: [f64; 2],
    /// The trace's tokens/s as a fraction of its peak.
    pub trace: f64,
    /// The model's tokens/s (mean over the span) as a fraction of its initial tokens/s.
    pub model: f64,
}

impl ThermalTrace {
    /// The tokens/s all fractions are taken against: `peak_tok_s`, else the first sample's.
    pub fn reference_tok_s(&self) -> Option<f64> {
        self.peak_tok_s
            .or_else(|| self.samples.first().and_then(|s| s.tok_s))
    }

    /// The samples that have a time (a `t_s` or a span) and a throughput, as
    /// `(from, to, fraction of peak)`.
    pub fn timed(&self) -> Vec<(f64, f64, f64)> {
        let peak = self.reference_tok_s();
        self.samples
            .iter()
            .filter_map(|s| {
                let (a, b) = match (s.t_s, s.t_from_s, s.t_to_s) {
                    (Some(t), _, _) => (t, t),
                    (None, Some(a), Some(b)) => (a, b),
                    _ => return None,
                };
                let frac = s.fraction_of_peak.or_else(|| Some(s.tok_s? / peak?))?;
                Some((a, b, frac))
            })
            .collect()
    }

    /// The model's kept fraction next to each timed sample of the trace: at a point in time
    /// the series sample at or before it; over a span, the mean of the series samples in it.
    pub fn compare(&self, report: &ThermalReport) -> Vec<TracePoint> {
        self.timed()
            .into_iter()
            .map(|(a, b, trace)| TracePoint {
                t_s: 0.5 * (a + b),
                span_s: [a, b],
                trace,
                model: kept_fraction(report, a, b),
            })
            .collect()
    }
}

/// One timed sample of a trace, for a chart: its span and the fraction of the run's peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceFraction {
    /// Time of the sample (or the middle of its span), s.
    pub t_s: f64,
    /// Start and end of the span it averages over, s (equal for a point in time).
    pub span_s: [f64; 2],
    /// Tokens/s as a fraction of the trace's peak.
    pub fraction: f64,
    /// Tokens/s, when the source gives it (else `fraction` × `reference_tok_s`).
    pub tok_s: Option<f64>,
}

/// A trace with its timed samples as fractions of its peak: what the page's thermal chart
/// draws next to the model's curve (scaled by the model's own initial tokens/s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceView {
    /// The committed trace, as in `models/validation/thermal/`.
    #[serde(flatten)]
    pub trace: ThermalTrace,
    /// The tokens/s the fractions are taken against ([`ThermalTrace::reference_tok_s`]).
    pub reference_tok_s: Option<f64>,
    /// The timed samples, in file order.
    pub points: Vec<TraceFraction>,
}

/// The committed traces measured on the bundled device `device_id`, each with its timed
/// samples as fractions of its peak (empty for a device without traces); an unknown id is an
/// error naming it.
pub fn trace_views(device_id: &str) -> Result<Vec<TraceView>> {
    crate::device::device(device_id)?;
    Ok(thermal_traces(device_id)?
        .into_iter()
        .map(|t| {
            let reference_tok_s = t.reference_tok_s();
            let points = t
                .timed()
                .into_iter()
                .map(|(a, b, fraction)| TraceFraction {
                    t_s: 0.5 * (a + b),
                    span_s: [a, b],
                    fraction,
                    tok_s: reference_tok_s.map(|r| fraction * r),
                })
                .collect();
            TraceView {
                trace: t,
                reference_tok_s,
                points,
            }
        })
        .collect())
}

/// The model's tokens/s over `[from_s, to_s]` as a fraction of its initial tokens/s: the mean
/// of the series samples in the span, or the last sample at or before `from_s` when the span
/// holds none (a point in time).
pub fn kept_fraction(report: &ThermalReport, from_s: f64, to_s: f64) -> f64 {
    let s = &report.series;
    let inside: Vec<f64> = s
        .iter()
        .filter(|x| x.t_s >= from_s && x.t_s <= to_s)
        .map(|x| x.tok_s)
        .collect();
    let v = if inside.len() > 1 {
        inside.iter().sum::<f64>() / inside.len() as f64
    } else {
        s.iter()
            .rev()
            .find(|x| x.t_s <= from_s)
            .or(s.first())
            .map_or(0.0, |x| x.tok_s)
    };
    if report.initial_tok_s > 0.0 {
        v / report.initial_tok_s
    } else {
        0.0
    }
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
