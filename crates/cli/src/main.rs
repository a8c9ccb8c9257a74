//! # edgefit (CLI)
//!
//! The terminal face of edgefit: the same engine and estimator as the web page, with the same
//! numbers, for engineers and CI pipelines. Subcommands today: `generate`, `estimate`,
//! `perplexity`, `kv-eval`, `prune`, `fit` and `validate`. Later issues add `quantize` and `bench`.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use edgefit_engine::native::NativePlatform;
use edgefit_engine::{Engine, GenerateOptions, LoadOptions, SamplerConfig};
use edgefit_estimate::KvFormat;
use edgefit_kernels::Kernel;
use indicatif::{ProgressBar, ProgressStyle};

mod estimate;
mod fit;
mod generate;
mod kv_eval;
mod perplexity;
mod prune;
mod validate;

/// Bytes per MiB: the CLI's human-readable sizes are binary, as the page's are ("92.1 MiB").
const MIB: f64 = (1u64 << 20) as f64;

#[derive(Parser)]
#[command(
    name = "edgefit",
    version,
    about = "Size and run small LLMs for phones and other end-side devices"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text with a model and report measured speed and memory.
    Generate(GenerateArgs),
    /// Predict memory, latency, heat and the golden-four verdicts for a model on a device.
    Estimate(estimate::EstimateArgs),
    /// Measure a model's perplexity on a text (default: the repository's evaluation text).
    Perplexity(perplexity::PerplexityArgs),
    /// Compare KV-cache formats with an f32 cache over a long generation (KL, top-1, attention
    /// cosine, decode speed, bytes).
    KvEval(kv_eval::KvEvalArgs),
    /// Structurally prune a model (heads, per-head dims, MLP channels, layers) and save it.
    Prune(prune::PruneArgs),
    /// What fits on a device: every model × weight format × KV format × pruning level × context
    /// the estimator passes on the golden four, ranked, with the Pareto frontier.
    Fit(fit::FitArgs),
    /// The estimator against the committed published measurements: error per point, MAPE by
    /// phase, unit, runtime and device, and leave-one-source-out.
    Validate(validate::ValidateArgs),
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// A GGUF file, or a directory with config.json, tokenizer.json and *.safetensors.
    #[arg(long)]
    model: PathBuf,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// A follow-up turn in the same conversation (repeatable, in order): the KV cache keeps the
    /// earlier turns and only the new tokens are computed. With --json, one line per turn.
    #[arg(long, value_name = "PROMPT")]
    then: Vec<String>,
    /// Wrap the prompt in the model's chat template (instruct models).
    #[arg(long)]
    chat: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling mass, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    format: FormatArgs,
    /// Print one JSON object with the text and the metrics instead of streaming text.
    #[arg(long)]
    json: bool,
    /// After each turn, estimate the run on DEVICE (a device id, a profile JSON path, or
    /// `this-browser`: that profile filled with this machine's micro-benchmarks) and print the
    /// estimate-vs-measured rows, as the page's table does (with --json: the
    /// `estimate_comparison` field).
    #[arg(long, value_name = "DEVICE")]
    estimate: Option<String>,
}

/// How to hold the weights and which kernel runs them (shared by the commands that run a model).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct FormatArgs {
    /// Linear-layer weight format: auto (default: every tensor a GGUF file holds in Q4_0, Q4_1,
    /// Q8_0, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K stays exactly as it is; float weights and other
    /// types become w4g32, embedding q8_0), w4g32, w4g64, w4g128, q8_0, f16, f32. GGUF
    /// Q4_0/Q4_1 tensors stay exactly as they are for w4g32 too.
    #[arg(long, default_value = "auto")]
    pub weights: String,
    /// Embedding / output-head format (default: q8_0 with 4-bit weights, else the same as
    /// --weights).
    #[arg(long)]
    pub embedding: Option<String>,
    /// Re-round tensors the file already holds in the requested format (e.g. GGUF Q4_1 for
    /// w4g32) with edgefit's own symmetric quantizer instead of keeping them as they are.
    #[arg(long)]
    pub requantize: bool,
    /// KV-cache format: int8 (default: K and V int8, chosen by `cargo xtask bench kv`), f32,
    /// f16, k8v16 (K int8 + V f16), int4g32, kivi4 (K 4-bit per channel in blocks of 32 tokens,
    /// V int4g32).
    #[arg(long, default_value = "int8")]
    pub kv: String,
    /// Kernel for the matrix products: scalar, portable, avx2 (native x86_64), simd128 (wasm).
    /// Default: the fastest this build runs here.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Threads for the matrix products and attention heads, 1 to 256 (the outputs are the same
    /// bits for any count). Default: the CPUs this process may use, at most 8.
    #[arg(long)]
    pub threads: Option<String>,
}

