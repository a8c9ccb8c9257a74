//! `edgefit prune`: structured pruning of a model (TransAct-style heads and per-head dims, MLP
//! channels, whole layers; magnitude or activation-aware importance over a calibration text),
//! then optional re-quantization, saved as HF safetensors + config.json or as GGUF, with a
//! report of what was removed. Method and rules: `edgefit_engine::prune`'s docs.
//!
//! It can also measure the result in the same process (`--perplexity`, `--speed-tokens N`) and
//! run several plans after one load and one calibration (`--plans FILE`, one JSON line each):
//! the calibration statistics do not depend on the plan. `cargo xtask bench prune` uses this.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use edgefit_engine::export::{self, ExportDType, GgufDType};
use edgefit_engine::native::NativePlatform;
use edgefit_engine::{
    collect_stats, perplexity_of_text, prune, ActivationStats, Allocation, Engine, Importance,
    LayerRatios, LoadOptions, Logits, Model, PerplexityOptions, PrunePlan, TextTokenizer,
    WeightsFormat,
};
use serde::Deserialize;
use serde_json::{json, Value};

/// The calibration text `cargo xtask setup` fetches, relative to the repository root.
pub const DEFAULT_CALIBRATION: &str = "models/calibration.txt";

#[derive(clap::Args)]
pub struct PruneArgs {
    /// A GGUF file, or a directory with config.json, tokenizer.json and *.safetensors.
    #[arg(long)]
    model: PathBuf,
    /// Where to save: a directory (HF safetensors + config.json + tokenizer files) or a file
    /// ending in .gguf. Omitted: nothing is saved (measure with --perplexity / --speed-tokens).
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// Several plans, one load and one calibration: a JSON array of objects
    /// {name, heads, kv_heads, qk_dims, v_dims, mlp, layers, method, allocation, mlp_multiple,
    /// out}, every field optional (ratios and layers default to 0, method / allocation /
    /// mlp_multiple to the flags, out to nothing saved; --dtype applies to every out). The
    /// ratio flags and --out must then be left out. One result per plan (one JSON line with
    /// --json); a plan that fails reports its error and the others still run.
    #[arg(long, value_name = "FILE")]
    plans: Option<PathBuf>,
    /// Also score a text with the pruned model at f32 (as `edgefit perplexity`).
    #[arg(long)]
    perplexity: bool,
    /// Text for --perplexity [default: tests/data/constitution.txt of the repository].
    #[arg(long)]
    text: Option<PathBuf>,
    /// --perplexity scores at most this many tokens (the first ones of the text).
    #[arg(long)]
    max_tokens: Option<usize>,
    /// --perplexity's window: tokens of context, each window from an empty KV cache.
    #[arg(long, default_value_t = 512)]
    window: usize,
    /// Also time greedy decoding of this many tokens with the pruned model quantized to w4g32
    /// (head q8_0, KV f32), after --speed-prompt-file without the chat template; a stop token
    /// does not end it (every model decodes the same number of tokens).
    #[arg(long, default_value_t = 0)]
    speed_tokens: usize,
    /// The prompt for --speed-tokens [default: tests/bench/prompt.txt of the repository].
    #[arg(long)]
    speed_prompt_file: Option<PathBuf>,
    /// Generations for --speed-tokens (the report has each run and the median).
    #[arg(long, default_value_t = 1)]
    speed_runs: usize,
    /// Threads for calibration, scoring and the speed runs (default: as for `generate`).
    #[arg(long)]
    threads: Option<String>,
    /// Print one JSON object per plan (the pruning report and the measurements) instead of a
    /// summary.
    #[arg(long)]
    json: bool,
}

/// One entry of `--plans`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PlanSpec {
    name: Option<String>,
    heads: f64,
    kv_heads: f64,
    qk_dims: f64,
    v_dims: f64,
    mlp: f64,
    layers: usize,
    method: Option<String>,
    allocation: Option<String>,
    mlp_multiple: Option<usize>,
    out: Option<PathBuf>,
}

/// A plan ready to run: its name, what to remove and where to save the result.
struct Job {
    name: String,
    plan: PrunePlan,
    out: Option<Output>,
}

#[derive(Clone)]
struct Output {
    path: PathBuf,
    hf: Option<ExportDType>,
    gguf: Option<GgufDType>,
}

/// The evaluation settings shared by every plan.
struct Eval {
    /// (path, text) for --perplexity.
    text: Option<(PathBuf, String)>,
    max_tokens: Option<usize>,
    window: usize,
    /// (path, prompt) for --speed-tokens.
    prompt: Option<(PathBuf, String)>,
    speed_tokens: usize,
    speed_runs: usize,
}

