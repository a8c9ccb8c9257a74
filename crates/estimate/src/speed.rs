//! Prefill and decode speed of one deployment under an explicit runtime profile ([`speeds`]):
//! the roofline of [`crate::latency`] at the unit's top frequency, with the runtime's
//! efficiencies resolved for that unit, `prefill tok/s = prompt·batch / t_prefill` and
//! `decode tok/s = batch·steps / Σ t_step`. No thermal simulation, no ranges: the inner loop of
//! the fit ([`crate::validate`]), below [`crate::report`] and the fitted profiles it uses.

use crate::deploy::Deployment;
use crate::device::DeviceProfile;
use crate::error::Result;
use crate::latency::{Plan, Roof, TimeModel};
use crate::runtime::{resolve, RuntimeProfile};
use crate::spec::ModelSpec;

/// Prefill and decode speed of one deployment with an explicit runtime profile (the fit's inner
/// loop: no thermal simulation, no ranges).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Speeds {
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
    pub threads: Option<u32>,
}

/// The time model and the resolved decode and prefill roofs of one deployment.
fn model<'a>(
    spec: &'a ModelSpec,
    dep: &Deployment,
    device: &'a DeviceProfile,
    rt: &RuntimeProfile,
) -> Result<(TimeModel<'a>, Roof, Roof, Option<u32>)> {
    dep.validate()?;
    let unit_id = dep.unit.unwrap_or(device.default_unit);
    let unit = device.unit(unit_id)?;
    let exec = resolve(device, unit_id, dep, rt)?;
    let prompt = u64::from(dep.prompt_tokens);
    let plan = Plan {
        weights: dep.weights,
        embedding: crate::runtime::head_weights(dep, rt, spec),
        kv: dep.kv,
        compute: exec.compute,
        batch: u64::from(dep.batch),
        prompt,
        gen: u64::from(dep.gen_tokens),
        chunk: u64::from(dep.prefill_chunk.unwrap_or(dep.prompt_tokens)).min(prompt),
        static_context: exec.static_context.then_some(u64::from(dep.context)),
        mix: crate::runtime::layer_mix(dep, rt, spec),
    };
    let tm = TimeModel::new(spec, plan);
    let prefill = Roof::at(unit, &exec.prefill, unit.f_max());
    let decode = Roof::at(unit, &exec.decode, unit.f_max());
    Ok((tm, prefill, decode, exec.threads))
}

pub(crate) fn speeds(
    spec: &ModelSpec,
    dep: &Deployment,
    device: &DeviceProfile,
    rt: &RuntimeProfile,
) -> Result<Speeds> {
    let (tm, prefill, decode, threads) = model(spec, dep, device, rt)?;
    let (prefill_s, _) = tm.prefill(&prefill);
    let (steps, start) = tm.decode_steps();
    let (dec_s, _) = tm.decode_sum(&decode, start, steps);
    let batch = tm.plan.batch as f64;
    Ok(Speeds {
        prefill_tok_s: tm.plan.prompt as f64 * batch / prefill_s,
        decode_tok_s: batch * steps as f64 / dec_s,
        threads,
    })
}

/// What the fixed costs of a decode step are weighed against: the ops of one pass (each pays
/// `op_overhead_us`), the bytes of the first step (as the report's `decode_bytes_per_step`)
/// and the per-pass overhead in seconds.
pub(crate) fn decode_fixed_terms(
    spec: &ModelSpec,
    dep: &Deployment,
    device: &DeviceProfile,
    rt: &RuntimeProfile,
) -> Result<(f64, f64, f64)> {
    let (tm, _, decode, _) = model(spec, dep, device, rt)?;
    let (_, start) = tm.decode_steps();
    let (_, bytes) = tm.step(&decode, 1, start);
    Ok((tm.ops_per_pass(), bytes, decode.pass_overhead))
}

/// One phase's speed of [`speeds`] (tok/s), computing only that phase: the fit's bisections
/// solve a prefill or a decode figure, never both.
pub(crate) fn phase_speed(
    spec: &ModelSpec,
    dep: &Deployment,
    device: &DeviceProfile,
    rt: &RuntimeProfile,
    prefill_phase: bool,
) -> Result<f64> {
    let (tm, prefill, decode, _) = model(spec, dep, device, rt)?;
    let batch = tm.plan.batch as f64;
    if prefill_phase {
        let (prefill_s, _) = tm.prefill(&prefill);
        Ok(tm.plan.prompt as f64 * batch / prefill_s)
    } else {
        let (steps, start) = tm.decode_steps();
        let (dec_s, _) = tm.decode_sum(&decode, start, steps);
        Ok(batch * steps as f64 / dec_s)
    }
}
