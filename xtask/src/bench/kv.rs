//! `cargo xtask bench kv [--quick] [--runs N]`: what each KV-cache format of the default model
//! costs and saves (issue 5: "Accuracy and speed, measured"). One table, one row per format
//! `edgefit kv-eval` reports (f32 first), saved to `build/bench/kv.md`:
//!
//! - bytes of the cache at 512 and 2048 tokens, and per token (kv-eval's `kv_bytes_*`);
//! - perplexity of the evaluation text (`edgefit perplexity --kv F`, windows of 512, the whole
//!   text; `--quick`: its first 1024 tokens) and its ratio to f32's;
//! - mean KL from f32 (nats), top-1 agreement, attention-output cosine (mean, min) and
//!   teacher-forced decode tok/s, all from one `edgefit kv-eval` run on `tests/bench/prompt.txt`
//!   (1024 tokens in buckets of 128; `--quick`: 256 in buckets of 64);
//! - decode and prefill tok/s with a long prompt (the first ~4000 characters of
//!   `tests/data/constitution.txt`, ~850 tokens, so reading the cache matters) and 64 greedy
//!   tokens, natively (`edgefit generate --kv F`) and on the real page in headless Chromium
//!   (`tests/bench/run-kv.mjs`), medians of `--runs N` (default 1).
//!
//! Below the table, kv-eval's KL curve: the mean KL per bucket of positions, per format. A
//! column that cannot run shows `error [n]` and the error text in the notes; nothing is made up.

use crate::bench::cmd::run_json;
use crate::bench::machine::{field, host, notes};
use crate::bench::options::Options;
use crate::bench::page::{build_site_or_cli, page_column, site_runs};
use crate::bench::table::{fmt_opt, save, write_commands_and_machine, Column, Notes};
use crate::setup;
use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Greedy tokens per speed run (native and page).
const GEN_TOKENS: usize = 64;
/// About this many characters of the evaluation text make the long speed prompt.
const LONG_PROMPT_CHARS: usize = 4000;
/// The evaluation text (as `edgefit perplexity`'s default) and the long prompt's source.
const TEXT: &str = "tests/data/constitution.txt";
/// kv-eval's prompt.
const EVAL_PROMPT: &str = "tests/bench/prompt.txt";
/// The f32 reference's sampler in kv-eval (passed explicitly, printed in the header).
const REF_TEMPERATURE: &str = "0.8";
const REF_TOP_P: &str = "0.95";
const REF_SEED: &str = "1";

/// One KV format: kv-eval's object for it and the other columns.
#[derive(Debug, Clone, Default)]
struct KvRow {
    format: String,
    eval: Value,
    perplexity: Column,
    native: Column,
    page: Column,
}

/// Everything the table shows.
#[derive(Debug, Clone, Default)]
struct KvBench {
    /// kv-eval's JSON (prompt_tokens, tokens, bucket, weights, kernel, formats).
    eval: Value,
    rows: Vec<KvRow>,
    /// Characters of the evaluation text in the long prompt.
    prompt_chars: usize,
    runs: usize,
    quick: bool,
    commands: Vec<String>,
    machine: Vec<String>,
}

/// What every step of the kv bench reads.
struct KvRun<'a> {
    root: PathBuf,
    /// The default model.
    model: PathBuf,
    /// The release CLI.
    exe: PathBuf,
    opts: &'a Options,
    /// The long prompt of the speed columns, and the file holding it (for the page).
    long_prompt: String,
    prompt_file: PathBuf,
}

