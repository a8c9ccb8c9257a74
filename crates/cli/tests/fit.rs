//! `edgefit fit` as a user runs it: the built binary's JSON equals the library's answer for the
//! same request (the page calls the same function), its table, and one-line errors; and the
//! estimator's commands with long outputs (`fit`, `validate`, `estimate`) end quietly when
//! their reader stops early.

mod common;

use common::{assert_ok, assert_one_line_error, edgefit};
use edgefit_estimate::fit::{fit, FitModel, FitRequest, FitResult};
use edgefit_estimate::{device, preset, WeightFormat};

#[test]
fn json_is_the_library_answer_for_one_preset() {
    let out = edgefit(&[
        "fit",
        "--device",
        "snapdragon-8-gen3",
        "--model",
        "llama-3.2-1b",
        "--context",
        "4096",
        "--weights",
        "q8_0,w4g32",
        "--json",
    ]);
    assert_ok(&out);
    let got: FitResult = serde_json::from_slice(&out.stdout).unwrap();
    let req = FitRequest {
        models: vec![FitModel {
            id: "llama-3.2-1b".into(),
            spec: preset("llama-3.2-1b").unwrap(),
        }],
        weights: vec![WeightFormat::Q8_0, WeightFormat::W4g32],
        contexts: vec![4096],
        ..FitRequest::default()
    };
    let want = fit(&req, &device("snapdragon-8-gen3").unwrap()).unwrap();
    // Byte for byte (parsing floats back may round the last bit).
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.trim_end(), serde_json::to_string(&want).unwrap());
    assert_eq!(got.tried, 2 * 6 * 4);
    assert!(got.rows.iter().all(|r| r.context == 4096));
}

#[test]
fn the_table_lists_ranked_rows_and_the_counts() {
    let out = edgefit(&[
        "fit",
        "--device",
        "snapdragon-8-gen3",
        "--family",
        "qwen2",
        "--top",
        "3",
    ]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configurations pass the golden four"),
        "{text}"
    );
    let ranked: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(ranked.len(), 3, "{text}");
    // Every row is a qwen2-family preset (Qwen2, Qwen2.5, the DeepSeek-R1 Qwen distill).
    let qwen2_family = ["qwen2.5-", "qwen2-", "deepseek-r1-distill-qwen-"];
    assert!(
        ranked
            .iter()
            .all(|l| qwen2_family.iter().any(|f| l.contains(f))),
        "{text}"
    );
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["fit", "--device", "nokia-3310"],
            &["nokia-3310", "devices"],
        ),
        (
            &["fit", "--device", "snapdragon-8-gen3", "--model", "gpt-5"],
            &["gpt-5", "preset"],
        ),
        (
            &["fit", "--device", "snapdragon-8-gen3", "--weights", "w3"],
            &["w3", "weight format"],
        ),
        (
            &["fit", "--device", "snapdragon-8-gen3", "--prune", "0.95"],
            &["prune level", "0.95"],
        ),
        (
            &["fit", "--device", "snapdragon-8-gen3", "--family", "gpt"],
            &["gpt"],
        ),
        (
            &["estimate", "--model", "llama-3.2-1b", "--compute", "int3"],
            &["int3", "compute dtype", "f16"],
        ),
    ];
    for (args, needles) in cases {
        assert_one_line_error(&edgefit(args), needles);
    }
}

/// A reader that has stopped (`edgefit validate --json | head -1`): each command ends quietly,
/// killed by SIGPIPE as other command-line tools are, with nothing on stderr (before: a
/// `failed printing to stdout` panic and exit code 101).
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_long_outputs_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let cases: [&[&str]; 3] = [
        &["validate", "--json"],
        &["fit", "--device", "snapdragon-8-gen3"],
        &[
            "estimate",
            "--model",
            "smollm2-135m",
            "--device",
            "snapdragon-8-gen3",
        ],
    ];
    for args in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_edgefit"))
            .args(args)
            .current_dir(common::repo())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before the first write.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
        const SIGPIPE: i32 = 13;
        assert_eq!(
            out.status.signal(),
            Some(SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

/// `edgefit estimate --help` names every weight and KV format the estimator sizes (its list is
/// written by hand in the flag's doc comment, so a new format must be added there too).
#[test]
fn estimate_help_names_every_weight_and_kv_format() {
    let out = edgefit(&["estimate", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for name in WeightFormat::ALL
        .iter()
        .map(|w| w.as_str())
        .chain(edgefit_estimate::KvFormat::ALL.iter().map(|k| k.as_str()))
    {
        assert!(
            words.contains(&name),
            "estimate --help does not name {name}:\n{help}"
        );
    }
}

/// `edgefit estimate --model file.gguf` without `--weights` estimates the deployment's default
/// format and says so when the file's own (`general.file_type`) is another: the default model
/// is Q4_1, the default deployment w4g32. With `--weights q4_1` nothing is said.
#[test]
fn estimate_of_a_gguf_file_names_the_files_own_weights() {
    let model = common::repo().join("models/smollm2-135m-instruct-q4_1.gguf");
    let model = model.to_str().expect("a UTF-8 path");
    let warnings = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "estimate",
            "--model",
            model,
            "--device",
            "snapdragon-8-gen3",
        ];
        args.extend_from_slice(extra);
        args.push("--json");
        let out = edgefit(&args);
        assert_ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            v["deployment"]["weights"],
            extra.get(1).copied().unwrap_or("w4g32")
        );
        v["warnings"]
            .as_array()
            .expect("a warnings array")
            .iter()
            .map(|w| w.as_str().expect("a string").to_string())
            .collect()
    };
    let default = warnings(&[]);
    let about: Vec<&String> = default.iter().filter(|w| w.contains("file_type")).collect();
    assert_eq!(about.len(), 1, "{default:?}");
    for needle in ["Q4_1", "general.file_type 3", "`w4g32`", "--weights q4_1"] {
        assert!(
            about[0].contains(needle),
            "`{needle}` missing from {about:?}"
        );
    }
    let chosen = warnings(&["--weights", "q4_1"]);
    assert!(
        !chosen.iter().any(|w| w.contains("file_type")),
        "{chosen:?}"
    );
}
