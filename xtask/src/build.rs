//! `cargo xtask build`: the static site in `build/site` and the release CLI; `cargo xtask
//! site`: the publishable `dist/` (all three wasm builds, see [`site`]).
//!
//! `build/site` is complete on its own: `index.html` and the rest of `web/`, the wasm-bindgen
//! output in `pkg/` (optimized by wasm-opt from npm's binaryen) and, when the nightly toolchain
//! is there, the threaded build in `pkg-threads/` ([`threads_wasm`]), uPlot in `vendor/uplot/`, and the
//! default model in `models/`. It is rebuilt from scratch each time (cheap: the model is a hard
//! link), except the wasm-bindgen + wasm-opt output, which is reused while the wasm that cargo
//! produced is unchanged.

use crate::setup::{self, MODEL_PATH};
use crate::util::{self, run};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Written next to the default model when the site carries it; web/main.js reads it.
const DEFAULT_MODEL_MANIFEST: &str = "models/default.json";

/// `cargo xtask build`: setup, then [`build_site`].
pub fn build() -> Result<()> {
    setup::setup()?;
    build_site()
}

/// The release site and CLI, assuming setup is done.
pub fn build_site() -> Result<()> {
    let root = util::root();
    let site = root.join("build/site");
    let pkg = Beside::start(simd_wasm()?, "pkg", true, Opt::Publish);
    // `cargo xtask serve` sends COOP/COEP, so the page there runs the threaded build if present.
    let threads =
        threads_wasm(Lint::No)?.map(|w| Beside::start(w, "pkg-threads", true, Opt::Publish));
    let pkg = pkg.finish_simd()?;
    let threads = threads.map(Beside::finish_simd).transpose()?;
    let mut pkgs = vec![(pkg.as_path(), "pkg")];
    if let Some(threads) = &threads {
        pkgs.push((threads.as_path(), "pkg-threads"));
    }
    assemble(&site, &pkgs)?;
    build_cli()?;
    println!(
        "== build: done: site in {}, CLI at {}",
        site.display(),
        util::target_dir().join("release/edgefit").display()
    );
    Ok(())
}

/// `cargo xtask site`: setup, then `dist/` for any static host under any sub-path: the page
/// with three wasm builds, `pkg/` (simd128), `pkg-baseline/` (no SIMD, for engines without
/// it; the worker picks one with `WebAssembly.validate`) and `pkg-threads/` (simd128 with
/// atomics and shared memory, run on several Web Workers when the page is cross-origin
/// isolated; skipped with one line when the nightly toolchain or its rust-src is missing), each
/// through wasm-bindgen and wasm-opt; uPlot; the default model, calibration and evaluation
/// texts when present (the page asks for a file otherwise); `.nojekyll` for GitHub Pages; the
/// page's `coi-serviceworker.js` isolates it on hosts that cannot send COOP/COEP. Every URL in
/// the page is relative.
pub fn site() -> Result<()> {
    setup::setup_for_site()?;
    site_only(Opt::Publish, || Ok(()))
}

/// [`site`] and the release CLI, assuming setup is done (`cargo xtask test`'s step: the page's
/// tests run against `dist/` and compare with the CLI). wasm-opt runs at [`Opt::Test`], and the
/// CLI builds beside the last wasm-opt.
pub fn site_and_cli() -> Result<()> {
    site_only(Opt::Test, build_cli_as_tested)
}

/// How hard wasm-opt works on each module. npm's binaryen is itself wasm, one core: on the
/// default build `-O3` took 156 s of CPU and `-O1` 29 s (`time`, 2026-12-01), for a module 7.5 %
/// larger than `-O3`'s (6.04 vs 5.62 MB from 7.05 MB in; `-O2`: 110 s, 5.71 MB). LLVM has
/// already optimized the code at opt-level 3, so what `-O3` adds is mostly size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opt {
    /// `-O3`: what `cargo xtask site`, `build` and `demo` publish or serve.
    Publish,
    /// `-O1`: `cargo xtask test`'s site, whose tests check what the page does, not its size;
    /// the three modules' `-O3` would be about 6 of the cold run's minutes.
    Test,
}

impl Opt {
    fn flag(self) -> &'static str {
        match self {
            Opt::Publish => "-O3",
            Opt::Test => "-O1",
        }
    }
}