pub(crate) fn kv(opts: &Options) -> Result<()> {
    let started = Instant::now();
    let root = util::root();
    let model = root.join(setup::MODEL_PATH);
    let exe = util::target_dir().join("release/edgefit");

    println!("\n== bench kv: release site and CLI");
    let site_error = build_site_or_cli(&root)?;

    let long_prompt = long_prompt(&root.join(TEXT))?;
    let prompt_file = util::xtask_dir()?.join("kv-prompt.txt");
    fs::write(&prompt_file, &long_prompt)
        .with_context(|| format!("writing {}", prompt_file.display()))?;

    let run = KvRun {
        root: root.clone(),
        model,
        exe,
        opts,
        long_prompt: long_prompt.clone(),
        prompt_file,
    };
    let mut bench = KvBench {
        prompt_chars: long_prompt.chars().count(),
        runs: opts.runs,
        quick: opts.quick,
        ..KvBench::default()
    };

    eval_rows(&run, &mut bench)?;
    perplexity_columns(&run, &mut bench);
    native_columns(&run, &mut bench);
    page_columns(&run, &mut bench, site_error)?;

    bench.machine = machine(&bench);
    let table = render_kv(&bench);
    println!("\n{table}");
    save("kv.md", &table)?;
    println!(
        "  (bench kv took {:.1} min)",
        started.elapsed().as_secs_f64() / 60.0
    );
    Ok(())
}

/// The rows: kv-eval's formats, with its accuracy columns and teacher-forced decode speed.
fn eval_rows(run: &KvRun, bench: &mut KvBench) -> Result<()> {
    let root = run.root.clone();
    let model = run.model.clone();
    let exe = run.exe.clone();
    let opts = run.opts;
    let (eval_tokens, bucket) = if opts.quick { (256, 64) } else { (1024, 128) };
    // kv-eval: the list of formats, the accuracy columns and the teacher-forced decode speed.
    println!("\n== bench kv: edgefit kv-eval (native, release)");
    let eval_args: Vec<String> = [
        "kv-eval",
        "--prompt-file",
        EVAL_PROMPT,
        "--tokens",
        &eval_tokens.to_string(),
        "--bucket",
        &bucket.to_string(),
        "--temperature",
        REF_TEMPERATURE,
        "--top-p",
        REF_TOP_P,
        "--seed",
        REF_SEED,
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let shown = format!(
        "edgefit {} --model {} {}",
        eval_args[0],
        setup::MODEL_PATH,
        eval_args[1..].join(" ")
    );
    bench.commands.push(shown.clone());
    let mut cmd = Command::new(&exe);
    cmd.current_dir(&root)
        .arg(&eval_args[0])
        .arg("--model")
        .arg(&model)
        .args(&eval_args[1..]);
    let t = Instant::now();
    let eval = run_json(&mut cmd, &shown, true).context("kv-eval gives the table's rows")?;
    println!("    {:.0} s", t.elapsed().as_secs_f64());
    let formats = eval
        .get("formats")
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty())
        .context("kv-eval's JSON has no `formats`")?;
    for f in formats {
        let format = f
            .get("format")
            .and_then(Value::as_str)
            .context("a kv-eval format without a name")?;
        bench.rows.push(KvRow {
            format: format.to_string(),
            eval: f.clone(),
            ..KvRow::default()
        });
    }
    bench.eval = eval;

    Ok(())
}

/// The perplexity column, one `edgefit perplexity --kv F` per format.
fn perplexity_columns(run: &KvRun, bench: &mut KvBench) {
    let root = run.root.clone();
    let model = run.model.clone();
    let exe = run.exe.clone();
    let opts = run.opts;
    // Perplexity per format.
    println!("\n== bench kv: edgefit perplexity per KV format");
    let quick_tokens = ["--max-tokens", "1024"];
    let extra: &[&str] = if opts.quick { &quick_tokens } else { &[] };
    bench.commands.push(format!(
        "edgefit perplexity --model {} --kv <F> --json{}   (text {TEXT}, window 512)",
        setup::MODEL_PATH,
        extra.iter().map(|a| format!(" {a}")).collect::<String>()
    ));
    for row in &mut bench.rows {
        let shown = format!(
            "edgefit perplexity --model {} --kv {} --json{}",
            setup::MODEL_PATH,
            row.format,
            extra.iter().map(|a| format!(" {a}")).collect::<String>()
        );
        let mut cmd = Command::new(&exe);
        cmd.current_dir(&root)
            .arg("perplexity")
            .arg("--model")
            .arg(&model)
            .args(["--kv", &row.format, "--json"])
            .args(extra);
        let t = Instant::now();
        row.perplexity = match run_json(&mut cmd, &shown, true) {
            Ok(v) => {
                println!(
                    "    perplexity {} over {} tokens, {:.0} s",
                    fmt_opt(v.get("perplexity").and_then(Value::as_f64), 4),
                    v.get("tokens").and_then(Value::as_u64).unwrap_or(0),
                    t.elapsed().as_secs_f64()
                );
                Column {
                    runs: vec![v],
                    error: None,
                }
            }
            Err(e) => Column::failed(format!("{e:#}")),
        };
    }
}

