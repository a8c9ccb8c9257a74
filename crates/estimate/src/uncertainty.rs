//! Honest error bars: every latency and throughput the estimator reports comes with a range
//! taken from its own errors on the committed validation set.
//!
//! # How a range is obtained
//! For each compute unit and phase (prefill, decode), each validation point gives two residuals
//! `r = measured / estimated`: one against the estimate made with the runtimes refitted
//! **without the point's own source** (leave-one-source-out, [`crate::validate`]: the error on
//! a device or runtime the set has not seen) and one against the estimate fitted on the whole
//! set (the figure the estimator prints). The band is the 10th and 90th percentile of those
//! residuals together (linear interpolation between order statistics: the `q`-quantile of `n`
//! sorted values is at index `q·(n − 1)`), widened to contain 1 (the estimate itself), and a
//! reported figure `x` gets `[x·r_10, x·r_90]` (`TTFT` gets `[t / r_90, t / r_10]` from the
//! prefill band). A unit with fewer than [`MIN_POINTS`] residuals in a phase uses the
//! residuals of all units in that phase.
//!
//! Computed once per process from the bundled validation set (deterministic: same files, same
//! bands). The leave-one-source-out refits behind them take a few hundred milliseconds, so a
//! process that has them already (the web page's build writes [`tables`] to a JSON file) can
//! hand them over with [`seed`] before the first estimate; [`Tables::key`] (a hash of every
//! bundled profile, preset and validation file and of the crate version) refuses tables made
//! from other data.
//!
//! The band arithmetic (the types and `band_of`) lives in the leaf [`crate::band`], re-exported
//! here, so that [`crate::validate`] computes bands without importing this module, which reads
//! the validation set through it.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use crate::band::{band_of, quantile, Band, Bands, Phase, MIN_POINTS};
use crate::error::Result;
use crate::runtime::{runtime_profile, Runtime, RuntimeProfile};

/// The bands (from the bundled validation set) and the runtime profiles refitted on it, once
/// per process: computed on first use, or handed over by [`seed`].
static BANDS: OnceLock<Result<Bands>> = OnceLock::new();
static FITTED: OnceLock<Result<Vec<RuntimeProfile>>> = OnceLock::new();

/// The bands, computed once from the bundled validation set.
pub fn bands() -> Result<Bands> {
    BANDS.get_or_init(crate::validate::compute_bands).clone()
}

/// The runtime profile as the estimator uses it: the committed priors refitted on the whole
/// validation set ([`crate::validate::fit_runtimes`]), computed once.
pub fn fitted_profile(id: Runtime) -> Result<RuntimeProfile> {
    let all = FITTED.get_or_init(crate::validate::fit_all).clone()?;
    match all.into_iter().find(|p| p.id == id) {
        Some(p) => Ok(p),
        None => runtime_profile(id),
    }
}

/// What [`bands`] and [`fitted_profile`] compute, as one serializable value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tables {
    /// [`tables_key`] of the data they were computed from.
    pub key: String,
    /// [`bands`].
    pub bands: Bands,
    /// The refitted runtime profiles ([`fitted_profile`] of every runtime).
    pub fitted: Vec<RuntimeProfile>,
}

/// The estimator's own source files, hashed into [`tables_key`]: the fit, the time model and
/// everything they call shape the tables, so a code-only change must invalidate tables made by
/// an older build (a test checks that every file under `src/` is listed).
macro_rules! source_files {
    ($($f:literal),+ $(,)?) => {
        pub(crate) const SOURCE_FILES: &[(&str, &str)] = &[$(($f, include_str!($f))),+];
    };
}

source_files!(
    "band.rs",
    "compare.rs",
    "deploy.rs",
    "device.rs",
    "error.rs",
    "explain.rs",
    "fit.rs",
    "format.rs",
    "gguf.rs",
    "governor.rs",
    "hf.rs",
    "latency.rs",
    "lib.rs",
    "macros.rs",
    "memory.rs",
    "report.rs",
    "runtime.rs",
    "source.rs",
    "spec.rs",
    "speed.rs",
    "thermal.rs",
    "uncertainty.rs",
    "validate/mod.rs",
    "validate/refit.rs",
    "validate/set.rs",
    "verdict.rs",
);

/// FNV-1a (64 bit) over the crate version, every bundled JSON file (runtime and device
/// profiles, presets, validation files and their map) and every source file of this crate
/// (`SOURCE_FILES`), each as `name NUL text NUL`: equal keys mean the tables were computed
/// from the same inputs by the same code. (Any edit of the crate's sources, comments included,
/// changes the key: the site build recomputes the tables, never a stale set accepted.)
pub fn tables_key() -> String {
    key_over(SOURCE_FILES)
}