/// `dist/`, with `beside_last` run while the last module is optimized.
fn site_only(opt: Opt, beside_last: impl FnOnce() -> Result<()>) -> Result<()> {
    let dist = util::root().join("dist");
    // Each build's wasm-bindgen + wasm-opt runs beside the next cargo build ([`Beside`]).
    let simd = Beside::start(simd_wasm()?, "pkg", true, opt);
    let baseline = Beside::start(baseline_wasm()?, "pkg-baseline", false, opt);
    // `cargo xtask test` lints the threaded build's own code as it compiles it (see [`Lint`]).
    let threads =
        threads_wasm(Lint::for_opt(opt))?.map(|w| Beside::start(w, "pkg-threads", true, opt));
    let simd = simd.finish_simd()?;
    let baseline = baseline.finish()?;
    beside_last()?;
    let threads = threads.map(Beside::finish_simd).transpose()?;
    let mut pkgs = vec![
        (simd.as_path(), "pkg"),
        (baseline.as_path(), "pkg-baseline"),
    ];
    if let Some(threads) = &threads {
        pkgs.push((threads.as_path(), "pkg-threads"));
    }
    assemble(&dist, &pkgs)?;
    fs::write(dist.join(".nojekyll"), "")?;
    println!(
        "== site: done: {} (wasm-opt {}; serve it from any static host, under any path)",
        dist.display(),
        opt.flag()
    );
    Ok(())
}

/// [`bindgen_and_optimize`] of one build on a thread of its own, so the next cargo build runs
/// beside it: wasm-opt (npm's binaryen, itself compiled to wasm) optimizes a module on one core
/// for a minute or more, while cargo's builds keep both cores busy; one after the other, a cold
/// `cargo xtask site` left a core idle for each of the three builds.
struct Beside(std::thread::JoinHandle<Result<PathBuf>>);

impl Beside {
    fn start(wasm: PathBuf, name: &'static str, simd: bool, opt: Opt) -> Beside {
        Beside(std::thread::spawn(move || {
            bindgen_and_optimize(&wasm, name, simd, opt)
        }))
    }

    /// The bound and optimized package.
    fn finish(self) -> Result<PathBuf> {
        self.0
            .join()
            .map_err(|_| anyhow::anyhow!("the wasm-bindgen + wasm-opt thread panicked"))?
    }

    /// [`finish`](Self::finish), checking the module was built with simd128.
    fn finish_simd(self) -> Result<PathBuf> {
        let pkg = self.finish()?;
        require_simd(&pkg)?;
        Ok(pkg)
    }
}

/// The simd128 wasm (the workspace's `.cargo/config.toml` flags), as cargo builds it.
fn simd_wasm() -> Result<PathBuf> {
    let root = util::root();
    println!("== build: edgefit-wasm (release, {WASM_TARGET}, simd128)");
    run(wasm_build(util::cargo().current_dir(&root)))?;
    Ok(util::target_dir().join(format!("{WASM_TARGET}/release/edgefit_wasm.wasm")))
}

/// The same crate without SIMD, in its own target directory (`target/baseline`) so the two
/// builds do not rebuild each other: `CARGO_ENCODED_RUSTFLAGS` replaces every other rustflags
/// source, the config file's `+simd128` included, with `-simd128` (an empty value counts as
/// unset and would keep the config's flags).
fn baseline_wasm() -> Result<PathBuf> {
    let (mut cmd, wasm) = baseline_command();
    println!("== build: edgefit-wasm (release, {WASM_TARGET}, baseline: no SIMD)");
    run(&mut cmd)?;
    // wasm-opt runs with SIMD disabled on it, so it refuses the module if any SIMD instruction
    // is left (its `target_features` section may still list simd128: memchr and zlib-rs compile
    // simd128 functions that are never called without it, and the linker keeps the flag).
    Ok(wasm)
}

/// The baseline build's cargo command and the wasm it writes.
fn baseline_command() -> (Command, PathBuf) {
    let dir = util::target_dir().join("baseline");
    let mut cmd = util::cargo();
    cmd.current_dir(util::root())
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=-simd128")
        .env("CARGO_TARGET_DIR", &dir);
    wasm_build(&mut cmd);
    (
        cmd,
        dir.join(format!("{WASM_TARGET}/release/edgefit_wasm.wasm")),
    )
}

