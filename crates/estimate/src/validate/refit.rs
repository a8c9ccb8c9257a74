//! The refit: each runtime × unit's fractions solved point by point from the cases' measurements
//! and pooled as log-medians (see the module above for the rules); what [`super::validate`]
//! refits without each source for the leave-one-source-out figure.

use std::collections::BTreeMap;

use crate::band::Phase;
use crate::error::{EstimateError, Result};
use crate::format::ComputeUnit;
use crate::runtime::{runtime_profiles, Runtime, RuntimeProfile};

use super::{cases, Case, FIT_MIN};

/// Estimated (prefill tok/s, decode tok/s) of a case with the given runtime profiles.
pub(super) fn speeds_of(c: &Case, profiles: &[RuntimeProfile]) -> Result<(f64, f64)> {
    Ok((
        speed_of(c, profiles, Phase::Prefill)?,
        speed_of(c, profiles, Phase::Decode)?,
    ))
}

/// The estimated speed of one phase of a case (tok/s): the decode of a source that times it
/// from another cache depth at that depth (`decode_deployment`).
fn speed_of(c: &Case, profiles: &[RuntimeProfile], phase: Phase) -> Result<f64> {
    let rt =
        profiles
            .iter()
            .find(|p| p.id == c.runtime)
            .ok_or_else(|| EstimateError::Validation {
                what: c.point.id.clone(),
                reason: format!("no profile for runtime {}", c.runtime),
            })?;
    let dep = match (phase, &c.decode_deployment) {
        (Phase::Decode, Some(d)) => d,
        _ => &c.deployment,
    };
    crate::speed::phase_speed(&c.spec, dep, &c.device, rt, phase == Phase::Prefill)
}

/// A fitted parameter of a runtime × unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Param {
    /// `compute_fraction`, from prefill points.
    Compute,
    /// `decode_bandwidth_fraction`, from decode points (of unquantized formats when the unit
    /// has a kernel roof).
    Bandwidth,
    /// The decode kernel roof, from decode points of quantized formats:
    /// `decode_weights_per_cycle` on a CPU, `decode_weights_per_flop` on a GPU (and on an NPU,
    /// from its points with float activations).
    Kernel,
}

impl Param {
    fn phase(self) -> Phase {
        match self {
            Param::Compute => Phase::Prefill,
            Param::Bandwidth | Param::Kernel => Phase::Decode,
        }
    }
    fn bounds(self, unit: ComputeUnit) -> (f64, f64) {
        match self {
            Param::Compute | Param::Bandwidth => (FIT_MIN, 1.0),
            Param::Kernel if unit != ComputeUnit::Cpu => {
                (KAPPA_MIN, crate::runtime::MAX_WEIGHTS_PER_FLOP)
            }
            Param::Kernel => (FIT_MIN, crate::runtime::MAX_WEIGHTS_PER_CYCLE),
        }
    }
}

/// Lowest `decode_weights_per_flop` the fit may reach (a GEMV spending 20,000 FLOPs of the
/// GPU's f32 peak per weight).
const KAPPA_MIN: f64 = 5e-5;

/// Whether `ru` has a decode kernel roof on a device whose GPU interface is `api`.
fn has_kernel_roof(ru: &crate::runtime::RuntimeUnit, api: Option<&str>) -> bool {
    ru.decode_weights_per_cycle.is_some()
        || ru.decode_weights_per_flop.is_some()
        || ru
            .api_entry(api)
            .is_some_and(|(_, f)| f.decode_weights_per_flop.is_some())
}

