//! Shared parts of edgefit's fuzz targets (`cargo xtask fuzz` builds and runs them).
//!
//! * A counting global allocator that turns a single allocation over [`MAX_ALLOC`] bytes, or
//!   more than [`MAX_LIVE`] bytes live at once, into an abort with a message. libFuzzer reports
//!   the abort as a crash and saves the input: a header that makes a parser ask for gigabytes is
//!   a finding even when the machine could satisfy it. (libFuzzer's own `-malloc_limit_mb` needs a
//!   sanitizer's malloc hooks; this works with `--sanitizer none` too.)
//! * Seeds: every target writes its own seeds when `EDGEFIT_FUZZ_WRITE_SEEDS` names a directory
//!   ([`write_seeds_if_asked`], called from the target's `init`), so the seeds are made from the
//!   real generators (the engine's synthetic GGUF and HF files, the bundled device profiles and
//!   presets, the start of the real model) at run time by the same binary, and nothing binary is
//!   committed.
//! * [`split`]: one input cut into two parts by a 2-byte length prefix.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest single allocation a parser may make on fuzz input: 256 MiB. No input under the
/// fuzzers' length limit (a few hundred KB) describes a model that needs more: asking for more
/// means a size was taken from a header without checking it against the data.
pub const MAX_ALLOC: usize = 256 << 20;
/// The most bytes live at once: 1 GiB.
pub const MAX_LIVE: usize = 1 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// [`System`] with the two caps above.
pub struct CappedAlloc;

fn too_much(what: &str) -> ! {
    // No allocation here: a fixed message to stderr (unbuffered), then abort; libFuzzer's crash
    // handler saves the input.
    let text: &[u8] = match what {
        "single" => b"\n==edgefit-fuzz== single allocation over MAX_ALLOC (256 MiB): out-of-memory finding\n",
        _ => b"\n==edgefit-fuzz== live heap over MAX_LIVE (1 GiB): out-of-memory finding\n",
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text);
    std::process::abort()
}

fn admit(size: usize) {
    if size > MAX_ALLOC {
        too_much("single");
    }
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    if live > MAX_LIVE {
        too_much("live");
    }
}

// SAFETY: forwards to `System`, only counting.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        admit(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        admit(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            admit(new_size - layout.size());
            if new_size > MAX_ALLOC {
                too_much("single");
            }
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: CappedAlloc = CappedAlloc;

/// The repository root (fuzz/ is one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/ lives one level below the repository root")
        .to_path_buf()
}

/// When `EDGEFIT_FUZZ_WRITE_SEEDS` is set, writes `make()`'s seeds (name, bytes) into that
/// directory and exits; otherwise does nothing. Called from each target's `init`.
pub fn write_seeds_if_asked(make: impl FnOnce() -> Vec<(String, Vec<u8>)>) {
    let Some(dir) = std::env::var_os("EDGEFIT_FUZZ_WRITE_SEEDS") else {
        return;
    };
    let dir = PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("creating {}: {e}", dir.display());
        std::process::exit(2);
    }
    let seeds = make();
    for (name, bytes) in &seeds {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("writing {}: {e}", path.display());
            std::process::exit(2);
        }
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    std::process::exit(0);
}

/// One estimate of a bundled preset on a bundled device, from each estimating target's `init`:
/// the estimator builds its once-per-process tables (the uncertainty bands and the runtime
/// profiles refitted on the validation set, ~10 s in the unoptimized fuzz build) on the first
/// estimate, and libFuzzer times units, not `init`. Without it the first unit took over the
/// 20 s slow-unit limit on a busy machine and was saved as a finding.
pub fn warm_estimator() {
    let spec = edgefit_estimate::preset("smollm2-135m").expect("bundled preset");
    let dev = edgefit_estimate::device("snapdragon-8-gen3").expect("bundled device");
    let _ = edgefit_estimate::estimate(&spec, &edgefit_estimate::Deployment::default(), &dev);
}

/// The JSON files of a directory under the repository root, as seeds named after them.
pub fn json_files(dir: &str) -> Vec<(String, Vec<u8>)> {
    let path = repo_root().join(dir);
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&path) else {
        eprintln!("reading {}: no seeds from it", path.display());
        return out;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "json") {
            if let Ok(bytes) = std::fs::read(&p) {
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                out.push((name, bytes));
            }
        }
    }
    out.sort();
    out
}

/// Cuts `data` into two parts: the first two bytes (little-endian) give the first part's
/// length, clamped to what is there.
pub fn split(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (&[], data);
    }
    let n = u16::from_le_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    rest.split_at(n.min(rest.len()))
}

/// The inverse of [`split`], for seeds. Panics if `first` is over 65535 bytes (seeds only).
pub fn join(first: &[u8], second: &[u8]) -> Vec<u8> {
    let n = u16::try_from(first.len()).expect("first part of a seed under 64 KiB");
    let mut out = n.to_le_bytes().to_vec();
    out.extend_from_slice(first);
    out.extend_from_slice(second);
    out
}

/// The first 64 KiB of the real model (`models/smollm2-135m-instruct-q4_1.gguf`) when it is
/// there: a real header, cut inside its tokenizer's vocabulary.
pub fn real_model_head(name: &str) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let path = repo_root().join("models/smollm2-135m-instruct-q4_1.gguf");
    let mut head = Vec::new();
    match std::fs::File::open(&path) {
        Ok(f) => {
            if f.take(64 << 10).read_to_end(&mut head).is_err() {
                return Vec::new();
            }
        }
        Err(_) => return Vec::new(),
    }
    vec![(name.to_string(), head)]
}
