//! `cargo xtask bench prune [--quick] [--runs N]`: what structured pruning of the default model
//! costs and buys (issue 6). One table, one row per pruning configuration, saved to
//! `build/bench/prune.md`:
//!
//! - baseline (nothing pruned); MLP width, query heads, Q/K dims and V dims 10/20/30/50%;
//!   layers 10/20/30/50% of 30 (3/6/9/15); MLP 20% with magnitude importance (every other row
//!   uses activation importance, calibrated on 2048 tokens of `models/calibration.txt`); and a
//!   few combinations near 80% of the parameters. `--quick`: the baseline, 20% of each
//!   structure, the magnitude row and two combinations.
//! - the real shape (ratios round per `edgefit_engine::prune`'s docs: SmolLM2's 9 query heads
//!   in 3 KV groups of 3 lose whole heads per group), parameters, weight bytes held as w4g32,
//!   KV bytes per token (f32 cache);
//! - perplexity of `tests/data/constitution.txt` with the pruned f32 weights (windows of 512;
//!   the whole text, `--quick`: its first 1024 tokens);
//! - decode tok/s natively (the pruned model quantized to w4g32, 64 greedy tokens after
//!   `tests/bench/prompt.txt`, median of max(3, N) runs) and on the real page in headless
//!   Chromium (the pruned model written as a q8_0 GGUF, loaded through the page's file input
//!   and re-rounded to w4g32 there; median of N runs, default 1), each with its speed-up over
//!   the baseline row;
//! - the estimator's decode tok/s for the same shape on a Snapdragon 8 Gen 3
//!   (`edgefit estimate --model <the pruned GGUF> --weights w4g32 --kv f32`) and its predicted
//!   speed-up over the baseline, next to the measured ones.
//!
//! Everything but the page and the estimate runs in one `edgefit prune --plans` process (one
//! load, one calibration). Below the table: the best row with at most 82% of the baseline's
//! parameters, and activation vs magnitude importance at MLP 20%. A cell that cannot be
//! measured shows `error [n]` with the reason in the notes; nothing is made up.

use crate::bench::cmd::{get, run_json};
use crate::bench::machine::{field, host, notes};
use crate::bench::options::Options;
use crate::bench::page::{build_site_or_cli, page_column, site_runs};
use crate::bench::table::{fmt_opt, save, write_commands_and_machine, Column, Notes};
use crate::setup;
use crate::util::{self, display};
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Greedy tokens per speed run (native and page).
const GEN_TOKENS: usize = 64;
/// The speed prompt.
const PROMPT: &str = "tests/bench/prompt.txt";
/// The evaluation text.
const TEXT: &str = "tests/data/constitution.txt";
/// Calibration text and tokens for activation importance.
const CALIBRATION: &str = "models/calibration.txt";
const CALIBRATION_TOKENS: usize = 2048;
/// The estimator's device.
const DEVICE: &str = "snapdragon-8-gen3";
/// Layers of the default model (SmolLM2-135M), for the layer ratios.
const MODEL_LAYERS: usize = 30;
/// "About 20% fewer parameters": at most this fraction of the baseline's.
const BUDGET: f64 = 0.82;
/// Names of the rows the notes compare.
const BASELINE: &str = "baseline";
const MLP20: &str = "MLP 20%";
const MLP20_MAGNITUDE: &str = "MLP 20% (magnitude)";

/// One configuration: its plan and the three kinds of measurement.
#[derive(Debug, Clone, Default)]
struct PruneRow {
    name: String,
    /// The `--plans` entry.
    spec: Value,
    /// `edgefit prune --json`'s line: report, perplexity, native speed.
    prune: Column,
    estimate: Column,
    page: Column,
}

/// Everything the table shows.
#[derive(Debug, Clone, Default)]
struct PruneBench {
    rows: Vec<PruneRow>,
    runs: usize,
    native_runs: usize,
    quick: bool,
    commands: Vec<String>,
    machine: Vec<String>,
}