/// The target features of the threaded build: simd128 as the default build, plus what shared
/// memory and the pool's atomics need.
const THREADS_FEATURES: &str = "+simd128,+atomics,+bulk-memory,+mutable-globals";

/// wasm-ld's flags for a shared memory that every Web Worker's instance imports, and the TLS
/// symbols wasm-bindgen's thread support needs (rustc no longer passes them for `+atomics`).
/// Given to the final crate only (`cargo rustc -- …`), so changing them relinks without
/// recompiling std and every dependency, which RUSTFLAGS would.
const THREADS_LINK_ARGS: [&str; 6] = [
    "--shared-memory",
    "--import-memory",
    "--export-if-defined=__wasm_init_tls",
    "--export-if-defined=__tls_size",
    "--export-if-defined=__tls_align",
    "--export-if-defined=__tls_base",
];

/// The threaded build's wasm (bound into `pkg-threads/` beside the other builds), or `None`
/// with one line saying why not: the same crate
/// with [`THREADS_FEATURES`], std rebuilt with them (`-Z build-std`, nightly only: the shipped
/// std is compiled without atomics) and a shared memory that may grow to the 4 GiB a wasm32
/// memory addresses (wasm-ld's default maximum for a shared memory is far less). Release only,
/// in its own target directory (`target/threads`): the flags and the toolchain differ from the
/// other builds, so nothing compiled there could be reused here.
///
/// With [`Lint::Clippy`] the workspace's crates are compiled by nightly's `clippy-driver`
/// (`RUSTC_WORKSPACE_WRAPPER`, lints `-D warnings`): the only build of the code behind
/// `cfg(target_feature = "atomics")` (the pool's wasm workers, the facade's spawner) is linted
/// as it is compiled, for the cost of the lint passes alone.
fn threads_wasm(lint: Lint) -> Result<Option<PathBuf>> {
    let (mut cmd, wasm) = match threads_command(lint) {
        Ok(built) => built,
        Err(why) => {
            println!("== build: threaded wasm skipped: {why}; the site runs one thread");
            return Ok(None);
        }
    };
    println!(
        "== build: edgefit-wasm (release, {WASM_TARGET}, threads: atomics + shared memory, nightly -Z build-std{})",
        if lint == Lint::Clippy { ", linted by nightly clippy" } else { "" }
    );
    let t0 = std::time::Instant::now();
    run(&mut cmd)?;
    println!(
        "  threaded cargo build: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(Some(wasm))
}

/// The threaded build's cargo command and the wasm it writes, or why it cannot be built here.
fn threads_command(lint: Lint) -> std::result::Result<(Command, PathBuf), String> {
    setup::threads_toolchain()?;
    let dir = util::target_dir().join("threads");
    let flags = [
        format!("-Ctarget-feature={THREADS_FEATURES}"),
        format!("-Clink-arg=--max-memory={}", 4u64 << 30),
    ]
    .join("\x1f");
    let mut cmd = Command::new("rustup");
    cmd.current_dir(util::root())
        .args(["run", "nightly", "cargo"])
        .args([
            "rustc",
            "-Z",
            "build-std=panic_abort,std",
            "--release",
            "--lib",
        ])
        .args(["-p", "edgefit-wasm", "--target", WASM_TARGET, "--"])
        .args(THREADS_LINK_ARGS.map(|a| format!("-Clink-arg={a}")))
        // The stable toolchain's variables from `cargo xtask` must not leak into nightly cargo.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .envs(lint.wrapper())
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .env("CARGO_TARGET_DIR", &dir);
    Ok((
        cmd,
        dir.join(format!("{WASM_TARGET}/release/edgefit_wasm.wasm")),
    ))
}

/// The baseline and threaded wasm builds started early, in the background, by `cargo xtask
/// test` (see [`start_early_builds`]); dropping it stops whatever is still building.
pub struct EarlyBuilds {
    thread: Option<std::thread::JoinHandle<()>>,
    /// The process group of the cargo build running now (0: none), so that drop can stop it
    /// with its rustc children.
    group: std::sync::Arc<std::sync::atomic::AtomicU32>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    log: PathBuf,
}

/// Starts the site's baseline and threaded cargo builds on a background thread, their output
/// in `build/early-wasm-builds.log`. They have target directories of their own
/// (`target/baseline`, `target/threads`), so they never wait for the other steps' cargo builds,
/// and [`site_and_cli`] later finds them fresh. The point is the idle core: the steps before
/// the site spend minutes running tests on one core (the wasm tests in Node, the fuzz targets,
/// the native tests' tails) while these builds need ~10 minutes of CPU on a cold machine. A
/// failure here is not reported: the site step runs the same builds again and reports it.
pub fn start_early_builds() -> Result<EarlyBuilds> {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Arc;
    let build_dir = util::root().join("build");
    fs::create_dir_all(&build_dir)?;
    let log = build_dir.join("early-wasm-builds.log");
    let file = fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut builds = vec![("baseline", baseline_command().0)];
    // Linted as the site step of `cargo xtask test` builds it, so that step finds it fresh.
    if let Ok((cmd, _)) = threads_command(Lint::for_opt(Opt::Test)) {
        builds.push(("threaded", cmd));
    }
    let group = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (group2, stop2) = (Arc::clone(&group), Arc::clone(&stop));
    let shown = log.display().to_string();
    println!("  (starting the baseline and threaded wasm builds in the background; log: {shown})");
    let thread = std::thread::spawn(move || {
        for (name, mut cmd) in builds {
            if stop2.load(Ordering::SeqCst) {
                return;
            }
            let (Ok(out), Ok(err)) = (file.try_clone(), file.try_clone()) else {
                return;
            };
            #[cfg(unix)]
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            let t0 = std::time::Instant::now();
            let Ok(mut child) = cmd.stdout(out).stderr(err).spawn() else {
                continue;
            };
            group2.store(child.id(), Ordering::SeqCst);
            if stop2.load(Ordering::SeqCst) {
                // Dropped while this build was starting: drop saw no group to stop.
                kill_group(child.id());
            }
            let status = child.wait();
            group2.store(0, Ordering::SeqCst);
            let ok = status.map(|s| s.success()).unwrap_or(false);
            println!(
                "  (background: the {name} wasm build {} after {:.1} s)",
                if ok {
                    "finished"
                } else {
                    "failed; the site step will retry it"
                },
                t0.elapsed().as_secs_f64()
            );
        }
    });
    Ok(EarlyBuilds {
        thread: Some(thread),
        group,
        stop,
        log,
    })
}

impl EarlyBuilds {
    /// Waits for the builds to end.
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            println!(
                "  (waiting for the background wasm builds; log: {})",
                self.log.display()
            );
            thread.join().ok();
        }
    }
}