/// The native speed columns, `edgefit generate --kv F` with the long prompt, `--runs` times.
fn native_columns(run: &KvRun, bench: &mut KvBench) {
    let root = run.root.clone();
    let model = run.model.clone();
    let exe = run.exe.clone();
    let opts = run.opts;
    let long_prompt = run.long_prompt.clone();
    let prompt_file = run.prompt_file.clone();
    // Native speed with the long prompt.
    println!("\n== bench kv: edgefit generate per KV format (native, long prompt)");
    bench.commands.push(format!(
        "edgefit generate --model {} --kv <F> --prompt <the first {} characters of {TEXT}> \
         --max-tokens {GEN_TOKENS} --temperature 0 --json",
        setup::MODEL_PATH,
        bench.prompt_chars
    ));
    for row in &mut bench.rows {
        let shown = format!(
            "edgefit generate --model {} --kv {} --prompt <{}> --max-tokens {GEN_TOKENS} \
             --temperature 0 --json",
            setup::MODEL_PATH,
            row.format,
            prompt_file.display()
        );
        for i in 0..opts.runs {
            let mut cmd = Command::new(&exe);
            cmd.current_dir(&root)
                .arg("generate")
                .arg("--model")
                .arg(&model)
                .args(["--kv", &row.format, "--prompt", &long_prompt])
                .args(["--max-tokens", &GEN_TOKENS.to_string()])
                .args(["--temperature", "0", "--json"]);
            match run_json(
                &mut cmd,
                &format!("{shown}   (run {}/{})", i + 1, opts.runs),
                true,
            ) {
                Ok(v) => {
                    println!("    {}", speed_summary(&v));
                    row.native.runs.push(v);
                }
                Err(e) => {
                    row.native.error = Some(format!("{e:#}"));
                    break;
                }
            }
        }
    }
}

/// The page columns: the real page in headless Chromium per format (or why it could not run).
fn page_columns(run: &KvRun, bench: &mut KvBench, site_error: Option<String>) -> Result<()> {
    let root = run.root.clone();
    let opts = run.opts;
    let prompt_file = run.prompt_file.clone();
    let names: Vec<String> = bench.rows.iter().map(|r| r.format.clone()).collect();
    // The page in headless Chromium.
    println!("\n== bench kv: the edgefit page in headless Chromium (long prompt)");
    bench.commands.push(format!(
        "node tests/bench/run-kv.mjs   (build/site served; per format a new context: load-default, \
         kv-format <F>, the same prompt, max-tokens {GEN_TOKENS}, temperature 0, chat and \
         keep-context off, generate)"
    ));
    let page = match site_error {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => site_runs(
            &root,
            "tests/bench/run-kv.mjs",
            &prompt_file,
            GEN_TOKENS,
            opts.runs,
            &[("KV_FORMATS", names.join(","))],
        ),
    };
    match page {
        Ok(lines) => {
            for row in &mut bench.rows {
                row.page = page_column(
                    &lines,
                    "kv",
                    &row.format,
                    "run-kv.mjs printed no measurement",
                );
            }
        }
        Err(e) => {
            let why = format!("{e:#}");
            for row in &mut bench.rows {
                row.page = Column::failed(why.clone());
            }
        }
    }

    Ok(())
}

/// The first ~[`LONG_PROMPT_CHARS`] characters of `text`, cut at a whitespace.
fn long_prompt(text: &Path) -> Result<String> {
    let all = fs::read_to_string(text).with_context(|| format!("reading {}", text.display()))?;
    let head: String = all.chars().take(LONG_PROMPT_CHARS).collect();
    let prompt = match head.rfind(char::is_whitespace) {
        Some(i) if head.len() < all.len() && i > 0 => head[..i].trim_end(),
        _ => head.trim_end(),
    };
    if prompt.is_empty() {
        bail!("{} is empty", text.display());
    }
    Ok(prompt.to_string())
}

