//! `cargo xtask test`: every check and test, in order, stopping at the first failure.
//!
//! After setup: rustfmt; clippy native (as the release build of the tests, see
//! [`clippy_native`]); clippy wasm32; native tests; a short fuzz pass (every
//! cargo-fuzz target for [`crate::fuzz::TEST_SECONDS`] s); wasm tests in Node; the
//! same wasm tests in headless Chromium (Debian's chromium + chromedriver, never a downloaded
//! browser); the publishable site (`dist/`: simd128, baseline and threaded wasm) and the
//! release CLI; the page's own tests with `node --test` against `dist/` served by Python's
//! `http.server` under a sub-path (`/edgefit/`) on an ephemeral port, as any static host would,
//! in three lanes (see [`WebLanes`])
//! (and by `cargo xtask serve`'s server, which sends COOP/COEP, for the threaded build's test).

use crate::util::{self, run, which};
use crate::{build, setup};
use anyhow::{bail, Context, Result};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Crates whose tests also run on wasm32 (in Node and in Chromium).
const WASM_TEST_CRATES: [&str; 3] = ["edgefit-wasm", "edgefit-kernels", "edgefit-estimate"];

/// Chromium flags for headless runs on a machine with no network but loopback: without the
/// background-networking flags Chromium keeps trying (and failing) to reach Google's services.
const CHROMIUM_ARGS: [&str; 9] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
];

type StepFn = Box<dyn FnOnce() -> Result<()>>;

/// The step that starts the site's baseline and threaded wasm builds in the background (the
/// native tests), and the site step that uses them (see `test`).
const EARLY_BUILDS_FROM: usize = 5;
const SITE_STEP: usize = 9;

/// Runs the steps; `from` (1-based) skips the steps before it, except setup.
pub fn test(from: usize) -> Result<()> {
    let steps: Vec<(&str, StepFn)> = vec![
        ("setup", Box::new(setup::setup_with_gemma)),
        ("rustfmt", Box::new(fmt)),
        ("clippy (native)", Box::new(clippy_native)),
        ("clippy (wasm32)", Box::new(clippy_wasm)),
        ("native tests", Box::new(native_tests)),
        (
            "fuzz pass (every target unoptimized, 5 s each)",
            Box::new(crate::fuzz::test_pass),
        ),
        ("wasm tests in Node", Box::new(wasm_tests_node)),
        (
            "wasm tests in headless Chromium",
            Box::new(wasm_tests_chromium),
        ),
        (
            "the static site (dist/, every wasm build) and the CLI",
            Box::new(build::site_and_cli),
        ),
        ("web tests (node --test)", Box::new(web_tests)),
    ];
    let total = steps.len();
    if steps[EARLY_BUILDS_FROM - 1].0 != "native tests"
        || !steps[SITE_STEP - 1].0.starts_with("the static site")
    {
        bail!(
            "xtask: EARLY_BUILDS_FROM / SITE_STEP no longer name the native tests and site steps"
        );
    }
    let mut done: Vec<StepTime> = Vec::new();
    let started = Instant::now();
    let mut early: Option<build::EarlyBuilds> = None;
    if from > total {
        bail!("--from {from}: there are only {total} steps");
    }
    for (i, (name, step)) in steps.into_iter().enumerate() {
        if i > 0 && i + 1 < from {
            println!(
                "\n======== [test {}/{total}] {name}: skipped (--from {from})",
                i + 1
            );
            continue;
        }
        println!("\n======== [test {}/{total}] {name} ========", i + 1);
        let t = Instant::now();
        // The site's baseline and threaded wasm builds run in the background from the native
        // tests on (see `build::start_early_builds`); the site step waits for them first.
        if early.is_none() && (EARLY_BUILDS_FROM..SITE_STEP).contains(&(i + 1)) {
            match build::start_early_builds() {
                Ok(builds) => early = Some(builds),
                Err(err) => println!("  (no background wasm builds: {err:#})"),
            }
        }
        if i + 1 == SITE_STEP {
            if let Some(builds) = early.take() {
                builds.wait();
            }
        }
        let cpu = children_cpu_seconds();
        let result = step();
        done.push(StepTime {
            n: i + 1,
            name,
            wall: t.elapsed(),
            cpu: children_cpu_seconds()
                .zip(cpu)
                .map(|(after, before)| after - before),
            ok: result.is_ok(),
        });
        if let Err(err) = result {
            summary(&done, total, started.elapsed());
            return Err(err.context(format!("test step {}/{total} `{name}` failed", i + 1)));
        }
    }
    summary(&done, total, started.elapsed());
    Ok(())
}

