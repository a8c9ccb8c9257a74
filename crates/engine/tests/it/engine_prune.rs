// The engine swaps in a pruned model: calibration in pieces equals one run, the pruned model
// keeps the loaded formats, kernel and KV format, generates, and `restore` brings the loaded
// one back. Native only (the native clock).
#![cfg(not(target_arch = "wasm32"))]

use crate::common::synthetic::synthetic_engine;
use edgefit_engine::prune::merge_stats;
use edgefit_engine::synthetic::SyntheticDType;
use edgefit_engine::{Engine, GenerateOptions, Importance, LayerRatios, LoadOptions, PrunePlan};

const TEXT: &str =
    "the theme of the thesis: then the thing went there, the other one then the end. ";

fn engine() -> Engine {
    synthetic_engine(7, SyntheticDType::F32, LoadOptions::default())
}

#[test]
fn calibration_in_pieces_equals_one_run() {
    let e = engine();
    let text = TEXT.repeat(4);
    let tokens = e.calibration_tokens(&text, 100).unwrap();
    assert!(tokens.len() > 40, "{} tokens", tokens.len());
    let whole = e.calibrate_tokens(&tokens, 16).unwrap();
    let mut merged = e.calibrate_tokens(&tokens[..32], 16).unwrap();
    for piece in tokens[32..].chunks(48) {
        merged = merge_stats(merged, &e.calibrate_tokens(piece, 16).unwrap()).unwrap();
    }
    assert_eq!(merged.tokens, whole.tokens);
    assert_eq!(merged.windows, whole.windows);
    for (a, b) in merged.layers.iter().zip(&whole.layers) {
        let close = |x: &[f64], y: &[f64]| {
            x.iter()
                .zip(y)
                .all(|(p, q)| (p - q).abs() <= 1e-9 * q.abs().max(1.0))
        };
        assert!(close(&a.attn_in, &b.attn_in) && close(&a.attn_out, &b.attn_out));
        assert!(close(&a.mlp_in, &b.mlp_in) && close(&a.mlp_mid, &b.mlp_mid));
        assert!((a.block_influence - b.block_influence).abs() < 1e-12);
    }
    let all = e.calibrate(&text, 100, 16).unwrap();
    assert_eq!(all, whole);
    assert!(e.calibration_tokens("", 10).is_err());
}

#[test]
fn the_calibration_stepper_equals_one_run_and_refuses_bad_settings() {
    let e = engine();
    let text = TEXT.repeat(4);
    let whole = e.calibrate(&text, 100, 16).unwrap();
    let mut cal = e.begin_calibration(&text, 100, 16).unwrap();
    assert_eq!(cal.tokens().len(), whole.tokens);
    assert!(cal.stats().is_none() && !cal.done());
    let mut ran = Vec::new();
    for windows in [1, 2, 1, 100, 5] {
        ran.push(e.calibrate_step(&mut cal, windows).unwrap());
        assert_eq!(cal.done(), cal.stats().is_some());
    }
    // 16, then 2·16 more, 16 more, then the rest; a finished calibration runs nothing more.
    let n = whole.tokens;
    assert_eq!(ran, [16, 48, 64, n, n]);
    let stats = cal.stats().unwrap();
    assert_eq!((stats.tokens, stats.windows), (whole.tokens, whole.windows));
    for (a, b) in stats.layers.iter().zip(&whole.layers) {
        let close = |x: &[f64], y: &[f64]| {
            x.iter()
                .zip(y)
                .all(|(p, q)| (p - q).abs() <= 1e-9 * q.abs().max(1.0))
        };
        assert!(close(&a.attn_in, &b.attn_in) && close(&a.attn_out, &b.attn_out));
        assert!(close(&a.mlp_in, &b.mlp_in) && close(&a.mlp_mid, &b.mlp_mid));
        assert!((a.block_influence - b.block_influence).abs() < 1e-12);
    }
    let context = e.unpruned_model().config.context_length;
    assert!(e.begin_calibration(&text, 100, 0).is_err());
    assert!(e.begin_calibration(&text, 100, context + 1).is_err());
    assert!(e.begin_calibration("", 100, 16).is_err());
    let mut cal = e.begin_calibration(&text, 100, 16).unwrap();
    assert!(e.calibrate_step(&mut cal, 0).is_err());
}

