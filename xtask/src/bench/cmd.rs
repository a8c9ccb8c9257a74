//! Running the benches' commands and reading what they print: a command's stdout (its stderr
//! shown live), its last JSON line, its JSON lines, and fields and medians of JSON values. A
//! leaf of [`crate::bench`].

use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::process::{Command, Stdio};

pub(crate) fn cargo_in_root() -> Command {
    let mut cmd = util::cargo();
    cmd.current_dir(util::root());
    cmd
}

/// Runs a command with stderr shown live and returns its stdout.
pub(crate) fn stdout_of(cmd: &mut Command) -> Result<String> {
    let shown = util::display(cmd);
    println!("  $ {shown}");
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!("`{shown}` failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` (stdout and stderr captured) and parses its last JSON line; a failure says the
/// last line of its stderr. `echo_stderr`: print every stderr line (`    | …`) after the run;
/// otherwise print only the failure.
pub(crate) fn run_json(cmd: &mut Command, shown: &str, echo_stderr: bool) -> Result<Value> {
    println!("  $ {shown}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if echo_stderr {
        for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
            println!("    | {line}");
        }
    }
    if !out.status.success() {
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        if !echo_stderr {
            println!("    failed ({}): {last}", out.status);
        }
        bail!("failed ({}): {last}", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .context("printed no JSON")
}

/// The lines of `out` that are JSON values, in order (the drivers' one object per line).
pub(crate) fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Median of the numeric field `key` (a `/`-separated path into nested objects) over `runs`,
/// ignoring runs without it; `None` if no run has it.
pub(crate) fn median_of(runs: &[Value], key: &str) -> Option<f64> {
    let mut v: Vec<f64> = runs
        .iter()
        .filter_map(|r| get(r, key).and_then(Value::as_f64))
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// `v["a"]["b"]` for `"a/b"`.
pub(crate) fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').try_fold(v, |v, k| v.get(k))
}