/// The configurations: (name, `--plans` entry without `out`).
fn configs(quick: bool) -> Vec<(String, Value)> {
    let pcts: &[u32] = if quick { &[20] } else { &[10, 20, 30, 50] };
    let mut out = vec![(BASELINE.to_string(), json!({}))];
    for (label, key) in [
        ("MLP", "mlp"),
        ("query heads", "heads"),
        ("Q/K dims", "qk_dims"),
        ("V dims", "v_dims"),
    ] {
        for &p in pcts {
            out.push((
                format!("{label} {p}%"),
                json!({ key: f64::from(p) / 100.0 }),
            ));
        }
    }
    for &p in pcts {
        let n = (MODEL_LAYERS * p as usize + 50) / 100;
        out.push((format!("layers {p}% ({n})"), json!({ "layers": n })));
    }
    out.push((
        MLP20_MAGNITUDE.to_string(),
        json!({"mlp": 0.2, "method": "magnitude"}),
    ));
    out.push((
        "MLP 20% + 3 layers".into(),
        json!({"mlp": 0.2, "layers": 3}),
    ));
    out.push((
        "MLP 30% + V dims 25%".into(),
        json!({"mlp": 0.3, "v_dims": 0.25}),
    ));
    if !quick {
        out.push((
            "MLP 25% + Q/K 25% + V 25%".into(),
            json!({"mlp": 0.25, "qk_dims": 0.25, "v_dims": 0.25}),
        ));
    }
    out
}

/// Deletes the pruned GGUFs however the bench ends.
struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = fs::remove_file(f);
        }
    }
}

/// What every step of the prune bench reads.
struct PruneRun<'a> {
    root: PathBuf,
    /// The release CLI.
    exe: PathBuf,
    opts: &'a Options,
    /// The `--plans` file.
    plans_file: PathBuf,
    /// The pruned GGUFs, one per row, deleted when the run is dropped.
    temp: TempFiles,
}

pub(crate) fn prune(opts: &Options) -> Result<()> {
    let started = Instant::now();
    let root = util::root();
    let exe = util::target_dir().join("release/edgefit");

    println!("\n== bench prune: release site and CLI");
    let site_error = build_site_or_cli(&root)?;

    let (mut bench, temp, plans_file) = plan(opts)?;
    let run = PruneRun {
        root,
        exe,
        opts,
        plans_file,
        temp,
    };
    prune_columns(&run, &mut bench);
    estimate_columns(&run, &mut bench);
    page_columns(&run, &mut bench, site_error)?;
    drop(run);

    bench.machine = machine(&bench);
    let table = render_prune(&bench);
    println!("\n{table}");
    save("prune.md", &table)?;
    println!(
        "  (bench prune took {:.1} min)",
        started.elapsed().as_secs_f64() / 60.0
    );
    Ok(())
}

/// The plan: one row per configuration, its `--plans` entry (written to a file for one
/// `edgefit prune` process) and the temporary GGUF it is saved to.
fn plan(opts: &Options) -> Result<(PruneBench, TempFiles, PathBuf)> {
    let mut bench = PruneBench {
        runs: opts.runs,
        native_runs: opts.runs.max(3),
        quick: opts.quick,
        ..PruneBench::default()
    };
    let tmp = std::env::temp_dir();
    let mut temp = TempFiles(Vec::new());
    let mut plans = Vec::new();
    for (i, (name, spec)) in configs(opts.quick).into_iter().enumerate() {
        let gguf = tmp.join(format!(
            "edgefit-bench-prune-{}-{i}.gguf",
            std::process::id()
        ));
        let mut entry = spec.clone();
        if let Some(map) = entry.as_object_mut() {
            map.insert("name".into(), json!(name));
            map.insert("out".into(), json!(gguf.display().to_string()));
        }
        plans.push(entry);
        temp.0.push(gguf);
        bench.rows.push(PruneRow {
            name,
            spec,
            ..PruneRow::default()
        });
    }
    let plans_file = util::xtask_dir()?.join("prune-plans.json");
    fs::write(&plans_file, serde_json::to_string_pretty(&plans)?)
        .with_context(|| format!("writing {}", plans_file.display()))?;

    Ok((bench, temp, plans_file))
}

