//! The validation set and `edgefit validate`: the estimator against published measurements.
//!
//! # The set
//! `models/validation/*.json`, one file per source (`{"source": {...}, "points": [...]}`),
//! copied verbatim from the transcription (every number as published, batch 1), plus
//! `models/validation/map.json`, which maps the files' slugs to the estimator's ids (`soc` →
//! device profile, `model` → preset, `weights` → weight format, per point where the slug is
//! ambiguous) and lists the points that are skipped, each with its reason. A point whose
//! device, model or weight format has no mapping is skipped with that reason, never guessed.
//!
//! # What is estimated per point
//! The deployment is the point's: weight format, runtime, unit, threads (default: the
//! runtime's / device's), prompt tokens (default [`DEFAULT_PROMPT`] when the source gives only
//! decode), generated tokens (default [`DEFAULT_GEN`]), the context (the point's
//! `context_tokens` where published, at least prompt + generated; else the next power of two
//! ≥ prompt + generated, at least 256: it matters only to a static-shape runtime such as QNN,
//! whose attention spans the whole context), the KV format the runtime's exported models hold
//! where its profile fixes one (`kv_cache`: LiteRT's f32), else f16 (what the other runtimes
//! measured use),
//! batch 1, the top frequency (no throttling). Prefill tok/s and decode tok/s
//! are compared with the measured figures where the source gives them. A source whose harness
//! times its decode from another cache depth than the point's prompt (`decode_depth` in
//! `map.json`: llama-bench's `tgN` test generates into an empty cache) has its decode
//! estimated at that depth (the steps at cache lengths `d, d+1, …`, `d` at least 1), its
//! prefill at the prompt. The output head takes the format the runtime's files store it in
//! where that differs from the layers' (the runtime profile's `quantized_head`: llama.cpp's
//! quantizer writes `output.weight` as Q6_K, or Q8_0 when the hidden size is not a multiple
//! of 256), as every estimate does.
//!
//! # The fit ([`fit_runtimes`]): two or three numbers per runtime × unit, shared by every device
//! For each (runtime, unit) with points, in this order, from the committed priors:
//! 1. `compute_fraction` `η_c` from its prefill points;
//! 2. `decode_bandwidth_fraction` `η_d` from its decode points — on a runtime × unit with a
//!    kernel roof, only from points of unquantized formats (f32/f16/bf16, which no unpacking
//!    kernel bounds), else the prior stays;
//! 3. the kernel roof from its decode points of quantized formats: `decode_weights_per_cycle`
//!    `ρ` on a CPU (bisection in log space over [[`FIT_MIN`], [`crate::runtime::MAX_WEIGHTS_PER_CYCLE`]]),
//!    `decode_weights_per_flop` `κ` on a GPU (over [5·10⁻⁵, [`crate::runtime::MAX_WEIGHTS_PER_FLOP`]],
//!    per GPU interface where the profile has `api_fractions`);
//! 4. `η_c` again with the new `η_d` and `ρ`.
//!
//! Before these four, a runtime unit whose profile lists `units.<unit>.op_overhead_us` among its
//! `fitted` fields (LiteRT's CPU) has its per-op cost `o` searched on a grid (0–96 µs, each value
//! at most what every decode point of the unit leaves after its bytes at the theoretical
//! bandwidth and the per-pass cost, over its ops): at each value the four steps are redone for
//! that unit, and the value kept is the one whose refit gives the smallest mean over sources of
//! each source's mean `|ln(estimate / measured)|` of decode. One point cannot tell a fixed cost
//! per op from a rate; points of models of different sizes on one device can.
//!
//! Each step solves, per point, the value that makes the estimate equal the measurement (the
//! estimate is monotone in it; bisection over [[`FIT_MIN`], 1] (fractions) or the ρ and κ ranges above; a point beyond
//! reach at a bound takes that bound). The value kept is a **median of per-source medians**:
//! each source's points give the median of their solutions, and the parameter is the median
//! over the sources, so each source is one vote — a source with many points (one device, one
//! harness, one app) cannot outvote the others, and one outlier cannot drag a runtime. Both
//! medians are taken in log space (`log_median`: the geometric mean of the middle two for an
//! even count; the values are fractions and rates, compared by ratio). No other figure is
//! fitted (but the per-op cost above). A (runtime, unit) whose points do not constrain a parameter takes the log-space
//! median of that parameter over the other runtimes fitted on the same unit (pooled); only a
//! unit no point constrains keeps the committed prior.
//! Deterministic: same files, same numbers.
//!
//! # The figures
//! Error per point `(estimated − measured) / measured`; MAPE = mean of `|error|` × 100, by
//! phase, unit, runtime and device. **Leave-one-source-out** (LOSO): for each source, refit
//! without its points, estimate them, and pool those errors: the figure to trust for a device
//! or runtime the set has not seen. The ranges of [`crate::uncertainty`] come from the LOSO
//! residuals; "inside range" counts the points whose measurement lies in the range the
//! estimator prints for them.