fn speed_summary(v: &Value) -> String {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    format!(
        "{} prompt tokens at {:.1} tok/s, {} generated at {:.1} tok/s, KV {} ({} tokens, {} bytes)",
        f("prompt_tokens"),
        f("prefill_tok_s"),
        f("generated_tokens"),
        f("decode_tok_s"),
        v.get("kv_format").and_then(Value::as_str).unwrap_or("?"),
        f("kv_tokens"),
        f("kv_bytes")
    )
}

/// The machine and runtimes, for the notes.
fn machine(bench: &KvBench) -> Vec<String> {
    let native = format!(
        "{}, edgefit CLI: weights {}, kernel {}",
        host(),
        field(&bench.eval, "weights"),
        field(&bench.eval, "kernel")
    );
    let page = bench.rows.iter().find_map(|r| r.page.runs.first());
    notes(native, page, false)
}

fn mib(bytes: Option<f64>) -> String {
    match bytes {
        Some(b) => format!("{:.2} MiB", b / (1024.0 * 1024.0)),
        None => "-".into(),
    }
}

/// A KL value readable from 1e-7 to 1.
fn kl(v: Option<f64>) -> String {
    match v {
        Some(0.0) => "0".into(),
        Some(x) => format!("{x:.2e}"),
        None => "-".into(),
    }
}

