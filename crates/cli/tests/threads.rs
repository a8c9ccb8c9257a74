//! `--threads` on every command that runs a model: a hostile count is one error line naming
//! the range (before any model loads), a good one is reported in every `--json` output, and
//! the results do not depend on it (the synthetic model, so this stays fast). `estimate`'s
//! `--threads` (the deployment's) is refused with the same line.

mod common;

use common::{assert_ok, assert_one_line_error, edgefit};
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use serde_json::Value;

/// The synthetic model written to a temporary file (its path).
fn synthetic_file(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("edgefit-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, gguf_bytes(3, SyntheticDType::Q8_0).unwrap()).unwrap();
    path.display().to_string()
}

/// The commands that run a model, with short settings, on `model`.
fn commands(model: &str) -> Vec<Vec<String>> {
    // The synthetic model's context (128) is shorter than the bench prompt: a short one.
    let prompt = std::env::temp_dir().join(format!("edgefit-threads-{}.txt", std::process::id()));
    std::fs::write(&prompt, "the theme of the thesis").unwrap();
    let prompt = prompt.display().to_string();
    [
        &[
            "generate",
            "--model",
            model,
            "--prompt",
            "the theme",
            "--max-tokens",
            "6",
        ][..],
        &[
            "perplexity",
            "--model",
            model,
            "--max-tokens",
            "24",
            "--window",
            "16",
        ][..],
        &[
            "kv-eval",
            "--model",
            model,
            "--tokens",
            "6",
            "--formats",
            "int8",
        ][..],
        &[
            "prune",
            "--model",
            model,
            "--mlp",
            "0.25",
            "--speed-tokens",
            "4",
            "--speed-prompt-file",
            &prompt,
            "--perplexity",
            "--max-tokens",
            "24",
        ][..],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect()
}

#[test]
fn estimate_refuses_a_hostile_thread_count_with_the_same_line() {
    let estimate = |threads: &str, json: bool| {
        let mut args = vec![
            "estimate",
            "--model",
            "smollm2-135m",
            "--device",
            "snapdragon-8-gen3",
            "--unit",
            "cpu",
            "--threads",
            threads,
        ];
        if json {
            args.push("--json");
        }
        edgefit(&args)
    };
    for bad in ["0", "257", "100000", "x", "2.5", ""] {
        assert_one_line_error(
            &estimate(bad, false),
            &[
                &format!("--threads {bad}"),
                "expected a thread count from 1 to 256",
            ],
        );
    }
    // Counts in the range go on to the estimator (which also holds them to the device's 8
    // cores) and are reported.
    for good in ["1", "8"] {
        let out = estimate(good, true);
        assert_ok(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["deployment"]["threads"], good.parse::<u64>().unwrap());
    }
}

#[test]
fn a_hostile_thread_count_is_one_error_line_naming_the_range() {
    // The model does not exist: the count must be refused before loading is tried.
    for args in commands("no-such-model.gguf") {
        for bad in ["0", "257", "100000", "x", "2.5", ""] {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            all.extend(["--threads", bad]);
            let out = edgefit(&all);
            assert_one_line_error(
                &out,
                &[
                    &format!("--threads {bad}"),
                    "expected a thread count from 1 to 256",
                ],
            );
        }
    }
}

#[test]
fn every_json_output_reports_its_threads_and_the_results_do_not_depend_on_them() {
    let model = synthetic_file("synthetic-q8.gguf");
    for args in commands(&model) {
        let mut results = Vec::new();
        for threads in ["1", "3"] {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            all.extend(["--threads", threads, "--json"]);
            let out = edgefit(&all);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{all:?}: {stderr}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
                .unwrap_or_else(|e| panic!("{all:?}: {e}: {stdout}"));
            assert_eq!(v["threads"], threads.parse::<u64>().unwrap(), "{all:?}");
            if args[0] == "prune" {
                assert_eq!(v["speed"]["threads"], v["threads"], "{all:?}");
            }
            // What must not change with the thread count.
            results.push(match args[0].as_str() {
                "generate" => v["text"].clone(),
                "perplexity" => v["perplexity"].clone(),
                "kv-eval" => v["formats"][0]["kl_mean"].clone(),
                _ => v["perplexity"]["perplexity"].clone(),
            });
        }
        assert!(!results[0].is_null(), "{args:?}: {results:?}");
        assert_eq!(results[0], results[1], "{args:?}");
    }
}

#[test]
fn the_default_is_the_available_cores_at_most_8() {
    let model = synthetic_file("synthetic-default.gguf");
    let out = edgefit(&[
        "generate",
        "--model",
        &model,
        "--prompt",
        "the",
        "--max-tokens",
        "2",
        "--json",
    ]);
    assert_ok(&out);
    let v: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(v["threads"], cores.min(8) as u64);
}
