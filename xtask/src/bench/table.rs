//! The benches' tables: number cells, a cell that is an error or a partial run with its note,
//! the Commands and Machine sections, and where the printed tables are saved. A leaf of
//! [`crate::bench`].

use crate::bench::cmd::median_of;
use crate::util;
use anyhow::{Context, Result};
use serde_json::Value;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

/// Where the printed tables are saved.
fn results_dir() -> Result<PathBuf> {
    let dir = util::root().join("build/bench");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

pub(crate) fn save(name: &str, text: &str) -> Result<()> {
    let path = results_dir()?.join(name);
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("  (saved to {})", path.display());
    Ok(())
}

/// Measurements of one table cell's column for one row: its runs, or why it could not run
/// (the `kv` and `prune` benches).
#[derive(Debug, Clone, Default)]
pub(crate) struct Column {
    pub(crate) runs: Vec<Value>,
    pub(crate) error: Option<String>,
}

impl Column {
    pub(crate) fn failed(why: impl Into<String>) -> Column {
        Column {
            runs: Vec::new(),
            error: Some(why.into()),
        }
    }

    /// Median of a numeric field (a `/`-separated path) over the runs.
    pub(crate) fn median(&self, key: &str) -> Option<f64> {
        median_of(&self.runs, key)
    }
}

/// The numbered notes under a table: a cell whose column failed shows `error [n]`, one that
/// failed after some runs shows its value and `[n]`, and note `n` says why.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    notes: Vec<String>,
    /// The runs each column asked for, when the note should say "k of N runs".
    runs: Option<usize>,
}

impl Notes {
    /// Notes that say "k of `runs` runs" for a partial column.
    pub(crate) fn of_runs(runs: usize) -> Notes {
        Notes {
            notes: Vec::new(),
            runs: Some(runs),
        }
    }

    /// Notes that say "k run(s)" for a partial column.
    pub(crate) fn new() -> Notes {
        Notes::default()
    }

    /// The cell for `col` (`value` when it ran), adding its note if it failed: `what` and
    /// `name` say which column and row.
    pub(crate) fn cell(&mut self, col: &Column, what: &str, name: &str, value: String) -> String {
        match &col.error {
            Some(err) if col.runs.is_empty() => {
                self.push(format!("{what} {name}: {}", one_line(err)));
                format!("error [{}]", self.notes.len())
            }
            Some(err) => {
                let ran = match self.runs {
                    Some(n) => format!("{} of {n} runs", col.runs.len()),
                    None => format!("{} run(s)", col.runs.len()),
                };
                self.push(format!("{what} {name}: {ran}, then: {}", one_line(err)));
                format!("{value} [{}]", self.notes.len())
            }
            None => value,
        }
    }

    pub(crate) fn push(&mut self, note: String) {
        self.notes.push(note);
    }

    /// `heading` and the notes as a list `- [n] …`, nothing when there are none.
    pub(crate) fn write(&self, s: &mut String, heading: &str) {
        if self.notes.is_empty() {
            return;
        }
        let _ = writeln!(s, "{heading}");
        for (i, n) in self.notes.iter().enumerate() {
            let _ = writeln!(s, "- [{}] {n}", i + 1);
        }
    }
}

/// An error's non-empty lines joined with ` / `.
fn one_line(e: &str) -> String {
    e.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The `## Commands` and `## Machine` sections that end the kv and prune tables.
pub(crate) fn write_commands_and_machine(s: &mut String, commands: &[String], machine: &[String]) {
    let _ = writeln!(s, "\n## Commands\n");
    for c in commands {
        let _ = writeln!(s, "- `{c}`");
    }
    let _ = writeln!(s, "\n## Machine\n");
    for m in machine {
        let _ = writeln!(s, "- {m}");
    }
}

pub(crate) fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// Asserts that the rendered table `t` contains every one of `wanted` (the table tests).
#[cfg(test)]
pub(crate) fn assert_contains_all(t: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(t.contains(w), "missing {w:?} in:\n{t}");
    }
}