impl Drop for EarlyBuilds {
    /// Stops the build still running (a step failed, or the run was cut short): its whole
    /// process group, cargo and its rustc children.
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        let group = self.group.load(Ordering::SeqCst);
        if group != 0 {
            kill_group(group);
        }
        thread.join().ok();
    }
}

/// SIGTERM to the process group `group` (a cargo build and its rustc children).
fn kill_group(group: u32) {
    Command::new("kill")
        .args(["-TERM", "--", &format!("-{group}")])
        .stderr(std::process::Stdio::null())
        .status()
        .ok();
}

/// Whether the threaded build lints the workspace's code while compiling it.
///
/// Why this way: `cargo clippy` checks in a build of its own (check-mode units share nothing with
/// a release build), and with `-Z build-std` it checks std and every dependency again, in one
/// more target tree. Tried on this 2-core machine on 2026-12-02 (nice 19, load average 12–19
/// from other builds): that cold `cargo +nightly clippy -Z build-std` was still checking the
/// dependencies after 75 minutes and was stopped. Compiling the workspace's crates with
/// `clippy-driver` instead (what `cargo clippy` runs: rustc that also lints) adds only the lint
/// passes to a build CI runs anyway: the threaded build of the four workspace crates and the link
/// took 119.4 s of user CPU without the wrapper and 121.6 s with it (460.5 / 382.9 s wall at that
/// load; std and the dependencies were already built). Nightly's clippy, not stable's: the build
/// needs nightly (std rebuilt with atomics), so a lint nightly adds can fail it before stable
/// has it. `cargo xtask test`'s native build is linted the same way ([`util::clippy_wrapped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lint {
    No,
    Clippy,
}