/// `--threads`: a whole number from 1 to the pool's limit, or (absent) the default
/// ([`edgefit_kernels::pool::default_threads`]); anything else is one line naming the range.
/// Checked before a model loads.
pub(crate) fn threads(arg: Option<&str>) -> Result<usize> {
    let max = edgefit_kernels::pool::MAX_THREADS;
    match arg {
        None => Ok(edgefit_kernels::pool::default_threads()),
        Some(s) => match s.trim().parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => bail!("--threads {s}: expected a thread count from 1 to {max}"),
        },
    }
}

impl FormatArgs {
    /// The load options these flags ask for.
    /// Also checks `--threads`, so a bad count is refused before the model loads.
    pub(crate) fn load_options(&self) -> Result<LoadOptions> {
        threads(self.threads.as_deref())?;
        Ok(LoadOptions {
            weights: self.weights.parse()?,
            embedding: self.embedding.as_deref().map(str::parse).transpose()?,
            requantize: self.requantize,
        })
    }

    /// The KV format `--kv` names.
    pub(crate) fn kv_format(&self) -> Result<KvFormat> {
        self.kv.parse().with_context(|| format!("--kv {}", self.kv))
    }

    /// Switches `engine` to the requested kernel (if any) and KV format.
    pub(crate) fn apply(&self, engine: &mut Engine) -> Result<()> {
        engine.set_kv_format(self.kv_format()?);
        if let Some(name) = &self.kernel {
            let available: Vec<&str> = Kernel::available().iter().map(|k| k.name()).collect();
            let Some(kernel) = Kernel::from_name(name) else {
                bail!(
                    "unknown kernel `{name}`: this build runs {}",
                    available.join(", ")
                );
            };
            engine.set_kernel(kernel)?;
        }
        engine.set_threads(threads(self.threads.as_deref())?)?;
        Ok(())
    }
}

fn main() -> std::process::ExitCode {
    // A reader that stops early (`edgefit validate --json | head -1`) ends the process quietly,
    // as it does other command-line tools, instead of a panic in `println!`: Rust ignores
    // SIGPIPE, so every write to the closed pipe would fail.
    #[cfg(unix)]
    // SAFETY: `signal` with the default disposition, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole chain of causes on one line, without a backtrace.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Generate(args) => generate(args),
        Command::Estimate(args) => estimate::run(args),
        Command::Perplexity(args) => perplexity::run(args),
        Command::KvEval(args) => kv_eval::run(args),
        Command::Prune(args) => prune::run(args),
        Command::Fit(args) => fit::run(args),
        Command::Validate(args) => validate::run(args),
    }
}