mod refit;
mod set;

pub use refit::{fit_all, fit_runtimes};
use refit::{measured, speeds_of};
pub use set::{cases, slug_map, validation_files, Case, Point, Skipped, SlugMap, ValidationFile};
pub(crate) use set::{MAP, VALIDATION_FILES};

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::band::{band_of, Bands, Phase, MIN_POINTS};
use crate::error::Result;
use crate::format::{ComputeUnit, WeightFormat};
use crate::runtime::{Runtime, RuntimeProfile};
pub use crate::source::Source;

/// Prompt tokens assumed when a source gives only decode.
pub const DEFAULT_PROMPT: u32 = 64;
/// Generated tokens assumed when a source does not say.
pub const DEFAULT_GEN: u32 = 128;
/// Lowest value a fitted fraction may take.
pub const FIT_MIN: f64 = 0.002;

/// One point's estimate against its measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Source id.
    pub source: String,
    /// Point id.
    pub id: String,
    /// Device profile id.
    pub device: String,
    /// Preset id.
    pub model: String,
    /// Runtime.
    pub runtime: Runtime,
    /// Unit.
    pub unit: ComputeUnit,
    /// Weight format estimated.
    pub weights: WeightFormat,
    /// Prompt tokens estimated.
    pub prompt_tokens: u32,
    /// Threads estimated (CPU).
    pub threads: Option<u32>,
    /// Phase.
    pub phase: Phase,
    /// Measured tok/s.
    pub measured: f64,
    /// Estimated tok/s, fitted on the whole set.
    pub estimated: f64,
    /// `(estimated − measured)/measured`, %.
    pub error_pct: f64,
    /// Estimated with the fit that left this point's source out.
    pub loso_estimated: f64,
    /// Its error, %.
    pub loso_error_pct: f64,
    /// The range the estimator prints for this point.
    pub range: [f64; 2],
    /// Measured within `range`.
    pub inside_range: bool,
}

/// MAPE of a group of rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mape {
    /// `phase`, `unit`, `runtime` or `device`.
    pub by: String,
    /// The group's key (`decode`, `npu cpu`...); phase-split groups read `key phase`.
    pub key: String,
    /// Rows.
    pub points: usize,
    /// In-sample MAPE, %.
    pub mape_pct: f64,
    /// Leave-one-source-out MAPE, %.
    pub loso_mape_pct: f64,
}

