//! The pruning tests (moved from `prune.rs` as they were).

use super::plan::ratio_values;
use super::*;
use crate::model::Logits;
use crate::synthetic::{gguf_bytes, SyntheticDType, FFN, HEAD_DIM, HIDDEN, KV_HEADS, LAYERS};
use crate::weights::LayerWeights;
use edgefit_kernels::Matrix;

const TOKENS: [u32; 7] = [5, 77, 140, 200, 33, 9, 250];

fn load(dtype: SyntheticDType, weights: WeightsFormat) -> Model {
    let bytes = gguf_bytes(7, dtype).unwrap();
    let options = LoadOptions {
        weights,
        ..Default::default()
    };
    crate::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
        .unwrap()
        .0
}

fn synthetic() -> Model {
    load(SyntheticDType::F32, WeightsFormat::F32)
}

/// The synthetic model with its f32 layer weights edited.
fn edited(edit: impl Fn(usize, &mut LayerWeights)) -> Model {
    let m = synthetic();
    let mut w = m.weights.clone();
    for (l, lw) in w.layers.iter_mut().enumerate() {
        edit(l, lw);
    }
    Model::new(m.config.clone(), w)
}

fn data(m: &mut Matrix) -> (&mut Vec<f32>, usize) {
    match m {
        Matrix::F32 { data, cols, .. } => (data, *cols),
        _ => panic!("tests edit f32 weights"),
    }
}

fn zero_col(m: &mut Matrix, c: usize) {
    let (d, cols) = data(m);
    for row in d.chunks_exact_mut(cols) {
        row[c] = 0.0;
    }
}

fn zero_row(m: &mut Matrix, r: usize) {
    let (d, cols) = data(m);
    d[r * cols..(r + 1) * cols].fill(0.0);
}

fn logits(m: &Model) -> Vec<f32> {
    let mut cache = m.new_cache(32);
    m.forward(&TOKENS, &mut cache, Logits::All).unwrap()
}

fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
        / scale
}

fn stats_of(m: &Model) -> ActivationStats {
    let tokens: Vec<u32> = (0..96).map(|i| (i * 37 % 250 + 3) as u32).collect();
    collect_stats(m, &tokens, 32).unwrap()
}

/// Prunes `model` with `plan` under both importance methods and checks each result: valid,
/// the same logits (the removed units contributed exactly nothing), `removed` fewer params.
/// Summation order changes (fewer terms, other SIMD lanes) cost a few ulp: 1e-5 relative.
fn prunes_exactly(model: &Model, plan: PrunePlan, removed: u64) -> Vec<PruneReport> {
    let want = logits(model);
    let stats = stats_of(model);
    let mut reports = Vec::new();
    for importance in [Importance::Magnitude, Importance::Activation] {
        let plan = PrunePlan {
            importance,
            ..plan.clone()
        };
        let (p, r) = prune(model, &plan, Some(&stats)).unwrap();
        p.config.validate().unwrap();
        assert_eq!(p.weights.options.weights, WeightsFormat::F32);
        assert_eq!(
            model.config.params() - p.config.params(),
            removed,
            "{importance:?}: {r:?}"
        );
        assert_eq!(r.params_after, p.config.params());
        assert_eq!(p.config.to_spec().params().total, p.config.params());
        let d = rel_diff(&want, &logits(&p));
        assert!(d < 1e-5, "{importance:?}: relative logit difference {d}");
        reports.push(r);
    }
    reports
}

const H: u64 = HIDDEN as u64;
const D: u64 = HEAD_DIM as u64;

#[test]
fn zeroed_mlp_channels_are_pruned_exactly() {
    let gone = [3, 17, 18, 40, 41, 42, 60, 95];
    let model = edited(|_, lw| gone.iter().for_each(|&j| zero_col(&mut lw.w_down, j)));
    // 96 channels, remove 8: keep round(96 · (1 − 1/12)) = 88.
    let plan = PrunePlan {
        ratios: LayerRatios {
            mlp: 1.0 / 12.0,
            ..Default::default()
        },
        ..Default::default()
    };
    for r in prunes_exactly(&model, plan, LAYERS as u64 * 8 * 3 * H) {
        for l in &r.layers {
            assert_eq!(l.removed_mlp_channels, gone);
        }
        assert_eq!(r.shapes[0].ffn, FFN - 8);
        assert_eq!(
            r.kv_f32_bytes_per_token_after,
            r.kv_f32_bytes_per_token_before
        );
    }
}