/// The output for `path` in `dtype`: GGUF for a name ending in .gguf, else an HF directory.
fn output(path: &Path, dtype: &str) -> Result<Output> {
    if path.extension().is_some_and(|e| e == "gguf") {
        let d: GgufDType = dtype
            .parse()
            .with_context(|| format!("--dtype {dtype}: a .gguf output takes f32, f16 or q8_0"))?;
        Ok(Output {
            path: path.to_path_buf(),
            hf: None,
            gguf: Some(d),
        })
    } else {
        let d: ExportDType = dtype
            .parse()
            .with_context(|| format!("--dtype {dtype}: an HF directory takes f32, f16 or bf16"))?;
        Ok(Output {
            path: path.to_path_buf(),
            hf: Some(d),
            gguf: None,
        })
    }
}

/// The plans the flags (or `--plans`) ask for, every setting checked.
fn jobs(args: &PruneArgs) -> Result<Vec<Job>> {
    let importance: Importance = args.method.parse().context("--method")?;
    let allocation: Allocation = args.allocation.parse().context("--allocation")?;
    let Some(plans) = &args.plans else {
        let per_layer: Option<Vec<LayerRatios>> = match &args.per_layer {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading --per-layer {}", p.display()))?;
                Some(serde_json::from_str(&text).with_context(|| {
                    format!(
                        "--per-layer {}: expected a JSON array of {{heads, kv_heads, qk_dims, v_dims, mlp}}",
                        p.display()
                    )
                })?)
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
        let out = match &args.out {
            Some(p) => Some(output(p, &args.dtype)?),
            None => None,
        };
        return Ok(vec![Job {
            name: "plan".into(),
            plan,
            out,
        }]);
    };
    let flags_used = [
        args.heads,
        args.kv_heads,
        args.qk_dims,
        args.v_dims,
        args.mlp,
    ]
    .iter()
    .any(|&r| r != 0.0)
        || args.layers != 0
        || args.per_layer.is_some()
        || args.out.is_some();
    if flags_used {
        bail!(
            "--plans {}: the ratios, --layers, --per-layer and --out go into the plans file, not the flags",
            plans.display()
        );
    }
    let text = std::fs::read_to_string(plans)
        .with_context(|| format!("reading --plans {}", plans.display()))?;
    let specs: Vec<PlanSpec> = serde_json::from_str(&text).with_context(|| {
        format!(
            "--plans {}: expected a JSON array of {{name, heads, kv_heads, qk_dims, v_dims, mlp, layers, method, allocation, mlp_multiple, out}}",
            plans.display()
        )
    })?;
    if specs.is_empty() {
        bail!("--plans {}: the array is empty", plans.display());
    }
    specs
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p.name.clone().unwrap_or_else(|| format!("plan {}", i + 1));
            let importance: Importance = match &p.method {
                Some(m) => m.parse().with_context(|| format!("{name}: method"))?,
                None => importance,
            };
            let allocation: Allocation = match &p.allocation {
                Some(a) => a.parse().with_context(|| format!("{name}: allocation"))?,
                None => allocation,
            };
            let out = match &p.out {
                Some(path) => Some(output(path, &args.dtype).with_context(|| name.clone())?),
                None => None,
            };
            Ok(Job {
                plan: PrunePlan {
                    ratios: LayerRatios {
                        heads: p.heads,
                        kv_heads: p.kv_heads,
                        qk_dims: p.qk_dims,
                        v_dims: p.v_dims,
                        mlp: p.mlp,
                    },
                    per_layer: None,
                    layers: p.layers,
                    drop_layers: Vec::new(),
                    allocation,
                    importance,
                    mlp_multiple: p.mlp_multiple.unwrap_or(args.mlp_multiple),
                },
                name,
                out,
            })
        })
        .collect()
}

