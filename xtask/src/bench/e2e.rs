//! `cargo xtask bench e2e [--model PATH] [--threads 1,2]`: one GGUF end to end, the edgefit CLI
//! and page beside llama.cpp natively and in the browser (see [`crate::bench`]): plan the rows
//! (engines × weights × threads), run each, collect medians, render the table and its JSON.

use crate::bench::cmd::{json_lines, median_of, stdout_of};
use crate::bench::machine::native_runtime;
use crate::bench::options::Options;
use crate::bench::page::{copy_bench_files, node};
use crate::bench::table::{fmt_opt, save};
use crate::util::{self, run};
use crate::{build, serve, setup};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Greedy tokens per e2e run (kernels.md's peer protocol).
const E2E_TOKENS: usize = 128;

/// One engine × runtime × weights × threads row: the runs' measurements, or why it could not
/// run.
#[derive(Debug, Clone, Default)]
struct E2eRow {
    engine: String,
    runtime: String,
    weights: String,
    threads: usize,
    runs: Vec<Value>,
    error: Option<String>,
}

impl E2eRow {
    fn new(engine: &str, runtime: &str, weights: &str, threads: usize) -> E2eRow {
        E2eRow {
            engine: engine.into(),
            runtime: runtime.into(),
            weights: weights.into(),
            threads,
            ..E2eRow::default()
        }
    }

    /// Whether this is the row of `engine` on `runtime` with `weights` at `threads`.
    fn is(&self, engine: &str, runtime: &str, weights: &str, threads: usize) -> bool {
        self.engine == engine
            && self.runtime == runtime
            && self.weights == weights
            && self.threads == threads
    }

    /// Median of a numeric field over the runs.
    fn median(&self, key: &str) -> Option<f64> {
        median_of(&self.runs, key)
    }

    /// The row of `build/bench/e2e.json` (medians; `peak_bytes` only on a row that reports it:
    /// the page's peak wasm memory, the CLI's own `peak_bytes`; `error` only on a row that
    /// could not run).
    fn json(&self, model: &str) -> Value {
        let mut v = serde_json::json!({
            "engine": self.engine,
            "runtime": self.runtime,
            "model": model,
            "weights": self.weights,
            "threads": self.threads,
            "prefill_tok_s": self.median("prefill_tok_s"),
            "decode_tok_s": self.median("decode_tok_s"),
            "load_ms": self.median("load_ms"),
            "runs": self.runs.len(),
        });
        if let (Some(peak), Some(map)) = (self.median("peak_bytes"), v.as_object_mut()) {
            map.insert("peak_bytes".into(), peak.into());
        }
        if let (Some(err), Some(map)) = (&self.error, v.as_object_mut()) {
            map.insert("error".into(), err.clone().into());
        }
        v
    }
}

/// The model an e2e run measures.
struct E2eModel {
    path: PathBuf,
    /// How the tables name it (repository-relative when it is inside the repository).
    label: String,
    /// Whether it is the default model (the page loads it with its own button, the CLI compares
    /// f32 and w4g32 on it).
    default: bool,
    /// What the peers run: the file's own blocks (`q4_1 (GGUF as is)`).
    as_is: String,
}

impl E2eModel {
    fn resolve(arg: Option<&Path>) -> Result<E2eModel> {
        let root = util::root();
        let default_path = root.join(setup::MODEL_PATH);
        let path = match arg {
            None => default_path.clone(),
            Some(p) => p.to_path_buf(),
        };
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        };
        if !path.is_file() && same(&path, &root.join(setup::GEMMA_MODEL_PATH)) {
            setup::gemma_model()?;
        }
        if !path.is_file() {
            bail!(
                "--model {}: no such file (the default model and `{}` come from `cargo xtask \
                 setup` and `cargo xtask setup --gemma`)",
                path.display(),
                setup::GEMMA_MODEL_PATH
            );
        }
        if path
            .extension()
            .is_none_or(|e| !e.eq_ignore_ascii_case("gguf"))
        {
            bail!(
                "--model {}: the e2e bench runs GGUF files (the llama.cpp peers read only GGUF)",
                path.display()
            );
        }
        let label = match path.canonicalize().ok().zip(root.canonicalize().ok()) {
            Some((p, r)) => p.strip_prefix(&r).map(Path::to_path_buf).unwrap_or(p),
            None => path.clone(),
        };
        // Symlinked models (a worktree's models/) resolve outside the repository: name them by
        // the path given when it is relative.
        let label = if label.is_absolute() && path.is_relative() {
            path.display().to_string()
        } else if label.is_absolute() && same(&path, &default_path) {
            setup::MODEL_PATH.to_string()
        } else if label.is_absolute() && same(&path, &root.join(setup::GEMMA_MODEL_PATH)) {
            setup::GEMMA_MODEL_PATH.to_string()
        } else {
            label.display().to_string()
        };
        Ok(E2eModel {
            default: same(&path, &default_path),
            as_is: format!("{} (GGUF as is)", gguf_kind(&path)),
            label,
            path,
        })
    }

    /// Where the bench's peer site serves the file (relative URL).
    fn served_as(&self) -> String {
        format!(
            "models/{}",
            self.path.file_name().unwrap_or_default().to_string_lossy()
        )
    }
}