/// One step's outcome for the summary.
struct StepTime<'a> {
    n: usize,
    name: &'a str,
    wall: Duration,
    /// CPU seconds (user + system) of the processes the step started and waited for (cargo,
    /// rustc, node, Chromium, ...): beside the wall time it shows how busy both cores were,
    /// which a loaded machine does not change much. `None` where /proc is not readable.
    cpu: Option<f64>,
    ok: bool,
}

/// User + system CPU seconds of this process's waited-for children and their waited-for
/// descendants (`cutime` + `cstime`, fields 16 and 17 of `/proc/self/stat`, in clock ticks of
/// the kernel's fixed `USER_HZ` = 100 for that interface). Linux only; `None` elsewhere.
fn children_cpu_seconds() -> Option<f64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field k is at index k - 3.
    let ticks = |k: usize| fields.get(k - 3)?.parse::<u64>().ok();
    Some((ticks(16)? + ticks(17)?) as f64 / 100.0)
}

fn summary(done: &[StepTime], total: usize, elapsed: Duration) {
    let skipped = total - done.len();
    println!("\n======== summary ========");
    println!("  step   result     wall    cpu (user+sys of the step's processes)");
    for t in done {
        let mark = if t.ok { "ok    " } else { "FAILED" };
        let cpu = t
            .cpu
            .map_or("       -".to_string(), |c| format!("{c:>8.1}"));
        println!(
            "  {:>2}. {mark} {:>8.1} s {cpu} s  {}",
            t.n,
            t.wall.as_secs_f64(),
            t.name
        );
    }
    let cpu: f64 = done.iter().filter_map(|t| t.cpu).sum();
    println!("  cpu total {cpu:.1} s");
    let failed = done.iter().filter(|d| !d.ok).count();
    if skipped > 0 {
        println!("  ({skipped} steps skipped or not reached)");
    }
    println!("  total {:.1} s", elapsed.as_secs_f64());
    println!("xtask: {} passed, {failed} failed", done.len() - failed);
}

fn cargo_in_root() -> Command {
    let mut cmd = util::cargo();
    cmd.current_dir(util::root());
    cmd
}

fn fmt() -> Result<()> {
    run(cargo_in_root().args(["fmt", "--all", "--", "--check"]))
        .context("formatting differs: run `cargo fmt --all` and look at the diff")
}

/// Clippy on every native target of the workspace, denying warnings, as the release build of
/// the native tests and the workspace's binaries ([`util::clippy_wrapped`]): the next step runs
/// those tests without building anything again, and the site step's release CLI is the same
/// build. `--all-targets` covers libs, bins, tests, benches and examples in test mode; the
/// `--bins` build adds the binaries without `cfg(test)` (where code only tests use is dead).
fn clippy_native() -> Result<()> {
    run(util::clippy_wrapped(cargo_in_root().args([
        "test",
        "--release",
        "--workspace",
        "--all-targets",
        "--no-run",
    ]))?)?;
    run(util::clippy_wrapped(cargo_in_root().args([
        "build",
        "--release",
        "--workspace",
        "--bins",
    ]))?)
}

fn clippy_wasm() -> Result<()> {
    let mut cmd = cargo_in_root();
    cmd.args(["clippy", "--target", WASM_TARGET]);
    for krate in [
        "edgefit-kernels",
        "edgefit-engine",
        "edgefit-estimate",
        "edgefit-wasm",
        "edgefit-bench",
    ] {
        cmd.args(["-p", krate]);
    }
    run(cmd.args(["--all-targets", "--", "-D", "warnings"]))
}

