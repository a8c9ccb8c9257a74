//! `edgefit perplexity`: how well a model predicts a text, in a given weight format, with the
//! time it took. The default text is the repository's evaluation text,
//! `tests/data/constitution.txt` (see `tests/data/README.md`).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use edgefit_engine::native::NativePlatform;
use edgefit_engine::{perplexity_of_text, PerplexityOptions};
use edgefit_estimate::KvFormat;
use indicatif::ProgressBar;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::FormatArgs;

/// The evaluation text, relative to the repository root.
pub const DEFAULT_TEXT: &str = "tests/data/constitution.txt";

/// Inputs per window unless `--window` says otherwise (llama.cpp's perplexity default, too).
const DEFAULT_WINDOW: usize = 512;

#[derive(clap::Args)]
pub struct PerplexityArgs {
    /// A GGUF file, or a directory with config.json, tokenizer.json and *.safetensors.
    #[arg(long)]
    model: PathBuf,
    #[command(flatten)]
    format: FormatArgs,
    /// UTF-8 text to score [default: tests/data/constitution.txt of the repository].
    #[arg(long)]
    text: Option<PathBuf>,
    /// Score at most this many tokens (the first ones of the text).
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Tokens of context per window: the text is cut into windows this long, each scored from
    /// an empty KV cache.
    #[arg(long, default_value_t = DEFAULT_WINDOW)]
    window: usize,
    /// Print one JSON object instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Where the default text is: under the current directory if run from the repository root,
/// else in the source tree this binary was built from.
fn default_text() -> PathBuf {
    crate::repo_file(DEFAULT_TEXT)
}

pub fn run(args: PerplexityArgs) -> Result<()> {
    // Settings first, so a typo fails before a model loads.
    let kv: KvFormat = args.format.kv_format()?;
    if args.max_tokens == Some(0) {
        bail!("--max-tokens 0: must be at least 1");
    }
    if args.window == 0 {
        bail!("--window 0: must be at least 1");
    }
    let load_options = args.format.load_options()?;
    let (text_path, default) = match &args.text {
        Some(p) => (p.clone(), false),
        None => (default_text(), true),
    };
    let bytes = std::fs::read(&text_path).map_err(|e| {
        let hint = if default {
            " (the default evaluation text ships with the repository: run from its root, or \
             pass --text FILE)"
        } else {
            ""
        };
        anyhow::anyhow!("reading text {}: {e}{hint}", text_path.display())
    })?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("text {} is not UTF-8", text_path.display()))?;
    let sha256 = hex(&Sha256::digest(text.as_bytes()));

    let mut engine = crate::load(&args.model, args.json, load_options)?;
    args.format.apply(&mut engine)?;
    let context = engine.model().config.context_length;
    if args.window > context {
        bail!(
            "--window {}: the model's context holds {context} tokens",
            args.window
        );
    }

    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(crate::bar_style(
        "scoring [{bar:30}] {pos}/{len} tokens {per_sec} eta {eta}",
    ));
    let platform = NativePlatform::default();
    let options = PerplexityOptions {
        max_tokens: args.max_tokens,
        window: Some(args.window),
        batch: None,
    };
    let report = perplexity_of_text(
        engine.model(),
        engine.tokenizer(),
        &text,
        options,
        Some(&platform),
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )
    .with_context(|| format!("scoring {}", text_path.display()))?;
    bar.finish_and_clear();

    let m = engine.metrics();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::to_value(&report)?;
        if let Some(map) = obj.as_object_mut() {
            for (k, v) in [
                ("model", json!(args.model.display().to_string())),
                ("weights", json!(m.weights)),
                ("embedding", json!(m.embedding)),
                ("kernel", json!(m.kernel)),
                ("threads", json!(m.threads)),
                ("kv", json!(kv.as_str())),
                ("weights_bytes", json!(m.weights_bytes)),
                ("load_ms", json!(m.load_ms)),
                (
                    "text",
                    json!({
                        "path": text_path.display().to_string(),
                        "sha256": sha256,
                        "bytes": text.len(),
                    }),
                ),
            ] {
                map.insert(k.to_string(), v);
            }
        }
        writeln!(stdout, "{}", serde_json::to_string(&obj)?)?;
    } else {
        writeln!(
            stdout,
            "perplexity {:.4} (mean NLL {:.4} nats) over {} tokens of {} ({} tokens in all; {} \
             window(s) of at most {})",
            report.perplexity,
            report.mean_nll,
            report.tokens,
            text_path.display(),
            report.text_tokens,
            report.windows,
            report.window
        )?;
        writeln!(
            stdout,
            "{:.1} s, {:.1} tok/s | weights {} (embedding {}), KV {}, kernel {} | {:.1} MiB of \
             weights, loaded in {:.0} ms",
            report.ms.unwrap_or(0.0) / 1000.0,
            report.tokens_per_s.unwrap_or(0.0),
            m.weights,
            m.embedding,
            kv,
            m.kernel,
            m.weights_bytes as f64 / crate::MIB,
            m.load_ms
        )?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads an evaluation text: `path`, or the repository's default text when `None`. Returns
/// the path read and the text (UTF-8).
pub(crate) fn read_text(path: Option<&Path>) -> Result<(PathBuf, String)> {
    let (path, default) = match path {
        Some(p) => (p.to_path_buf(), false),
        None => (default_text(), true),
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        let hint = if default {
            " (the default evaluation text ships with the repository: run from its root, or \
             pass --text FILE)"
        } else {
            ""
        };
        anyhow::anyhow!("reading text {}: {e}{hint}", path.display())
    })?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("text {} is not UTF-8", path.display()))?;
    Ok((path, text))
}
