//! Small helpers shared by the commands: paths, running programs, hashing, copying.

use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

/// Cargo's target directory (honours `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root().join(dir)
            }
        }
        None => root().join("target"),
    }
}

/// xtask's own scratch space (caches, stamps, generated config), under the target directory.
pub fn xtask_dir() -> Result<PathBuf> {
    let dir = target_dir().join("xtask");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The cargo that runs us (so nested builds use the same toolchain).
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Makes `cmd` (a cargo build of the workspace) compile the workspace's own crates with
/// clippy-driver, denying warnings: what `cargo clippy -- -D warnings` does, but in a real
/// build instead of `cargo check`, so `cargo xtask test` lints while it builds the release
/// tests and shares every dependency's release build with them, instead of checking all ~230
/// dependencies a second time. clippy-driver is rustc plus clippy's lints (it compiles
/// unoptimized MIR, which LLVM then optimizes as usual); dependencies still build with plain
/// rustc, as under `cargo clippy`. `RUSTC_WORKSPACE_WRAPPER` and `CLIPPY_ARGS` (its
/// arguments, each followed by `__CLIPPY_HACKERY__`) are what `cargo clippy` sets itself.
/// Every command that builds the same crates must be wrapped alike, or cargo rebuilds them.
pub fn clippy_wrapped(cmd: &mut Command) -> Result<&mut Command> {
    let driver = clippy_driver()?;
    Ok(cmd
        .env("RUSTC_WORKSPACE_WRAPPER", driver)
        .env("CLIPPY_ARGS", CLIPPY_DENY_WARNINGS))
}

/// `CLIPPY_ARGS` for clippy-driver as `cargo clippy -- -D warnings` passes them (each argument
/// followed by `__CLIPPY_HACKERY__`).
pub const CLIPPY_DENY_WARNINGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// The clippy-driver of the toolchain that runs `cargo` (beside it), else the one on PATH.
fn clippy_driver() -> Result<PathBuf> {
    let beside = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|cargo| Some(cargo.parent()?.join("clippy-driver")))
        .filter(|p| is_executable(p));
    beside
        .or_else(|| which("clippy-driver"))
        .context("clippy-driver not found beside cargo or on PATH: `rustup component add clippy`")
}

/// Looks a program up on PATH, like `command -v`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A command line as a person would type it (for logs and "do it by hand" hints).
pub fn display(cmd: &Command) -> String {
    let mut parts = Vec::new();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            parts.push(format!("{}={}", key.to_string_lossy(), quote(value)));
        }
    }
    parts.push(quote(cmd.get_program()));
    parts.extend(cmd.get_args().map(quote));
    parts.join(" ")
}

fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%^".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Runs a command with inherited stdio, echoing it first; fails if it exits non-zero.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = display(cmd);
    run_shown_as(cmd, &shown)
}

/// Like [`run`], but echoes `shown` instead of the full command line.
pub fn run_shown_as(cmd: &mut Command, shown: &str) -> Result<()> {
    println!("  $ {shown}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs a command quietly and returns its stdout (None if it cannot start or fails).
pub fn capture(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Copies a directory tree (files and subdirectories) into `dst`, creating it.
pub fn copy_tree(src: &Path, dst: &Path) -> Result<u64> {
    fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    let mut count = 0;
    for entry in fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            count += copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)
                .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
            count += 1;
        }
    }
    Ok(count)
}

/// Hard-links `src` to `dst` (replacing `dst`), falling back to a copy across filesystems.
/// A symlinked `src` (a worktree's `models/`) is resolved first: a hard link to the symlink
/// itself would be a symlink out of the served root, which the static server refuses.
pub fn link_or_copy(src: &Path, dst: &Path) -> Result<&'static str> {
    let resolved = fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
    let src = resolved.as_path();
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    if dst.exists() {
        fs::remove_file(dst).with_context(|| format!("removing {}", dst.display()))?;
    }
    if fs::hard_link(src, dst).is_ok() {
        return Ok("hard-linked");
    }
    fs::copy(src, dst)
        .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    Ok("copied")
}

/// Size and modification time of a file, as a cache key.
pub fn size_mtime(path: &Path) -> Option<(u64, u128)> {
    let meta = fs::metadata(path).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((meta.len(), mtime))
}

/// Human-readable byte count.
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.2} MiB ({n} bytes)", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB ({n} bytes)", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

/// Splits `--key value` and `--key=value` arguments into (key, value) pairs, in order (every
/// option of xtask's commands takes a value). A key without a value is an error naming it.
pub fn flag_values(rest: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        match arg.split_once('=') {
            Some((k, v)) => out.push((k.to_string(), v.to_string())),
            None => {
                let v = it
                    .next()
                    .with_context(|| format!("`{arg}` needs a value"))?;
                out.push((arg.clone(), v.clone()));
            }
        }
    }
    Ok(out)
}

/// Owned strings from literals (the tests' argument lists).
#[cfg(test)]
pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}