/// The quantization a GGUF file name ends with (`…-q4_k_m.gguf` → `q4_k_m`), else `GGUF`.
fn gguf_kind(path: &Path) -> String {
    let stem = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_lowercase();
    let known = [
        "q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
        "f16", "bf16", "f32",
    ];
    known
        .iter()
        .find(|k| stem.ends_with(*k))
        .map(|k| k.to_string())
        .unwrap_or_else(|| "GGUF".into())
}

pub(crate) fn e2e(opts: &Options) -> Result<()> {
    let root = util::root();
    let model = E2eModel::resolve(opts.model.as_deref())?;
    let prompt_file = root.join("tests/bench/prompt.txt");
    let prompt = fs::read_to_string(&prompt_file)
        .with_context(|| format!("reading {}", prompt_file.display()))?
        .trim_end()
        .to_string();

    println!(
        "\n== bench e2e: {} at {} thread(s); release site and CLI",
        model.label,
        opts.threads
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    build::build_site()?;

    let peers = peer_packages();
    if let Err(e) = &peers {
        println!("  ! the llama.cpp peers are not installed: {e:#}");
    }
    // The native engines round by round, each once a round, rather than every run of one
    // engine before the next: this kind of VM swings between a fast and a slow mode for minutes
    // at a time (the same process ~1.4–2× apart), and a stretch of slow mode that fell on one
    // engine's runs moved the ratios between engines and between thread counts; interleaved, it
    // falls on every row alike. The browser driver interleaves its pages the same way, in one
    // browser (its compiled-code cache kept, as a returning visitor's).
    let (mut cli, mut native_peer) = (Vec::new(), Vec::new());
    for round in 1..=opts.runs {
        println!(
            "\n== bench e2e: native round {round}/{} (every engine once)",
            opts.runs
        );
        merge_rows(&mut cli, e2e_cli(&model, &prompt, &opts.threads)?);
        let peer = opts
            .threads
            .iter()
            .map(|&threads| e2e_llamacpp(&model, &prompt_file, threads, &peers))
            .collect();
        merge_rows(&mut native_peer, peer);
    }
    let mut rows = cli;
    rows.extend(e2e_browser(
        &model,
        &prompt_file,
        opts.runs,
        &opts.threads,
        peers.is_ok(),
    ));
    rows.extend(native_peer);
    // One thread count after the other (stable: engines keep their order within one).
    rows.sort_by_key(|r| r.threads);

    let table = render_e2e(
        &rows,
        &model.label,
        opts.runs,
        &[
            wasm_sizes(&root.join("build/site/pkg"))?,
            wasm_sizes(&root.join("build/site/pkg-threads")).unwrap_or_default(),
        ]
        .concat(),
    );
    println!("\n{table}");
    let json = serde_json::to_string_pretty(
        &rows
            .iter()
            .map(|r| r.json(&model.label))
            .collect::<Vec<_>>(),
    )?;
    save("e2e.txt", &table)?;
    save("e2e.json", &format!("{json}\n"))?;
    if !model.default {
        // A second model's run also keeps its own copy (the default model's stays in e2e.*
        // only until the next run).
        let stem = model.path.file_stem().unwrap_or_default().to_string_lossy();
        save(&format!("e2e-{stem}.txt"), &table)?;
        save(&format!("e2e-{stem}.json"), &format!("{json}\n"))?;
    }
    Ok(())
}

/// The edgefit CLI at each thread count, once per weight format: f32 and w4g32 for the
/// default model, `auto` (the file's blocks as they are) for any other.
/// One run each.
fn e2e_cli(model: &E2eModel, prompt: &str, thread_counts: &[usize]) -> Result<Vec<E2eRow>> {
    println!("\n== bench e2e: edgefit CLI (native, release)");
    let exe = util::target_dir().join("release/edgefit");
    let formats: &[(&str, &str)] = if model.default {
        &[
            ("f32", "f32"),
            ("w4g32", "w4g32 (GGUF q4_1 kept, head q8_0)"),
        ]
    } else {
        &[("auto", "auto (the file's blocks as they are)")]
    };
    let mut rows = Vec::new();
    for &threads in thread_counts {
        for &(flag, label) in formats {
            rows.push(e2e_cli_row(&exe, model, prompt, flag, label, threads));
        }
    }
    Ok(rows)
}

fn e2e_cli_row(
    exe: &Path,
    model: &E2eModel,
    prompt: &str,
    weights: &str,
    label: &str,
    threads: usize,
) -> E2eRow {
    let mut row = E2eRow::new("edgefit CLI", &native_runtime(), label, threads);
    let shown = format!(
        "edgefit generate --model {} --prompt <tests/bench/prompt.txt> --max-tokens {E2E_TOKENS} \
         --temperature 0 --json --weights {weights} --threads {threads}",
        model.label
    );
    let run = || -> std::result::Result<Value, String> {
        let mut cmd = Command::new(exe);
        cmd.arg("generate")
            .arg("--model")
            .arg(&model.path)
            .args(["--prompt", prompt])
            .args(["--max-tokens", &E2E_TOKENS.to_string()])
            .args(["--temperature", "0", "--json"])
            .args(["--weights", weights])
            .args(["--threads", &threads.to_string()]);
        println!("  $ {shown}");
        let out = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!("`{shown}` failed ({})", out.status));
        }
        let v = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .ok_or("the CLI printed no JSON")?;
        let ran = v.get("threads").and_then(Value::as_u64);
        if ran != Some(threads as u64) {
            return Err(format!(
                "asked for {threads} thread(s), the CLI reports {ran:?}"
            ));
        }
        Ok(v)
    };
    match run() {
        Ok(v) => {
            println!("    {}", summary(&v));
            row.runs.push(v);
        }
        Err(e) => row.error = Some(e),
    }
    // Say what the CLI ran, from its JSON (weights, embedding and kernel used).
    if let Some(first) = row.runs.first() {
        let get = |k: &str| {
            first
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (w, e, k) = (get("weights"), get("embedding"), get("kernel"));
        if !w.is_empty() {
            row.weights = match (e.is_empty(), k.is_empty()) {
                (false, false) => format!("{w} · embedding {e}, {k}"),
                (false, true) => format!("{w} · embedding {e}"),
                (true, false) => format!("{w}, {k}"),
                (true, true) => w,
            };
        }
    }
    row
}