/// Everything `edgefit validate` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidationReport {
    /// Sources used.
    pub sources: Vec<Source>,
    /// Per point and phase.
    pub rows: Vec<Row>,
    /// Skipped points.
    pub skipped: Vec<Skipped>,
    /// MAPE tables.
    pub mape: Vec<Mape>,
    /// The fitted runtime parameters on the whole set: (runtime, unit, compute_fraction,
    /// decode_bandwidth_fraction, decode kernel roof: `decode_weights_per_cycle` on a CPU,
    /// `decode_weights_per_flop` on a GPU).
    pub fitted: Vec<(Runtime, ComputeUnit, f64, f64, Option<f64>)>,
    /// The fitted per-GPU-interface figures on the whole set: (runtime, unit, interface,
    /// compute_fraction, decode_bandwidth_fraction, decode_weights_per_flop)
    /// ([`crate::runtime::ApiFractions`]; the roof is the unit's where the interface has none).
    #[serde(default)]
    pub fitted_api: Vec<(Runtime, ComputeUnit, String, f64, f64, Option<f64>)>,
    /// The fitted per-op overheads (µs) on the whole set, of the runtime units whose profile
    /// lists `units.<unit>.op_overhead_us` among its `fitted` fields.
    #[serde(default)]
    pub fitted_overhead: Vec<(Runtime, ComputeUnit, f64)>,
    /// Fraction of rows inside their printed range.
    pub inside_range: f64,
    /// The bands.
    pub bands: Bands,
}

struct Loso {
    /// (case index, phase) → (in-sample estimate, LOSO estimate)
    est: Vec<(usize, Phase, f64, f64)>,
    all: Vec<RuntimeProfile>,
}

fn run_loso(cases: &[Case]) -> Result<Loso> {
    let refs: Vec<&Case> = cases.iter().collect();
    let all = fit_runtimes(&refs)?;
    let mut sources: Vec<&str> = cases.iter().map(|c| c.source.as_str()).collect();
    sources.sort();
    sources.dedup();
    let mut loso_est: BTreeMap<(usize, Phase), f64> = BTreeMap::new();
    for s in &sources {
        let train: Vec<&Case> = cases.iter().filter(|c| c.source != *s).collect();
        let fitted = fit_runtimes(&train)?;
        for (i, c) in cases.iter().enumerate().filter(|(_, c)| c.source == *s) {
            let (p, d) = speeds_of(c, &fitted)?;
            loso_est.insert((i, Phase::Prefill), p);
            loso_est.insert((i, Phase::Decode), d);
        }
    }
    let mut est = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (p, d) = speeds_of(c, &all)?;
        for (phase, e) in [(Phase::Prefill, p), (Phase::Decode, d)] {
            if measured(c, phase).is_some() {
                est.push((i, phase, e, loso_est[&(i, phase)]));
            }
        }
    }
    Ok(Loso { est, all })
}

fn bands_from(cases: &[Case], loso: &Loso) -> Bands {
    let mut by_unit = Vec::new();
    let mut pooled = Vec::new();
    for phase in [Phase::Prefill, Phase::Decode] {
        // Both residuals of each point: against the LOSO estimate (out of sample) and against
        // the estimate the user sees (fitted on the whole set).
        let res = |u: Option<ComputeUnit>| -> Vec<f64> {
            loso.est
                .iter()
                .filter(|(i, p, _, _)| *p == phase && u.is_none_or(|u| cases[*i].unit == u))
                .flat_map(|(i, _, e, l)| {
                    measured(&cases[*i], phase)
                        .map(|m| [m / l, m / e])
                        .into_iter()
                        .flatten()
                })
                .collect()
        };
        let all = res(None);
        if !all.is_empty() {
            pooled.push((
                phase,
                band_of(all, format!("all units, {}", phase.as_str())),
            ));
        }
        for u in ComputeUnit::ALL {
            let r = res(Some(*u));
            if r.len() >= MIN_POINTS {
                by_unit.push((*u, phase, band_of(r, format!("{u} {}", phase.as_str()))));
            }
        }
    }
    Bands { by_unit, pooled }
}

/// The bands of [`crate::uncertainty`], from the bundled set.
pub fn compute_bands() -> Result<Bands> {
    let (cases, _) = cases()?;
    let loso = run_loso(&cases)?;
    Ok(bands_from(&cases, &loso))
}

fn mape(rows: &[&Row], by: &str, key: String) -> Mape {
    let n = rows.len().max(1) as f64;
    Mape {
        by: by.into(),
        key,
        points: rows.len(),
        mape_pct: rows.iter().map(|r| r.error_pct.abs()).sum::<f64>() / n,
        loso_mape_pct: rows.iter().map(|r| r.loso_error_pct.abs()).sum::<f64>() / n,
    }
}

