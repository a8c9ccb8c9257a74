//! `cargo xtask fuzz [--seconds N] [--target NAME]`: builds every cargo-fuzz target in `fuzz/`
//! once, writes each target's seeds, runs each for N seconds and prints a table (executions,
//! seconds, corpus size, crashes). Exits non-zero on any crash, naming the saved input and the
//! command that replays it.
//!
//! Build: `cargo +nightly fuzz build --sanitizer none --codegen-units 16` — optimized, with debug
//! assertions and overflow checks (cargo-fuzz's default), so an unchecked size that overflows is
//! a crash. No AddressSanitizer: the parsers are safe Rust (an out-of-bounds index is already a
//! panic), and ASan would double the cold build and halve the executions. Out-of-memory is
//! caught in process by the targets' capped allocator (`fuzz/src/lib.rs`: one allocation over
//! 256 MiB or 1 GiB live aborts), since libFuzzer's `-malloc_limit_mb` needs a sanitizer's
//! hooks; `-rss_limit_mb=2048` stays as a backstop.
//!
//! Seeds come from the real generators at run time (each target binary writes its own when
//! `EDGEFIT_FUZZ_WRITE_SEEDS` is set: the synthetic GGUF and HF models, `models/devices/`,
//! `models/presets/`, the start of the real model) into `fuzz/seeds/<target>/`; what the
//! fuzzer finds accumulates in `fuzz/corpus/<target>/` (both git-ignored) and crashes go to
//! `fuzz/artifacts/<target>/`.

use crate::setup;
use crate::util::{self, which};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The fuzz targets, one per parser (`fuzz/fuzz_targets/<name>.rs`).
pub const TARGETS: [&str; 6] = [
    "gguf_load",
    "gguf_estimate",
    "hf_load",
    "tokenizer",
    "device_preset",
    "wasm_json",
];

/// Seconds per target when `--seconds` is not given.
pub const DEFAULT_SECONDS: u64 = 60;

/// The host triple cargo-fuzz builds for (its default `--target`).
const TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// libFuzzer options for every run. `-timeout`: one input taking longer is a hang finding.
/// `-report_slow_units` at the same 20 s: below the hang limit a slow input is not a finding
/// (libFuzzer's default, 10 s, saved the first input of `gguf_estimate` and `wasm_json` as an
/// artifact in the unoptimized build: the first estimate computes the estimator's
/// leave-one-source-out tables, ~10 s there and well under a second optimized).
const LIBFUZZER_ARGS: [&str; 6] = [
    "-print_final_stats=1",
    "-rss_limit_mb=2048",
    "-malloc_limit_mb=2048",
    "-timeout=20",
    "-report_slow_units=20",
    "-close_fd_mask=1",
];

pub struct Options {
    pub seconds: u64,
    pub targets: Vec<String>,
    /// Build unoptimized (`cargo fuzz build --dev`): a cold build in ~2.5 min instead of ~6.5
    /// on this 2-core machine, at a fraction of the executions per second. The short pass of
    /// `cargo xtask test` uses it (a smoke test that every target builds and survives its
    /// seeds and a few seconds of mutation); `cargo xtask fuzz` builds optimized.
    pub dev: bool,
}

/// Parses `[--seconds N] [--target NAME]` (also `--seconds=N`, `--target=NAME`).
pub fn parse_args(rest: &[String]) -> Result<Options> {
    let mut opts = Options {
        seconds: DEFAULT_SECONDS,
        targets: Vec::new(),
        dev: false,
    };
    for (key, v) in util::flag_values(rest)? {
        match key.as_str() {
            "--seconds" => {
                opts.seconds = v.parse().ok().filter(|&s| s >= 1).with_context(|| {
                    format!("`--seconds {v}`: expected a whole number, 1 or more")
                })?;
            }
            "--target" => {
                if !TARGETS.contains(&v.as_str()) {
                    bail!("`--target {v}`: the targets are {}", TARGETS.join(", "));
                }
                opts.targets.push(v);
            }
            _ => bail!("unknown option `{key}` for fuzz: expected --seconds N or --target NAME"),
        }
    }
    if opts.targets.is_empty() {
        opts.targets = TARGETS.iter().map(|t| t.to_string()).collect();
    }
    Ok(opts)
}

/// One target's run, from libFuzzer's final statistics.
#[derive(Debug, Default, PartialEq)]
pub struct RunStats {
    pub executions: u64,
    pub seconds: f64,
    pub corpus: usize,
    pub crashes: Vec<PathBuf>,
    pub peak_rss_mb: u64,
    pub new_units: u64,
}

fn fuzz_dir() -> PathBuf {
    util::root().join("fuzz")
}

