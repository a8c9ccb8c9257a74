//! The thermal model against the published sustained-load traces (`models/validation/thermal/`).
//!
//! Every trace with times is compared: the iPhone 17 Pro traces (Gemma 4 E2B 4-bit, 10 minutes
//! of continuous generation under Core ML / ANE, MLX / GPU and LiteRT-LM / GPU; fractions of
//! the cold burst at stated times) and the TinyBench iPhone 16 Pro (MLX / GPU) and Galaxy S24
//! Ultra (MLC / GPU) runs of Qwen2.5-1.5B 4-bit (per-iteration means, over spans derived from
//! the stated iteration durations: see each file's `time_derivation`). The model runs the same
//! model when a preset exists (Qwen2.5-1.5B), else one of similar size (Gemma 4 E2B →
//! Qwen3-1.7B, both about 2B parameters at 4 bits), on the same device, runtime and unit, at
//! the trace's room temperature when stated; its kept fraction `tok_s(t) / tok_s(0)` (the mean
//! over a sample's span) is compared with the trace's.
//!
//! Tolerance (stated): |model − trace| ≤ 0.35 of the peak at every sample. The device profiles'
//! power and thermal figures are estimates and the phone class's skin limit is fitted (checked
//! leave-one-trace-out below), so this checks that the curve has the right shape and scale.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use edgefit_estimate::thermal::{
    ThermalReport, PHONE_DIE_CAPACITY_J_PER_K, PHONE_DIE_TO_BODY_K_PER_W, PHONE_SKIN_LIMIT_C,
};
use edgefit_estimate::{
    all_thermal_traces, device, estimate, preset, thermal_traces, Deployment, DeviceProfile,
    GovernorParams, ThermalTrace, WeightFormat,
};

/// Largest gap allowed between the model's and a trace's retained fraction.
const TOLERANCE: f64 = 0.35;

/// The preset run for a trace's model: the model itself, else one of similar size.
fn preset_for(model: &str) -> &str {
    match model {
        "gemma-4-e2b" => "qwen3-1.7b",
        m => m,
    }
}

/// The model's run for a trace on `dev` (the trace's device profile, possibly with a refitted
/// governor), long enough to cover every sample.
fn run(t: &ThermalTrace, dev: &DeviceProfile) -> ThermalReport {
    let end = t.timed().iter().map(|s| s.1).fold(0.0, f64::max);
    let dep = Deployment {
        weights: WeightFormat::W4g32,
        unit: Some(t.unit.parse().unwrap()),
        runtime: Some(t.runtime.parse().unwrap()),
        minutes: (end / 60.0 + 0.5).max(10.0),
        ambient_c: t.ambient_c,
        ..Deployment::default()
    };
    estimate(&preset(preset_for(&t.model)).unwrap(), &dep, dev)
        .unwrap()
        .thermal
}

/// The phone class's fitted parameters: the skin limit the governor holds (°C) and the
/// die-to-body resistance (K/W).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Fit {
    skin_c: f64,
    r_db: f64,
}

/// `dev` with the phone class's governor and resistance but the fitted values `f`.
fn with_fit(dev: &DeviceProfile, f: Fit) -> DeviceProfile {
    let mut d = dev.clone();
    d.thermal.governor = Some(GovernorParams {
        skin_limit_c: Some(f.skin_c),
        ..GovernorParams::for_kind("phone")
    });
    d.thermal.die_to_body_k_per_w = f.r_db;
    d
}

/// The traces with at least two timed samples, each with its device profile.
fn timed_traces() -> Vec<(ThermalTrace, DeviceProfile)> {
    all_thermal_traces()
        .unwrap()
        .into_iter()
        .filter(|t| t.timed().len() >= 2)
        .map(|t| {
            let d = device(&t.soc).unwrap();
            (t, d)
        })
        .collect()
}

/// Sum of squared gaps over every sample of `set` with the parameters `f`.
fn sq_gap(set: &[&(ThermalTrace, DeviceProfile)], f: Fit) -> f64 {
    set.iter()
        .map(|(t, d)| {
            t.compare(&run(t, &with_fit(d, f)))
                .iter()
                .map(|p| (p.model - p.trace).powi(2))
                .sum::<f64>()
        })
        .sum()
}

/// The least-squares fit over `set` on the grid skin 30-40 °C by 0.5 °C × R_db 8-11 K/W by
/// 0.5 K/W.
fn fit(set: &[&(ThermalTrace, DeviceProfile)]) -> Fit {
    let mut best = (
        f64::INFINITY,
        Fit {
            skin_c: 0.0,
            r_db: 0.0,
        },
    );
    for i in 0..=20 {
        for j in 0..=6 {
            let f = Fit {
                skin_c: 30.0 + 0.5 * f64::from(i),
                r_db: 8.0 + 0.5 * f64::from(j),
            };
            let e = sq_gap(set, f);
            if e < best.0 {
                best = (e, f);
            }
        }
    }
    best.1
}

fn label(t: &ThermalTrace) -> String {
    format!("{} {} {}/{}", t.device, t.model, t.runtime, t.unit)
}