fn set_param(p: &mut RuntimeProfile, unit: ComputeUnit, api: Option<&str>, param: Param, v: f64) {
    let Some(u) = p.units.get_mut(&unit) else {
        return;
    };
    if let Some(f) = api.and_then(|a| u.api_fractions.get_mut(a)) {
        match param {
            Param::Compute => f.compute_fraction = v,
            Param::Bandwidth => f.decode_bandwidth_fraction = v,
            Param::Kernel if unit != ComputeUnit::Cpu => f.decode_weights_per_flop = Some(v),
            Param::Kernel => u.decode_weights_per_cycle = Some(v),
        }
        return;
    }
    match param {
        Param::Compute => u.compute_fraction = v,
        Param::Bandwidth => u.decode_bandwidth_fraction = v,
        Param::Kernel if unit != ComputeUnit::Cpu => u.decode_weights_per_flop = Some(v),
        Param::Kernel => u.decode_weights_per_cycle = Some(v),
    }
}

/// Whether a decode kernel roof bounds case `c` under `ru`: quantized weights, and on an NPU
/// float activations (see `runtime::dequantizing_peak`).
fn roof_applies(c: &Case, ru: &crate::runtime::RuntimeUnit) -> bool {
    let w = c.deployment.weights;
    let compute = c.deployment.compute.unwrap_or(ru.compute_for(w));
    crate::runtime::is_quantized(w)
        && (c.unit == ComputeUnit::Cpu
            || c.device
                .units
                .get(&c.unit)
                .is_some_and(|u| crate::runtime::dequantizing_peak(c.unit, u, compute).is_some()))
}

/// The GPU programming interface whose fractions of `rt` apply to `c` (the device unit's
/// `api` when the runtime profile has an entry for it; `None`: the unit-level pair).
fn api_of(c: &Case, profiles: &[RuntimeProfile]) -> Option<String> {
    let ru = profiles
        .iter()
        .find(|p| p.id == c.runtime)?
        .units
        .get(&c.unit)?;
    let api = c.device.units.get(&c.unit)?.api.as_deref();
    ru.api_entry(api).map(|(a, _)| a.to_string())
}