#[test]
fn zeroed_query_heads_are_pruned_exactly_one_per_group() {
    // Heads 0,1 read KV head 0; heads 2,3 KV head 1. Zero head 1 and head 2.
    let model = edited(|_, lw| {
        for h in [1, 2] {
            (0..HEAD_DIM).for_each(|d| zero_col(&mut lw.wo, h * HEAD_DIM + d));
        }
    });
    let plan = PrunePlan {
        ratios: LayerRatios {
            heads: 0.5,
            ..Default::default()
        },
        ..Default::default()
    };
    // Per layer: two heads' q rows and o columns.
    for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * 2 * D * H) {
        for l in &r.layers {
            assert_eq!(l.removed_query_heads, [1, 2]);
            assert!(l.removed_kv_heads.is_empty());
        }
        assert_eq!((r.shapes[1].n_heads, r.shapes[1].n_kv_heads), (2, 2));
    }
}

#[test]
fn zeroed_kv_group_is_pruned_exactly() {
    let model = edited(|_, lw| {
        for c in 2 * HEAD_DIM..4 * HEAD_DIM {
            zero_col(&mut lw.wo, c);
        }
    });
    let plan = PrunePlan {
        ratios: LayerRatios {
            kv_heads: 0.5,
            ..Default::default()
        },
        ..Default::default()
    };
    // Per layer: 2 query heads (q rows, o columns) and one KV head (k and v rows).
    let removed = LAYERS as u64 * (2 * 2 + 2) * D * H;
    for r in prunes_exactly(&model, plan, removed) {
        for l in &r.layers {
            assert_eq!(l.removed_kv_heads, [1]);
            assert_eq!(l.removed_query_heads, [2, 3]);
        }
        assert_eq!(
            r.kv_f32_bytes_per_token_after * 2,
            r.kv_f32_bytes_per_token_before
        );
    }
}

#[test]
fn zeroed_rope_pairs_are_pruned_exactly() {
    let pairs = [1usize, 5];
    let model = edited(|_, lw| {
        for h in 0..lw.wq.rows() / HEAD_DIM {
            for &p in &pairs {
                zero_row(&mut lw.wq, h * HEAD_DIM + 2 * p);
                zero_row(&mut lw.wq, h * HEAD_DIM + 2 * p + 1);
            }
        }
    });
    // 8 pairs, keep round(8 · 0.75) = 6.
    let plan = PrunePlan {
        ratios: LayerRatios {
            qk_dims: 0.25,
            ..Default::default()
        },
        ..Default::default()
    };
    let heads = (crate::synthetic::HEADS + KV_HEADS) as u64;
    for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * 2 * heads * H) {
        for (l, s) in r.layers.iter().zip(&r.shapes) {
            assert_eq!(l.removed_qk_pairs, [1, 5]);
            assert_eq!(s.rope_pairs, [0, 2, 3, 4, 6, 7]);
            assert_eq!(s.qk_dim, 12);
        }
        // K shrinks by 4 of 32 dims per KV head: f32 K+V bytes 2·(16+16)·4 → 2·(12+16)·4.
        assert_eq!(r.kv_f32_bytes_per_token_before, LAYERS as u64 * 2 * 32 * 4);
        assert_eq!(r.kv_f32_bytes_per_token_after, LAYERS as u64 * 2 * 28 * 4);
    }
}

#[test]
fn zeroed_v_dims_are_pruned_exactly() {
    let dims = [3usize, 10];
    let model = edited(|_, lw| {
        for h in 0..lw.wo.cols() / HEAD_DIM {
            dims.iter()
                .for_each(|&d| zero_col(&mut lw.wo, h * HEAD_DIM + d));
        }
    });
    let plan = PrunePlan {
        ratios: LayerRatios {
            v_dims: 0.125,
            ..Default::default()
        },
        ..Default::default()
    };
    let heads = (crate::synthetic::HEADS + KV_HEADS) as u64;
    for r in prunes_exactly(&model, plan, LAYERS as u64 * 2 * heads * H) {
        for (l, s) in r.layers.iter().zip(&r.shapes) {
            assert_eq!(l.removed_v_dims, dims);
            assert_eq!(s.v_dim, 14);
        }
        assert_eq!(r.kv_f32_bytes_per_token_after, LAYERS as u64 * 2 * 30 * 4);
    }
}