fn binary(target: &str, dev: bool) -> PathBuf {
    fuzz_dir()
        .join("target")
        .join(TRIPLE)
        .join(if dev { "debug" } else { "release" })
        .join(target)
}

/// `rustup run nightly cargo …` in the repository root, without the variables of the stable
/// cargo that runs xtask (they would pin the toolchain or the target directory).
fn nightly_cargo() -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo"])
        .current_dir(util::root());
    for var in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The build command (all targets, or one).
fn build_command(target: Option<&str>, dev: bool) -> Command {
    let mut cmd = nightly_cargo();
    cmd.args([
        "fuzz",
        "build",
        "--sanitizer",
        "none",
        "--codegen-units",
        "16",
    ]);
    if dev {
        cmd.arg("--dev");
    }
    cmd.args(target);
    cmd
}

pub fn fuzz(opts: &Options) -> Result<()> {
    let started = Instant::now();
    setup::fuzz_tools()?;
    println!(
        "== fuzz: building {} target(s) (nightly, {}, debug assertions, no sanitizer)",
        opts.targets.len(),
        if opts.dev { "unoptimized" } else { "optimized" }
    );
    let t = Instant::now();
    let one = (opts.targets.len() == 1).then(|| opts.targets[0].as_str());
    util::run(&mut build_command(one, opts.dev)).context("building the fuzz targets")?;
    println!("  built in {:.1} s", t.elapsed().as_secs_f64());

    let mut rows = Vec::new();
    for target in &opts.targets {
        let seeds = write_seeds(target, opts.dev)?;
        println!(
            "== fuzz {target}: {} s from {seeds} seeds ({})",
            opts.seconds,
            rel(&fuzz_dir().join("seeds").join(target))
        );
        let stats = run_target(target, opts.seconds, opts.dev)?;
        if stats.executions == 0 && stats.crashes.is_empty() {
            bail!(
                "{target}: no `stat::number_of_executed_units` in libFuzzer's output (see \
                 fuzz/target/xtask-logs/{target}.log): a run that executes nothing must not pass"
            );
        }
        println!(
            "  {} executions, corpus {}, {} crash(es)",
            stats.executions,
            stats.corpus,
            stats.crashes.len()
        );
        rows.push((target.clone(), stats));
    }

    println!("\n== fuzz summary ({} s per target)", opts.seconds);
    println!(
        "  {:<14} {:>12} {:>8} {:>8} {:>8} {:>8}",
        "target", "executions", "seconds", "exec/s", "corpus", "crashes"
    );
    for (target, s) in &rows {
        let rate = if s.seconds > 0.0 {
            s.executions as f64 / s.seconds
        } else {
            0.0
        };
        println!(
            "  {target:<14} {:>12} {:>8.0} {:>8.0} {:>8} {:>8}",
            s.executions,
            s.seconds,
            rate,
            s.corpus,
            s.crashes.len()
        );
    }
    let total: u64 = rows.iter().map(|(_, s)| s.executions).sum();
    println!(
        "  total {total} executions; fuzz command took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let crashed: Vec<_> = rows.iter().filter(|(_, s)| !s.crashes.is_empty()).collect();
    if crashed.is_empty() {
        return Ok(());
    }
    for (target, s) in &crashed {
        for artifact in &s.crashes {
            println!("\n  CRASH in {target}: {}", rel(artifact));
            println!(
                "    reproduce: {} {}",
                rel(&binary(target, opts.dev)),
                rel(artifact)
            );
            println!(
                "    or:        cargo +nightly fuzz run --sanitizer none{} {target} {}",
                if opts.dev { " --dev" } else { "" },
                rel(artifact)
            );
        }
    }
    bail!(
        "fuzzing found {} crash(es) in {}",
        crashed.iter().map(|(_, s)| s.crashes.len()).sum::<usize>(),
        crashed
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn rel(p: &Path) -> String {
    p.strip_prefix(util::root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// Runs the target binary with `EDGEFIT_FUZZ_WRITE_SEEDS` into a fresh `fuzz/seeds/<target>/`;
/// returns how many seeds it wrote.
fn write_seeds(target: &str, dev: bool) -> Result<usize> {
    let dir = fuzz_dir().join("seeds").join(target);
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let bin = binary(target, dev);
    let out = Command::new(&bin)
        .env("EDGEFIT_FUZZ_WRITE_SEEDS", &dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} to write its seeds", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} did not write its seeds ({}): {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let n = count_files(&dir);
    if n == 0 {
        bail!("{target} wrote no seeds into {}", dir.display());
    }
    Ok(n)
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .map(|entries| entries.flatten().filter(|e| e.path().is_file()).count())
        .unwrap_or(0)
}

fn run_target(target: &str, seconds: u64, dev: bool) -> Result<RunStats> {
    let corpus = fuzz_dir().join("corpus").join(target);
    let seeds = fuzz_dir().join("seeds").join(target);
    let artifacts = fuzz_dir().join("artifacts").join(target);
    let logs = fuzz_dir().join("target").join("xtask-logs");
    for dir in [&corpus, &artifacts, &logs] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let before: Vec<PathBuf> = list(&artifacts);
    let log_path = logs.join(format!("{target}.log"));
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(binary(target, dev));
    cmd.arg(&corpus)
        .arg(&seeds)
        .arg(format!("-max_total_time={seconds}"))
        .args(LIBFUZZER_ARGS)
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    println!("  $ {}  (log: {})", util::display(&cmd), rel(&log_path));
    let t = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("running {}", binary(target, dev).display()))?;
    let wall = t.elapsed().as_secs_f64();
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    let mut stats = parse_stats(&text);
    if stats.seconds == 0.0 {
        stats.seconds = wall;
    }
    stats.corpus = count_files(&corpus);
    stats.crashes = list(&artifacts)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    if !status.success() && stats.crashes.is_empty() {
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{target} exited with {status} and saved no input; the end of its log ({}):\n{}",
            log_path.display(),
            tail.join("\n")
        );
    }
    if !stats.crashes.is_empty() {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        println!("  --- end of {} ---", rel(&log_path));
        for line in tail.into_iter().rev() {
            println!("  | {line}");
        }
    }
    Ok(stats)
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|e| e.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// libFuzzer's `-print_final_stats=1` lines (`stat::number_of_executed_units: N`, ...); the
/// seconds from the last status line's `secs:` field.
pub fn parse_stats(log: &str) -> RunStats {
    let mut s = RunStats::default();
    for line in log.lines() {
        let line = line.trim();
        if let Some((key, value)) = line.strip_prefix("stat::").and_then(|l| l.split_once(':')) {
            let value = value.trim();
            match key {
                "number_of_executed_units" => s.executions = value.parse().unwrap_or(0),
                "peak_rss_mb" => s.peak_rss_mb = value.parse().unwrap_or(0),
                "new_units_added" => s.new_units = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        // libFuzzer prints "Done N runs in S second(s)" at the end of a timed run.
        if let Some(rest) = line.strip_prefix("Done ") {
            if let Some(secs) = rest
                .split(" in ")
                .nth(1)
                .and_then(|t| t.split_whitespace().next())
                .and_then(|t| t.parse::<f64>().ok())
            {
                s.seconds = secs;
            }
        }
    }
    s
}

/// The short pass of `cargo xtask test`.
pub fn test_pass() -> Result<()> {
    if which("rustup").is_none() {
        bail!("`rustup` is not on PATH: fuzzing needs a rustup-managed nightly toolchain");
    }
    fuzz(&Options {
        seconds: TEST_SECONDS,
        targets: TARGETS.iter().map(|t| t.to_string()).collect(),
        dev: true,
    })
}

/// Seconds per target in `cargo xtask test`.
pub const TEST_SECONDS: u64 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::strings as s;

    #[test]
    fn parses_options() {
        let o = parse_args(&[]).unwrap();
        assert_eq!(o.seconds, DEFAULT_SECONDS);
        assert_eq!(o.targets.len(), TARGETS.len());
        let o = parse_args(&s(&["--seconds=5", "--target", "hf_load"])).unwrap();
        assert_eq!((o.seconds, o.targets), (5, vec!["hf_load".to_string()]));
        assert!(parse_args(&s(&["--seconds", "0"])).is_err());
        assert!(parse_args(&s(&["--seconds", "x"])).is_err());
        assert!(parse_args(&s(&["--target", "nope"])).is_err());
        assert!(parse_args(&s(&["--jobs", "2"])).is_err());
    }

    #[test]
    fn reads_libfuzzer_final_stats() {
        let log = "#2\tINITED cov: 10 ft: 11 corp: 3/1Kb exec/s: 0 rss: 40Mb\n\
                   #4096\tpulse  cov: 20 ft: 30 corp: 5/2Kb exec/s: 2048 rss: 41Mb\n\
                   Done 5230 runs in 11 second(s)\n\
                   stat::number_of_executed_units: 5230\n\
                   stat::average_exec_per_sec:     475\n\
                   stat::new_units_added:          7\n\
                   stat::slowest_unit_time_sec:    0\n\
                   stat::peak_rss_mb:              52\n";
        let s = parse_stats(log);
        assert_eq!(s.executions, 5230);
        assert_eq!(s.seconds, 11.0);
        assert_eq!(s.new_units, 7);
        assert_eq!(s.peak_rss_mb, 52);
        assert_eq!(parse_stats("no stats here").executions, 0);
    }
}