/// Tests run in the release profile, natively and on wasm32: the dependencies (candle,
/// tokenizers, ...) are then compiled once per target and shared with the release CLI and the
/// release wasm of step "release build of the site", which keeps a cold CI run well inside its
/// budget. The tests lose debug assertions; what they check is asserted explicitly.
fn native_tests() -> Result<()> {
    // Wrapped like the clippy step's build, so nothing is compiled again.
    run(util::clippy_wrapped(cargo_in_root().args([
        "test",
        "--release",
        "--workspace",
    ]))?)
}

/// `cargo test --target wasm32-unknown-unknown` for the crates that run on wasm; the runner set
/// in .cargo/config.toml is wasm-bindgen-test-runner.
fn wasm_test_command() -> Command {
    let mut cmd = cargo_in_root();
    // `--tests`: lib and integration tests, not doctests, which pass on wasm32 without running
    // (the runner finds no wasm-bindgen tests in them and exits 0).
    // `--release`: see `native_tests`.
    cmd.args(["test", "--release", "--target", WASM_TARGET, "--tests"]);
    for krate in WASM_TEST_CRATES {
        cmd.args(["-p", krate]);
    }
    // Runner variables from the caller's environment must not change where tests run.
    for var in [
        "WASM_BINDGEN_USE_BROWSER",
        "WASM_BINDGEN_USE_NODE_EXPERIMENTAL",
        "WASM_BINDGEN_USE_DENO",
        "WASM_BINDGEN_USE_DEDICATED_WORKER",
        "WASM_BINDGEN_USE_SHARED_WORKER",
        "WASM_BINDGEN_USE_SERVICE_WORKER",
        "WASM_BINDGEN_TEST_ONLY_NODE",
        "WASM_BINDGEN_TEST_ONLY_WEB",
        "NO_HEADLESS",
    ] {
        cmd.env_remove(var);
    }
    // Per-suite timeout (seconds): the engine tests run a model, and the machine may be busy.
    cmd.env("WASM_BINDGEN_TEST_TIMEOUT", "600");
    cmd
}

fn wasm_tests_node() -> Result<()> {
    let mut cmd = wasm_test_command();
    // Suites configured with `run_in_browser` are skipped here and run in the next step.
    cmd.env("WASM_BINDGEN_TEST_ONLY_NODE", "1");
    let output = run_tee(&mut cmd)?;
    check_wasm_tests_ran(&output, "Node")
}

/// wasm-bindgen-test-runner only runs `#[wasm_bindgen_test]` functions: a test binary with only
/// plain `#[test]`s prints `no tests to run!` and passes. Name those binaries, and fail if no
/// wasm test ran at all, so this step cannot pass while testing nothing.
fn check_wasm_tests_ran(output: &str, place: &str) -> Result<()> {
    let mut current = "";
    let mut empty = Vec::new();
    let mut passed = 0u64;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Running ") {
            current = rest;
        } else if line == "no tests to run!" {
            empty.push(current);
        } else if let Some(rest) = line.strip_prefix("test result: ok. ") {
            passed += rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    for binary in &empty {
        println!(
            "  note: no #[wasm_bindgen_test] in {binary}: its plain #[test]s do not run on wasm32"
        );
    }
    if passed == 0 {
        bail!(
            "no wasm test ran in {place}: add #[wasm_bindgen_test] tests to {WASM_TEST_CRATES:?}"
        );
    }
    println!("  {passed} wasm tests passed in {place}");
    Ok(())
}

fn wasm_tests_chromium() -> Result<()> {
    let chromium =
        which("chromium").context("`chromium` is not on PATH: run `cargo xtask setup`")?;
    let driver =
        which("chromedriver").context("`chromedriver` is not on PATH: run `cargo xtask setup`")?;
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": CHROMIUM_ARGS,
        }
    });
    let caps_path = util::xtask_dir()?.join("webdriver.json");
    fs::write(&caps_path, serde_json::to_string_pretty(&caps)?)?;
    let mut cmd = wasm_test_command();
    cmd.env("WASM_BINDGEN_USE_BROWSER", "1")
        .env("WASM_BINDGEN_TEST_ONLY_WEB", "1")
        .env("CHROMEDRIVER", &driver)
        .env("WASM_BINDGEN_TEST_WEBDRIVER_JSON", &caps_path)
        .env("WASM_BINDGEN_TEST_DRIVER_TIMEOUT", "60");
    let output = run_tee(&mut cmd)?;
    // Each test binary that ran says where; make sure that was Chromium, not Node.
    let in_chrome = output
        .lines()
        .filter(|l| l.contains("Running headless tests in Chrome"))
        .count();
    if in_chrome == 0 {
        bail!(
            "wasm-bindgen-test-runner never reported `Running headless tests in Chrome`: \
             the tests did not run in Chromium"
        );
    }
    println!(
        "  verified: {in_chrome} test binaries ran in headless Chromium ({})",
        chromium.display()
    );
    Ok(())
}