#[test]
fn identity_block_is_dropped_exactly() {
    let model = edited(|l, lw| {
        if l == 0 {
            for m in [&mut lw.wo, &mut lw.w_down] {
                data(m).0.fill(0.0);
            }
        }
    });
    let plan = PrunePlan {
        layers: 1,
        ..Default::default()
    };
    let block = model.config.uniform_layer().params(HIDDEN);
    for r in prunes_exactly(&model, plan.clone(), block) {
        assert_eq!(r.dropped_layers, [0]);
        assert_eq!(r.removed.layers, 1);
        assert_eq!(r.layers.len(), 1);
        assert_eq!(r.layers[0].layer, 1);
    }
    // Block influence finds the identity wherever it is; magnitude goes by position (the
    // layers before the last one).
    let model = edited(|l, lw| {
        if l == 1 {
            for m in [&mut lw.wo, &mut lw.w_down] {
                data(m).0.fill(0.0);
            }
        }
    });
    let stats = stats_of(&model);
    assert!(stats.layers[1].block_influence.abs() < 1e-12);
    let act = PrunePlan {
        importance: Importance::Activation,
        ..plan.clone()
    };
    let (p, r) = prune(&model, &act, Some(&stats)).unwrap();
    assert_eq!(r.dropped_layers, [1]);
    assert!(rel_diff(&logits(&model), &logits(&p)) < 1e-5);
    let (_, r) = prune(&model, &plan, None).unwrap();
    assert_eq!(r.dropped_layers, [0]);
}

#[test]
fn every_structure_at_once_is_exact_on_zeroed_units() {
    // KV head 1's group, head 1 of group 0, pair 4, V dim 7, channels 0..12, layer 0.
    let model = edited(|l, lw| {
        if l == 0 {
            data(&mut lw.wo).0.fill(0.0);
            data(&mut lw.w_down).0.fill(0.0);
        }
        for c in HEAD_DIM..4 * HEAD_DIM {
            zero_col(&mut lw.wo, c);
        }
        zero_col(&mut lw.wo, 7);
        zero_row(&mut lw.wq, 8);
        zero_row(&mut lw.wq, 9);
        (0..12).for_each(|j| zero_col(&mut lw.w_down, j));
    });
    let plan = PrunePlan {
        ratios: LayerRatios {
            heads: 0.5,
            kv_heads: 0.5,
            qk_dims: 1.0 / 8.0,
            v_dims: 1.0 / 16.0,
            mlp: 0.125,
        },
        layers: 1,
        ..Default::default()
    };
    // Left: one layer with 1 head, 1 KV head, qk 14, v 15, ffn 84.
    let kept = LayerShape {
        n_heads: 1,
        n_kv_heads: 1,
        qk_dim: 14,
        v_dim: 15,
        ffn: 84,
        rope_pairs: vec![0, 1, 2, 3, 5, 6, 7],
    };
    let removed = model.config.params()
        - (model.config.params() - 2 * model.config.uniform_layer().params(HIDDEN)
            + kept.params(HIDDEN));
    for r in prunes_exactly(&model, plan, removed) {
        assert_eq!(r.shapes, std::slice::from_ref(&kept));
        assert_eq!(r.dropped_layers, [0]);
    }
}

/// Deterministic ratios in [0, 0.9).
fn ratios(seed: u64) -> LayerRatios {
    let v = edgefit_kernels::pseudo_random(seed, 5);
    let r = |i: usize| f64::from(v[i].abs()) * 0.9;
    LayerRatios {
        heads: r(0),
        kv_heads: r(1),
        qk_dims: r(2),
        v_dims: r(3),
        mlp: r(4),
    }
}

fn only(which: usize, r: LayerRatios) -> LayerRatios {
    let v = ratio_values(&r);
    let pick = |i: usize| if i == which { v[i] } else { 0.0 };
    LayerRatios {
        heads: pick(0),
        kv_heads: pick(1),
        qk_dims: pick(2),
        v_dims: pick(3),
        mlp: pick(4),
    }
}