/// Estimates every point of the bundled set (see the module docs).
pub fn validate() -> Result<ValidationReport> {
    let (cases, skipped) = cases()?;
    let loso = run_loso(&cases)?;
    let bands = bands_from(&cases, &loso);
    let mut rows = Vec::new();
    for &(i, phase, e, l) in &loso.est {
        let c = &cases[i];
        let m = measured(c, phase).unwrap_or(f64::NAN);
        let b = bands.band(c.unit, phase);
        let range = [e * b.low, e * b.high];
        rows.push(Row {
            source: c.source.clone(),
            id: c.point.id.clone(),
            device: c.device_id.clone(),
            model: c.preset.clone(),
            runtime: c.runtime,
            unit: c.unit,
            weights: c.deployment.weights,
            prompt_tokens: c.deployment.prompt_tokens,
            threads: crate::speed::speeds(
                &c.spec,
                &c.deployment,
                &c.device,
                loso.all
                    .iter()
                    .find(|p| p.id == c.runtime)
                    .unwrap_or(&loso.all[0]),
            )?
            .threads,
            phase,
            measured: m,
            estimated: e,
            error_pct: (e - m) / m * 100.0,
            loso_estimated: l,
            loso_error_pct: (l - m) / m * 100.0,
            range,
            inside_range: m >= range[0] && m <= range[1],
        });
    }
    let mut tables = Vec::new();
    for phase in [Phase::Prefill, Phase::Decode] {
        let r: Vec<&Row> = rows.iter().filter(|r| r.phase == phase).collect();
        tables.push(mape(&r, "phase", phase.as_str().into()));
    }
    type KeyFn = fn(&Row) -> String;
    let keys: [(&str, KeyFn); 3] = [
        ("unit", |r| r.unit.to_string()),
        ("runtime", |r| r.runtime.to_string()),
        ("device", |r| r.device.clone()),
    ];
    for (by, key) in keys {
        let mut ks: Vec<String> = rows.iter().map(key).collect();
        ks.sort();
        ks.dedup();
        for k in ks {
            for phase in [Phase::Prefill, Phase::Decode] {
                let r: Vec<&Row> = rows
                    .iter()
                    .filter(|r| r.phase == phase && key(r) == k)
                    .collect();
                if !r.is_empty() {
                    tables.push(mape(&r, by, format!("{k} {}", phase.as_str())));
                }
            }
        }
    }
    let fitted = loso
        .all
        .iter()
        .flat_map(|p| {
            p.units
                .iter()
                .filter(|(u, ru)| {
                    !ru.device_figures && cases.iter().any(|c| c.runtime == p.id && c.unit == **u)
                })
                .map(|(u, ru)| {
                    (
                        p.id,
                        *u,
                        ru.compute_fraction,
                        ru.decode_bandwidth_fraction,
                        ru.decode_weights_per_cycle.or(ru.decode_weights_per_flop),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let fitted_api = loso
        .all
        .iter()
        .flat_map(|p| {
            p.units
                .iter()
                .flat_map(|(u, ru)| {
                    ru.api_fractions.iter().map(|(a, f)| {
                        (
                            p.id,
                            *u,
                            a.clone(),
                            f.compute_fraction,
                            f.decode_bandwidth_fraction,
                            f.decode_weights_per_flop.or(ru.decode_weights_per_flop),
                        )
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let fitted_overhead = loso
        .all
        .iter()
        .flat_map(|p| {
            p.units
                .iter()
                .filter(|(u, _)| {
                    p.fitted
                        .iter()
                        .any(|f| *f == format!("units.{u}.op_overhead_us"))
                })
                .map(|(u, ru)| (p.id, *u, ru.op_overhead_us))
                .collect::<Vec<_>>()
        })
        .collect();
    let inside = rows.iter().filter(|r| r.inside_range).count() as f64 / rows.len().max(1) as f64;
    Ok(ValidationReport {
        sources: validation_files()?.into_iter().map(|f| f.source).collect(),
        rows,
        skipped,
        mape: tables,
        fitted,
        fitted_api,
        fitted_overhead,
        inside_range: inside,
        bands,
    })
}

impl ValidationReport {
    /// The summary README shows between `<!-- validate:begin -->` and `<!-- validate:end -->`:
    /// MAPE by phase (in-sample and LOSO), by unit, runtime and device, the fraction inside the
    /// ranges, the bands and the counts. Deterministic text.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let n_points: std::collections::BTreeSet<&str> =
            self.rows.iter().map(|r| r.id.as_str()).collect();
        let _ = writeln!(
            s,
            "{} points from {} sources ({} rows: a point may give prefill and decode), {} skipped",
            n_points.len(),
            self.sources.len(),
            self.rows.len(),
            self.skipped.len()
        );
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<8} {:<34} {:>6} {:>10} {:>10}",
            "by", "group", "rows", "MAPE %", "LOSO %"
        );
        for m in &self.mape {
            let _ = writeln!(
                s,
                "{:<8} {:<34} {:>6} {:>10.1} {:>10.1}",
                m.by, m.key, m.points, m.mape_pct, m.loso_mape_pct
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "inside the printed range: {:.1}% of {} rows",
            self.inside_range * 100.0,
            self.rows.len()
        );
        let pooled =
            (self.bands.pooled.iter()).map(|(phase, b)| (format!("all {}", phase.as_str()), b));
        let by_unit =
            (self.bands.by_unit.iter()).map(|(u, phase, b)| (format!("{u} {}", phase.as_str()), b));
        for (label, b) in pooled.chain(by_unit) {
            let _ = writeln!(
                s,
                "band {label:<16} x{:.2} .. x{:.2} ({} residuals)",
                b.low, b.high, b.points
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "fitted (whole set): runtime unit compute_fraction decode_bandwidth_fraction decode_kernel_roof"
        );
        let _ = writeln!(
            s,
            "  (decode_kernel_roof: cpu decode_weights_per_cycle, gpu and npu decode_weights_per_flop)"
        );
        let roof = |w: &Option<f64>| match w {
            Some(w) if *w < 0.1 => format!("{w:.4}"),
            Some(w) => format!("{w:.3}"),
            None => "-".into(),
        };
        for (rt, u, cf, bw, w) in &self.fitted {
            let _ = writeln!(s, "  {rt:<10} {u:<4} {cf:.3} {bw:.3} {}", roof(w));
        }
        for (rt, u, a, cf, bw, w) in &self.fitted_api {
            let _ = writeln!(
                s,
                "  {rt:<10} {:<4} {cf:.3} {bw:.3} {}",
                format!("{u}/{a}"),
                roof(w)
            );
        }
        for (rt, u, o) in &self.fitted_overhead {
            let _ = writeln!(s, "  {rt:<10} {u:<4} op_overhead_us {o}");
        }
        s
    }

    /// The whole text `edgefit validate` prints: every row, the skipped points, the summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<50} {:<7} {:>5} {:>3} {:>10} {:>10} {:>8} {:>10} {:>8} {:>21}",
            "point",
            "phase",
            "P",
            "t",
            "measured",
            "estimate",
            "err %",
            "LOSO est",
            "LOSO %",
            "range"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<50} {:<7} {:>5} {:>3} {:>10.2} {:>10.2} {:>+8.1} {:>10.2} {:>+8.1} {:>9.2}..{:<9.2}{}",
                r.id,
                r.phase.as_str(),
                r.prompt_tokens,
                r.threads.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                r.measured,
                r.estimated,
                r.error_pct,
                r.loso_estimated,
                r.loso_error_pct,
                r.range[0],
                r.range[1],
                if r.inside_range { "" } else { " out" }
            );
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "\nskipped");
            for k in &self.skipped {
                let _ = writeln!(s, "  {} ({}): {}", k.id, k.source, k.reason);
            }
        }
        let _ = writeln!(s);
        s.push_str(&self.summary());
        s
    }
}