impl Lint {
    /// `cargo xtask test`'s site ([`Opt::Test`]) lints; what is published is only built.
    fn for_opt(opt: Opt) -> Lint {
        match opt {
            Opt::Test => Lint::Clippy,
            Opt::Publish => Lint::No,
        }
    }

    /// The environment that makes cargo compile the workspace's crates with `clippy-driver`
    /// (the rustup proxy, which `rustup run nightly` resolves to nightly's) and deny warnings.
    fn wrapper(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Lint::No => Vec::new(),
            Lint::Clippy => vec![
                ("RUSTC_WORKSPACE_WRAPPER", "clippy-driver"),
                ("CLIPPY_ARGS", util::CLIPPY_DENY_WARNINGS),
            ],
        }
    }
}

/// `cargo build --release -p edgefit-wasm --target wasm32-unknown-unknown` on `cmd`.
fn wasm_build(cmd: &mut Command) -> &mut Command {
    cmd.args([
        "build",
        "--release",
        "-p",
        "edgefit-wasm",
        "--target",
        WASM_TARGET,
    ])
}

/// Fails unless the optimized module in `pkg` was built with simd128.
fn require_simd(pkg: &Path) -> Result<()> {
    let bg = pkg.join("edgefit_wasm_bg.wasm");
    let features = wasm_features(&fs::read(&bg)?)
        .with_context(|| format!("reading the target_features of {}", bg.display()))?;
    if !features.iter().any(|f| f == "simd128") {
        bail!(
            "{} was built without simd128 (features: {}): is RUSTFLAGS set?",
            bg.display(),
            features.join(", ")
        );
    }
    Ok(())
}

/// Writes a complete site into `site` (removed first): `web/`, each `(pkg dir, name)`, uPlot,
/// and the model (hard link) and texts when present.
fn assemble(site: &Path, pkgs: &[(&Path, &str)]) -> Result<()> {
    let root = util::root();
    println!("== build: assembling {}", site.display());
    if site.exists() {
        fs::remove_dir_all(site).with_context(|| format!("removing old {}", site.display()))?;
    }
    let web = root.join("web");
    let n = util::copy_tree(&web, site)?;
    println!("  web/: {n} files");
    for (pkg, name) in pkgs {
        let n = util::copy_tree(pkg, &site.join(name))?;
        println!("  {name}/: {n} files (wasm-bindgen + wasm-opt output)");
    }
    let uplot = root.join("node_modules/uplot/dist");
    for file in ["uPlot.iife.min.js", "uPlot.min.css"] {
        let dst = site.join("vendor/uplot").join(file);
        fs::create_dir_all(dst.parent().context("site path has a parent")?)?;
        fs::copy(uplot.join(file), &dst)
            .with_context(|| format!("copying {file} from node_modules/uplot/dist"))?;
    }
    println!("  vendor/uplot/: uPlot.iife.min.js, uPlot.min.css");
    write_estimator_tables(site)?;
    let model = root.join(MODEL_PATH);
    if model.is_file() {
        let how = util::link_or_copy(&model, &site.join(MODEL_PATH))?;
        println!("  {MODEL_PATH}: {how}");
        // The page asks this small file whether the site serves the default model (a HEAD
        // request for the model itself is reported as aborted by Chromium).
        let manifest = serde_json::json!({
            "path": MODEL_PATH,
            "bytes": fs::metadata(&model)?.len(),
        });
        fs::write(site.join(DEFAULT_MODEL_MANIFEST), format!("{manifest}\n"))?;
        println!("  {DEFAULT_MODEL_MANIFEST}: written");
    } else {
        println!("  {MODEL_PATH}: not present (the page will ask for a model file)");
    }
    // The page's pruning panel reads the calibration text (from setup) and scores perplexity
    // on the evaluation text.
    for (from, to) in [
        (setup::CALIBRATION_PATH, setup::CALIBRATION_PATH),
        ("tests/data/constitution.txt", "data/constitution.txt"),
    ] {
        if !root.join(from).is_file() {
            println!("  {to}: not present ({from} missing)");
            continue;
        }
        let dst = site.join(to);
        fs::create_dir_all(dst.parent().context("site path has a parent")?)?;
        fs::copy(root.join(from), &dst).with_context(|| format!("copying {from} to the site"))?;
        println!("  {to}: copied from {from}");
    }
    Ok(())
}

