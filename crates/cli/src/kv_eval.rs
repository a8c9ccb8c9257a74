//! `edgefit kv-eval`: what each KV-cache format costs against an f32 cache over a long
//! generation (KL divergence of next-token distributions per bucket of positions, top-1
//! agreement, cosine of attention outputs, decode time, bytes at 512 and 2048 tokens). The
//! method is in `edgefit_engine::kv_eval`'s docs; `cargo xtask bench kv` prints its table.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use edgefit_engine::native::NativePlatform;
use edgefit_engine::{kv_eval, KvEvalOptions, SamplerConfig};
use edgefit_estimate::KvFormat;

use crate::FormatArgs;

#[derive(clap::Args)]
pub struct KvEvalArgs {
    /// A GGUF file, or a directory with config.json, tokenizer.json and *.safetensors.
    #[arg(long)]
    model: PathBuf,
    /// Linear-layer weight format (as for `generate`).
    #[arg(long, default_value = "w4g32")]
    weights: String,
    /// Kernel for the matrix products and attention (default: the fastest here).
    #[arg(long)]
    kernel: Option<String>,
    /// Threads for the matrix products and attention heads (default: as for `generate`).
    #[arg(long)]
    threads: Option<String>,
    /// KV formats to compare with f32, comma-separated [default: all of them].
    #[arg(long, value_delimiter = ',')]
    formats: Vec<String>,
    /// The prompt the generation starts from.
    #[arg(long, default_value = "Once upon a time")]
    prompt: String,
    /// Read the prompt from this UTF-8 file instead.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// Tokens generated and compared after the prompt.
    #[arg(long, default_value_t = 1024)]
    tokens: usize,
    /// Positions per point of the KL curve.
    #[arg(long, default_value_t = 128)]
    bucket: usize,
    /// Sampling temperature of the f32 reference (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Nucleus mass of the reference's sampling.
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Seed of the reference's sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: KvEvalArgs) -> Result<()> {
    let formats: Vec<KvFormat> = if args.formats.is_empty() {
        KvFormat::ALL.to_vec()
    } else {
        args.formats
            .iter()
            .map(|f| f.parse().with_context(|| format!("--formats {f}")))
            .collect::<Result<_>>()?
    };
    if args.tokens == 0 || args.bucket == 0 {
        bail!("--tokens and --bucket must be at least 1");
    }
    let prompt = match &args.prompt_file {
        Some(p) => {
            std::fs::read_to_string(p).with_context(|| format!("reading prompt {}", p.display()))?
        }
        None => args.prompt.clone(),
    };
    let format = FormatArgs {
        weights: args.weights.clone(),
        embedding: None,
        requantize: false,
        kv: "f32".into(),
        kernel: args.kernel.clone(),
        threads: args.threads.clone(),
    };
    let mut engine = crate::load(&args.model, args.json, format.load_options()?)?;
    format.apply(&mut engine)?;
    let tokens = engine.tokenizer().encode(&prompt)?;
    let options = KvEvalOptions {
        tokens: args.tokens,
        bucket: args.bucket,
        sampler: SamplerConfig {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
        },
    };
    if !args.json {
        eprintln!(
            "comparing {} KV formats over {} generated tokens after a {}-token prompt...",
            formats.len(),
            args.tokens,
            tokens.len()
        );
    }
    let platform = NativePlatform::default();
    let report = kv_eval(engine.model(), &tokens, &formats, options, &platform)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::to_value(&report)?;
        if let Some(map) = obj.as_object_mut() {
            let m = engine.metrics();
            map.insert("weights".into(), m.weights.clone().into());
            map.insert("kernel".into(), m.kernel.clone().into());
            map.insert("threads".into(), m.threads.into());
            map.insert("model".into(), args.model.display().to_string().into());
        }
        writeln!(out, "{}", serde_json::to_string(&obj)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<8} {:>12} {:>12} {:>10} {:>7} {:>9} {:>9} {:>10}",
        "format", "KV@512", "KV@2048", "KL mean", "top-1", "cos mean", "cos min", "decode/s"
    )?;
    for f in &report.formats {
        writeln!(
            out,
            "{:<8} {:>12} {:>12} {:>10.5} {:>7.3} {:>9.6} {:>9.6} {:>10.1}",
            f.format,
            f.kv_bytes_512,
            f.kv_bytes_2048,
            f.kl_mean,
            f.top1_agreement,
            f.attn_cos_mean,
            f.attn_cos_min,
            f.decode_tok_s
        )?;
    }
    writeln!(out, "\nmean KL (nats) per {} positions:", report.bucket)?;
    for f in &report.formats {
        let curve: Vec<String> = f.kl_by_bucket.iter().map(|k| format!("{k:.4}")).collect();
        writeln!(out, "{:<8} {}", f.format, curve.join(" "))?;
    }
    Ok(())
}
