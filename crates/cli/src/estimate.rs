//! `edgefit estimate`: the estimator's report for a model shape on a device, as a table or JSON.

use std::path::Path;

use anyhow::{bail, Context, Result};
use edgefit_estimate::{
    device, device_ids, estimate, preset, preset_ids, Deployment, DeviceProfile, GgufFileType,
    ModelSpec, WeightFormat,
};

#[derive(clap::Args)]
pub struct EstimateArgs {
    /// A preset name (see the error for the list), an HF config.json (or a directory holding
    /// one), or a .gguf file (only its header is read).
    #[arg(long)]
    model: String,
    /// A device profile id, or a path to a device profile JSON.
    #[arg(long, default_value = "snapdragon-8-gen3")]
    device: String,
    /// Weight format: f32 f16 bf16 int8 w4g32 w4g64 w4g128 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k
    /// q4_k q5_k q6_k (under llamacpp, q4_k and q5_k are sized as the Q4_K_M / Q5_K_M files
    /// its quantizer writes: attn_v and ffn_down of about half the layers in q6_k; q3_k and
    /// q2_k as its Q3_K_M and Q2_K files).
    #[arg(long)]
    weights: Option<String>,
    /// Precision of the activations the matrix products run in: f32 f16 bf16 int8 (default: the
    /// runtime's for the weight format; e.g. `--runtime qnn --weights w4g128 --compute f16` is
    /// a model with 4-bit weights and fp16 activations, AI Hub's "w4", whose decode converts
    /// every weight before the multiply).
    #[arg(long)]
    compute: Option<String>,
    /// KV-cache format: f32 f16 k8v16 int8 int4g32 kivi4.
    #[arg(long)]
    kv: Option<String>,
    /// Context length the KV cache is sized for.
    #[arg(long)]
    context: Option<u32>,
    /// Prompt tokens.
    #[arg(long)]
    prompt_tokens: Option<u32>,
    /// Generated tokens.
    #[arg(long)]
    gen_tokens: Option<u32>,
    /// Compute unit: cpu, gpu or npu.
    #[arg(long)]
    unit: Option<String>,
    /// Runtime: llamacpp, executorch, litert, mlc, qnn, coreml, mlx or edgefit (default: the
    /// device's for the unit).
    #[arg(long)]
    runtime: Option<String>,
    /// CPU threads, 1 to 256 (default: the runtime's or the device's).
    #[arg(long)]
    threads: Option<String>,
    /// Thermal policy: flat-out, paced or capped.
    #[arg(long)]
    policy: Option<String>,
    /// Minutes of continuous generation to simulate.
    #[arg(long)]
    minutes: Option<f64>,
    /// Print the whole report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub(crate) fn load_spec(model: &str) -> Result<ModelSpec> {
    Ok(load_model(model)?.0)
}

/// The model's shape, and for a GGUF file what its `general.file_type` says of its weights.
fn load_model(model: &str) -> Result<(ModelSpec, Option<GgufFileType>)> {
    let path = Path::new(model);
    if path.is_file() && model.ends_with(".gguf") {
        let file = std::fs::File::open(path).with_context(|| format!("opening {model}"))?;
        let md = edgefit_engine::gguf::read_estimate_metadata(&mut std::io::BufReader::new(file))
            .with_context(|| format!("reading {model}"))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok((md.to_spec(&name)?, md.file_type()));
    }
    let config = if path.is_dir() {
        path.join("config.json")
    } else {
        path.to_path_buf()
    };
    if config.is_file() {
        let text = std::fs::read_to_string(&config)
            .with_context(|| format!("reading {}", config.display()))?;
        let name = if path.is_dir() {
            path
        } else {
            path.parent().unwrap_or(path)
        };
        let name = name
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.to_string());
        return Ok((ModelSpec::from_hf_config(&name, &text)?, None));
    }
    let spec = preset(model).with_context(|| {
        format!(
            "`{model}` is neither a file nor a preset (presets: {})",
            preset_ids().join(", ")
        )
    })?;
    Ok((spec, None))
}

