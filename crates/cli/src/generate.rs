//! `edgefit generate --estimate DEVICE`: the native twin of the page's "Estimate vs measured"
//! table. After a turn, the run's deployment (`edgefit_estimate::compare::measured_deployment`)
//! is estimated on DEVICE and its rows (`comparison_rows`) are printed: a table on stderr, or
//! the `estimate_comparison` field of the turn's JSON line.
//!
//! DEVICE is a bundled device id, a device profile JSON path, or `this-browser`: the
//! `this-browser` profile filled with this machine's micro-benchmarks (the same probes the page
//! runs in a tab, with the kernel the engine runs; a few seconds), which is the loop the page
//! closes, natively.

use anyhow::{Context, Result};
use edgefit_engine::microbench::{self, MicrobenchConfig};
use edgefit_engine::native::NativePlatform;
use edgefit_engine::{Engine, Platform};
use edgefit_estimate::compare::{comparison_rows, measured_deployment, ComparisonRow, Measured};
use edgefit_estimate::{estimate, DeviceProfile};
use edgefit_kernels::Kernel;
use serde::Serialize;

/// The device id that means "measure this machine".
pub(crate) const THIS_MACHINE: &str = "this-browser";

/// What `--estimate` adds to a turn.
#[derive(Debug, Serialize)]
pub(crate) struct Comparison {
    /// The device profile's id and name.
    pub device: String,
    pub device_name: String,
    /// The deployment that predicts the run.
    pub deployment: edgefit_estimate::Deployment,
    pub rows: Vec<ComparisonRow>,
}

/// Resolves `--estimate DEVICE` once per run (measuring this machine for [`THIS_MACHINE`],
/// with the kernel `engine` runs, on the threads it runs on: the figures are those of that
/// thread count).
pub(crate) fn device_for(id: &str, engine: &Engine) -> Result<DeviceProfile> {
    if id != THIS_MACHINE {
        return crate::estimate::load_device(id);
    }
    let kernel = Kernel::from_name(&engine.info().kernel).unwrap_or_else(Kernel::best);
    let p = NativePlatform::default();
    let engine_platform = || Box::new(NativePlatform::default()) as Box<dyn Platform>;
    let threads = engine.metrics().threads;
    let pool = edgefit_kernels::Pool::new(threads)
        .with_context(|| format!("a pool of {threads} threads for the micro-benchmarks"))?;
    let mut run =
        microbench::MeasureRun::with_pool(MicrobenchConfig::default(), kernel, None, pool);
    while run.step(&p, &engine_platform) {}
    let m = run.finish();
    // The same profile as the page's, measured here: `m.native` names it as this machine's.
    DeviceProfile::this_browser(&m)
        .context("building the this-browser profile from this machine's measurements")
}

/// The comparison of the engine's latest turn with its estimate on `device`.
pub(crate) fn compare(engine: &Engine, device: &DeviceProfile) -> Result<Comparison> {
    let measured: Measured = serde_json::from_value(serde_json::to_value(engine.metrics())?)
        .context("reading the engine's metrics")?;
    let stored = engine.info().weights.stored_for_comparison();
    let deployment = measured_deployment(&measured, &stored).context("the run to compare")?;
    let spec = engine.model_spec();
    let report = estimate(&spec, &deployment, device).context("estimating the run")?;
    let rows = comparison_rows(&spec, &report, &measured)?;
    Ok(Comparison {
        device: device.id.clone(),
        device_name: device.name.clone(),
        deployment,
        rows,
    })
}

/// The table for a terminal: one line per row.
pub(crate) fn table(c: &Comparison) -> String {
    let mut out = format!(
        "estimate vs measured on {} ({}): weights {}, KV {}\n",
        c.device_name, c.device, c.deployment.weights, c.deployment.kv
    );
    out.push_str(&format!(
        "  {:<26} {:>16} {:>16} {:>9}\n",
        "", "estimate", "measured", "error"
    ));
    let num = |v: Option<f64>, unit: &str| match v {
        None => "-".to_string(),
        Some(v) if unit == "bytes" => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    };
    for r in &c.rows {
        let err = r
            .error_pct
            .map_or("-".to_string(), |e| format!("{e:+.1} %"));
        out.push_str(&format!(
            "  {:<26} {:>16} {:>16} {:>9}\n",
            format!("{} ({})", r.label, r.unit),
            num(r.estimate, &r.unit),
            num(r.measured, &r.unit),
            err
        ));
    }
    out
}