fn summary(v: &Value) -> String {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    format!(
        "load {:.0} ms, {} prompt tokens at {:.1} tok/s, {} generated at {:.1} tok/s, {} thread(s)",
        f("load_ms"),
        f("prompt_tokens"),
        f("prefill_tok_s"),
        f("generated_tokens"),
        f("decode_tok_s"),
        f("threads")
    )
}

/// `npm ci` in tests/bench when its node_modules is missing or older than its lock file.
fn peer_packages() -> Result<()> {
    let dir = util::root().join("tests/bench");
    let lock = dir.join("package-lock.json");
    let stamp = dir.join("node_modules/.package-lock.json");
    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = match (mtime(&stamp), mtime(&lock)) {
        (Some(s), Some(l)) => s >= l,
        _ => false,
    };
    let wanted = [
        "node_modules/@wllama/wllama/esm/index.js",
        "node_modules/node-llama-cpp/package.json",
    ];
    if fresh && wanted.iter().all(|f| dir.join(f).exists()) {
        println!("\n== bench e2e: llama.cpp peers already installed in tests/bench/node_modules");
        return Ok(());
    }
    println!("\n== bench e2e: installing the llama.cpp peers (tests/bench/package-lock.json)");
    run(Command::new("npm")
        .current_dir(&dir)
        .args(["ci", "--no-audit", "--no-fund"]))
    .context("installing the benchmark peers: run `npm ci` in tests/bench by hand")
}