/// The value of the phase's parameter that makes the estimate of `c` equal its measurement.
fn solve(c: &Case, profiles: &[RuntimeProfile], param: Param, measured: f64) -> Result<f64> {
    let phase = param.phase();
    let idx = profiles.iter().position(|p| p.id == c.runtime).unwrap_or(0);
    let api = api_of(c, profiles);
    let mut trial = profiles.to_vec();
    let mut at = |v: f64| -> Result<f64> {
        set_param(&mut trial[idx], c.unit, api.as_deref(), param, v);
        speed_of(c, &trial, phase)
    };
    let (mut lo, mut hi) = param.bounds(c.unit);
    if at(hi)? <= measured {
        return Ok(hi);
    }
    if at(lo)? >= measured {
        return Ok(lo);
    }
    for _ in 0..40 {
        let mid = if param == Param::Kernel {
            (lo * hi).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        if at(mid)? < measured {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(if param == Param::Kernel {
        (lo * hi).sqrt()
    } else {
        0.5 * (lo + hi)
    })
}

/// The median in log space: the geometric mean of the middle two for an even count (the
/// fitted values are fractions and rates, compared by ratio).
fn log_median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some((v[(n - 1) / 2] * v[n / 2]).sqrt())
}

pub(super) fn measured(c: &Case, phase: Phase) -> Option<f64> {
    match phase {
        Phase::Prefill => c.point.prefill_tok_s,
        Phase::Decode => c.point.decode_tok_s,
    }
}

/// A (runtime, unit, GPU interface) group of cases with its own fitted values (see
/// [`api_of`]).
type Group = (Runtime, ComputeUnit, Option<String>);

/// Fits `param` of one group on its cases (the per-point solutions pooled as a median of
/// per-source log-medians) and sets it in `profiles`; `None` when no point constrains it.
fn fit_param(
    profiles: &mut [RuntimeProfile],
    cases: &[&Case],
    apis: &[Option<String>],
    group: &Group,
    param: Param,
) -> Result<Option<f64>> {
    let (rt, unit, api) = (group.0, group.1, &group.2);
    let Some(ru) = profiles
        .iter()
        .find(|p| p.id == rt)
        .and_then(|p| p.units.get(&unit))
        .cloned()
    else {
        return Ok(None);
    };
    if ru.device_figures {
        return Ok(None);
    }
    let kernel_roof = has_kernel_roof(&ru, api.as_deref());
    if param == Param::Kernel && !kernel_roof {
        return Ok(None);
    }
    // Per source, the (log-space) median of its points' solutions; then the median over
    // the sources: each source is one vote, so a source with many points (one device,
    // one harness) cannot outvote the others.
    let mut by_source: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (c, _) in cases
        .iter()
        .zip(apis)
        .filter(|(c, a)| c.runtime == rt && c.unit == unit && *a == api)
    {
        let bound = roof_applies(c, &ru);
        let evidence = match param {
            Param::Compute => true,
            Param::Bandwidth => !kernel_roof || !bound,
            Param::Kernel => bound,
        };
        if let (true, Some(m)) = (evidence, measured(c, param.phase())) {
            by_source
                .entry(c.source.as_str())
                .or_default()
                .push(solve(c, profiles, param, m)?);
        }
    }
    let sol: Vec<f64> = by_source.into_values().filter_map(log_median).collect();
    let Some(v) = log_median(sol) else {
        return Ok(None);
    };
    let idx = profiles.iter().position(|p| p.id == rt).unwrap_or(0);
    set_param(&mut profiles[idx], unit, api.as_deref(), param, v);
    Ok(Some(v))
}

/// The order the fractions and roofs are fitted in (see the module docs).
const PARAM_ORDER: [Param; 4] = [
    Param::Compute,
    Param::Bandwidth,
    Param::Kernel,
    Param::Compute,
];

/// Per-op overheads (µs) tried for a runtime unit whose profile lists
/// `units.<unit>.op_overhead_us` among its `fitted` fields.
const OVERHEAD_GRID_US: [f64; 12] = [
    0.0, 1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0,
];

/// The largest per-op overhead (µs) `c` allows under `rt`: its measured decode step minus its
/// bytes at the device's theoretical bandwidth and the per-pass overhead, over its ops
/// (`crates/estimate/tests/overhead_bounds.rs` checks the same for every point); `None`
/// without a decode figure or a theoretical bandwidth.
fn overhead_room_us(c: &Case, rt: &RuntimeProfile) -> Result<Option<f64>> {
    let (Some(m), Some(bw)) = (
        c.point.decode_tok_s,
        c.device.memory.theoretical_bandwidth_gbs,
    ) else {
        return Ok(None);
    };
    let dep = c.decode_deployment.as_ref().unwrap_or(&c.deployment);
    let (ops, bytes, pass_s) = crate::speed::decode_fixed_terms(&c.spec, dep, &c.device, rt)?;
    Ok(Some((1.0 / m - bytes / (bw * 1e9) - pass_s) / ops * 1e6))
}

/// The per-op overhead of `group` (a runtime unit that fits it): the grid value, within what
/// every decode point of the group allows ([`overhead_room_us`]), whose refit (the decode
/// steps of [`PARAM_ORDER`] redone for the group) gives the smallest mean over sources of
/// each source's mean `|ln(estimate / measured)|` of decode. A time linear in a fixed cost per op
/// and in the bytes cannot tell the two apart from one point; across models of different
/// sizes (SmolLM-135M to Gemma 2 2B on one phone) it can, which one median per parameter
/// cannot. Sets the winner in `profiles`; `None` when the group has no decode point.
fn fit_overhead(
    profiles: &mut [RuntimeProfile],
    cases: &[&Case],
    apis: &[Option<String>],
    group: &Group,
) -> Result<Option<f64>> {
    let (rt, unit, api) = (group.0, group.1, &group.2);
    let idx = profiles.iter().position(|p| p.id == rt).unwrap_or(0);
    // The search depends only on the group's cases (every fit starts from the committed
    // priors): a leave-one-source-out refit whose left-out source has no point in the group
    // finds the same value, so it is computed once per set of cases.
    let in_group: Vec<&Case> = cases
        .iter()
        .zip(apis)
        .filter(|(c, a)| c.runtime == rt && c.unit == unit && *a == api)
        .map(|(c, _)| *c)
        .collect();
    let ids: Vec<&str> = in_group.iter().map(|c| c.point.id.as_str()).collect();
    let key = format!("{rt}/{unit}/{api:?}:{}", ids.join(","));
    let memo = OVERHEAD_MEMO.get_or_init(Default::default);
    let known = memo.lock().ok().and_then(|m| m.get(&key).copied());
    let found = match known {
        Some(v) => v,
        None => {
            let v = search_overhead(profiles, cases, apis, group, &in_group)?;
            if let Ok(mut m) = memo.lock() {
                m.insert(key, v);
            }
            v
        }
    };
    if let (Some(o), Some(u)) = (found, profiles[idx].units.get_mut(&unit)) {
        u.op_overhead_us = o;
    }
    Ok(found)
}

/// Results of [`search_overhead`] by group and case set (see [`fit_overhead`]).
static OVERHEAD_MEMO: std::sync::OnceLock<std::sync::Mutex<BTreeMap<String, Option<f64>>>> =
    std::sync::OnceLock::new();

/// The grid search of [`fit_overhead`] over the group's cases `in_group`; `profiles` are left
/// as they were.
fn search_overhead(
    profiles: &[RuntimeProfile],
    cases: &[&Case],
    apis: &[Option<String>],
    group: &Group,
    in_group: &[&Case],
) -> Result<Option<f64>> {
    let (rt, unit) = (group.0, group.1);
    let idx = profiles.iter().position(|p| p.id == rt).unwrap_or(0);
    let members: Vec<&Case> = in_group
        .iter()
        .filter(|c| c.point.decode_tok_s.is_some())
        .copied()
        .collect();
    if members.is_empty() {
        return Ok(None);
    }
    // What the group's decode points leave for the per-op cost (it does not depend on it).
    let mut room = f64::INFINITY;
    for c in &members {
        if let Some(r) = overhead_room_us(c, &profiles[idx])? {
            room = room.min(r);
        }
    }
    let mut best: Option<(f64, f64)> = None;
    for &o in OVERHEAD_GRID_US.iter().take_while(|&&o| o <= room) {
        let mut trial = profiles.to_vec();
        if let Some(u) = trial[idx].units.get_mut(&unit) {
            u.op_overhead_us = o;
        }
        // Decode does not depend on `compute_fraction` (a batch-1 step's compute roof is the
        // peak), so the trial refits the decode figures only.
        for param in PARAM_ORDER
            .into_iter()
            .filter(|p| p.phase() == Phase::Decode)
        {
            fit_param(&mut trial, cases, apis, group, param)?;
        }
        let mut by_source: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for c in &members {
            let d = speed_of(c, &trial, Phase::Decode)?;
            let m = c.point.decode_tok_s.unwrap_or(d);
            by_source
                .entry(c.source.as_str())
                .or_default()
                .push((d / m).ln().abs());
        }
        let score = by_source
            .values()
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
            .sum::<f64>()
            / by_source.len() as f64;
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, o));
        }
    }
    Ok(best.map(|(_, o)| o))
}

