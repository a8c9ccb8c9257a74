//! `edgefit perplexity` as a user runs it: the built binary, its JSON, its one-line errors.

mod common;

use common::{assert_ok, assert_one_line_error, edgefit, repo};
use std::path::PathBuf;

fn model_path() -> PathBuf {
    match std::env::var_os("EDGEFIT_MODEL") {
        Some(p) => PathBuf::from(p),
        None => repo().join("models/smollm2-135m-instruct-q4_1.gguf"),
    }
}

#[test]
fn json_has_the_perplexity_and_what_produced_it() {
    let model = model_path();
    assert!(
        model.is_file(),
        "the default model is needed at {}; `cargo xtask setup` fetches it",
        model.display()
    );
    let model = model.to_string_lossy().into_owned();
    let out = edgefit(&[
        "perplexity",
        "--model",
        &model,
        "--max-tokens",
        "64",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ok(&out);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object on one line: {stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("valid JSON");
    assert_eq!(v["tokens"], 64);
    let ppl = v["perplexity"].as_f64().expect("perplexity is a number");
    assert!(ppl.is_finite() && ppl > 1.0, "perplexity {ppl}");
    let nll = v["mean_nll"].as_f64().expect("mean_nll");
    assert!((nll.exp() - ppl).abs() < 1e-9 * ppl);
    assert_eq!(
        v["weights"], "q4_1",
        "the default (auto) keeps the file's Q4_1 layers"
    );
    assert_eq!(v["kv"], "int8", "the default KV format");
    assert!(v["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    assert_eq!(v["model"], model.as_str());
    assert_eq!(
        v["text"]["sha256"],
        "679af08c6421f5741c9f50293a42037f3babeda3e5404b5427e8771280e44a27"
    );
    assert!(v["text"]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("tests/data/constitution.txt")));
    assert!(v["ms"].as_f64().is_some_and(|ms| ms > 0.0));
    assert!(v["tokens_per_s"].as_f64().is_some_and(|t| t > 0.0));
}

#[test]
fn missing_text_file_is_a_one_line_error() {
    let out = edgefit(&[
        "perplexity",
        "--model",
        "does-not-matter.gguf",
        "--text",
        "no/such/text.txt",
    ]);
    assert_one_line_error(&out, &["no/such/text.txt"]);
}

#[test]
fn unknown_kv_formats_are_one_line_errors() {
    for (kv, needles) in [
        ("q3", &["q3", "f32, f16"][..]),
        ("int16", &["int16", "k8v16"][..]),
    ] {
        let out = edgefit(&["perplexity", "--model", "m.gguf", "--kv", kv]);
        assert_one_line_error(&out, needles);
    }
}

#[test]
fn bad_numbers_and_formats_are_one_line_errors() {
    for (args, needle) in [
        (&["--max-tokens", "0"][..], "--max-tokens"),
        (&["--window", "0"][..], "--window"),
        (&["--weights", "w5"][..], "w5"),
    ] {
        let mut all = vec!["perplexity", "--model", "m.gguf"];
        all.extend_from_slice(args);
        let out = edgefit(&all);
        assert_one_line_error(&out, &[needle]);
    }
}
