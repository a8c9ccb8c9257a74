//! `cargo xtask bench kernels`: `edgefit-bench` natively, then built for wasm32 (simd128) and
//! run in headless Chromium through `tests/bench/kernels.html` (see [`crate::bench`]).

use crate::bench::cmd::{cargo_in_root, stdout_of};
use crate::bench::options::Options;
use crate::bench::page::{copy_bench_files, node};
use crate::bench::table::save;
use crate::serve;
use crate::util::{self, run};
use anyhow::Result;
use std::fs;
use std::process::Command;

const WASM_TARGET: &str = "wasm32-unknown-unknown";

pub(crate) fn kernels(opts: &Options) -> Result<()> {
    println!("\n== bench kernels: native (release)");
    run(cargo_in_root().args([
        "build",
        "--release",
        "-p",
        "edgefit-bench",
        "--bin",
        "edgefit-bench",
    ]))?;
    let exe = util::target_dir().join("release/edgefit-bench");
    let mut cmd = Command::new(&exe);
    // candle's CPU matmul sizes its thread pool from this: one thread, like everything else.
    cmd.env("RAYON_NUM_THREADS", "1")
        .env_remove("CANDLE_DEQUANTIZE_ALL");
    if opts.quick {
        cmd.arg("--quick");
    }
    let native = stdout_of(&mut cmd)?;
    println!("\n{native}");
    save("kernels-native.txt", &native)?;

    println!("\n== bench kernels: wasm32 (release, simd128) in headless Chromium");
    run(cargo_in_root().args([
        "build",
        "--release",
        "-p",
        "edgefit-bench",
        "--lib",
        "--target",
        WASM_TARGET,
    ]))?;
    let wasm = util::target_dir().join(format!("{WASM_TARGET}/release/edgefit_bench.wasm"));
    let site = copy_bench_files(&["kernels.html", "kernels.js"])?;
    let pkg = site.join("pkg");
    if pkg.exists() {
        fs::remove_dir_all(&pkg)?;
    }
    // The module as wasm-bindgen leaves it: LLVM already optimized it at opt-level 3 (the site
    // additionally runs wasm-opt; its effect on these loops is small).
    run(Command::new("wasm-bindgen")
        .args(["--target", "web", "--out-dir"])
        .arg(&pkg)
        .arg(&wasm))?;
    let config = if opts.quick {
        r#"{"ms":[1],"budget_ms":100,"min_samples":3,"slow_ms":300}"#
    } else {
        ""
    };
    let server = serve::start(&site, "127.0.0.1", 0)?;
    let url = format!(
        "{}kernels.html?config={}",
        server.url(),
        percent_encode(config)
    );
    let result = stdout_of(node("tests/bench/run-kernels.mjs")?.arg(&url));
    drop(server);
    let chromium = result?;
    println!("\n{chromium}");
    save("kernels-chromium.txt", &chromium)?;
    Ok(())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_percent_encoded() {
        assert_eq!(percent_encode(r#"{"a":1}"#), "%7B%22a%22%3A1%7D");
    }
}