/// The prune column: one `edgefit prune --plans` process (load, calibrate, then per plan
/// prune, score, save and time).
fn prune_columns(run: &PruneRun, bench: &mut PruneBench) {
    let root = run.root.clone();
    let exe = run.exe.clone();
    let plans_file = run.plans_file.clone();
    let opts = run.opts;
    let native_runs = bench.native_runs;
    // One process: load, calibrate, then per plan prune, score, save and time.
    println!("\n== bench prune: edgefit prune --plans (native, release)");
    let max_tokens: &[&str] = if opts.quick {
        &["--max-tokens", "1024"]
    } else {
        &[]
    };
    let args: Vec<String> = [
        "prune",
        "--model",
        setup::MODEL_PATH,
        "--plans",
        &plans_file.display().to_string(),
        "--method",
        "activation",
        "--calibration",
        CALIBRATION,
        "--calibration-tokens",
        &CALIBRATION_TOKENS.to_string(),
        "--dtype",
        "q8_0",
        "--perplexity",
        "--text",
        TEXT,
        "--window",
        "512",
    ]
    .iter()
    .chain(max_tokens)
    .chain(&[
        "--speed-tokens",
        &GEN_TOKENS.to_string(),
        "--speed-prompt-file",
        PROMPT,
        "--speed-runs",
        &native_runs.to_string(),
        "--json",
    ])
    .map(|s| s.to_string())
    .collect();
    let shown = format!("edgefit {}", args.join(" "));
    bench.commands.push(shown.clone());
    match prune_lines(Command::new(&exe).current_dir(&root).args(&args), &shown) {
        Ok(lines) => {
            for row in &mut bench.rows {
                match lines
                    .iter()
                    .find(|v| v.get("name").and_then(Value::as_str) == Some(&row.name))
                {
                    Some(v) => match v.get("error").and_then(Value::as_str) {
                        Some(err) => row.prune = Column::failed(err),
                        None => row.prune.runs.push(v.clone()),
                    },
                    None => row.prune = Column::failed("edgefit prune printed no line for it"),
                }
            }
        }
        Err(e) => {
            let why = format!("{e:#}");
            for row in &mut bench.rows {
                row.prune = Column::failed(why.clone());
            }
        }
    }
}

/// The estimate column: `edgefit estimate` on each pruned GGUF.
fn estimate_columns(run: &PruneRun, bench: &mut PruneBench) {
    let root = run.root.clone();
    let exe = run.exe.clone();
    let temp = &run.temp;
    // The estimator on each pruned GGUF.
    println!("\n== bench prune: edgefit estimate per pruned model ({DEVICE})");
    let prompt_tokens = bench
        .rows
        .iter()
        .find_map(|r| r.prune.median("speed/prompt_tokens"));
    bench.commands.push(format!(
        "edgefit estimate --model <the pruned GGUF> --device {DEVICE} --weights w4g32 --kv f32 \
         --prompt-tokens {} --gen-tokens {GEN_TOKENS} --json",
        fmt_opt(prompt_tokens, 0)
    ));
    for (row, gguf) in bench.rows.iter_mut().zip(&temp.0) {
        if row.prune.runs.is_empty() {
            row.estimate = Column::failed("no pruned model (see the prune column)");
            continue;
        }
        let mut cmd = Command::new(&exe);
        cmd.current_dir(&root)
            .arg("estimate")
            .arg("--model")
            .arg(gguf)
            .args(["--device", DEVICE, "--weights", "w4g32", "--kv", "f32"])
            .args(["--gen-tokens", &GEN_TOKENS.to_string(), "--json"]);
        if let Some(p) = prompt_tokens {
            cmd.args(["--prompt-tokens", &format!("{p:.0}")]);
        }
        let shown = display(&cmd);
        row.estimate = match run_json(&mut cmd, &shown, false) {
            Ok(v) => Column {
                runs: vec![v],
                error: None,
            },
            Err(e) => Column::failed(format!("{e:#}")),
        };
    }
}

