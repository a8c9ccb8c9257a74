//! The hostile-file suite through the CLI: every hostile model of the engine's suite
//! (`crates/engine/tests/it/common/hostile_cases.rs`), written to a file (or an HF directory) and
//! given to each command that loads a model, fails with a non-zero exit and one `error: ...`
//! line naming the problem: no panic, no backtrace. `estimate` reads only the header (or
//! config.json), so it must refuse what is wrong there and may size a file whose problem is
//! in its tensors' values.

mod common;

#[path = "../../engine/tests/it/common/hostile_cases.rs"]
mod hostile_cases;

use std::path::{Path, PathBuf};

use common::{assert_one_line_error, edgefit};
use hostile_cases::*;

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("edgefit-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The commands that load a whole model, with the arguments that make them do only that
/// (and fail on it) before any long work.
fn loading_commands(model: &str, out_dir: &Path) -> Vec<Vec<String>> {
    let out = out_dir.join("pruned.gguf").display().to_string();
    [
        vec![
            "generate",
            "--model",
            model,
            "--prompt",
            "hi",
            "--max-tokens",
            "2",
        ],
        vec!["perplexity", "--model", model, "--max-tokens", "16"],
        vec!["kv-eval", "--model", model, "--tokens", "4"],
        vec!["prune", "--model", model, "--mlp", "0.25", "--out", &out],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(str::to_string).collect())
    .collect()
}

fn run(args: &[String]) -> std::process::Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    edgefit(&refs)
}

/// No panic, and either success or one error line.
fn assert_no_crash(out: &std::process::Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{what}: {stderr}"
    );
    if !out.status.success() {
        let lines: Vec<&str> = stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: "),
            "{what}: {stderr}"
        );
    }
}

#[test]
fn every_hostile_gguf_is_one_error_line_in_each_command() {
    let dir = scratch("gguf");
    for (i, c) in gguf_cases().into_iter().enumerate() {
        let path = dir.join(format!("case{i}.gguf"));
        std::fs::write(&path, &c.bytes).unwrap();
        let model = path.display().to_string();
        let needles: Vec<&str> = c.needles.iter().map(String::as_str).collect();
        for args in loading_commands(&model, &dir) {
            let out = run(&args);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if args[0] == "generate" {
                println!("{} | {}", c.name, stderr.trim_end());
            }
            assert_one_line_error(&out, &needles);
            assert!(
                stderr.contains(&model),
                "{}: the file is named: {stderr}",
                c.name
            );
        }
        // The header-level problems are the estimator's too; the rest may be sized.
        let out = edgefit(&[
            "estimate",
            "--model",
            &model,
            "--device",
            "snapdragon-8-gen3",
        ]);
        let header_level = matches!(c.kind, Kind::Format | Kind::Unsupported)
            || c.needles.iter().any(|n| {
                n.contains("run past the end")
                    || n.contains("overlap")
                    || n.contains("multiply past")
                    || n.contains("general.alignment")
                    || n.contains("elements")
                    || n.contains("value type")
            });
        if header_level {
            assert_one_line_error(&out, &needles);
        } else {
            assert_no_crash(&out, &format!("estimate {}", c.name));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_gguf_files_are_one_error_line() {
    let dir = scratch("cut");
    let bytes = good(edgefit_engine::synthetic::SyntheticDType::Q8_0);
    let l = layout(&bytes);
    let path = dir.join("cut.gguf");
    let model = path.display().to_string();
    for cut in [
        0,
        3,
        7,
        20,
        100,
        1000,
        l.header_end - 1,
        l.header_end + 100,
        bytes.len() - 1,
    ] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        for args in loading_commands(&model, &dir) {
            assert_one_line_error(&run(&args), &[&model]);
        }
        let out = edgefit(&[
            "estimate",
            "--model",
            &model,
            "--device",
            "snapdragon-8-gen3",
        ]);
        assert_one_line_error(&out, &[&model]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_hostile_hf_model_is_one_error_line_in_each_command() {
    let dir = scratch("hf");
    for (i, c) in hf_cases().into_iter().enumerate() {
        let model_dir = dir.join(format!("case{i}"));
        std::fs::create_dir_all(&model_dir).unwrap();
        let (config, tok, tok_config, st) = &c.files;
        std::fs::write(model_dir.join("config.json"), config).unwrap();
        std::fs::write(model_dir.join("tokenizer.json"), tok).unwrap();
        std::fs::write(model_dir.join("tokenizer_config.json"), tok_config).unwrap();
        std::fs::write(model_dir.join("model.safetensors"), st).unwrap();
        let model = model_dir.display().to_string();
        let needles: Vec<&str> = c.needles.iter().map(String::as_str).collect();
        for args in loading_commands(&model, &dir) {
            let out = run(&args);
            if args[0] == "generate" {
                println!(
                    "{} | {}",
                    c.name,
                    String::from_utf8_lossy(&out.stderr).trim_end()
                );
            }
            assert_one_line_error(&out, &needles);
        }
        let out = edgefit(&[
            "estimate",
            "--model",
            &model,
            "--device",
            "snapdragon-8-gen3",
        ]);
        assert_no_crash(&out, &format!("estimate {}", c.name));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
