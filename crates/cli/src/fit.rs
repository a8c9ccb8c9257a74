//! `edgefit fit`: "what fits on this device?" The estimator's sizing solver
//! (`edgefit_estimate::fit`) over the bundled presets (or one model), printed as a ranked table
//! or as the JSON the page shows.

use anyhow::{bail, Result};
use edgefit_estimate::fit::{fit, FitModel, FitRequest, FitResult};
use edgefit_estimate::{preset, preset_ids, Deployment, Family};

use crate::estimate::{load_device, load_spec};

#[derive(clap::Args)]
pub struct FitArgs {
    /// A device profile id, or a path to a device profile JSON.
    #[arg(long)]
    device: String,
    /// Only this model: a preset id, an HF config.json (or its directory) or a .gguf file
    /// (header only). Default: every bundled preset.
    #[arg(long)]
    model: Option<String>,
    /// Only presets of this family: llama, mistral, qwen2, gemma, gemma2, phi3.
    #[arg(long, conflicts_with = "model")]
    family: Option<String>,
    /// Only this context length (default: 1024, 2048, 4096 and 8192).
    #[arg(long)]
    context: Option<u32>,
    /// Weight formats to try, comma-separated (default: f16,q8_0,w4g32,w4g128).
    #[arg(long, value_delimiter = ',')]
    weights: Vec<String>,
    /// KV formats to try, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    kv: Vec<String>,
    /// Pruning levels to try, comma-separated fractions (default: 0,0.1,0.2,0.3): MLP width,
    /// Q/K and V head dims each lose that fraction.
    #[arg(long, value_delimiter = ',')]
    prune: Vec<f64>,
    /// Prompt tokens.
    #[arg(long)]
    prompt_tokens: Option<u32>,
    /// Generated tokens.
    #[arg(long)]
    gen_tokens: Option<u32>,
    /// Thermal policy: flat-out, paced or capped.
    #[arg(long)]
    policy: Option<String>,
    /// Minutes of continuous generation to simulate.
    #[arg(long)]
    minutes: Option<f64>,
    /// Rows to print in the table (the JSON has all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print the whole result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The request the arguments describe (the page builds the same one from its form).
fn request(args: &FitArgs) -> Result<FitRequest> {
    let models = match (&args.model, &args.family) {
        (Some(m), _) => {
            let spec = load_spec(m)?;
            vec![FitModel {
                id: m.clone(),
                spec,
            }]
        }
        (None, family) => {
            let family: Option<Family> = family.as_deref().map(str::parse).transpose()?;
            let mut out = Vec::new();
            for id in preset_ids() {
                let spec = preset(id)?;
                if family.is_none_or(|f| f == spec.family) {
                    out.push(FitModel {
                        id: id.to_string(),
                        spec,
                    });
                }
            }
            if out.is_empty() {
                bail!(
                    "no preset of family {}",
                    args.family.as_deref().unwrap_or("")
                );
            }
            out
        }
    };
    let mut base = Deployment::default();
    if let Some(p) = args.prompt_tokens {
        base.prompt_tokens = p;
    }
    if let Some(g) = args.gen_tokens {
        base.gen_tokens = g;
    }
    if let Some(p) = &args.policy {
        base.policy = p.parse()?;
    }
    if let Some(m) = args.minutes {
        if !(m.is_finite() && m > 0.0) {
            bail!("--minutes {m}: expected a positive number of minutes");
        }
        base.minutes = m;
    }
    Ok(FitRequest {
        models,
        weights: args
            .weights
            .iter()
            .map(|w| w.parse())
            .collect::<Result<_, _>>()?,
        kv: args
            .kv
            .iter()
            .map(|k| k.parse())
            .collect::<Result<_, _>>()?,
        prune_levels: args.prune.clone(),
        contexts: args.context.into_iter().collect(),
        base,
    })
}

pub fn run(args: FitArgs) -> Result<()> {
    let dev = load_device(&args.device)?;
    let req = request(&args)?;
    let res = fit(&req, &dev)?;
    if args.json {
        println!("{}", serde_json::to_string(&res)?);
        return Ok(());
    }
    print_table(&res, args.top);
    Ok(())
}

fn print_table(res: &FitResult, top: usize) {
    let f = &res.failed;
    println!(
        "{}: {} of {} configurations pass the golden four (failed: memory {}, TTFT {}, sustained {}, temperature {}; {} impossible)",
        res.device_name,
        res.rows.len(),
        res.tried,
        f.memory,
        f.ttft,
        f.sustained,
        f.temperature,
        f.invalid
    );
    if res.rows.is_empty() {
        return;
    }
    println!(
        "ranked by parameters kept, weight bits, context, KV bits, then speed; * = Pareto frontier (params, sustained tok/s, memory)\n"
    );
    println!(
        "{:>4} {:1} {:<20} {:>6} {:>7} {:>6} {:>8} {:>9} {:>9} {:>8} {:>9} {:>7}",
        "rank",
        "",
        "model",
        "prune",
        "weights",
        "kv",
        "context",
        "params M",
        "peak MiB",
        "TTFT ms",
        "sust t/s",
        "ΔT °C"
    );
    for r in res.rows.iter().take(top) {
        println!(
            "{:>4} {:1} {:<20} {:>5.0}% {:>7} {:>6} {:>8} {:>9.1} {:>9.1} {:>8.0} {:>9.1} {:>7.1}",
            r.rank,
            if r.frontier { "*" } else { "" },
            r.model,
            r.prune * 100.0,
            r.weights.as_str(),
            r.kv.as_str(),
            r.context,
            r.params as f64 / 1e6,
            r.peak_memory_bytes as f64 / crate::MIB,
            r.ttft_ms,
            r.sustained_tok_s,
            r.temp_rise_c
        );
    }
    if res.rows.len() > top {
        println!(
            "… {} more (--top N, or --json for all)",
            res.rows.len() - top
        );
    }
}
