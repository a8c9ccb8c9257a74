//! The machine notes under the kv and prune tables: the host (CPU, cores), the load average
//! when the table was printed, and what the page ran on. A leaf of [`crate::bench`].

use crate::bench::cmd::get;
use serde_json::Value;
use std::fs;

pub(crate) fn native_runtime() -> String {
    format!("native {}", std::env::consts::ARCH)
}

/// `native x86_64 (CPU model, N cores)`.
pub(crate) fn host() -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    format!("{} ({cpu}, {cores} cores)", native_runtime())
}

/// A string field of `v` at a `/`-separated path, `?` when missing.
pub(crate) fn field(v: &Value, path: &str) -> String {
    get(v, path)
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

/// The notes: `native` (the host line with what the CLI ran), the load average, and the page
/// line from one page run (`with_kv`: also its KV format), or that the page did not run.
pub(crate) fn notes(native: String, page: Option<&Value>, with_kv: bool) -> Vec<String> {
    let mut out = vec![native];
    if let Some(load) = fs::read_to_string("/proc/loadavg").ok().and_then(|l| {
        l.split_whitespace()
            .take(3)
            .map(str::to_string)
            .reduce(|a, b| a + " " + &b)
    }) {
        out.push(format!(
            "load average (1, 5, 15 min) when the table was printed: {load} (the speed columns \
             assume an otherwise idle machine)"
        ));
    }
    out.push(match page {
        Some(v) => {
            let kv = if with_kv {
                format!(", KV {}", field(v, "kv_format"))
            } else {
                String::new()
            };
            format!(
                "{}, edgefit page: weights {}, kernel {}{kv}",
                field(v, "runtime"),
                field(v, "weights"),
                field(v, "kernel")
            )
        }
        None => "Chromium: the page did not run (see the notes)".into(),
    });
    out
}