/// Like [`run`], but also returns everything the command printed (stdout and stderr).
fn run_tee(cmd: &mut Command) -> Result<String> {
    let shown = util::display(cmd);
    println!("  $ {shown}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{shown}`"))?;
    let log = Arc::new(Mutex::new(String::new()));
    let pump = |stream: Box<dyn std::io::Read + Send>, to_stderr: bool| {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if to_stderr {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        })
    };
    let out = pump(Box::new(child.stdout.take().unwrap()), false);
    let err = pump(Box::new(child.stderr.take().unwrap()), true);
    let status = child.wait()?;
    out.join().ok();
    err.join().ok();
    std::io::stdout().flush().ok();
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    let log = log.lock().unwrap().clone();
    Ok(log)
}

/// Test files node's runner would pick by name, found recursively under `dir`.
fn node_test_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if path.is_dir() {
            if name != "node_modules" && !name.starts_with('.') {
                node_test_files(&path, out)?;
            }
            continue;
        }
        let Some(stem) = ["js", "mjs", "cjs"]
            .iter()
            .find_map(|ext| name.strip_suffix(&format!(".{ext}")))
        else {
            continue;
        };
        if stem == "test"
            || stem.starts_with("test-")
            || stem.ends_with(".test")
            || stem.ends_with("-test")
            || stem.ends_with("_test")
        {
            out.push(path);
        }
    }
    Ok(())
}

fn web_tests() -> Result<()> {
    let root = util::root();
    let mut files = Vec::new();
    for dir in ["tests/web", "tests/e2e"] {
        let path = root.join(dir);
        if !path.is_dir() {
            bail!("{dir}/ does not exist: the page's tests live there, and a missing test directory must not pass");
        }
        let before = files.len();
        node_test_files(&path, &mut files)?;
        if files.len() == before {
            bail!(
                "{dir}/ has no test files (*.test.js, *-test.js, *_test.js, test-*.js, test.js; \
                 also .mjs/.cjs): an empty test directory must not pass"
            );
        }
    }
    files.sort();
    let chromium =
        which("chromium").context("`chromium` is not on PATH: run `cargo xtask setup`")?;
    let build_dir = root.join("build");
    let server = StaticServer::start(&root.join("dist"), SUB_PATH)?;
    println!(
        "  serving {} with `python3 -m http.server` at {}",
        root.join("dist").display(),
        server.url
    );
    // The same dist/ from `cargo xtask serve`'s server, which sends COOP/COEP: the threaded
    // build's test checks the page is isolated there without the service worker.
    let coi = crate::serve::start(&root.join("dist"), "127.0.0.1", 0)?;
    let node_test = |files: &[PathBuf]| {
        let mut cmd = Command::new("node");
        cmd.current_dir(&root)
            .arg("--test")
            .arg("--test-concurrency=1")
            .args(files.iter().map(|f| f.strip_prefix(&root).unwrap_or(f)))
            .env("EDGEFIT_URL", &server.url)
            .env("EDGEFIT_COI_URL", coi.url())
            .env("EDGEFIT_BUILD_DIR", &build_dir)
            // fit.test.mjs compares the page's "What fits?" with the CLI the build step made;
            // the page unit tests that load the built wasm read it from the served site.
            .env("EDGEFIT_CLI", util::target_dir().join("release/edgefit"))
            .env("EDGEFIT_SITE_DIR", root.join("dist"))
            .env("CHROMIUM", &chromium)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1");
        cmd
    };
    let lanes = WebLanes::split(&root, files)?;
    // The side lane runs beside the main one, its output kept in a log printed afterwards.
    fs::create_dir_all(&build_dir)?;
    let side_log_path = build_dir.join("web-tests-side-lane.log");
    let side_log = fs::File::create(&side_log_path)
        .with_context(|| format!("creating {}", side_log_path.display()))?;
    let mut side_cmd = node_test(&lanes.side);
    let side_shown = util::display(&side_cmd);
    println!(
        "  $ {side_shown} (side lane, beside the next command; output in {})",
        side_log_path.display()
    );
    let mut side = side_cmd
        .stdout(side_log.try_clone()?)
        .stderr(side_log)
        .spawn()
        .with_context(|| format!("could not start `{side_shown}`"))?;
    let main = run(&mut node_test(&lanes.main));
    let side_status = side.wait();
    println!("\n== web tests, side lane ({}):", lanes.side.len());
    print!("{}", fs::read_to_string(&side_log_path).unwrap_or_default());
    let side = match side_status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(anyhow::anyhow!("`{side_shown}` failed ({status})")),
        Err(e) => Err(anyhow::anyhow!("waiting for `{side_shown}`: {e}")),
    };
    // The timed file last and alone: it compares the estimate with what the page measures.
    let alone = if main.is_ok() && side.is_ok() {
        println!(
            "\n== web tests, alone on the machine ({}):",
            lanes.alone.len()
        );
        run(&mut node_test(&lanes.alone))
    } else {
        Ok(())
    };
    drop(server);
    drop(coi);
    main.and(side).and(alone)
}

