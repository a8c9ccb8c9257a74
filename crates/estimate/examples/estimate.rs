//! Prints a report summary (or the full JSON with `--json`):
//! `cargo run -p edgefit-estimate --example estimate -- PRESET DEVICE [WEIGHTS] [KV] [POLICY] [--unit=cpu|gpu|npu] [--json]`

use edgefit_estimate::{device, estimate, preset, Deployment};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let model = pos.first().map_or("smollm2-135m", |s| s.as_str());
    let dev = pos.get(1).map_or("snapdragon-8-gen3", |s| s.as_str());
    let mut dep = Deployment::default();
    if let Some(w) = pos.get(2) {
        dep.weights = w.parse()?;
    }
    if let Some(k) = pos.get(3) {
        dep.kv = k.parse()?;
    }
    if let Some(p) = pos.get(4) {
        dep.policy = p.parse()?;
    }
    if let Some(u) = args.iter().find_map(|a| a.strip_prefix("--unit=")) {
        dep.unit = Some(u.parse()?);
    }
    let r = estimate(&preset(model)?, &dep, &device(dev)?)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{} on {} ({}, kv {}, {})",
        r.model.name, r.device.name, dep.weights, dep.kv, dep.policy
    );
    println!(
        "memory: weights {:.3} GB, kv {:.3} GB ({} B/token), act {:.3} GB, total {:.3} GB of {:.3} GB",
        r.memory.weights_bytes as f64 / 1e9,
        r.memory.kv_bytes as f64 / 1e9,
        r.memory.kv_bytes_per_token,
        r.memory.activations_bytes as f64 / 1e9,
        r.memory.total_bytes as f64 / 1e9,
        r.memory.usable_bytes as f64 / 1e9
    );
    println!(
        "latency: ttft {:.1} ms, prefill {:.1} tok/s, decode {:.1} tok/s ({:.2} -> {:.2} ms/step)",
        r.latency.ttft_ms,
        r.latency.prefill_tok_s,
        r.latency.decode_tok_s,
        r.latency.decode_ms_first,
        r.latency.decode_ms_last
    );
    println!(
        "thermal: throttle at {:?} s, sustained {:.1} tok/s, rise {:.1} C (die max {:.1} C), {:.3} J/token, {:.2} W, battery {:?} %/h",
        r.thermal.time_to_throttle_s.map(|t| t.round()),
        r.thermal.sustained_tok_s,
        r.thermal.temp_rise_c,
        r.thermal.die_max_c,
        r.thermal.energy_per_token_j,
        r.thermal.avg_power_w,
        r.thermal.battery_pct_per_hour.map(|b| (b * 10.0).round() / 10.0)
    );
    println!(
        "verdict: memory {:?}, ttft {:?}, sustained {:?}, temperature {:?}, {:?}",
        r.verdict.memory,
        r.verdict.ttft,
        r.verdict.sustained,
        r.verdict.temperature,
        r.verdict.experience
    );
    for w in &r.warnings {
        println!("warning: {w}");
    }
    Ok(())
}