fn package_version(rel: &str) -> String {
    let path = util::root().join("tests/bench/node_modules").join(rel);
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The edgefit page and wllama in one headless Chromium: the page on its single-threaded
/// simd128 build at 1 thread, then on its threaded build at each of `threads` (both servers send
/// COOP/COEP, so the pages are cross-origin isolated), wllama at each of `threads`. A row's
/// thread count is what the page (its footer) or wllama (`getNumThreads`) reports; a run that
/// ran another count or build than asked makes its row an error.
fn e2e_browser(
    model: &E2eModel,
    prompt_file: &Path,
    runs: usize,
    threads: &[usize],
    peers: bool,
) -> Vec<E2eRow> {
    let counts = threads
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "\n== bench e2e: headless Chromium (edgefit page: simd128 build at 1 thread, threaded \
         build and wllama at {counts} thread(s))"
    );
    let fail = |why: String| {
        let mut rows = vec![E2eRow {
            error: Some(why.clone()),
            ..E2eRow::new("edgefit page", "Chromium (simd128)", "-", 1)
        }];
        for &t in threads {
            for engine in ["edgefit page", "wllama"] {
                rows.push(E2eRow {
                    error: Some(why.clone()),
                    ..E2eRow::new(engine, "Chromium", "-", t)
                });
            }
        }
        rows
    };
    let result = (|| -> Result<Vec<Value>> {
        let site = copy_bench_files(&["wllama.html", "wllama.js"])?;
        if peers {
            let esm = util::root().join("tests/bench/node_modules/@wllama/wllama/esm");
            util::copy_tree(&esm, &site.join("wllama"))?;
        }
        let served = model.served_as();
        util::link_or_copy(&model.path, &site.join(&served))?;
        let edgefit = serve::start(&util::root().join("build/site"), "127.0.0.1", 0)?;
        let peers_srv = serve::start(&site, "127.0.0.1", 0)?;
        let mut cmd = node("tests/bench/run-browser.mjs")?;
        cmd.env("EDGEFIT_URL", edgefit.url())
            .env(
                "PEERS_URL",
                if peers {
                    peers_srv.url()
                } else {
                    String::new()
                },
            )
            .env("MODEL_PATH", &served)
            .env("PEER_WEIGHTS", &model.as_is)
            .env("PROMPT_FILE", prompt_file)
            .env("TOKENS", E2E_TOKENS.to_string())
            .env("RUNS", runs.to_string())
            .env("THREADS", &counts);
        if model.default {
            cmd.env("WEIGHTS", "f32,w4g32");
        } else {
            // Any other model goes in through the page's file input, on its own blocks.
            cmd.env("WEIGHTS", "auto").env("MODEL_FILE", &model.path);
        }
        let out = stdout_of(&mut cmd);
        drop(edgefit);
        drop(peers_srv);
        Ok(json_lines(&out?))
    })();
    let lines = match result {
        Ok(lines) => lines,
        Err(e) => return fail(format!("{e:#}")),
    };
    let mut rows = browser_rows(&lines);
    if !peers {
        for &t in threads {
            rows.push(E2eRow {
                error: Some("not installed (see above)".into()),
                ..E2eRow::new("wllama", "Chromium", &model.as_is, t)
            });
        }
    }
    rows
}