/// The page's test files in three lanes. The end-to-end files each drive one Chromium running
/// the single-threaded wasm build on the real model, so one file at a time leaves a core of
/// this 2-core machine idle: [`SIDE_LANE`] runs beside the others (long files that measure
/// memory and correctness, not time), and [`ALONE_LANE`] runs after both, alone, because it
/// compares the estimate with the speed the page measures. (Everything at once timed out page
/// loads: several Chromiums per core.)
struct WebLanes {
    main: Vec<PathBuf>,
    side: Vec<PathBuf>,
    alone: Vec<PathBuf>,
}

/// Beside the main lane: the soak (decoding, checks memory), the pruning panel (checks what the
/// worker computes) and the fault injections (generous timeouts). With these three the lanes
/// take about as long: in a warm run on this machine (2026-12) the soak took 160 s, pruning
/// 55 s and faults 77 s of test time, against ~300 s for the main lane's other files.
const SIDE_LANE: [&str; 3] = [
    "tests/e2e/soak.test.mjs",
    "tests/e2e/prune.test.mjs",
    "tests/e2e/faults.test.mjs",
];
/// After the other lanes, alone: the estimate-vs-measured loop.
const ALONE_LANE: [&str; 1] = ["tests/e2e/estimate-loop.test.mjs"];

impl WebLanes {
    /// Splits `files`; a lane file that is not among them is an error, so a rename cannot
    /// silently drop a test from the run.
    fn split(root: &Path, files: Vec<PathBuf>) -> Result<WebLanes> {
        let rel = |f: &PathBuf| {
            f.strip_prefix(root)
                .unwrap_or(f)
                .to_string_lossy()
                .replace('\\', "/")
        };
        for name in SIDE_LANE.iter().chain(&ALONE_LANE) {
            if !files.iter().any(|f| rel(f) == *name) {
                bail!("{name} is named in a web-test lane (xtask/src/testing.rs) but is not a test file");
            }
        }
        let (mut side, mut alone, mut main) = (Vec::new(), Vec::new(), Vec::new());
        for f in files {
            let r = rel(&f);
            if SIDE_LANE.contains(&r.as_str()) {
                side.push(f);
            } else if ALONE_LANE.contains(&r.as_str()) {
                alone.push(f);
            } else {
                main.push(f);
            }
        }
        Ok(WebLanes { main, side, alone })
    }
}

/// The sub-path the page's tests find the site under (a static host rarely serves at `/`).
const SUB_PATH: &str = "edgefit";