/// The page column: the real page in headless Chromium on each pruned GGUF (or why not).
fn page_columns(run: &PruneRun, bench: &mut PruneBench, site_error: Option<String>) -> Result<()> {
    let root = run.root.clone();
    let opts = run.opts;
    let temp = &run.temp;
    // The page in headless Chromium, one pruned GGUF after the other.
    println!("\n== bench prune: the edgefit page in headless Chromium (local GGUF files)");
    bench.commands.push(format!(
        "node tests/bench/run-prune.mjs   (build/site served; per model a new context: \
         weights-format w4g32, model-file <the pruned q8_0 GGUF>, kv-format f32, prompt \
         {PROMPT}, max-tokens {GEN_TOKENS}, temperature 0, chat and keep-context off, generate)"
    ));
    let models: Vec<Value> = bench
        .rows
        .iter()
        .zip(&temp.0)
        .filter(|(r, f)| !r.prune.runs.is_empty() && f.is_file())
        .map(|(r, f)| json!({"name": r.name, "path": f.display().to_string()}))
        .collect();
    let page = match site_error {
        Some(why) => Err(anyhow::anyhow!(why)),
        None if models.is_empty() => Err(anyhow::anyhow!("no pruned model to load")),
        None => site_runs(
            &root,
            "tests/bench/run-prune.mjs",
            &root.join(PROMPT),
            GEN_TOKENS,
            opts.runs,
            &[("MODELS", serde_json::to_string(&models)?)],
        ),
    };
    match page {
        Ok(lines) => {
            for row in &mut bench.rows {
                let missing = if row.prune.runs.is_empty() {
                    "no pruned model (see the prune column)"
                } else {
                    "run-prune.mjs printed no measurement"
                };
                row.page = page_column(&lines, "name", &row.name, missing);
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

/// Runs `edgefit prune --plans ... --json`, its stderr shown live and each result line
/// summarized as it comes; returns the JSON lines.
fn prune_lines(cmd: &mut Command, shown: &str) -> Result<Vec<Value>> {
    println!("  $ {shown}");
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("could not start `{shown}`"))?;
    let stdout = child
        .stdout
        .take()
        .context("no stdout from edgefit prune")?;
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading edgefit prune's output")?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let name = v.get("name").and_then(Value::as_str).unwrap_or("?");
        match v.get("error").and_then(Value::as_str) {
            Some(err) => println!("    {name}: error: {err}"),
            None => println!(
                "    {name}: {} parameters, ppl {}, native decode {} tok/s  ({:.0} s so far)",
                get(&v, "params_after").and_then(Value::as_u64).unwrap_or(0),
                fmt_opt(get(&v, "perplexity/perplexity").and_then(Value::as_f64), 4),
                fmt_opt(get(&v, "speed/decode_tok_s").and_then(Value::as_f64), 1),
                t.elapsed().as_secs_f64()
            ),
        }
        lines.push(v);
    }
    let status = child.wait().context("waiting for edgefit prune")?;
    if !status.success() {
        anyhow::bail!("`{shown}` failed ({status})");
    }
    Ok(lines)
}

/// The machine and runtimes, for the notes.
fn machine(bench: &PruneBench) -> Vec<String> {
    let native = match bench.rows.iter().find_map(|r| r.prune.runs.first()) {
        Some(v) => format!(
            "{}, edgefit CLI: weights {} (embedding {}), kernel {}, KV {}",
            host(),
            field(v, "speed/weights"),
            field(v, "speed/embedding"),
            field(v, "speed/kernel"),
            field(v, "speed/kv_format")
        ),
        None => host(),
    };
    let page = bench.rows.iter().find_map(|r| r.page.runs.first());
    notes(native, page, true)
}

/// `9/3 h`, or `6–9/3 h` when layers differ: a per-layer field as one value or its range.
fn range(shapes: &[Value], key: &str) -> String {
    let v: Vec<u64> = shapes
        .iter()
        .filter_map(|s| s.get(key).and_then(Value::as_u64))
        .collect();
    match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        _ => "?".into(),
    }
}

/// The pruned shape: layers, query / KV heads, Q/K and V head dims, MLP width.
fn shape(report: &Value) -> String {
    let Some(shapes) = report.get("shapes").and_then(Value::as_array) else {
        return "-".into();
    };
    format!(
        "{}L {}/{}h qk{} v{} ffn{}",
        shapes.len(),
        range(shapes, "n_heads"),
        range(shapes, "n_kv_heads"),
        range(shapes, "qk_dim"),
        range(shapes, "v_dim"),
        range(shapes, "ffn")
    )
}

fn speedup(x: Option<f64>, base: Option<f64>) -> String {
    match (x, base) {
        (Some(x), Some(b)) if b > 0.0 => format!("{:.2}×", x / b),
        _ => "-".into(),
    }
}

fn render_prune(b: &PruneBench) -> String {
    let mut s = String::new();
    let report = |r: &PruneRow| r.prune.runs.first().cloned();
    let num = |r: &PruneRow, k: &str| report(r).and_then(|v| get(&v, k).and_then(Value::as_f64));
    let base = b.rows.iter().find(|r| r.name == BASELINE);
    let base_num = |k: &str| base.and_then(|r| num(r, k));
    let base_params =
        base_num("params_after").or_else(|| b.rows.iter().find_map(|r| num(r, "params_before")));
    let base_ppl = base_num("perplexity/perplexity");
    let base_native = base_num("speed/decode_tok_s");
    let base_page = base.and_then(|r| r.page.median("decode_tok_s"));
    let base_est = base.and_then(|r| r.estimate.median("latency/decode_tok_s"));
    let ppl_info = b
        .rows
        .iter()
        .find_map(|r| report(r)?.get("perplexity").cloned());
    let cal = b.rows.iter().find_map(|r| {
        let v = report(r)?;
        Some((
            get(&v, "calibration_tokens")?.as_u64()?,
            get(&v, "calibration_ms")?.as_f64()?,
        ))
    });

    let _ = writeln!(
        s,
        "# Structured pruning of {}, one thread{}\n",
        setup::MODEL_PATH,
        if b.quick { ", --quick" } else { "" }
    );
    let _ = writeln!(
        s,
        "- importance: activation (Wanda-style, layers by block influence), calibrated on {} \
         tokens of {CALIBRATION}{}, except the `(magnitude)` row; uniform allocation; nothing \
         retrained",
        cal.map(|c| c.0.to_string())
            .unwrap_or_else(|| CALIBRATION_TOKENS.to_string()),
        cal.map(|c| format!(" ({:.0} s, once for every row)", c.1 / 1e3))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "- shape: layers, query/KV heads, Q/K and V head dims, MLP width (a–b: differs between \
         layers); ratios round per layer as the engine's prune docs say, so SmolLM2's 9 query \
         heads in 3 KV groups of 3 lose whole heads per group (10% removes none, 20–50% one per \
         group)"
    );
    let _ = writeln!(
        s,
        "- params: every parameter, embedding (tied, not pruned) included, and % of the \
         baseline; w4g32: bytes of the weights quantized to w4g32 (embedding/head q8_0), the \
         engine's `weights_bytes` (MB = 10^6); KV B/tok: the f32 KV cache's bytes per token"
    );
    let _ = writeln!(
        s,
        "- ppl: perplexity of {TEXT}, {}, windows of {}, with the pruned f32 weights (so it \
         isolates pruning from quantization); ppl/base: ratio to the baseline's",
        match &ppl_info {
            Some(v) => {
                let scored = get(v, "tokens").and_then(Value::as_f64).unwrap_or(0.0);
                let all = get(v, "text_tokens").and_then(Value::as_f64).unwrap_or(0.0);
                if scored + 1.0 < all {
                    format!("the first {scored:.0} predictions of its {all:.0} tokens")
                } else {
                    format!("all of its {all:.0} tokens ({scored:.0} predictions)")
                }
            }
            None => "(did not run)".into(),
        },
        ppl_info
            .as_ref()
            .and_then(|v| get(v, "window").and_then(Value::as_f64))
            .unwrap_or(512.0)
    );
    let _ = writeln!(
        s,
        "- native / page: decode tok/s of {GEN_TOKENS} greedy tokens after {PROMPT}, KV f32; \
         native: the pruned model quantized to w4g32 in the `edgefit prune` process (median of \
         {} runs); page: the real page in headless Chromium loading the pruned model as a local \
         q8_0 GGUF and re-rounding it to symmetric w4g32 (like `--requantize`; median of {} \
         run(s); it stops at a stop token: `(n tok)` then says how many it decoded); ×: speed-up \
         over the baseline row in the same column; native decodes all {GEN_TOKENS} tokens \
         whatever they are",
        b.native_runs, b.runs
    );
    let _ = writeln!(
        s,
        "- est: the estimator's decode tok/s for the same shape on {DEVICE} (w4g32, KV f32, \
         `edgefit estimate` on the pruned GGUF) and its predicted speed-up over its baseline. A \
         phone and this machine differ in absolute speed, so compare the speed-ups: est × is \
         the prediction for what the measured × columns show here"
    );

    let mut notes = Notes::new();

    let _ = writeln!(
        s,
        "\n| config | shape | params | % base | w4g32 | KV B/tok | ppl | ppl/base | native tok/s \
         | native × | page tok/s | page × | est tok/s | est × |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &b.rows {
        let rep = report(r);
        let params = num(r, "params_after");
        let ppl = num(r, "perplexity/perplexity");
        let native = num(r, "speed/decode_tok_s");
        let page = r.page.median("decode_tok_s");
        let est = r.estimate.median("latency/decode_tok_s");
        let first = notes.cell(
            &r.prune,
            "edgefit prune",
            &r.name,
            rep.as_ref().map(shape).unwrap_or_else(|| "-".into()),
        );
        // The page stops at a stop token: say when it decoded fewer tokens than asked.
        let page_value = match r.page.median("generated_tokens") {
            Some(n) if n < GEN_TOKENS as f64 => format!("{} ({n:.0} tok)", fmt_opt(page, 1)),
            _ => fmt_opt(page, 1),
        };
        let page_cell = notes.cell(&r.page, "page", &r.name, page_value);
        let est_cell = notes.cell(&r.estimate, "estimate", &r.name, fmt_opt(est, 1));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            first,
            params
                .map(|p| format!("{:.2} M", p / 1e6))
                .unwrap_or_else(|| "-".into()),
            match (params, base_params) {
                (Some(p), Some(bp)) if bp > 0.0 => format!("{:.1}%", 100.0 * p / bp),
                _ => "-".into(),
            },
            num(r, "speed/weights_bytes")
                .map(|x| format!("{:.1} MB", x / 1e6))
                .unwrap_or_else(|| "-".into()),
            fmt_opt(num(r, "kv_f32_bytes_per_token_after"), 0),
            fmt_opt(ppl, 3),
            match (ppl, base_ppl) {
                (Some(p), Some(bp)) if bp > 0.0 => format!("{:.3}", p / bp),
                _ => "-".into(),
            },
            fmt_opt(native, 1),
            speedup(native, base_native),
            page_cell,
            speedup(page, base_page),
            est_cell,
            speedup(est, base_est),
        );
    }

    // The best recipe for about 20% fewer parameters.
    let _ = writeln!(s, "\n## Best recipe for ~20% fewer parameters\n");
    let within: Vec<(&PruneRow, f64, f64)> = b
        .rows
        .iter()
        .filter_map(|r| {
            let frac = num(r, "params_after")? / base_params?;
            Some((r, frac, num(r, "perplexity/perplexity")?))
        })
        .filter(|&(_, frac, _)| frac <= BUDGET)
        .collect();
    match within.iter().min_by(|a, b| a.2.total_cmp(&b.2)) {
        Some((r, frac, ppl)) => {
            let _ = writeln!(
                s,
                "Lowest perplexity with at most {:.0}% of the baseline's parameters: **{}** — \
                 {:.1}% of the parameters, ppl {ppl:.3} ({} × the baseline's), native decode {} \
                 ({}), page {} ({}). Rows within the budget: {}.",
                BUDGET * 100.0,
                r.name,
                frac * 100.0,
                base_ppl
                    .map(|bp| format!("{:.3}", ppl / bp))
                    .unwrap_or_else(|| "-".into()),
                fmt_opt(num(r, "speed/decode_tok_s"), 1),
                speedup(num(r, "speed/decode_tok_s"), base_native),
                fmt_opt(r.page.median("decode_tok_s"), 1),
                speedup(r.page.median("decode_tok_s"), base_page),
                within
                    .iter()
                    .map(|(r, f, p)| format!("{} ({:.1}%, ppl {p:.3})", r.name, f * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        None => {
            let _ = writeln!(
                s,
                "No row with a perplexity has at most {:.0}% of the baseline's parameters.",
                BUDGET * 100.0
            );
        }
    }

    // Activation vs magnitude at MLP 20%.
    let _ = writeln!(s, "\n## Activation vs magnitude importance at MLP 20%\n");
    let ppl_of = |name: &str| {
        b.rows
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| num(r, "perplexity/perplexity"))
    };
    match (ppl_of(MLP20), ppl_of(MLP20_MAGNITUDE)) {
        (Some(a), Some(m)) => {
            let _ = writeln!(
                s,
                "Same shape, same removed fraction: activation ppl {a:.3}, magnitude ppl {m:.3} \
                 (baseline {}): {} is better by {:.2}×.",
                fmt_opt(base_ppl, 3),
                if a <= m { "activation" } else { "magnitude" },
                a.max(m) / a.min(m)
            );
        }
        (a, m) => {
            let _ = writeln!(
                s,
                "Not both measured: activation ppl {}, magnitude ppl {} (see the notes).",
                fmt_opt(a, 3),
                fmt_opt(m, 3)
            );
        }
    }

    for r in &b.rows {
        for why in r
            .page
            .runs
            .iter()
            .filter_map(|v| v.get("retried_after").and_then(Value::as_str))
        {
            notes.push(format!(
                "page {}: a run was retried once after: {why}",
                r.name
            ));
        }
    }
    notes.write(&mut s, "\n## Notes\n");
    let _ = writeln!(s, "\n## Plans\n");
    for r in &b.rows {
        let _ = writeln!(s, "- {}: `{}`", r.name, r.spec);
    }
    write_commands_and_machine(&mut s, &b.commands, &b.machine);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::table::assert_contains_all;

    fn shapes(n: usize, heads: u64, ffn: u64) -> Value {
        Value::Array(
            (0..n)
                .map(|_| json!({"n_heads": heads, "n_kv_heads": 3, "qk_dim": 64, "v_dim": 64, "ffn": ffn}))
                .collect(),
        )
    }

    fn row(name: &str, params: f64, ppl: f64, native: f64, shapes: Value) -> PruneRow {
        PruneRow {
            name: name.into(),
            spec: json!({}),
            prune: Column {
                runs: vec![json!({
                    "name": name, "params_before": 134515008.0, "params_after": params,
                    "kv_f32_bytes_per_token_after": 46080, "shapes": shapes,
                    "calibration_tokens": 2048, "calibration_ms": 60000.0,
                    "perplexity": {"perplexity": ppl, "tokens": 1024, "text_tokens": 5779, "window": 512},
                    "speed": {"decode_tok_s": native, "weights_bytes": 89941248, "weights": "w4g32",
                              "embedding": "q8_0", "kernel": "avx2", "kv_format": "f32"}
                })],
                error: None,
            },
            estimate: Column {
                runs: vec![json!({"latency": {"decode_tok_s": native * 2.0}})],
                error: None,
            },
            page: Column {
                runs: vec![
                    json!({"decode_tok_s": native / 2.0}),
                    json!({"decode_tok_s": native}),
                ],
                error: None,
            },
        }
    }

    #[test]
    fn prune_table_has_ratios_best_recipe_and_errors() {
        let mut mixed = shapes(30, 9, 1229);
        mixed[0]["n_heads"] = json!(6);
        let mut bad = row("V dims 20%", 0.0, 0.0, 0.0, json!([]));
        bad.prune = Column::failed("out of memory\nmore");
        bad.estimate = Column::failed("no pruned model (see the prune column)");
        bad.page = Column::failed("no pruned model (see the prune column)");
        let mut mag = row(
            MLP20_MAGNITUDE,
            118600128.0,
            1000.0,
            70.0,
            shapes(30, 9, 1229),
        );
        mag.page.error = Some("timeout".into());
        mag.page.runs[0]["generated_tokens"] = json!(10);
        mag.page.runs[1]["retried_after"] = json!("page.goto: Timeout");
        let bench = PruneBench {
            rows: vec![
                row(BASELINE, 134515008.0, 5.0, 60.0, shapes(30, 9, 1536)),
                row(MLP20, 118600128.0, 8.0, 70.0, mixed),
                row(
                    "MLP 30% + V dims 25%",
                    107000000.0,
                    12.0,
                    80.0,
                    shapes(30, 9, 1075),
                ),
                bad,
                mag,
            ],
            runs: 2,
            native_runs: 3,
            quick: true,
            commands: vec!["edgefit prune --json".into()],
            machine: vec!["native x86_64".into()],
        };
        let t = render_prune(&bench);
        assert_contains_all(
            &t,
            &[
                "| baseline | 30L 9/3h qk64 v64 ffn1536 | 134.52 M | 100.0% | 89.9 MB | 46080 | 5.000 | 1.000 | 60.0 | 1.00× | 45.0 | 1.00× | 120.0 | 1.00× |",
                "| MLP 20% | 30L 6–9/3h qk64 v64 ffn1229 | 118.60 M | 88.2% |",
                "| 8.000 | 1.600 | 70.0 | 1.17× | 52.5 | 1.17× | 140.0 | 1.17× |",
                "| V dims 20% | error [1] | - | - |",
                "- [1] edgefit prune V dims 20%: out of memory / more",
                "| 52.5 (10 tok) [4] | 1.17× |",
                "- [5] page MLP 20% (magnitude): a run was retried once after: page.goto: Timeout",
                "- [4] page MLP 20% (magnitude): 2 run(s), then: timeout",
                "**MLP 30% + V dims 25%** — 79.5% of the parameters, ppl 12.000 (2.400 × the baseline's)",
                "activation ppl 8.000, magnitude ppl 1000.000 (baseline 5.000): activation is better by 125.00×",
                "the first 1024 predictions of its 5779 tokens",
                "calibrated on 2048 tokens of models/calibration.txt (60 s, once for every row)",
            ],
        );
    }

    #[test]
    fn configs_cover_the_issue() {
        let quick: Vec<String> = configs(true).into_iter().map(|c| c.0).collect();
        assert_eq!(quick[0], BASELINE);
        assert!(quick.contains(&MLP20.to_string()) && quick.contains(&MLP20_MAGNITUDE.to_string()));
        assert!(quick.contains(&"layers 20% (6)".to_string()), "{quick:?}");
        let full = configs(false);
        assert!(full
            .iter()
            .any(|c| c.0 == "layers 50% (15)" && c.1 == json!({"layers": 15})));
        assert!(full.iter().any(|c| c.0 == "query heads 10%"));
        assert_eq!(full.len(), 1 + 20 + 1 + 3);
    }
}
