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

pub(crate) fn speeds(
    spec: &ModelSpec,
    dep: &Deployment,
    device: &DeviceProfile,
    rt: &RuntimeProfile,
) -> Result<Speeds> {
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
    let (prefill_s, _) = tm.prefill(&Roof::at(unit, &exec.prefill, unit.f_max()));
    let (steps, start) = tm.decode_steps();
    let (dec_s, _) = tm.decode_sum(&Roof::at(unit, &exec.decode, unit.f_max()), start, steps);
    Ok(Speeds {
        prefill_tok_s: (prompt * plan.batch) as f64 / prefill_s,
        decode_tok_s: plan.batch as f64 * steps as f64 / dec_s,
        threads: exec.threads,
    })
}