#[test]
fn prune_swaps_in_a_smaller_model_in_the_loaded_formats_and_restore_brings_it_back() {
    let mut e = engine();
    e.set_kv_format(edgefit_estimate::KvFormat::F16);
    let opts = GenerateOptions {
        max_tokens: 4,
        ..GenerateOptions::default()
    };
    e.generate("the", opts, &mut |_| {}).unwrap();
    let before = e.info();
    let stats = e.calibrate(&TEXT.repeat(3), 64, 32).unwrap();
    let plan = PrunePlan {
        ratios: LayerRatios {
            mlp: 0.25,
            ..LayerRatios::default()
        },
        importance: Importance::Activation,
        ..PrunePlan::default()
    };
    let report = e.prune(&plan, Some(&stats)).unwrap();
    assert!(e.is_pruned());
    assert_eq!(report.params_before, before.params);
    assert!(report.params_after < report.params_before);
    let after = e.info();
    assert_eq!(after.params, report.params_after);
    assert_eq!(
        after.weights.weights, before.weights.weights,
        "the loaded format again"
    );
    assert_eq!(e.metrics().kv_format, "f16");
    assert_eq!(e.metrics().kv_tokens, 0, "a fresh cache");
    assert!(e.metrics().weights_bytes < before.weights_bytes);
    assert_eq!(e.model_spec().params().total, report.params_after);
    e.generate("the", opts, &mut |_| {}).unwrap();
    assert!(e.metrics().generated_tokens > 0);

    // A second prune starts from the loaded model, so the same statistics still fit.
    let report2 = e
        .prune(
            &PrunePlan {
                ratios: LayerRatios {
                    mlp: 0.5,
                    ..LayerRatios::default()
                },
                ..plan.clone()
            },
            Some(&stats),
        )
        .unwrap();
    assert_eq!(report2.params_before, before.params);
    assert!(report2.params_after < report.params_after);
    // Activation importance without statistics is refused and changes nothing.
    assert!(e.prune(&plan, None).is_err());
    assert_eq!(e.info().params, report2.params_after);

    assert!(e.restore());
    assert!(!e.is_pruned());
    assert_eq!(e.info().params, before.params);
    assert_eq!(e.metrics().kv_format, "f16");
    assert!(!e.restore(), "nothing to restore twice");
    e.generate("the", opts, &mut |_| {}).unwrap();
}

/// Converting layer by layer while pruning (what the engine does, to keep its peak memory to
/// one f32 layer) gives exactly the weights of pruning to f32 and converting afterwards.
#[test]
fn pruning_into_a_format_equals_pruning_then_converting() {
    use edgefit_engine::prune::{prune, prune_into};
    use edgefit_engine::{Logits, Model, WeightsFormat};
    let e = engine();
    let base = e.unpruned_model();
    let plan = PrunePlan {
        ratios: LayerRatios {
            mlp: 0.3,
            v_dims: 0.25,
            ..LayerRatios::default()
        },
        ..PrunePlan::default()
    };
    let options = LoadOptions {
        weights: WeightsFormat::W4g32,
        embedding: Some(base.weights.options.embedding_format()),
        ..LoadOptions::default()
    };
    let (f32_model, report) = prune(base, &plan, None).unwrap();
    assert_eq!(f32_model.weights.options.weights, WeightsFormat::F32);
    let Model {
        config, weights, ..
    } = f32_model;
    let mut after = Model::new(config, weights.into_converted(options).unwrap());
    after.kernel = base.kernel;
    after.kv_format = base.kv_format;
    let (direct, report2) = prune_into(base, &plan, None, options).unwrap();
    assert_eq!(report2.shapes, report.shapes);
    assert_eq!(direct.config, after.config);
    assert_eq!(direct.weights.bytes(), after.weights.bytes());
    assert_eq!(direct.weights.summary(), after.weights.summary());
    let tokens = e.tokenizer().encode(TEXT).unwrap();
    let run = |m: &Model| {
        let mut cache = m.new_cache(64);
        m.forward(&tokens, &mut cache, Logits::All).unwrap()
    };
    assert_eq!(direct.kernel, after.kernel);
    let (a, b) = (run(&direct), run(&after));
    assert!(
        a == b,
        "logits differ by up to {}",
        a.iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    );
}