/// `dist/` served by a plain static server (Python's `http.server`, nothing of ours) under
/// `/<sub>/`, through a temporary directory holding one symlink; killed on drop.
struct StaticServer {
    child: std::process::Child,
    dir: PathBuf,
    url: String,
}

impl StaticServer {
    fn start(dist: &Path, sub: &str) -> Result<StaticServer> {
        if !dist.join("index.html").is_file() {
            bail!(
                "{} has no index.html: run `cargo xtask site`",
                dist.display()
            );
        }
        let dir = util::xtask_dir()?.join(format!("static-root-{}", std::process::id()));
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(&dir)?;
        std::os::unix::fs::symlink(dist, dir.join(sub))
            .with_context(|| format!("linking {} into {}", dist.display(), dir.display()))?;
        // A free port: bind, read it, release it for the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting `python3 -m http.server`")?;
        let mut server = StaticServer {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}/{sub}/"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                bail!("`python3 -m http.server` exited at start ({status})");
            }
            if started.elapsed() > Duration::from_secs(20) {
                bail!("`python3 -m http.server` did not listen on port {port} within 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
        fs::remove_dir_all(&self.dir).ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_cpu_of_waited_children() {
        let before = children_cpu_seconds();
        if !cfg!(target_os = "linux") {
            return;
        }
        let before = before.expect("/proc/self/stat is readable on Linux");
        // A child that spins for ~0.3 s of CPU, then is waited for.
        let status = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let spent = children_cpu_seconds().unwrap() - before;
        assert!(
            spent >= 0.05,
            "a busy child's CPU time was not counted: {spent} s"
        );
    }

    #[test]
    fn wasm_runs_that_test_nothing_fail() {
        let empty = "     Running unittests src/lib.rs (target/x.wasm)\nno tests to run!\n";
        assert!(check_wasm_tests_ran(empty, "Node").is_err());
        let ran = format!(
            "{empty}     Running tests/web.rs (t/w.wasm)\nrunning 2 tests\n\
                           test result: ok. 2 passed; 0 failed; 0 ignored; 0 filtered out\n"
        );
        check_wasm_tests_ran(&ran, "Node").unwrap();
    }

    #[test]
    fn finds_node_test_files_by_name() {
        let dir = util::target_dir().join(format!("xtask-test-nodefiles-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub/node_modules")).unwrap();
        for f in [
            "a.test.js",
            "sub/b.test.mjs",
            "test-c.js",
            "helper.js",
            "sub/node_modules/x.test.js",
            "d_test.cjs",
            "shot.png",
        ] {
            fs::write(dir.join(f), "").unwrap();
        }
        let mut found = Vec::new();
        node_test_files(&dir, &mut found).unwrap();
        let mut names: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a.test.js", "d_test.cjs", "sub/b.test.mjs", "test-c.js"]
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn web_lanes_split_every_file_once_and_name_a_missing_lane_file() {
        let root = Path::new("/r");
        let all: Vec<PathBuf> = [
            "tests/web/a.test.js",
            "tests/e2e/soak.test.mjs",
            "tests/e2e/estimate-loop.test.mjs",
            "tests/e2e/page.test.mjs",
            "tests/e2e/prune.test.mjs",
            "tests/e2e/faults.test.mjs",
        ]
        .iter()
        .map(|f| root.join(f))
        .collect();
        let lanes = WebLanes::split(root, all.clone()).unwrap();
        let names = |v: &[PathBuf]| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().to_string())
                .collect()
        };
        assert_eq!(
            names(&lanes.main),
            ["tests/web/a.test.js", "tests/e2e/page.test.mjs"]
        );
        assert_eq!(
            names(&lanes.side),
            [
                "tests/e2e/soak.test.mjs",
                "tests/e2e/prune.test.mjs",
                "tests/e2e/faults.test.mjs"
            ]
        );
        assert_eq!(names(&lanes.alone), ["tests/e2e/estimate-loop.test.mjs"]);
        let without_soak: Vec<PathBuf> = all
            .into_iter()
            .filter(|p| !p.ends_with("soak.test.mjs"))
            .collect();
        let err = WebLanes::split(root, without_soak)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("tests/e2e/soak.test.mjs"), "{err}");
    }
}