/// Groups the browser driver's per-run lines into rows (engine × runtime × weights × asked
/// threads, in first-seen order). A run whose reported `threads` is not its `asked_threads`,
/// or that says it ran another build (`build_error`) or showed an error (`page_error`), makes
/// its row an error naming what happened: the table never shows a figure under a thread count
/// it did not run.
fn browser_rows(lines: &[Value]) -> Vec<E2eRow> {
    let mut rows: Vec<E2eRow> = Vec::new();
    for v in lines {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
        let (engine, runtime, weights) = (s("engine"), s("runtime"), s("weights"));
        let asked = v.get("asked_threads").and_then(Value::as_u64);
        let ran = v.get("threads").and_then(Value::as_u64);
        let threads = asked.or(ran).unwrap_or(1) as usize;
        let idx = match rows
            .iter()
            .position(|r| r.is(&engine, &runtime, &weights, threads))
        {
            Some(i) => i,
            None => {
                rows.push(E2eRow::new(&engine, &runtime, &weights, threads));
                rows.len() - 1
            }
        };
        let row = &mut rows[idx];
        let err = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(e) = err("error") {
            row.error = Some(e);
        } else if let Some(e) = err("build_error") {
            row.error = Some(e);
        } else if asked.is_none() || ran != asked {
            row.error = Some(format!(
                "asked for {} thread(s), it reports {}",
                asked.map_or("?".into(), |a| a.to_string()),
                ran.map_or("none".into(), |r| r.to_string())
            ));
        } else if let Some(e) = err("page_error") {
            row.error = Some(format!("the page showed an error: {e}"));
        } else if row.error.is_none() {
            println!("    {engine} ({runtime}, {weights}): {}", summary(v));
            row.runs.push(v.clone());
        }
    }
    rows
}

/// Native llama.cpp through node-llama-cpp at `threads` threads.
fn e2e_llamacpp(
    model: &E2eModel,
    prompt_file: &Path,
    threads: usize,
    peers: &Result<()>,
) -> E2eRow {
    println!(
        "\n== bench e2e: native llama.cpp (node-llama-cpp, prebuilt, CPU), {threads} thread(s)"
    );
    let mut row = E2eRow::new(
        &format!(
            "llama.cpp (node-llama-cpp {})",
            package_version("node-llama-cpp/package.json")
        ),
        &native_runtime(),
        &model.as_is,
        threads,
    );
    if let Err(e) = peers {
        row.error = Some(format!("not installed: {e}"));
        return row;
    }
    let result = node("tests/bench/llamacpp.mjs").and_then(|mut cmd| {
        stdout_of(
            cmd.arg(&model.path)
                .arg(prompt_file)
                .arg(E2E_TOKENS.to_string())
                .arg("1")
                .arg(threads.to_string()),
        )
    });
    match result {
        Ok(out) => {
            for v in json_lines(&out) {
                println!("    {}", summary(&v));
                let ran = v.get("threads").and_then(Value::as_u64);
                if ran != Some(threads as u64) {
                    row.error = Some(format!(
                        "asked for {threads} thread(s), node-llama-cpp reports {ran:?}"
                    ));
                    break;
                }
                row.runs.push(v);
            }
            if row.runs.is_empty() && row.error.is_none() {
                row.error = Some("node-llama-cpp printed no measurement".into());
            }
        }
        Err(e) => row.error = Some(format!("{e:#}")),
    }
    row
}

/// Adds one round's rows to the rows so far: a row of the same engine, runtime, weights and
/// threads gains the round's runs (and its error, if it is the first: a row that failed in any
/// round is shown as failed); any other row is appended in its order.
fn merge_rows(rows: &mut Vec<E2eRow>, round: Vec<E2eRow>) {
    for new in round {
        match rows
            .iter_mut()
            .find(|r| r.is(&new.engine, &new.runtime, &new.weights, new.threads))
        {
            Some(row) => {
                row.runs.extend(new.runs);
                if row.error.is_none() {
                    row.error = new.error;
                }
            }
            None => rows.push(new),
        }
    }
}

/// `(file name, raw bytes, gzip -9 bytes)` of every .wasm in `dir`.
fn wasm_sizes(dir: &Path) -> Result<Vec<(String, u64, Option<u64>)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wasm") {
            let raw = fs::metadata(&path)?.len();
            let gz = Command::new("gzip")
                .args(["-9", "-c"])
                .arg(&path)
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| o.stdout.len() as u64);
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let dir_name = dir.file_name().unwrap_or_default().to_string_lossy();
            out.push((format!("build/site/{dir_name}/{name}"), raw, gz));
        }
    }
    out.sort();
    Ok(out)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