/// A warning when the deployment's weights are not the GGUF file's own and no `--weights` was
/// given: the estimate is for the deployment's default format, not the file's.
fn file_weights_warning(file: &GgufFileType, deployed: WeightFormat) -> Option<String> {
    let what = format!(
        "the file's weights are {} (general.file_type {})",
        file.name, file.code
    );
    match file.weights {
        Some(w) if w == deployed => None,
        Some(w) => Some(format!(
            "{what}, `{w}` to the estimator; this estimate is for `{deployed}`, the \
             deployment's default: `--weights {w}` estimates the file's own weights (with \
             `--runtime llamacpp --unit cpu` as llama.cpp runs them on the CPU)"
        )),
        None => Some(format!(
            "{what}, a recipe the estimator has no layout for; this estimate is for \
             `{deployed}`, the deployment's default (`--weights` picks another)"
        )),
    }
}

pub(crate) fn load_device(id: &str) -> Result<DeviceProfile> {
    let path = Path::new(id);
    if path.is_file() {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {id}"))?;
        return Ok(DeviceProfile::from_json(&text)?);
    }
    device(id).with_context(|| {
        format!(
            "unknown device `{id}` (devices: {})",
            device_ids().join(", ")
        )
    })
}

pub fn run(args: EstimateArgs) -> Result<()> {
    let (spec, file_type) = load_model(&args.model)?;
    let dev = load_device(&args.device)?;
    let mut dep = Deployment::default();
    if let Some(w) = &args.weights {
        dep.weights = w.parse()?;
    }
    if let Some(c) = &args.compute {
        dep.compute = Some(c.parse()?);
    }
    if let Some(k) = &args.kv {
        dep.kv = k.parse()?;
    }
    if let Some(c) = args.context {
        dep.context = c;
    }
    if let Some(p) = args.prompt_tokens {
        dep.prompt_tokens = p;
    }
    if let Some(g) = args.gen_tokens {
        dep.gen_tokens = g;
    }
    if let Some(u) = &args.unit {
        dep.unit = Some(u.parse()?);
    }
    if let Some(r) = &args.runtime {
        dep.runtime = Some(r.parse()?);
    }
    if let Some(t) = &args.threads {
        // The range and the one-line error of every other command's `--threads`.
        dep.threads = Some(u32::try_from(crate::threads(Some(t))?)?);
    }
    if let Some(p) = &args.policy {
        dep.policy = p.parse()?;
    }
    if let Some(m) = args.minutes {
        if !(m.is_finite() && m > 0.0) {
            bail!("--minutes {m}: expected a positive number of minutes");
        }
        dep.minutes = m;
    }
    let mut r = estimate(&spec, &dep, &dev)?;
    if args.weights.is_none() {
        if let Some(w) = file_type.and_then(|f| file_weights_warning(&f, dep.weights)) {
            r.warnings.push(w);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let d = &r.deployment;
    let label = |v: &dyn erased::Label| v.label();
    println!("{} on {}", r.model.name, r.device.name);
    println!(
        "  weights {} | KV {} | context {} | prompt {} + {} generated | unit {} | runtime {}{} | policy {}",
        label(&d.weights),
        label(&d.kv),
        d.context,
        d.prompt_tokens,
        d.gen_tokens,
        r.latency.unit,
        r.latency.runtime,
        r.latency
            .threads
            .map(|t| format!(" ({t} threads)"))
            .unwrap_or_default(),
        label(&d.policy)
    );
    let m = &r.memory;
    println!("\nmemory");
    for (what, bytes) in [
        ("weights", m.weights_bytes),
        ("KV cache (full context)", m.kv_bytes),
        ("activations (peak)", m.activations_bytes),
        ("runtime overhead", m.runtime_overhead_bytes),
        ("loader duplication", m.loader_duplication_bytes),
        ("fragmentation allowance", m.fragmentation_bytes),
        ("total", m.total_bytes),
        ("usable on device", m.usable_bytes),
    ] {
        println!("  {what:<26} {:>10.1} MiB", bytes as f64 / crate::MIB);
    }
    println!("  {:<26} {:>10} B", "KV per token", m.kv_bytes_per_token);
    let l = &r.latency;
    println!("\nlatency");
    println!(
        "  {:<26} {:>10.1} ms     (range {:.1}..{:.1})",
        "time to first token", l.ttft_ms, l.ttft_ms_range[0], l.ttft_ms_range[1]
    );
    println!(
        "  {:<26} {:>10.1} tok/s  (range {:.1}..{:.1})",
        "prefill", l.prefill_tok_s, l.prefill_tok_s_range[0], l.prefill_tok_s_range[1]
    );
    println!(
        "  {:<26} {:>10.1} tok/s  (range {:.1}..{:.1})",
        "decode (average)", l.decode_tok_s, l.decode_tok_s_range[0], l.decode_tok_s_range[1]
    );
    println!(
        "  {:<26} {:>10.1} %      ({} µs per op, {} µs per token)",
        "fixed overhead in decode",
        l.decode_overhead_share * 100.0,
        l.op_overhead_us,
        l.token_overhead_us
    );
    let b = &l.decode_ms_by_bound;
    println!(
        "  {:<26} {:>10.2} ms     (ops held by: bytes {:.2} ms, kernel rate {:.2} ms, compute {:.2} ms, fixed cost {:.2} ms)",
        "first decode step",
        l.decode_ms_first,
        b.memory,
        b.kernel,
        b.compute,
        b.overhead
    );
    println!("  ranges: {}", l.range_basis);
    let t = &r.thermal;
    println!("\nthermal ({} min)", dep.minutes);
    match t.time_to_throttle_s {
        Some(s) => println!("  {:<26} {:>10.0} s", "first throttle", s),
        None => println!("  {:<26} {:>10}", "first throttle", "never"),
    }
    println!("  {:<26} {:>10.1} tok/s", "sustained", t.sustained_tok_s);
    println!("  {:<26} {:>10.1} °C", "temperature rise", t.temp_rise_c);
    println!(
        "  {:<26} {:>10.3} J",
        "energy per token", t.energy_per_token_j
    );
    println!("\nper-layer decode ops (first step)");
    println!(
        "  {:<8} {:<14} {:>12} {:>12} {:>10} {:>9} {:>10}",
        "layers", "op", "MFLOP", "weight KB", "KV KB", "FLOP/B", "µs"
    );
    for g in &r.layers {
        let span = format!("{}-{}", g.first_layer, g.last_layer);
        for op in &g.decode {
            println!(
                "  {:<8} {:<14} {:>12.2} {:>12.1} {:>10.1} {:>9.2} {:>10.1}  {}",
                span,
                op.op,
                op.flops / 1e6,
                op.weight_bytes / 1e3,
                op.kv_bytes / 1e3,
                op.intensity,
                op.time_us,
                label(&op.bound)
            );
        }
    }
    let v = &r.verdict;
    println!("\nverdict (golden four)");
    for (what, verdict) in [
        ("memory", &v.memory),
        ("TTFT", &v.ttft),
        ("sustained tok/s", &v.sustained),
        ("temperature", &v.temperature),
    ] {
        println!("  {what:<26} {}", label(verdict));
    }
    for w in &r.warnings {
        println!("warning: {w}");
    }
    Ok(())
}

/// Displays any serde-serializable enum by its JSON name (`w4g32`, `pass`, `memory`).
mod erased {
    pub trait Label {
        fn label(&self) -> String;
    }

    impl<T: serde::Serialize> Label for T {
        fn label(&self) -> String {
            match serde_json::to_value(self) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => "?".to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_weights_warning_speaks_only_when_the_formats_differ() {
        let q41 = GgufFileType::from_code(3);
        assert_eq!(file_weights_warning(&q41, WeightFormat::Q4_1), None);
        let w = file_weights_warning(&q41, WeightFormat::W4g32).expect("a warning");
        assert!(w.contains("Q4_1") && w.contains("`w4g32`") && w.contains("--weights q4_1"));
        let iq4 = GgufFileType::from_code(30);
        let w = file_weights_warning(&iq4, WeightFormat::W4g32).expect("a warning");
        assert!(w.contains("IQ4_XS") && w.contains("no layout"), "{w}");
    }
}