/// Where a repository-relative default file is (the evaluation text, the calibration text,
/// the bench prompt): under the current directory if run from the repository root, else in the
/// source tree this binary was built from (canonicalized), else the relative path as given.
pub(crate) fn repo_file(rel: &str) -> PathBuf {
    let here = PathBuf::from(rel);
    if here.is_file() {
        return here;
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    if built.is_file() {
        built.canonicalize().unwrap_or(built)
    } else {
        here
    }
}

/// Loads a GGUF file or an HF directory into an engine, with a progress bar unless `quiet`.
pub(crate) fn load(path: &Path, quiet: bool, options: LoadOptions) -> Result<Engine> {
    let platform = Box::new(NativePlatform::default());
    if path.is_dir() {
        let t0 = std::time::Instant::now();
        let read = |name: &str| {
            std::fs::read(path.join(name))
                .with_context(|| format!("reading {}", path.join(name).display()))
        };
        let config = String::from_utf8(read("config.json")?).context("config.json is not UTF-8")?;
        let tokenizer = read("tokenizer.json")?;
        let tokenizer_config = std::fs::read_to_string(path.join("tokenizer_config.json")).ok();
        let mut shard_paths: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("listing {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        shard_paths.sort();
        if shard_paths.is_empty() {
            bail!("no .safetensors file in {}", path.display());
        }
        let shards: Vec<Vec<u8>> = shard_paths
            .iter()
            .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
            .collect::<Result<_>>()?;
        let refs: Vec<&[u8]> = shards.iter().map(Vec::as_slice).collect();
        let (model, tok) = edgefit_engine::hf::load_hf(
            &config,
            &tokenizer,
            tokenizer_config.as_deref(),
            &refs,
            options,
        )
        .with_context(|| format!("loading {}", path.display()))?;
        return Ok(Engine::new(
            model,
            tok,
            platform,
            t0.elapsed().as_secs_f64() * 1000.0,
        ));
    }
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(bar_style("loading {msg} [{bar:30}] {pos}/{len} tensors"));
    bar.set_message(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let engine = Engine::load_gguf(&mut reader, platform, options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .with_context(|| format!("loading {}", path.display()))?;
    bar.finish_and_clear();
    Ok(engine)
}

fn generate(args: GenerateArgs) -> Result<()> {
    let load_options = args.format.load_options()?;
    args.format.kv_format()?;
    let mut engine = load(&args.model, args.json, load_options)?;
    args.format.apply(&mut engine)?;
    let device = match &args.estimate {
        Some(id) => {
            Some(generate::device_for(id, &engine).with_context(|| format!("--estimate {id}"))?)
        }
        None => None,
    };
    let mut options = GenerateOptions {
        chat: args.chat,
        max_tokens: args.max_tokens,
        sampler: SamplerConfig {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
        },
        keep: false,
    };
    let mut stdout = std::io::stdout().lock();
    let turns = std::iter::once(&args.prompt).chain(&args.then);
    for (turn, prompt) in turns.enumerate() {
        options.keep = turn > 0;
        if turn > 0 && !args.json {
            writeln!(stdout, "\n--- turn {} ---", turn + 1)?;
        }
        let context = || format!("turn {}", turn + 1);
        engine.start(prompt, options).with_context(context)?;
        prefill_with_progress(&mut engine, args.json).with_context(context)?;
        let mut text = String::new();
        while let Some(piece) = engine.step().with_context(context)? {
            if !args.json {
                // A closed pipe ends the output; the generation itself is unaffected.
                let _ = stdout.write_all(piece.as_bytes());
                let _ = stdout.flush();
            }
            text.push_str(&piece);
        }
        let comparison = match &device {
            Some(d) => Some(generate::compare(&engine, d).with_context(context)?),
            None => None,
        };
        report(&engine, &args, turn, text, comparison.as_ref(), &mut stdout)?;
    }
    Ok(())
}

/// The CLI's progress bars: `template` (indicatif's syntax) drawn with `=> `.
pub(crate) fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// Feeds the started generation's prompt chunk by chunk (as the page's worker does), with a
/// progress bar on stderr when it is longer than one chunk (none with `--json`, or when stderr is
/// not a terminal).
fn prefill_with_progress(engine: &mut Engine, quiet: bool) -> Result<()> {
    let mut bar: Option<ProgressBar> = None;
    loop {
        let p = engine.prefill_chunk()?;
        if p.finished() {
            break;
        }
        if quiet {
            continue;
        }
        bar.get_or_insert_with(|| {
            ProgressBar::new(p.total as u64).with_style(bar_style(
                "reading the prompt [{bar:30}] {pos}/{len} tokens, {eta} left",
            ))
        })
        .set_position(p.done as u64);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(())
}

/// Prints one turn's metrics: a JSON line with `--json`, else a summary line on stderr.
fn report(
    engine: &Engine,
    args: &GenerateArgs,
    turn: usize,
    text: String,
    comparison: Option<&generate::Comparison>,
    stdout: &mut impl Write,
) -> Result<()> {
    let m = engine.metrics();
    if args.json {
        let mut obj = serde_json::to_value(m)?;
        if let Some(map) = obj.as_object_mut() {
            map.insert("text".to_string(), serde_json::Value::String(text));
            map.insert("turn".to_string(), serde_json::Value::from(turn + 1));
            map.insert(
                "model".to_string(),
                serde_json::Value::String(args.model.display().to_string()),
            );
            if let Some(c) = comparison {
                map.insert("estimate_comparison".to_string(), serde_json::to_value(c)?);
            }
        }
        writeln!(stdout, "{}", serde_json::to_string(&obj)?)?;
    } else {
        writeln!(stdout)?;
        eprintln!(
            "{} prompt tokens ({} reused from earlier turns), {} generated ({}) | weights {} (embedding {}), kernel {} × {} thread(s), KV {} | load {:.0} ms | TTFT {:.0} ms | prefill {:.1} tok/s | decode {:.1} tok/s | weights {:.1} MiB | KV {} tokens, {:.2} MiB | peak {:.1} MiB",
            m.prompt_tokens,
            m.reused_tokens,
            m.generated_tokens,
            match m.finish_reason {
                Some(edgefit_engine::FinishReason::Stop) => "stop token",
                Some(edgefit_engine::FinishReason::Length) => "max tokens",
                None => "unfinished",
            },
            m.weights,
            m.embedding,
            m.kernel,
            m.threads,
            m.kv_format,
            m.load_ms,
            m.ttft_ms,
            m.prefill_tok_s,
            m.decode_tok_s,
            m.weights_bytes as f64 / MIB,
            m.kv_tokens,
            m.kv_bytes as f64 / MIB,
            m.peak_bytes as f64 / MIB
        );
        if let Some(c) = comparison {
            eprint!("{}", generate::table(c));
        }
    }
    Ok(())
}