/// The fit of the module docs: the committed priors refitted on `cases`.
pub fn fit_runtimes(cases: &[&Case]) -> Result<Vec<RuntimeProfile>> {
    let mut profiles = runtime_profiles()?;
    // One group per runtime × unit × GPU interface with its own fractions (see api_of).
    let apis: Vec<Option<String>> = cases.iter().map(|c| api_of(c, &profiles)).collect();
    let mut groups: Vec<Group> = cases
        .iter()
        .zip(&apis)
        .map(|(c, a)| (c.runtime, c.unit, a.clone()))
        .collect();
    groups.sort();
    groups.dedup();
    // First the per-op overhead where the profile fits it (its search refits the group's
    // other values at every trial; they are fitted again below with the winner).
    for g in &groups {
        let fits = profiles.iter().find(|p| p.id == g.0).is_some_and(|p| {
            p.fitted
                .iter()
                .any(|f| *f == format!("units.{}.op_overhead_us", g.1))
        });
        if fits && g.2.is_none() {
            fit_overhead(&mut profiles, cases, &apis, g)?;
        }
    }
    type Fitted = (Runtime, ComputeUnit, Option<String>, Param, f64);
    let mut fitted: Vec<Fitted> = Vec::new();
    for param in PARAM_ORDER {
        fitted.retain(|(_, _, _, q, _)| *q != param);
        for g in &groups {
            if let Some(v) = fit_param(&mut profiles, cases, &apis, g, param)? {
                fitted.push((g.0, g.1, g.2.clone(), param, v));
            }
        }
    }
    // A runtime × unit the points do not constrain takes the median of the values fitted
    // for other runtimes on the same unit (pooled), not its prior: so leaving a source out
    // leaves the evidence of the other runtimes, not a guess.
    // The same for a GPU interface entry no point constrains: the pool of that unit.
    for param in [Param::Compute, Param::Bandwidth, Param::Kernel] {
        for p in profiles.iter_mut() {
            let id = p.id;
            for (unit, ru) in p.units.iter_mut() {
                if ru.device_figures {
                    continue;
                }
                // The kernel roof is pooled only where the profile has one: a CPU's ρ at the
                // unit level, a GPU's κ at the unit level or per interface.
                let keys: Vec<Option<String>> = std::iter::once(None)
                    .chain(ru.api_fractions.keys().cloned().map(Some))
                    .filter(|k| {
                        param != Param::Kernel
                            || match k {
                                None => {
                                    ru.decode_weights_per_cycle.is_some()
                                        || ru.decode_weights_per_flop.is_some()
                                }
                                Some(a) => ru.api_fractions[a].decode_weights_per_flop.is_some(),
                            }
                    })
                    .collect();
                for key in keys {
                    if fitted
                        .iter()
                        .any(|(r, u, a, q, _)| *r == id && u == unit && *a == key && *q == param)
                    {
                        continue;
                    }
                    let pool: Vec<f64> = fitted
                        .iter()
                        .filter(|(_, u, _, q, _)| u == unit && *q == param)
                        .map(|(_, _, _, _, v)| *v)
                        .collect();
                    let Some(v) = log_median(pool) else {
                        continue;
                    };
                    let entry = key.as_ref().and_then(|a| ru.api_fractions.get_mut(a));
                    let per_flop = *unit != ComputeUnit::Cpu;
                    match (param, entry) {
                        (Param::Compute, Some(f)) => f.compute_fraction = v,
                        (Param::Bandwidth, Some(f)) => f.decode_bandwidth_fraction = v,
                        (Param::Kernel, Some(f)) => f.decode_weights_per_flop = Some(v),
                        (Param::Compute, None) => ru.compute_fraction = v,
                        (Param::Bandwidth, None) => ru.decode_bandwidth_fraction = v,
                        (Param::Kernel, None) if per_flop => ru.decode_weights_per_flop = Some(v),
                        (Param::Kernel, None) => ru.decode_weights_per_cycle = Some(v),
                    }
                }
            }
        }
    }
    Ok(profiles)
}

/// The fit on the whole bundled set (what [`crate::estimate`] uses).
pub fn fit_all() -> Result<Vec<RuntimeProfile>> {
    let (cases, _) = cases()?;
    let refs: Vec<&Case> = cases.iter().collect();
    fit_runtimes(&refs)
}
