//! The browser half of the benches: the served directories, the node drivers of headless
//! Chromium (`tests/bench/*.mjs`), and one page run over the release site (`build/site`). A
//! leaf of [`crate::bench`].

use crate::bench::cmd::{json_lines, stdout_of};
use crate::bench::table::Column;
use crate::util::{self, run, which};
use crate::{build, serve};
use anyhow::{Context, Result};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the bench pages are assembled and served from.
fn bench_site() -> PathBuf {
    util::target_dir().join("bench/site")
}

/// Copies the static bench files of `tests/bench` into the served directory.
pub(crate) fn copy_bench_files(files: &[&str]) -> Result<PathBuf> {
    let site = bench_site();
    fs::create_dir_all(&site).with_context(|| format!("creating {}", site.display()))?;
    let src = util::root().join("tests/bench");
    for f in files.iter().chain(&["index.html"]) {
        fs::copy(src.join(f), site.join(f))
            .with_context(|| format!("copying tests/bench/{f} to {}", site.display()))?;
    }
    Ok(site)
}

pub(crate) fn node(script: &str) -> Result<Command> {
    let chromium =
        which("chromium").context("`chromium` is not on PATH: run `cargo xtask setup`")?;
    let mut cmd = Command::new("node");
    cmd.current_dir(util::root())
        .arg(script)
        .env("CHROMIUM", chromium)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1");
    Ok(cmd)
}

/// Builds the release site; if it does not build, builds the CLI alone and returns why, for the
/// page column (the native columns still run).
pub(crate) fn build_site_or_cli(root: &Path) -> Result<Option<String>> {
    match build::build_site() {
        Ok(()) => Ok(None),
        Err(e) => {
            println!("  ! the site did not build, the page column will show why: {e:#}");
            run(util::cargo()
                .current_dir(root)
                .args(["build", "--release", "-p", "edgefit-cli"]))?;
            Ok(Some(format!("the site did not build: {e:#}")))
        }
    }
}

/// Serves build/site and runs the driver `script` with `EDGEFIT_URL`, `PROMPT_FILE`, `TOKENS`,
/// `RUNS` and `env`: its JSON lines.
pub(crate) fn site_runs(
    root: &Path,
    script: &str,
    prompt_file: &Path,
    tokens: usize,
    runs: usize,
    env: &[(&str, String)],
) -> Result<Vec<Value>> {
    let server = serve::start(&root.join("build/site"), "127.0.0.1", 0)?;
    let mut cmd = node(script)?;
    cmd.env("EDGEFIT_URL", server.url())
        .env("PROMPT_FILE", prompt_file)
        .env("TOKENS", tokens.to_string())
        .env("RUNS", runs.to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = stdout_of(&mut cmd);
    drop(server);
    Ok(json_lines(&out?))
}

/// The page column of the row whose `key` is `id`: the runs of `lines` for it (an `error`
/// line sets the column's error), `missing` if none is for it.
pub(crate) fn page_column(lines: &[Value], key: &str, id: &str, missing: &str) -> Column {
    let mut col = Column::default();
    for v in lines
        .iter()
        .filter(|v| v.get(key).and_then(Value::as_str) == Some(id))
    {
        if let Some(err) = v.get("error").and_then(Value::as_str) {
            col.error = Some(err.to_string());
        } else {
            col.runs.push(v.clone());
        }
    }
    if col.runs.is_empty() && col.error.is_none() {
        col.error = Some(missing.to_string());
    }
    col
}