pub fn run(args: PruneArgs) -> Result<()> {
    // Every setting first, so a typo fails before a model loads.
    let jobs = jobs(&args)?;
    if args.max_tokens == Some(0) {
        bail!("--max-tokens 0: must be at least 1");
    }
    if args.window == 0 {
        bail!("--window 0: must be at least 1");
    }
    if args.speed_runs == 0 {
        bail!("--speed-runs 0: must be at least 1");
    }
    let threads = crate::threads(args.threads.as_deref())?;
    let eval = Eval {
        text: if args.perplexity {
            Some(crate::perplexity::read_text(args.text.as_deref())?)
        } else {
            None
        },
        max_tokens: args.max_tokens,
        window: args.window,
        prompt: if args.speed_tokens > 0 {
            let path = args
                .speed_prompt_file
                .clone()
                .unwrap_or_else(|| crate::repo_file("tests/bench/prompt.txt"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading --speed-prompt-file {}", path.display()))?;
            Some((path, text.trim_end().to_string()))
        } else {
            None
        },
        speed_tokens: args.speed_tokens,
        speed_runs: args.speed_runs,
    };
    let needs_stats = jobs
        .iter()
        .any(|j| j.plan.importance == Importance::Activation);
    let calibration = if needs_stats {
        let path = args
            .calibration
            .clone()
            .unwrap_or_else(|| crate::repo_file(DEFAULT_CALIBRATION));
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
    let mut engine = crate::load(&args.model, args.json, f32_options)?;
    engine.set_threads(threads)?;
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
    let calibration_ms = t0.elapsed().as_secs_f64() * 1e3;

    let many = args.plans.is_some();
    for job in &jobs {
        let result = run_job(
            &args,
            job,
            &engine,
            stats.as_ref(),
            &eval,
            calibration.as_ref().map(|(p, _)| p.as_path()),
            calibration_ms,
        );
        match result {
            Ok(()) => {}
            Err(e) if many => {
                // One failing plan does not stop the others; it says why instead.
                if args.json {
                    let line = json!({"name": job.name, "error": format!("{e:#}")});
                    writeln!(std::io::stdout().lock(), "{line}")?;
                } else {
                    eprintln!("{}: error: {e:#}", job.name);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Prunes, measures, saves and reports one plan.
fn run_job(
    args: &PruneArgs,
    job: &Job,
    engine: &Engine,
    stats: Option<&ActivationStats>,
    eval: &Eval,
    calibration: Option<&Path>,
    calibration_ms: f64,
) -> Result<()> {
    let t0 = std::time::Instant::now();
    let (mut pruned, report) = prune(engine.model(), &job.plan, stats)?;
    pruned.pool = engine.model().pool.clone();
    let prune_ms = t0.elapsed().as_secs_f64() * 1e3;

    let perplexity = match &eval.text {
        Some((path, text)) => {
            if !args.json {
                eprintln!("{}: scoring {} at f32 ...", job.name, path.display());
            }
            let platform = NativePlatform::default();
            let options = PerplexityOptions {
                max_tokens: eval.max_tokens,
                window: Some(eval.window.min(pruned.config.context_length)),
                batch: None,
            };
            let r = perplexity_of_text(
                &pruned,
                engine.tokenizer(),
                text,
                options,
                Some(&platform),
                &mut |_, _| {},
            )
            .with_context(|| format!("scoring {}", path.display()))?;
            let mut v = serde_json::to_value(&r)?;
            if let Some(map) = v.as_object_mut() {
                map.insert("text".into(), json!(path.display().to_string()));
            }
            Some(v)
        }
        None => None,
    };

    let files = match &job.out {
        Some(out) => save(&pruned, engine.tokenizer(), out)?,
        None => Vec::new(),
    };

    let speed = match &eval.prompt {
        Some((path, prompt)) => {
            if !args.json {
                eprintln!(
                    "{}: w4g32, {} greedy tokens after {} ...",
                    job.name,
                    eval.speed_tokens,
                    path.display()
                );
            }
            Some(speed(
                pruned,
                engine.tokenizer(),
                prompt,
                eval.speed_tokens,
                eval.speed_runs,
            )?)
        }
        None => None,
    };

    let mut out = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::to_value(&report)?;
        if let Some(map) = obj.as_object_mut() {
            for (k, v) in [
                ("name", json!(job.name)),
                ("plan", serde_json::to_value(&job.plan)?),
                ("model", json!(args.model.display().to_string())),
                (
                    "files",
                    json!(files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()),
                ),
                ("dtype", json!(args.dtype)),
                ("threads", json!(engine.model().pool.threads())),
                ("prune_ms", json!(prune_ms)),
                ("calibration_ms", json!(stats.map(|_| calibration_ms))),
                (
                    "calibration",
                    json!(calibration.map(|p| p.display().to_string())),
                ),
                ("calibration_tokens", json!(stats.map(|s| s.tokens))),
                ("perplexity", perplexity.unwrap_or(Value::Null)),
                ("speed", speed.unwrap_or(Value::Null)),
            ] {
                map.insert(k.into(), v);
            }
        }
        writeln!(out, "{}", serde_json::to_string(&obj)?)?;
        return Ok(());
    }
    let r = &report;
    let title = if args.plans.is_some() {
        format!("{}: ", job.name)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{title}pruned {} ({} importance, {} allocation): {} → {} parameters ({:.1}% removed)",
        args.model.display(),
        job.plan.importance.as_str(),
        match job.plan.allocation {
            Allocation::Uniform => "uniform",
            Allocation::Global => "global",
        },
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
    if let Some(p) = &perplexity {
        let f = |k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        writeln!(
            out,
            "perplexity (f32 weights) {:.4} over {} tokens, windows of {}",
            f("perplexity"),
            f("tokens"),
            f("window")
        )?;
    }
    if let Some(s) = &speed {
        let f = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        writeln!(
            out,
            "w4g32: {:.1} MiB of weights, decode {:.1} tok/s, prefill {:.1} tok/s (median of {} run(s), kernel {})",
            f("weights_bytes") / crate::MIB,
            f("decode_tok_s"),
            f("prefill_tok_s"),
            eval.speed_runs,
            s.get("kernel").and_then(Value::as_str).unwrap_or("?")
        )?;
    }
    for f in &files {
        writeln!(out, "wrote {}", f.display())?;
    }
    if let Some(o) = &job.out {
        if perplexity.is_none() {
            writeln!(
                out,
                "measure it: edgefit perplexity --model {}",
                o.path.display()
            )?;
        }
    }
    Ok(())
}

/// Writes the pruned model; returns the files written.
fn save(pruned: &Model, tokenizer: &TextTokenizer, out: &Output) -> Result<Vec<PathBuf>> {
    if let Some(d) = out.gguf {
        let bytes = export::gguf_bytes(pruned, tokenizer, d)?;
        std::fs::write(&out.path, &bytes)
            .with_context(|| format!("writing {}", out.path.display()))?;
        return Ok(vec![out.path.clone()]);
    }
    let d = out.hf.context("no output dtype")?;
    export::save_hf(pruned, tokenizer, &out.path, d)
        .with_context(|| format!("saving to {}", out.path.display()))
}

/// Quantizes `pruned` to w4g32 (head q8_0) and times `runs` greedy decodes of `tokens` tokens
/// after `prompt` (KV f32): the prompt in one forward call, then `tokens − 1` one-token calls,
/// always all of them (a stop token does not end the run, so every model decodes the same
/// number of tokens). Per run and medians: prefill and decode tok/s; and the weights' bytes.
fn speed(
    pruned: Model,
    tokenizer: &TextTokenizer,
    prompt: &str,
    tokens: usize,
    runs: usize,
) -> Result<Value> {
    let t0 = std::time::Instant::now();
    let options = LoadOptions {
        weights: WeightsFormat::W4g32,
        embedding: None,
        requantize: false,
    };
    let weights = pruned
        .weights
        .into_converted(options)
        .context("quantizing the pruned model to w4g32")?;
    let mut model = Model::new(pruned.config, weights);
    model.kv_format = edgefit_estimate::KvFormat::F32;
    model.pool = pruned.pool;
    let convert_ms = t0.elapsed().as_secs_f64() * 1e3;
    let ids = tokenizer.encode(prompt)?;
    if ids.is_empty() {
        bail!("the speed prompt has no tokens");
    }
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .fold((0usize, f32::NEG_INFINITY), |best, (i, &x)| {
                if x > best.1 {
                    (i, x)
                } else {
                    best
                }
            })
            .0 as u32
    };
    let mut per_run = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut cache = model.new_cache(ids.len() + tokens + 1);
        let t = std::time::Instant::now();
        let logits = model.forward(&ids, &mut cache, Logits::Last)?;
        let prefill_s = t.elapsed().as_secs_f64();
        let mut next = argmax(&logits);
        let t = std::time::Instant::now();
        for _ in 1..tokens {
            let logits = model.forward(&[next], &mut cache, Logits::Last)?;
            next = argmax(&logits);
        }
        let decode_s = t.elapsed().as_secs_f64();
        per_run.push(json!({
            "prefill_tok_s": ids.len() as f64 / prefill_s,
            "decode_tok_s": if tokens > 1 { Some((tokens - 1) as f64 / decode_s) } else { None },
            "prompt_tokens": ids.len(),
            "generated_tokens": tokens,
        }));
    }
    let median = |k: &str| {
        let mut v: Vec<f64> = per_run
            .iter()
            .filter_map(|r| r.get(k).and_then(Value::as_f64))
            .collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    };
    let o = model.weights.options;
    Ok(json!({
        "weights": o.weights.to_string(),
        "embedding": o.embedding_format().to_string(),
        "kernel": model.kernel.name(),
        "threads": model.pool.threads(),
        "kv_format": model.kv_format.to_string(),
        "weights_bytes": model.weights.bytes(),
        "convert_ms": convert_ms,
        "decode_tok_s": median("decode_tok_s"),
        "prefill_tok_s": median("prefill_tok_s"),
        "prompt_tokens": ids.len(),
        "generated_tokens": tokens,
        "runs": per_run,
    }))
}
