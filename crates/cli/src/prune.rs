//! `edgefit prune`: structured pruning of a model (TransAct-style heads and per-head dims, MLP
//! channels, whole layers; magnitude or activation-aware importance over a calibration text),
//! then optional re-quantization, saved as HF safetensors + config.json or as GGUF, with a
//! report of what was removed. Method and rules: `edgefit_engine::prune`'s docs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use edgefit_engine::export::{self, ExportDType, GgufDType};
use edgefit_engine::{
    collect_stats, prune, Allocation, Importance, LayerRatios, LoadOptions, Model, PrunePlan,
    WeightsFormat,
};
use serde_json::json;

/// The calibration text `cargo xtask setup` fetches, relative to the repository root.
pub const DEFAULT_CALIBRATION: &str = "models/calibration.txt";

#[derive(clap::Args)]
pub struct PruneArgs {
    /// A GGUF file, or a directory with config.json, tokenizer.json and *.safetensors.
    #[arg(long)]
    model: PathBuf,
    /// Where to save: a directory (HF safetensors + config.json + tokenizer files) or a file
    /// ending in .gguf.
    #[arg(long)]
    out: PathBuf,
    /// Fraction of query heads to remove (within each KV group).
    #[arg(long, default_value_t = 0.0)]
    heads: f64,
    /// Fraction of KV heads to remove (each with its query group).
    #[arg(long, default_value_t = 0.0)]
    kv_heads: f64,
    /// Fraction of per-head Q/K dims to remove (in RoPE pairs).
    #[arg(long, default_value_t = 0.0)]
    qk_dims: f64,
    /// Fraction of per-head V dims to remove.
    #[arg(long, default_value_t = 0.0)]
    v_dims: f64,
    /// Fraction of MLP channels to remove.
    #[arg(long, default_value_t = 0.0)]
    mlp: f64,
    /// Number of whole layers to remove (the least important).
    #[arg(long, default_value_t = 0)]
    layers: usize,
    /// Importance: magnitude (weights only) or activation (weights × calibration activations).
    #[arg(long, default_value = "magnitude")]
    method: String,
    /// uniform (every layer removes its ratio) or global (FLAP-style ranking across layers).
    #[arg(long, default_value = "uniform")]
    allocation: String,
    /// Calibration text for --method activation [default: models/calibration.txt from setup].
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Calibration tokens to run (the first ones of the text).
    #[arg(long, default_value_t = 2048)]
    calibration_tokens: usize,
    /// JSON array with one {heads, kv_heads, qk_dims, v_dims, mlp} object per layer, replacing
    /// the global ratios.
    #[arg(long)]
    per_layer: Option<PathBuf>,
    /// Round pruned MLP widths to a multiple of this (32 suits 4-bit groups; 1 = no rounding).
    #[arg(long, default_value_t = 1)]
    mlp_multiple: usize,
    /// Stored precision: f32, f16, bf16 (HF directory) or f32, f16, q8_0 (GGUF).
    #[arg(long, default_value = "f16")]
    dtype: String,
    /// Print one JSON object (the pruning report) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Where a repository-relative default file is: under the current directory, else in the
/// source tree this binary was built from.
fn repo_file(rel: &str) -> PathBuf {
    let here = PathBuf::from(rel);
    if here.is_file() {
        return here;
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    if built.is_file() {
        built
    } else {
        here
    }
}

pub fn run(args: PruneArgs) -> Result<()> {
    // Every setting first, so a typo fails before a model loads.
    let importance: Importance = args.method.parse().context("--method")?;
    let allocation: Allocation = args.allocation.parse().context("--allocation")?;
    let gguf = args.out.extension().is_some_and(|e| e == "gguf");
    let (hf_dtype, gguf_dtype) = if gguf {
        let d: GgufDType = args
            .dtype
            .parse()
            .with_context(|| format!("--dtype {}: a .gguf output", args.dtype))?;
        (None, Some(d))
    } else {
        let d: ExportDType = args.dtype.parse().with_context(|| {
            format!(
                "--dtype {}: an HF directory takes f32, f16 or bf16",
                args.dtype
            )
        })?;
        (Some(d), None)
    };
    let per_layer: Option<Vec<LayerRatios>> = match &args.per_layer {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading --per-layer {}", p.display()))?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("--per-layer {}: expected a JSON array of {{heads, kv_heads, qk_dims, v_dims, mlp}}", p.display()))?,
            )
        }
        None => None,
    };
    let plan = PrunePlan {
        ratios: LayerRatios {
            heads: args.heads,
            kv_heads: args.kv_heads,
            qk_dims: args.qk_dims,
            v_dims: args.v_dims,
            mlp: args.mlp,
        },
        per_layer,
        layers: args.layers,
        drop_layers: Vec::new(),
        allocation,
        importance,
        mlp_multiple: args.mlp_multiple,
    };
    let calibration = if importance == Importance::Activation {
        let path = args
            .calibration
            .clone()
            .unwrap_or_else(|| repo_file(DEFAULT_CALIBRATION));
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading calibration text {} (the default comes from `cargo xtask setup`; or pass --calibration FILE)",
                path.display()
            )
        })?;
        if args.calibration_tokens == 0 {
            bail!("--calibration-tokens 0: must be at least 1");
        }
        Some((path, text))
    } else {
        None
    };

    // Pruning runs on f32 weights (a 4-bit file is dequantized).
    let f32_options = LoadOptions {
        weights: WeightsFormat::F32,
        embedding: None,
        requantize: false,
    };
    let engine = crate::load(&args.model, args.json, f32_options)?;
    let model: &Model = engine.model();
    let t0 = std::time::Instant::now();
    let stats = match &calibration {
        Some((path, text)) => {
            let mut tokens = engine.tokenizer().encode(text)?;
            tokens.truncate(args.calibration_tokens);
            let window = 512.min(model.config.context_length);
            if !args.json {
                eprintln!(
                    "calibrating on {} tokens of {} ...",
                    tokens.len(),
                    path.display()
                );
            }
            Some(collect_stats(model, &tokens, window)?)
        }
        None => None,
    };
    let (pruned, report) = prune(model, &plan, stats.as_ref())?;
    let prune_ms = t0.elapsed().as_secs_f64() * 1e3;
    let files = if let Some(d) = gguf_dtype {
        let bytes = export::gguf_bytes(&pruned, engine.tokenizer(), d)?;
        std::fs::write(&args.out, &bytes)
            .with_context(|| format!("writing {}", args.out.display()))?;
        vec![args.out.clone()]
    } else {
        let d = hf_dtype.context("no output dtype")?;
        export::save_hf(&pruned, engine.tokenizer(), &args.out, d)
            .with_context(|| format!("saving to {}", args.out.display()))?
    };

    let mut out = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::to_value(&report)?;
        if let Some(map) = obj.as_object_mut() {
            map.insert("model".into(), json!(args.model.display().to_string()));
            map.insert(
                "files".into(),
                json!(files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()),
            );
            map.insert("dtype".into(), json!(args.dtype));
            map.insert("prune_ms".into(), json!(prune_ms));
            map.insert(
                "calibration".into(),
                json!(calibration.as_ref().map(|(p, _)| p.display().to_string())),
            );
            map.insert(
                "calibration_tokens".into(),
                json!(stats.as_ref().map(|s| s.tokens)),
            );
        }
        writeln!(out, "{}", serde_json::to_string(&obj)?)?;
    } else {
        let r = &report;
        writeln!(
            out,
            "pruned {} ({} importance, {} allocation): {} → {} parameters ({:.1}% removed)",
            args.model.display(),
            importance.as_str(),
            args.allocation,
            r.params_before,
            r.params_after,
            100.0 * (1.0 - r.params_after as f64 / r.params_before as f64)
        )?;
        writeln!(
            out,
            "removed: {} layers, {} query heads, {} KV heads, {} Q/K dims, {} V dims, {} MLP channels",
            r.removed.layers,
            r.removed.query_heads,
            r.removed.kv_heads,
            r.removed.qk_dims,
            r.removed.v_dims,
            r.removed.mlp_channels
        )?;
        writeln!(
            out,
            "KV cache (f32) per token: {} → {} bytes",
            r.kv_f32_bytes_per_token_before, r.kv_f32_bytes_per_token_after
        )?;
        for f in &files {
            writeln!(out, "wrote {}", f.display())?;
        }
        writeln!(
            out,
            "measure it: edgefit perplexity --model {}",
            args.out.display()
        )?;
    }
    Ok(())
}