/// The result validates and runs, its params equal the estimator's count, and the
/// estimator reproduces its shape from the report's `pruning`.
fn check_result(model: &Model, p: &Model, r: &PruneReport) {
    p.config.validate().unwrap();
    let spec = p.config.to_spec();
    assert_eq!(spec.params().total, p.config.params());
    assert_eq!(r.params_after, p.config.params());
    let kv = edgefit_estimate::kv_bytes_per_token(&spec, KvFormat::F32);
    let by_hand: usize = p
        .config
        .layer_shapes()
        .iter()
        .map(|l| 4 * l.n_kv_heads * (l.qk_dim + l.v_dim))
        .sum();
    assert_eq!(kv, by_hand as u64);
    assert_eq!(r.kv_f32_bytes_per_token_after, kv);
    let again = model.config.to_spec().pruned(&r.pruning).unwrap();
    assert_eq!(again.layers, spec.layers);
    let out = logits(p);
    assert_eq!(out.len(), TOKENS.len() * p.config.vocab);
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn random_plans_validate_run_and_match_the_estimator() {
    let model = synthetic();
    let stats = stats_of(&model);
    let spec = model.config.to_spec();
    let before_kv = edgefit_estimate::kv_bytes_per_token(&spec, KvFormat::F32);
    for seed in 1..=6u64 {
        let all = ratios(seed);
        let mut cases: Vec<LayerRatios> = (0..5).map(|i| only(i, all)).collect();
        cases.push(all);
        cases.push(LayerRatios {
            kv_heads: 0.0,
            ..all
        });
        for (ci, r) in cases.into_iter().enumerate() {
            for importance in [Importance::Magnitude, Importance::Activation] {
                for allocation in [Allocation::Uniform, Allocation::Global] {
                    let plan = PrunePlan {
                        ratios: r,
                        layers: (seed as usize + ci) % 2,
                        importance,
                        allocation,
                        mlp_multiple: if seed % 2 == 0 { 32 } else { 1 },
                        ..Default::default()
                    };
                    let (p, rep) = prune(&model, &plan, Some(&stats)).unwrap();
                    check_result(&model, &p, &rep);
                    // Heads alone keep every KV head; KV heads and dims shrink the cache.
                    let kv = rep.kv_f32_bytes_per_token_after;
                    if ci == 0 {
                        assert_eq!(
                            kv * model.config.n_layers as u64,
                            before_kv * p.config.n_layers as u64
                        );
                    }
                    if allocation == Allocation::Uniform
                        && plan.mlp_multiple == 1
                        && r.kv_heads == 0.0
                    {
                        // Exactly the estimator's rounding of the same ratios.
                        let est = spec
                            .pruned(
                                &edgefit_estimate::Pruning::from_ratios(
                                    &spec,
                                    &edgefit_estimate::PruneRatios {
                                        heads: r.heads,
                                        qk_dims: r.qk_dims,
                                        v_dims: r.v_dims,
                                        mlp: r.mlp,
                                        layers: plan.layers as u32,
                                    },
                                )
                                .unwrap(),
                            )
                            .unwrap();
                        assert_eq!(est.layers, p.config.to_spec().layers, "{plan:?}");
                    }
                    if plan.mlp_multiple == 32 {
                        assert!(p.config.layer_shapes().iter().all(|l| l.ffn % 32 == 0));
                    }
                    // Global allocation removes the uniform totals.
                    if allocation == Allocation::Global && plan.layers == 0 {
                        let uni = PrunePlan {
                            allocation: Allocation::Uniform,
                            mlp_multiple: 1,
                            ..plan.clone()
                        };
                        let (_, u) = prune(&model, &uni, Some(&stats)).unwrap();
                        assert_eq!(u.removed.kv_heads, rep.removed.kv_heads);
                        assert_eq!(u.removed.qk_dims, rep.removed.qk_dims);
                        assert_eq!(u.removed.v_dims, rep.removed.v_dims);
                        if plan.mlp_multiple == 1 {
                            assert_eq!(u.removed.mlp_channels, rep.removed.mlp_channels);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn quantized_input_is_pruned_in_f32_and_per_layer_ratios_apply() {
    let model = load(SyntheticDType::Q4_0, WeightsFormat::W4g32);
    let per = vec![
        LayerRatios {
            mlp: 0.5,
            v_dims: 0.25,
            ..Default::default()
        },
        LayerRatios {
            heads: 0.5,
            qk_dims: 0.5,
            ..Default::default()
        },
    ];
    let plan = PrunePlan {
        per_layer: Some(per),
        ..Default::default()
    };
    let (p, r) = prune(&model, &plan, None).unwrap();
    check_result(&model, &p, &r);
    assert_eq!(p.weights.options.weights, WeightsFormat::F32);
    assert_eq!(p.weights.options.embedding_format(), WeightsFormat::Q8_0);
    assert!(p.weights.layers[0].wq.format_name() == "f32");
    let s = &r.shapes;
    assert_eq!((s[0].ffn, s[0].v_dim, s[0].n_heads), (48, 12, 4));
    assert_eq!((s[1].ffn, s[1].qk_dim, s[1].n_heads), (96, 8, 2));
}

#[test]
fn global_allocation_takes_from_the_layer_with_weak_units() {
    // Layer 0: 48 channels 1000× weaker than the rest; layer 1 uniform.
    let model = edited(|l, lw| {
        if l == 0 {
            let (d, cols) = data(&mut lw.w_down);
            for row in d.chunks_exact_mut(cols) {
                row[..48].iter_mut().for_each(|v| *v *= 1e-3);
            }
        }
    });
    let plan = |allocation| PrunePlan {
        ratios: LayerRatios {
            mlp: 0.25,
            ..Default::default()
        },
        allocation,
        ..Default::default()
    };
    let (_, u) = prune(&model, &plan(Allocation::Uniform), None).unwrap();
    assert_eq!((u.shapes[0].ffn, u.shapes[1].ffn), (72, 72));
    let (p, g) = prune(&model, &plan(Allocation::Global), None).unwrap();
    assert_eq!((g.shapes[0].ffn, g.shapes[1].ffn), (48, 96));
    assert_eq!(
        g.layers[0].removed_mlp_channels,
        (0..48).collect::<Vec<_>>()
    );
    check_result(&model, &p, &g);
}

#[test]
fn activation_importance_sees_a_channel_that_never_fires() {
    // Hidden dims 0..8 stay zero up to layer 0's MLP (zero embedding columns, zero wo rows);
    // channel 5 reads only those dims, with large weights: magnitude keeps it, activation
    // finds it silent.
    let j = 5;
    let m = synthetic();
    let mut w = m.weights.clone();
    (0..8).for_each(|c| zero_col(&mut w.embed, c));
    let lw = &mut w.layers[0];
    (0..8).for_each(|r| zero_row(&mut lw.wo, r));
    for m in [&mut lw.w_gate, &mut lw.w_up] {
        let (d, cols) = data(m);
        let row = &mut d[j * cols..(j + 1) * cols];
        row.fill(0.0);
        row[..8].fill(3.0);
    }
    let (d, cols) = data(&mut lw.w_down);
    d.chunks_exact_mut(cols).for_each(|r| r[j] = 2.0);
    let model = Model::new(m.config.clone(), w);
    let stats = stats_of(&model);
    assert_eq!(stats.layers[0].mlp_mid[j], 0.0);
    let plan = |importance| PrunePlan {
        ratios: LayerRatios {
            mlp: 0.01, // one channel of 96
            ..Default::default()
        },
        importance,
        ..Default::default()
    };
    let (_, mag) = prune(&model, &plan(Importance::Magnitude), Some(&stats)).unwrap();
    let (_, act) = prune(&model, &plan(Importance::Activation), Some(&stats)).unwrap();
    assert_eq!(act.layers[0].removed_mlp_channels, [j]);
    assert_eq!(mag.layers[0].removed_mlp_channels.len(), 1);
    assert_ne!(mag.layers[0].removed_mlp_channels, [j]);
}

#[test]
fn stats_have_the_model_shape_and_bad_calibration_is_refused() {
    let model = synthetic();
    let s = stats_of(&model);
    assert_eq!((s.tokens, s.windows, s.layers.len()), (96, 3, LAYERS));
    for l in &s.layers {
        assert_eq!(l.attn_out.len(), model.config.q_dim());
        assert_eq!(l.mlp_mid.len(), FFN);
        assert!(l.attn_in.iter().all(|&v| v > 0.0));
        assert!(l.block_influence > 0.0 && l.block_influence < 2.0);
    }
    for (tokens, window, name) in [
        (&[][..], 8, "calibration"),
        (&[1, 2][..], 0, "window"),
        (&[1, 2][..], 10_000, "window"),
    ] {
        match collect_stats(&model, tokens, window) {
            Err(EngineError::Setting { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{other:?}"),
        }
    }
    assert!(collect_stats(&model, &[100_000], 8).is_err());
}

#[test]
fn bad_plans_are_refused_naming_the_knob() {
    let model = synthetic();
    let stats = stats_of(&model);
    let r = |f: fn(&mut LayerRatios)| {
        let mut r = LayerRatios::default();
        f(&mut r);
        r
    };
    let cases: Vec<(PrunePlan, &str)> = vec![
        (
            PrunePlan {
                ratios: r(|r| r.heads = f64::NAN),
                ..Default::default()
            },
            "heads",
        ),
        (
            PrunePlan {
                ratios: r(|r| r.mlp = 1.0),
                ..Default::default()
            },
            "mlp",
        ),
        (
            PrunePlan {
                ratios: r(|r| r.qk_dims = -0.1),
                ..Default::default()
            },
            "qk_dims",
        ),
        (
            PrunePlan {
                ratios: r(|r| r.v_dims = f64::INFINITY),
                ..Default::default()
            },
            "v_dims",
        ),
        (
            PrunePlan {
                layers: 2,
                ..Default::default()
            },
            "layers",
        ),
        (
            PrunePlan {
                layers: 1,
                drop_layers: vec![1],
                ..Default::default()
            },
            "layers",
        ),
        (
            PrunePlan {
                drop_layers: vec![5],
                ..Default::default()
            },
            "drop_layers",
        ),
        (
            PrunePlan {
                per_layer: Some(vec![LayerRatios::default()]),
                ..Default::default()
            },
            "per_layer",
        ),
        (
            PrunePlan {
                per_layer: Some(vec![LayerRatios::default(), r(|r| r.kv_heads = 1.5)]),
                ..Default::default()
            },
            "per_layer.kv_heads",
        ),
        (
            PrunePlan {
                per_layer: Some(vec![LayerRatios::default(); 2]),
                allocation: Allocation::Global,
                ..Default::default()
            },
            "allocation",
        ),
        (
            PrunePlan {
                mlp_multiple: 0,
                ..Default::default()
            },
            "mlp_multiple",
        ),
    ];
    for (plan, knob) in cases {
        match prune(&model, &plan, Some(&stats)) {
            Err(EngineError::Setting { name, .. }) => assert_eq!(name, knob, "{plan:?}"),
            Err(e) => panic!("{plan:?}: {e}"),
            Ok(_) => panic!("{plan:?} accepted"),
        }
    }
    // Activation needs statistics of this model.
    let act = PrunePlan {
        importance: Importance::Activation,
        ..Default::default()
    };
    let err = prune(&model, &act, None).err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("calibration")));
    let (small, _) = prune(
        &model,
        &PrunePlan {
            ratios: r(|r| r.mlp = 0.5),
            ..Default::default()
        },
        None,
    )
    .unwrap();
    assert!(matches!(
        prune(&small, &act, Some(&stats)),
        Err(EngineError::Setting {
            name: "calibration",
            ..
        })
    ));
    // Parsing the CLI's words.
    assert_eq!(
        "activation".parse::<Importance>().unwrap(),
        Importance::Activation
    );
    assert!("wanda".parse::<Importance>().is_err());
    assert_eq!("global".parse::<Allocation>().unwrap(), Allocation::Global);
    let plan: PrunePlan = serde_json::from_str(
        r#"{"ratios": {"mlp": 0.3}, "layers": 1, "importance": "activation"}"#,
    )
    .unwrap();
    assert_eq!(plan.mlp_multiple, 1);
    assert!(serde_json::from_str::<PrunePlan>(r#"{"ratio": {}}"#).is_err());
}

#[test]
fn nothing_pruned_is_the_same_model() {
    let model = synthetic();
    let (p, r) = prune(&model, &PrunePlan::default(), None).unwrap();
    assert_eq!(p.config, model.config);
    assert_eq!(r.params_before, r.params_after);
    assert_eq!(logits(&p), logits(&model));
}