fn render_e2e(
    rows: &[E2eRow],
    model: &str,
    runs: usize,
    sizes: &[(String, u64, Option<u64>)],
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "end to end: {model}, prompt tests/bench/prompt.txt, {E2E_TOKENS} greedy tokens (fewer if \
         the model ends), median of {runs} runs, at the thread counts of the `thr` column"
    );
    let _ = writeln!(
        s,
        "load = bytes in memory -> model ready (the page's metric; wllama: loadModel of a fetched \
         Blob; llama.cpp: loadModel + createContext from the file)\n\
         ratios = this row's tok/s / the peer's tok/s at the same thread count (above 1: faster \
         than the peer)\n\
         thr = the threads the row ran with, as it reports them (the CLI's JSON, the page's \
         footer, wllama's getNumThreads, node-llama-cpp's context); peak MB = the row's \
         peak_bytes (the page: its peak wasm memory; the CLI: its JSON's peak_bytes)"
    );
    let find = |engine: &str, threads: usize| {
        rows.iter().find(|r| {
            r.engine.starts_with(engine)
                && r.threads == threads
                && r.error.is_none()
                && !r.runs.is_empty()
        })
    };
    let _ = writeln!(
        s,
        "\n{:<34} {:<40} {:<38} {:>3} {:>8} {:>7} {:>7} {:>7} {:>6} {:>4}  {:>9} {:>9} {:>9} {:>9}",
        "engine",
        "runtime",
        "weights",
        "thr",
        "load ms",
        "peak MB",
        "prefill",
        "decode",
        "prompt",
        "gen",
        "pre/wllm",
        "dec/wllm",
        "pre/llcpp",
        "dec/llcpp"
    );
    let _ = writeln!(
        s,
        "{:<34} {:<40} {:<38} {:>3} {:>8} {:>7} {:>7} {:>7} {:>6} {:>4}",
        "", "", "", "", "", "", "tok/s", "tok/s", "tokens", ""
    );
    for r in rows {
        if let Some(err) = &r.error {
            let _ = writeln!(
                s,
                "{:<34} {:<40} {:<38} {:>3} could not run: {}",
                r.engine,
                r.runtime,
                r.weights,
                r.threads,
                err.lines().next().unwrap_or("")
            );
            continue;
        }
        let wl = |k: &str| find("wllama", r.threads).and_then(|p| p.median(k));
        let nl = |k: &str| find("llama.cpp", r.threads).and_then(|p| p.median(k));
        let pre = r.median("prefill_tok_s");
        let dec = r.median("decode_tok_s");
        let _ = writeln!(
            s,
            "{:<34} {:<40} {:<38} {:>3} {:>8} {:>7} {:>7} {:>7} {:>6} {:>4}  {:>9} {:>9} {:>9} {:>9}",
            r.engine,
            r.runtime,
            r.weights,
            r.threads,
            fmt_opt(r.median("load_ms"), 0),
            fmt_opt(r.median("peak_bytes").map(|b| b / 1e6), 1),
            fmt_opt(pre, 1),
            fmt_opt(dec, 1),
            fmt_opt(r.median("prompt_tokens"), 0),
            fmt_opt(r.median("generated_tokens"), 0),
            ratio(pre, wl("prefill_tok_s")),
            ratio(dec, wl("decode_tok_s")),
            ratio(pre, nl("prefill_tok_s")),
            ratio(dec, nl("decode_tok_s")),
        );
    }
    let scaling = scaling_lines(rows);
    if !scaling.is_empty() {
        let _ = writeln!(
            s,
            "\nscaling: each row at N threads against the same engine, runtime and weights at 1 \
             thread (tok/s ratio); peak = its peak wasm memory / the simd128 build's"
        );
        for line in scaling {
            let _ = writeln!(s, "  {line}");
        }
    }
    let _ = writeln!(s, "\nwasm in the site build (wasm-bindgen + wasm-opt):");
    for (name, raw, gz) in sizes {
        let _ = writeln!(
            s,
            "  {name}: {:.2} MB raw, {} gzip -9",
            *raw as f64 / 1e6,
            gz.map(|g| format!("{:.2} MB", g as f64 / 1e6))
                .unwrap_or_else(|| "? MB (no gzip)".into())
        );
    }
    s
}