#[test]
fn thermal_model_follows_the_timed_traces_within_the_tolerance() {
    let traces = timed_traces();
    assert!(traces.len() >= 5, "{} timed traces", traces.len());
    let mut compared = 0;
    let mut worst: f64 = 0.0;
    for (t, dev) in &traces {
        let r = run(t, dev);
        println!("{}: model peak {:.1} tok/s", label(t), r.initial_tok_s);
        for p in t.compare(&r) {
            println!(
                "  t {:>5.0}-{:<5.0} s: trace {:.2}, model {:.2}",
                p.span_s[0], p.span_s[1], p.trace, p.model
            );
            let gap = (p.model - p.trace).abs();
            worst = worst.max(gap);
            assert!(
                gap <= TOLERANCE,
                "{} at {:?} s: model {:.2} vs trace {:.2}",
                label(t),
                p.span_s,
                p.model,
                p.trace
            );
            compared += 1;
        }
        // The curve a reader compares: the kept fraction at 2, 5 and 10 minutes.
        println!(
            "  kept at 2 / 5 / 10 min: {:.2} / {:.2} / {:.2}",
            edgefit_estimate::thermal::kept_fraction(&r, 120.0, 120.0),
            edgefit_estimate::thermal::kept_fraction(&r, 300.0, 300.0),
            edgefit_estimate::thermal::kept_fraction(&r, 600.0, 600.0)
        );
    }
    println!("{compared} samples, largest gap {worst:.2} (tolerance {TOLERANCE})");
    assert!(compared >= 15, "{compared} samples compared");
}

#[test]
fn phone_class_fit_is_committed_and_holds_leave_one_trace_out() {
    let traces = timed_traces();
    let phones: Vec<_> = traces.iter().filter(|(_, d)| d.kind == "phone").collect();
    assert!(phones.len() >= 5);
    let all = fit(&phones);
    println!(
        "fitted on all {} traces: skin limit {} °C, R_db {} K/W",
        phones.len(),
        all.skin_c,
        all.r_db
    );
    assert_eq!(
        all.skin_c, PHONE_SKIN_LIMIT_C,
        "PHONE_SKIN_LIMIT_C is not the fit"
    );
    assert_eq!(
        all.r_db, PHONE_DIE_TO_BODY_K_PER_W,
        "PHONE_DIE_TO_BODY_K_PER_W is not the fit"
    );
    for (i, held) in phones.iter().enumerate() {
        let rest: Vec<_> = phones
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, x)| *x)
            .collect();
        let f = fit(&rest);
        let (t, d) = held;
        let worst = t
            .compare(&run(t, &with_fit(d, f)))
            .iter()
            .map(|p| (p.model - p.trace).abs())
            .fold(0.0, f64::max);
        println!(
            "without {}: skin {} °C, R_db {} K/W; held-out largest gap {worst:.2}",
            label(t),
            f.skin_c,
            f.r_db
        );
        assert!(worst <= TOLERANCE, "{} held out: gap {worst:.2}", label(t));
    }
}

#[test]
fn phone_profiles_carry_the_class_thermal_values() {
    for id in edgefit_estimate::device_ids() {
        let d = device(id).unwrap();
        if d.kind != "phone" {
            continue;
        }
        let t = &d.thermal;
        assert_eq!(t.die_to_body_k_per_w, PHONE_DIE_TO_BODY_K_PER_W, "{id}");
        assert_eq!(t.die_capacity_j_per_k, PHONE_DIE_CAPACITY_J_PER_K, "{id}");
        assert_eq!(t.governor, None, "{id}: the class governor applies");
    }
}

#[test]
fn traces_are_exposed_per_device() {
    assert_eq!(thermal_traces("apple-a19-pro").unwrap().len(), 3);
    assert_eq!(thermal_traces("snapdragon-8-gen3").unwrap().len(), 1);
    assert!(thermal_traces("raspberry-pi-5").unwrap().is_empty());
}

#[test]
fn trace_views_give_the_chart_its_points_and_name_unknown_devices() {
    let v = edgefit_estimate::trace_views("apple-a19-pro").unwrap();
    assert_eq!(v.len(), 3);
    for t in &v {
        assert_eq!(t.points.len(), 4, "{}", t.trace.runtime);
        assert_eq!(t.points[0].fraction, 1.0);
        assert_eq!(t.points[3].span_s, [600.0, 600.0]);
        let r = t.reference_tok_s.unwrap();
        assert_eq!(t.points[0].tok_s, Some(r));
    }
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json[0]["soc"], "apple-a19-pro");
    assert!(json[0]["points"][1]["span_s"].is_array());
    let s24 = edgefit_estimate::trace_views("snapdragon-8-gen3").unwrap();
    assert_eq!(s24[0].points.len(), 2);
    assert!((s24[0].points[1].fraction - 8.77 / 11.34).abs() < 1e-12);
    assert!(edgefit_estimate::trace_views("raspberry-pi-5")
        .unwrap()
        .is_empty());
    let e = edgefit_estimate::trace_views("no-such-phone")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no-such-phone"), "{e}");
}
