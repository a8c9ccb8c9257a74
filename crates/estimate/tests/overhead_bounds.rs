//! The fixed costs of a runtime profile (`op_overhead_us` × ops + `token_overhead_us`) can never
//! exceed what a measured decode step leaves once its bytes are moved at the device's
//! theoretical DRAM bandwidth: for every decode point of the validation set,
//! `overhead ≤ 1 / measured tok/s − bytes_per_step / BW_theoretical` (the step at the cache depth
//! the source timed its decode from). A prior that breaks this
//! makes the estimate slower than the measurement whatever the fit does (the fitted fractions
//! are capped at 1).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use edgefit_estimate::{device, estimate, preset, validate};

#[test]
fn no_measured_decode_step_is_shorter_than_the_fixed_costs_plus_the_bytes() {
    let (cases, _) = validate::cases().unwrap();
    let mut checked = 0;
    let mut broken = Vec::new();
    for c in &cases {
        let Some(measured) = c.point.decode_tok_s else {
            continue;
        };
        let spec = preset(&c.preset).unwrap();
        let dev = device(&c.device_id).unwrap();
        let Some(bw) = dev.memory.theoretical_bandwidth_gbs else {
            continue;
        };
        // The measured step's deployment: a source timing its decode from another cache depth
        // (`decode_depth`: llama-bench's tgN from an empty cache) has its own.
        let dep = c.decode_deployment.as_ref().unwrap_or(&c.deployment);
        let l = estimate(&spec, dep, &dev).unwrap().latency;
        if l.runtime == edgefit_estimate::Runtime::Edgefit {
            continue;
        }
        // Decode tok/s counts every sequence; the validation set is batch 1.
        let step_ms = 1e3 / measured;
        let bytes_ms = l.decode_bytes_per_step / (bw * 1e9) * 1e3;
        let overhead_ms = l.decode_overhead_share * l.decode_ms_first;
        assert!(overhead_ms > 0.0 || l.op_overhead_us == 0.0 && l.token_overhead_us == 0.0);
        checked += 1;
        if overhead_ms > step_ms - bytes_ms {
            broken.push(format!(
                "{} ({} {}): overhead {overhead_ms:.3} ms > measured step {step_ms:.3} ms - bytes at theoretical bandwidth {bytes_ms:.3} ms",
                c.point.id, c.runtime, c.unit
            ));
        }
    }
    assert!(checked >= 40, "only {checked} decode points checked");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