/// One line per row at more than one thread that has a 1-thread twin (same engine, runtime and
/// weights; both measured): `prefill ×a, decode ×b`, and for a threaded page row its peak wasm
/// memory against the page's simd128 row of the same weights (the target: within 1.2×).
fn scaling_lines(rows: &[E2eRow]) -> Vec<String> {
    let ok = |r: &&E2eRow| r.error.is_none() && !r.runs.is_empty();
    let mut out = Vec::new();
    for r in rows.iter().filter(ok).filter(|r| r.threads > 1) {
        let Some(one) = rows.iter().filter(ok).find(|o| {
            o.threads == 1
                && o.engine == r.engine
                && o.runtime == r.runtime
                && o.weights == r.weights
        }) else {
            continue;
        };
        let x = |k: &str| ratio(r.median(k), one.median(k));
        let mut line = format!(
            "{} ({}, {}): {} threads / 1: prefill x{}, decode x{}",
            r.engine,
            r.runtime,
            r.weights,
            r.threads,
            x("prefill_tok_s"),
            x("decode_tok_s")
        );
        let single = rows.iter().filter(ok).find(|o| {
            o.engine == r.engine
                && o.weights == r.weights
                && o.runtime != r.runtime
                && o.threads == 1
        });
        if let (Some(single), Some(_)) = (single, r.median("peak_bytes")) {
            let _ = std::fmt::Write::write_fmt(
                &mut line,
                format_args!(
                    "; peak x{} of {} at 1 thread",
                    ratio(r.median("peak_bytes"), single.median("peak_bytes")),
                    single.runtime
                ),
            );
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_merge_into_one_row_per_engine_runtime_weights_and_threads() {
        let run = |d: f64| serde_json::json!({ "prefill_tok_s": 10.0 * d, "decode_tok_s": d });
        let row = |engine: &str, threads: usize, runs: Vec<Value>, error: Option<&str>| E2eRow {
            runs,
            error: error.map(str::to_string),
            ..E2eRow::new(engine, "native", "w4g32", threads)
        };
        let mut rows = Vec::new();
        merge_rows(
            &mut rows,
            vec![
                row("a", 1, vec![run(1.0)], None),
                row("a", 2, vec![run(2.0)], None),
            ],
        );
        merge_rows(
            &mut rows,
            vec![
                row("a", 1, vec![run(3.0)], None),
                row("a", 2, vec![], Some("asked for 2 thread(s), it reports 1")),
                row("b", 1, vec![run(5.0)], None),
            ],
        );
        merge_rows(&mut rows, vec![row("a", 1, vec![run(2.0)], None)]);
        assert_eq!(rows.len(), 3, "one row per engine and thread count");
        assert_eq!(
            rows[0].runs.len(),
            3,
            "three rounds of engine a at 1 thread"
        );
        assert_eq!(rows[0].median("decode_tok_s"), Some(2.0));
        assert_eq!(rows[1].runs.len(), 1);
        assert_eq!(
            rows[1].error.as_deref(),
            Some("asked for 2 thread(s), it reports 1"),
            "a round's failure marks the row"
        );
        assert_eq!((rows[2].engine.as_str(), rows[2].runs.len()), ("b", 1));
    }

    #[test]
    fn gguf_kinds_come_from_the_file_name() {
        assert_eq!(
            gguf_kind(Path::new("models/smollm2-135m-instruct-q4_1.gguf")),
            "q4_1"
        );
        assert_eq!(
            gguf_kind(Path::new("models/gemma3-270m-it-q4_k_m.gguf")),
            "q4_k_m"
        );
        assert_eq!(gguf_kind(Path::new("x/model.gguf")), "GGUF");
    }

    #[test]
    fn e2e_table_has_medians_and_ratios_at_the_same_thread_count() {
        let run = |p: f64, d: f64| serde_json::json!({"load_ms": 10.0, "prefill_tok_s": p, "decode_tok_s": d, "prompt_tokens": 65, "generated_tokens": 128});
        let mut a = E2eRow::new("edgefit CLI", "native", "f32", 1);
        a.runs = vec![run(100.0, 20.0), run(300.0, 40.0), run(200.0, 30.0)];
        let mut a2 = E2eRow::new("edgefit CLI", "native", "f32", 2);
        a2.runs = vec![run(360.0, 45.0)];
        let mut w = E2eRow::new("wllama 3.13.0", "Chromium", "q4_1", 1);
        w.runs = vec![run(10.0, 10.0)];
        let mut n1 = E2eRow::new("llama.cpp (node-llama-cpp 3)", "native", "q4_1", 1);
        n1.runs = vec![run(400.0, 60.0)];
        let mut n2 = E2eRow::new("llama.cpp (node-llama-cpp 3)", "native", "q4_1", 2);
        n2.runs = vec![run(720.0, 90.0)];
        let mut bad = E2eRow::new("llama.cpp (node-llama-cpp 3)", "native", "q4_1", 4);
        bad.error = Some("no binary\nmore".into());
        let rows = [a, a2, w, n1, n2, bad];
        let t = render_e2e(
            &rows,
            "models/m.gguf",
            3,
            &[("x.wasm".into(), 2_000_000, Some(700_000))],
        );
        // 1 thread: 200/10, 30/10 against wllama; 200/400, 30/60 against llama.cpp.
        assert!(t.contains("  20.00      3.00      0.50      0.50"), "{t}");
        // 2 threads: no wllama row; 360/720, 45/90 against llama.cpp at 2.
        assert!(t.contains("        -         -      0.50      0.50"), "{t}");
        assert!(t.contains("could not run: no binary"), "{t}");
        assert!(t.contains("x.wasm: 2.00 MB raw, 0.70 MB gzip -9"), "{t}");
        let j = rows[1].json("models/m.gguf");
        assert_eq!(
            j,
            serde_json::json!({"engine": "edgefit CLI", "runtime": "native", "model": "models/m.gguf",
                "weights": "f32", "threads": 2, "prefill_tok_s": 360.0, "decode_tok_s": 45.0,
                "load_ms": 10.0, "runs": 1})
        );
        assert_eq!(rows[5].json("m")["error"], "no binary\nmore");
        assert!(rows[5].json("m")["decode_tok_s"].is_null());
    }

    #[test]
    fn browser_rows_keep_the_reported_threads_and_refuse_a_mismatch() {
        let line = |runtime: &str, asked: u64, ran: u64, peak: f64, extra: Value| {
            let mut v = serde_json::json!({"engine": "edgefit page", "runtime": runtime,
                "weights": "w4g32", "asked_threads": asked, "threads": ran, "load_ms": 5.0,
                "peak_bytes": peak, "prefill_tok_s": 100.0 * ran as f64,
                "decode_tok_s": 40.0 * ran as f64});
            if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                m.extend(e.clone());
            }
            v
        };
        let none = serde_json::json!({});
        let lines = [
            line("simd128", 1, 1, 100e6, none.clone()),
            line("threads", 1, 1, 110e6, none.clone()),
            line("threads", 2, 2, 115e6, none.clone()),
            // Asked for 4, the page ran 1: an error row at 4, never a figure.
            line("threads", 4, 1, 110e6, none.clone()),
            line(
                "threads",
                3,
                3,
                110e6,
                serde_json::json!({"build_error": "asked for the threads build, the page ran simd128"}),
            ),
        ];
        let rows = browser_rows(&lines);
        assert_eq!(rows.len(), 5);
        assert_eq!((rows[0].runtime.as_str(), rows[0].threads), ("simd128", 1));
        assert_eq!((rows[2].threads, rows[2].runs.len()), (2, 1));
        assert_eq!(rows[3].threads, 4);
        assert_eq!(
            rows[3].error.as_deref(),
            Some("asked for 4 thread(s), it reports 1")
        );
        assert!(rows[3].runs.is_empty());
        assert!(rows[4].error.as_deref().unwrap().contains("ran simd128"));
        assert_eq!(rows[2].json("m")["peak_bytes"], 115e6);
        // Scaling: the threaded row at 2 against the threaded row at 1 (x2 from the lines
        // above), its peak against the simd128 build's (115/100).
        let lines = scaling_lines(&rows);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("2 threads / 1: prefill x2.00, decode x2.00; peak x1.15 of simd128"),
            "{}",
            lines[0]
        );
    }
}