/// Where the page's worker finds the estimator's precomputed tables (relative to the site root).
pub const ESTIMATOR_TABLES: &str = "estimator-tables.json";

/// Writes [`ESTIMATOR_TABLES`]: the ranges' bands and the refitted runtime profiles
/// (`edgefit_estimate::uncertainty::tables`, keyed by the data they come from), computed here
/// once instead of in every tab on its first estimate (the leave-one-source-out refits take a
/// few hundred milliseconds natively, more in wasm). The worker hands them to the wasm
/// (`seedEstimatorTables`), which refuses tables of other data and then computes its own.
fn write_estimator_tables(site: &Path) -> Result<()> {
    let t0 = std::time::Instant::now();
    let tables = edgefit_estimate::uncertainty::tables()
        .map_err(|e| anyhow::anyhow!("computing the estimator tables: {e}"))?;
    let text = serde_json::to_string(&tables)?;
    fs::write(site.join(ESTIMATOR_TABLES), format!("{text}\n"))?;
    println!(
        "  {ESTIMATOR_TABLES}: written (key {}, {} bytes, {:.0} ms)",
        tables.key,
        text.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

fn build_cli() -> Result<()> {
    println!("== build: edgefit-cli (release)");
    run(util::cargo()
        .current_dir(util::root())
        .args(["build", "--release", "-p", "edgefit-cli"]))
}

/// The release CLI as `cargo xtask test`'s clippy step built it: the workspace's binaries,
/// linted ([`util::clippy_wrapped`]). The same command finds everything fresh. (`-p
/// edgefit-cli` alone would resolve the engine's features for the CLI only, not for the whole
/// workspace, and build the engine, kernels and estimator a second time.)
fn build_cli_as_tested() -> Result<()> {
    println!("== build: edgefit-cli (release, as the clippy step built it)");
    run(util::clippy_wrapped(
        util::cargo().current_dir(util::root()).args([
            "build",
            "--release",
            "--workspace",
            "--bins",
        ]),
    )?)
}

/// Runs wasm-bindgen and wasm-opt on `wasm`, into `target/xtask/<name>`, unless that output
/// was made from this same input at this `opt` (size + mtime stamp). `simd`: whether wasm-opt may
/// accept SIMD instructions. Returns the pkg directory.
fn bindgen_and_optimize(wasm: &Path, name: &str, simd: bool, opt: Opt) -> Result<PathBuf> {
    let root = util::root();
    let pkg = util::xtask_dir()?.join(name);
    let stamp = util::xtask_dir()?.join(format!("{name}.stamp"));
    let (size, mtime) = util::size_mtime(wasm)
        .with_context(|| format!("cargo did not produce {}", wasm.display()))?;
    let key = format!(
        "{size} {mtime} wasm-bindgen {} simd {simd} wasm-opt {}",
        setup::locked_wasm_bindgen_version()?,
        opt.flag()
    );
    let bg = pkg.join("edgefit_wasm_bg.wasm");
    if bg.exists() && fs::read_to_string(&stamp).ok().as_deref() == Some(key.as_str()) {
        println!(
            "== build: wasm-bindgen + wasm-opt: skipped, the wasm is unchanged since the last run"
        );
        return Ok(pkg);
    }
    fs::remove_file(&stamp).ok();
    if pkg.exists() {
        fs::remove_dir_all(&pkg)?;
    }

    println!("== build: wasm-bindgen --target web");
    run(Command::new("wasm-bindgen")
        .args(["--target", "web", "--out-dir"])
        .arg(&pkg)
        .arg(wasm))?;

    // Enable exactly the features rustc recorded in the module (LLVM's defaults change over
    // releases); the optimized module must still validate in Chromium and Node.
    let mut features = wasm_features(&fs::read(wasm)?)
        .with_context(|| format!("reading the target_features section of {}", wasm.display()))?;
    if !simd {
        features.retain(|f| f != "simd128" && f != "relaxed-simd");
    }
    let flags = wasm_opt_flags(&features)?;
    let before = fs::metadata(&bg)?.len();
    println!(
        "== build: wasm-opt {} (features used by the module: {})",
        opt.flag(),
        features.join(", ")
    );
    let wasm_opt = root.join("node_modules/.bin/wasm-opt");
    run(Command::new(&wasm_opt)
        .arg(opt.flag())
        .args(&flags)
        .arg(&bg)
        .arg("-o")
        .arg(&bg))?;
    let after = fs::metadata(&bg)?.len();
    println!(
        "  edgefit_wasm_bg.wasm: {} before, {} after wasm-opt ({:+.1}%)",
        util::bytes(before),
        util::bytes(after),
        (after as f64 / before as f64 - 1.0) * 100.0
    );
    fs::write(&stamp, key)?;
    Ok(pkg)
}

/// The features listed as used (`+`) in a wasm module's `target_features` custom section.
pub fn wasm_features(module: &[u8]) -> Result<Vec<String>> {
    if module.get(..8) != Some(b"\0asm\x01\0\0\0".as_slice()) {
        bail!("not a wasm module (bad magic/version)");
    }
    let mut pos = 8;
    while pos < module.len() {
        let id = module[pos];
        pos += 1;
        let len = leb(module, &mut pos)? as usize;
        let body = module
            .get(pos..pos + len)
            .context("truncated wasm section")?;
        pos += len;
        if id != 0 {
            continue;
        }
        let mut p = 0;
        let name = string(body, &mut p)?;
        if name != "target_features" {
            continue;
        }
        let count = leb(body, &mut p)?;
        let mut used = Vec::new();
        for _ in 0..count {
            let prefix = *body.get(p).context("truncated target_features")?;
            p += 1;
            let feature = string(body, &mut p)?;
            if prefix == b'+' {
                used.push(feature);
            }
        }
        return Ok(used);
    }
    bail!("the module has no target_features section")
}

fn leb(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos).context("truncated LEB128")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("LEB128 too long")
}

fn string(bytes: &[u8], pos: &mut usize) -> Result<String> {
    let len = leb(bytes, pos)? as usize;
    let s = bytes.get(*pos..*pos + len).context("truncated string")?;
    *pos += len;
    Ok(String::from_utf8_lossy(s).into_owned())
}

/// Maps LLVM feature names to wasm-opt's `--enable-*` flags. An unknown feature is an error, so
/// a toolchain upgrade that starts using something new is noticed here, not in the browser.
fn wasm_opt_flags(features: &[String]) -> Result<Vec<String>> {
    features
        .iter()
        .map(|f| {
            let flag = match f.as_str() {
                "simd128" => "simd",
                "relaxed-simd" => "relaxed-simd",
                "bulk-memory" => "bulk-memory",
                "bulk-memory-opt" => "bulk-memory-opt",
                "nontrapping-fptoint" => "nontrapping-float-to-int",
                "sign-ext" => "sign-ext",
                "mutable-globals" => "mutable-globals",
                "multivalue" => "multivalue",
                "reference-types" => "reference-types",
                "call-indirect-overlong" => "call-indirect-overlong",
                "extended-const" => "extended-const",
                "tail-call" => "tail-call",
                "atomics" => "threads",
                "exception-handling" => "exception-handling",
                "multimemory" => "multimemory",
                "memory64" => "memory64",
                "fp16" => "fp16",
                other => {
                    bail!("wasm feature `{other}` has no known wasm-opt flag: add it to xtask")
                }
            };
            Ok(format!("--enable-{flag}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_target_features() {
        // magic, version, custom section "target_features" with +simd128 and -atomics.
        let mut body = vec![15u8];
        body.extend(b"target_features");
        body.push(2);
        body.push(b'+');
        body.push(7);
        body.extend(b"simd128");
        body.push(b'-');
        body.push(7);
        body.extend(b"atomics");
        let mut module = b"\0asm\x01\0\0\0".to_vec();
        module.push(0);
        module.push(body.len() as u8);
        module.extend(&body);
        assert_eq!(wasm_features(&module).unwrap(), vec!["simd128".to_string()]);
        assert_eq!(
            wasm_opt_flags(&["simd128".into(), "sign-ext".into()]).unwrap(),
            vec!["--enable-simd", "--enable-sign-ext"]
        );
        assert!(wasm_opt_flags(&["warp-drive".into()]).is_err());
        assert!(wasm_features(b"\0asm\x01\0\0\0").is_err());
    }
}
