//! Shared by the CLI's integration tests: the built binary run from the repository root, and
//! the success and one-line error checks.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn edgefit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgefit"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the edgefit binary runs")
}

/// A successful run: exit status zero, else the test fails showing the run's stderr.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A failed run: non-zero exit, nothing on stdout, exactly one line on stderr starting with
/// `error:` and containing every one of `needles`.
pub fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line of error, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for n in needles {
        assert!(lines[0].contains(n), "`{n}` missing from: {stderr}");
    }
}