fn render_kv(b: &KvBench) -> String {
    let mut s = String::new();
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let e = &b.eval;
    let prompt_tokens = num(e, "prompt_tokens").unwrap_or(0.0);
    let tokens = num(e, "tokens").unwrap_or(0.0);
    let bucket = num(e, "bucket").unwrap_or(0.0);
    let ppl_of = |r: &KvRow| r.perplexity.median("perplexity");
    let f32_ppl = b.rows.iter().find(|r| r.format == "f32").and_then(ppl_of);
    let ppl_info = b.rows.iter().find_map(|r| r.perplexity.runs.first());
    let long_tokens = b.rows.iter().find_map(|r| {
        r.native
            .median("prompt_tokens")
            .or(r.page.median("prompt_tokens"))
    });

    let _ = writeln!(
        s,
        "# KV-cache formats of {} (weights {}, kernel {}), one thread{}\n",
        setup::MODEL_PATH,
        e.get("weights").and_then(Value::as_str).unwrap_or("?"),
        e.get("kernel").and_then(Value::as_str).unwrap_or("?"),
        if b.quick { ", --quick" } else { "" }
    );
    let _ = writeln!(
        s,
        "- KV@N: the cache's bytes holding N tokens (MiB = 2^20 bytes); B/tok = KV@2048 / 2048"
    );
    let _ = writeln!(
        s,
        "- ppl: perplexity of {TEXT}, {}, windows of {} tokens; ppl/f32: ratio to the f32 cache's",
        match ppl_info {
            Some(v) => {
                let scored = num(v, "tokens").unwrap_or(0.0);
                let all = num(v, "text_tokens").unwrap_or(0.0);
                // n tokens give n - 1 predictions.
                if scored + 1.0 < all {
                    format!("the first {scored:.0} predictions of its {all:.0} tokens")
                } else {
                    format!("all of its {all:.0} tokens ({scored:.0} predictions)")
                }
            }
            None => "(did not run)".into(),
        },
        ppl_info.and_then(|v| num(v, "window")).unwrap_or(512.0)
    );
    let _ = writeln!(
        s,
        "- KL (mean, nats, from the f32 cache's next-token distribution), top-1 (agreement with \
         f32), cos mean / cos min (attention outputs vs f32 over layers × positions), decode \
         kv-eval (tok/s, contexts {:.0}..{:.0}): one `edgefit kv-eval` run, {:.0} positions \
         teacher-forced on the f32 reference after {EVAL_PROMPT} ({:.0} tokens)",
        prompt_tokens,
        prompt_tokens + tokens,
        tokens,
        prompt_tokens
    );
    let _ = writeln!(
        s,
        "- decode / prefill CLI and page (tok/s): {GEN_TOKENS} greedy tokens after the first {} \
         characters of {TEXT} ({} tokens), median of {} run(s); page KV: the page's KV bytes and \
         tokens held after the run",
        b.prompt_chars,
        fmt_opt(long_tokens, 0),
        b.runs
    );

    let mut notes = Notes::of_runs(b.runs);

    let _ = writeln!(
        s,
        "\n| KV | KV@512 | KV@2048 | B/tok | ppl | ppl/f32 | KL | top-1 | cos mean | cos min | \
         decode kv-eval | decode CLI | decode page | prefill CLI | prefill page | page KV |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &b.rows {
        let ev = |k: &str| num(&r.eval, k);
        let ppl = ppl_of(r);
        let ppl_cell = notes.cell(&r.perplexity, "perplexity", &r.format, fmt_opt(ppl, 4));
        let ratio = match (ppl, f32_ppl) {
            (Some(p), Some(f)) if f > 0.0 => format!("{:.4}", p / f),
            _ => "-".into(),
        };
        let dec_cli = notes.cell(
            &r.native,
            "CLI generate",
            &r.format,
            fmt_opt(r.native.median("decode_tok_s"), 1),
        );
        let pre_cli = if r.native.runs.is_empty() {
            "-".into()
        } else {
            fmt_opt(r.native.median("prefill_tok_s"), 1)
        };
        let dec_page = notes.cell(
            &r.page,
            "page",
            &r.format,
            fmt_opt(r.page.median("decode_tok_s"), 1),
        );
        let pre_page = if r.page.runs.is_empty() {
            "-".into()
        } else {
            fmt_opt(r.page.median("prefill_tok_s"), 1)
        };
        let page_kv = match (r.page.median("kv_bytes"), r.page.median("kv_tokens")) {
            (Some(bytes), Some(t)) => format!("{} / {t:.0} tok", mib(Some(bytes))),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.format,
            mib(ev("kv_bytes_512")),
            mib(ev("kv_bytes_2048")),
            fmt_opt(ev("kv_bytes_2048").map(|x| x / 2048.0), 0),
            ppl_cell,
            ratio,
            kl(ev("kl_mean")),
            ev("top1_agreement")
                .map(|a| format!("{:.1}%", a * 100.0))
                .unwrap_or_else(|| "-".into()),
            fmt_opt(ev("attn_cos_mean"), 6),
            fmt_opt(ev("attn_cos_min"), 6),
            fmt_opt(ev("decode_tok_s"), 1),
            dec_cli,
            dec_page,
            pre_cli,
            pre_page,
            page_kv
        );
    }
    notes.write(&mut s, "\nNotes:");

    // The KL curve.
    let buckets = b
        .rows
        .iter()
        .filter_map(|r| r.eval.get("kl_by_bucket").and_then(Value::as_array))
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        s,
        "\n## KL vs f32 over positions (mean nats per {bucket:.0} positions)\n\n\
         Teacher-forced on an f32 reference sampled at T={REF_TEMPERATURE}, top-p {REF_TOP_P}, \
         seed {REF_SEED}; prompt {EVAL_PROMPT} ({prompt_tokens:.0} tokens); position 0 predicts \
         the first generated token.\n"
    );
    let mut head = String::from("| KV |");
    let mut rule = String::from("|---|");
    for i in 0..buckets {
        let lo = i as f64 * bucket;
        let hi = ((i + 1) as f64 * bucket).min(tokens) - 1.0;
        let _ = write!(head, " {lo:.0}–{hi:.0} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for r in &b.rows {
        let curve: Vec<String> = r
            .eval
            .get("kl_by_bucket")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|v| kl(v.as_f64())).collect())
            .unwrap_or_default();
        let _ = writeln!(s, "| {} | {} |", r.format, curve.join(" | "));
    }

    write_commands_and_machine(&mut s, &b.commands, &b.machine);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::table::assert_contains_all;
    use serde_json::json;

    #[test]
    fn kv_table_has_ratios_curve_and_errors() {
        let eval = json!({
            "prompt_tokens": 67, "tokens": 256, "bucket": 128, "weights": "w4g32", "kernel": "avx2",
            "formats": [
                {"format": "f32", "kv_bytes_512": 23592960u64, "kv_bytes_2048": 94371840u64,
                 "kl_mean": 0.0, "kl_by_bucket": [0.0, 0.0], "top1_agreement": 1.0,
                 "attn_cos_mean": 1.0, "attn_cos_min": 1.0, "decode_ms": 15.0, "decode_tok_s": 66.0},
                {"format": "int4g32", "kv_bytes_512": 3317760u64, "kv_bytes_2048": 13271040u64,
                 "kl_mean": 0.1071, "kl_by_bucket": [0.1086, 0.1056], "top1_agreement": 0.78125,
                 "attn_cos_mean": 0.9395267, "attn_cos_min": 0.6980797, "decode_ms": 14.7,
                 "decode_tok_s": 68.09}
            ]
        });
        let ppl = |p: f64| Column {
            runs: vec![
                json!({"perplexity": p, "tokens": 1024, "text_tokens": 5779, "window": 512}),
            ],
            error: None,
        };
        let gen = |d: f64| json!({"decode_tok_s": d, "prefill_tok_s": 98.0, "prompt_tokens": 851});
        let formats = eval["formats"].as_array().cloned().unwrap_or_default();
        let rows = vec![
            KvRow {
                format: "f32".into(),
                eval: formats[0].clone(),
                perplexity: ppl(5.0),
                native: Column {
                    runs: vec![gen(30.0), gen(34.0), gen(32.0)],
                    error: None,
                },
                page: Column::failed("chromium is not on PATH\nmore"),
            },
            KvRow {
                format: "int4g32".into(),
                eval: formats[1].clone(),
                perplexity: ppl(5.5),
                native: Column {
                    runs: vec![gen(40.0)],
                    error: Some("killed".into()),
                },
                page: Column::failed("chromium is not on PATH"),
            },
        ];
        let bench = KvBench {
            eval,
            rows,
            prompt_chars: 3998,
            runs: 3,
            quick: true,
            commands: vec!["edgefit kv-eval --json".into()],
            machine: vec!["native x86_64".into()],
        };
        let t = render_kv(&bench);
        // Bytes, per token, perplexity ratio, KL, agreement, cosine, median decode speed.
        assert_contains_all(
            &t,
            &[
                "| f32 | 22.50 MiB | 90.00 MiB | 46080 | 5.0000 | 1.0000 | 0 | 100.0% | 1.000000 | 1.000000 | 66.0 | 32.0 | error [1] | 98.0 | - | - |",
                "| int4g32 | 3.16 MiB | 12.66 MiB | 6480 | 5.5000 | 1.1000 | 1.07e-1 | 78.1% | 0.939527 | 0.698080 | 68.1 | 40.0 [2] | error [3] |",
                "- [1] page f32: chromium is not on PATH / more",
                "- [2] CLI generate int4g32: 1 of 3 runs, then: killed",
                "the first 1024 predictions of its 5779 tokens",
                "| KV | 0–127 | 128–255 |",
                "| int4g32 | 1.09e-1 | 1.06e-1 |",
                "T=0.8, top-p 0.95, seed 1",
            ],
        );
    }

    #[test]
    fn long_prompt_cuts_at_whitespace() {
        let dir = util::target_dir().join("xtask-test-kv");
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("text.txt");
        let word = "wörd ";
        fs::write(&f, word.repeat(2000)).unwrap();
        let p = long_prompt(&f).unwrap();
        assert!(
            p.chars().count() <= LONG_PROMPT_CHARS && p.chars().count() > 3990,
            "{}",
            p.len()
        );
        assert!(p.ends_with("wörd"));
        fs::write(&f, "short text \n").unwrap();
        assert_eq!(long_prompt(&f).unwrap(), "short text");
    }
}