/// [`tables_key`] with `sources` in place of [`SOURCE_FILES`].
fn key_over(sources: &[(&str, &str)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes.iter().chain(std::iter::once(&0u8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(env!("CARGO_PKG_VERSION").as_bytes());
    for files in [
        crate::runtime::RUNTIME_FILES,
        crate::device::DEVICE_FILES,
        crate::hf::PRESET_FILES,
        crate::validate::VALIDATION_FILES,
        sources,
    ] {
        for (name, text) in files {
            eat(name.as_bytes());
            eat(text.as_bytes());
        }
    }
    eat(crate::validate::MAP.as_bytes());
    format!("{h:016x}")
}

/// The tables of this process (computing them if needed), for [`seed`] in another.
pub fn tables() -> Result<Tables> {
    Ok(Tables {
        key: tables_key(),
        bands: bands()?,
        fitted: FITTED.get_or_init(crate::validate::fit_all).clone()?,
    })
}

/// Hands over tables computed by [`tables`] (same data, same release: [`Tables::key`] must equal
/// [`tables_key`], else [`EstimateError::Validation`](crate::EstimateError) naming both keys).
/// Returns `false` when this process computed or received them already (they are kept).
pub fn seed(t: Tables) -> Result<bool> {
    let want = tables_key();
    if t.key != want {
        return Err(crate::EstimateError::Validation {
            what: "estimator tables".into(),
            reason: format!(
                "made from other data (key {}, this build's is {want}): rebuild them with this build",
                t.key
            ),
        });
    }
    let fresh_bands = BANDS.set(Ok(t.bands)).is_ok();
    let fresh_fitted = FITTED.set(Ok(t.fitted)).is_ok();
    Ok(fresh_bands && fresh_fitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_only_change_changes_the_key() {
        let mut edited: Vec<(&str, String)> = SOURCE_FILES
            .iter()
            .map(|(n, t)| (*n, t.to_string()))
            .collect();
        let v = edited
            .iter_mut()
            .find(|(n, _)| *n == "validate/refit.rs")
            .unwrap();
        v.1.push(' ');
        let edited: Vec<(&str, &str)> = edited.iter().map(|(n, t)| (*n, t.as_str())).collect();
        assert_eq!(key_over(SOURCE_FILES), tables_key());
        assert_ne!(key_over(&edited), tables_key());
    }

    /// Every `.rs` file of `src/` is hashed into the key, so a code-only change of the fit
    /// cannot leave an older build's tables accepted.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn every_source_file_is_in_the_tables_key() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        // Every `.rs` file under `src/`, subfolders included, as a path relative to `src/`.
        fn walk(dir: &std::path::Path, prefix: &str, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()) {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() {
                    walk(&e.path(), &format!("{prefix}{name}/"), out);
                } else if name.ends_with(".rs") {
                    out.push(format!("{prefix}{name}"));
                }
            }
        }
        let mut on_disk = Vec::new();
        walk(std::path::Path::new(dir), "", &mut on_disk);
        on_disk.sort();
        let listed: Vec<String> = SOURCE_FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            listed, on_disk,
            "SOURCE_FILES must list every file of {dir}"
        );
        for (name, text) in SOURCE_FILES {
            let disk = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
            assert_eq!(*text, disk, "{name}");
        }
    }

    #[test]
    fn tables_round_trip_through_json_and_a_foreign_key_is_refused() {
        let t = tables().unwrap();
        assert_eq!(t.key, tables_key());
        assert_eq!(t.key.len(), 16);
        assert!(!t.bands.pooled.is_empty());
        assert_eq!(t.fitted.len(), Runtime::ALL.len());
        let back: Tables = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        for ((u, p, a), (u2, p2, b)) in t.bands.by_unit.iter().zip(&back.bands.by_unit) {
            assert_eq!((u, p, a.points), (u2, p2, b.points));
            assert!(
                (a.low - b.low).abs() <= 1e-12 * a.low && (a.high - b.high).abs() <= 1e-12 * a.high
            );
        }
        // Already computed in this process: kept, and `false` says so.
        assert!(!seed(back.clone()).unwrap());
        let mut foreign = back;
        foreign.key = "0000000000000000".into();
        let e = seed(foreign).unwrap_err().to_string();
        assert!(
            e.contains("made from other data") && e.contains(&t.key),
            "{e}"
        );
    }
}
