//! `cargo xtask bench [kernels|e2e|kv|all]`: benchmarks, release builds only. Not part of
//! `cargo xtask test`.
//!
//! - **kernels**: `edgefit-bench` (crates/bench) natively, then the same code built for wasm32
//!   (simd128) in headless Chromium through `tests/bench/kernels.html`, served from
//!   `target/bench/site` and driven by `tests/bench/run-kernels.mjs`. Each prints one table:
//!   every edgefit kernel × weight format against candle-core f32, candle-core Q4_0 (`QMatMul`),
//!   edgefit's scalar kernel and a streaming-read probe, all from the same run (one thread).
//! - **e2e** `[--model PATH] [--threads 1,2]`: one GGUF end to end (default: the default
//!   model; the Gemma 3 270M file works too), a fixed prompt (`tests/bench/prompt.txt`, ~65
//!   tokens) and 128 greedy tokens, medians of a few runs: the `edgefit` CLI and native
//!   llama.cpp (npm `node-llama-cpp`, prebuilt, CPU) at each thread count, the edgefit page
//!   (`build/site`) and llama.cpp compiled to wasm (npm `@wllama/wllama`) in headless Chromium
//!   at one thread (the page's build is single-threaded). Ratios compare with llama.cpp at the
//!   same thread count. The llama.cpp peers are installed into `tests/bench/node_modules` on
//!   first use (they are benchmark-only and large, so `cargo xtask setup` does not install
//!   them). Beside the text table, `build/bench/e2e.json` holds one row per engine × runtime ×
//!   weights × threads: `{engine, runtime, model, weights, threads, prefill_tok_s,
//!   decode_tok_s, load_ms}` (medians; `error` instead for a row that could not run).
//!
//! - **kv**: every KV-cache format of the default model, accuracy and speed: see [`kv`].
//! - **prune**: structured pruning of the default model, cost and speed: see [`prune`].
//!
//! The tables are also written to `build/bench/`.
//!
//! Layout: this file dispatches; each bench is one module that plans its rows, runs them,
//! collects the measurements and renders its table ([`kernels`], [`e2e`], [`kv`], [`prune`]);
//! they share leaves that import none of them: [`options`] (parsed once for all), [`cmd`] (run
//! a command, read its JSON), [`machine`] (the machine notes), [`page`] (the served pages and
//! the node drivers of headless Chromium) and [`table`] (cells, notes, the saved tables).

mod cmd;
mod e2e;
mod kernels;
mod kv;
mod machine;
mod options;
mod page;
mod prune;
mod table;

use crate::setup;
use anyhow::{bail, Result};
use options::{kv_options, parse_options};

pub fn bench(args: &[String]) -> Result<()> {
    let (which, rest) = match args.split_first() {
        Some((first, rest)) if !first.starts_with("--") => (first.as_str(), rest),
        _ => ("all", args),
    };
    let opts = parse_options(rest)?;
    if which != "e2e" && (opts.model.is_some() || opts.threads != [1]) {
        bail!("--model and --threads are options of `bench e2e` only");
    }
    match which {
        "kernels" => {
            setup::setup()?;
            kernels::kernels(&opts)
        }
        "e2e" => {
            setup::setup()?;
            e2e::e2e(&opts)
        }
        "kv" => {
            setup::setup()?;
            kv::kv(&kv_options(&opts, rest))
        }
        "prune" => {
            setup::setup()?;
            prune::prune(&kv_options(&opts, rest))
        }
        "all" => {
            setup::setup()?;
            kernels::kernels(&opts)?;
            e2e::e2e(&opts)?;
            kv::kv(&kv_options(&opts, rest))?;
            prune::prune(&kv_options(&opts, rest))
        }
        other => {
            bail!("unknown benchmark `{other}`: expected `kernels`, `e2e`, `kv`, `prune` or `all`")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::strings as s;

    #[test]
    fn unknown_benches_and_misplaced_options_are_refused() {
        assert!(bench(&s(&["nope"])).is_err());
        let e = bench(&s(&["kv", "--threads", "2"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`bench e2e` only"), "{e}");
    }
}
