//! [`Engine::warm_up`]: passes of the loaded model on a throwaway input that change nothing a
//! run sees (same text, same prompt and reused-token counts, same cache), recorded in the
//! metrics, and a budget that is not a number of milliseconds from 0 to 10 s refused by name.
#![cfg(not(target_arch = "wasm32"))]

use crate::common::synthetic::synthetic_engine;
use edgefit_engine::synthetic::SyntheticDType;
use edgefit_engine::{Engine, EngineError, GenerateOptions, LoadOptions, SamplerConfig, WarmUp};

fn engine() -> Engine {
    synthetic_engine(5, SyntheticDType::Q8_0, LoadOptions::default())
}

fn greedy(keep: bool) -> GenerateOptions {
    GenerateOptions {
        max_tokens: 6,
        keep,
        sampler: SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        },
        ..GenerateOptions::default()
    }
}

/// What a run shows: (prompt tokens, reused tokens, KV tokens) after a turn.
type Counts = (usize, usize, usize);

/// Two kept turns; `warm` runs between the load and the first turn and between the turns.
fn two_turns(warm: bool) -> (Vec<String>, Vec<Counts>, Option<WarmUp>) {
    let mut e = engine();
    let mut texts = Vec::new();
    let mut counts = Vec::new();
    let mut last = None;
    for (turn, prompt) in ["the cat", "the theme"].into_iter().enumerate() {
        if warm {
            let before = e.metrics().kv_tokens;
            let w = e
                .warm_up(if turn == 0 { 5.0 } else { 0.0 })
                .expect("warm-up");
            assert_eq!(
                e.metrics().kv_tokens,
                before,
                "the warm-up left the cache alone"
            );
            last = Some(w);
        }
        texts.push(e.generate(prompt, greedy(turn > 0), &mut |_| {}).unwrap());
        let m = e.metrics();
        counts.push((m.prompt_tokens, m.reused_tokens, m.kv_tokens));
        assert_eq!(m.warm_up, last, "the metrics keep the latest warm-up");
    }
    (texts, counts, last)
}

#[test]
fn a_warm_up_changes_nothing_a_run_sees_and_is_recorded() {
    let (plain_text, plain_counts, none) = two_turns(false);
    assert!(none.is_none());
    let (warm_text, warm_counts, last) = two_turns(true);
    assert_eq!(warm_text, plain_text);
    assert_eq!(warm_counts, plain_counts);
    assert!(
        plain_counts[1].1 > 0,
        "the second turn reused the first's tokens: {plain_counts:?}"
    );
    let w = last.expect("warmed");
    // Budget 0: the least passes.
    assert_eq!(w.passes, edgefit_engine::engine::MIN_WARM_PASSES, "{w:?}");
    assert_eq!(w.pass_ms.len(), w.passes);
    assert!(
        w.pass_ms.iter().all(|&ms| ms.is_finite() && ms >= 0.0),
        "{w:?}"
    );
    assert!(w.total_ms >= w.pass_ms.iter().sum::<f64>() - 1e-9, "{w:?}");
    assert_eq!(
        w.decode_steps,
        edgefit_engine::engine::WARM_DECODE_STEPS,
        "{w:?}"
    );
    assert!(
        (1..=edgefit_engine::engine::WARM_PROMPT_TOKENS).contains(&w.prompt_tokens),
        "{w:?}"
    );
}

#[test]
fn a_warm_up_runs_passes_until_its_budget_is_spent() {
    let mut e = engine();
    let budget = 20.0;
    let w = e.warm_up(budget).unwrap();
    // It ran until the budget was spent, and started no pass after that (a pass starts only
    // while the time so far, at least the earlier passes' sum, is under the budget).
    assert!(w.total_ms >= budget, "{w:?}");
    let n = w.passes;
    assert!(n >= edgefit_engine::engine::MIN_WARM_PASSES, "{w:?}");
    assert!(
        n == edgefit_engine::engine::MIN_WARM_PASSES
            || w.pass_ms[..n - 1].iter().sum::<f64>() < budget,
        "{w:?}"
    );
    assert_eq!(e.metrics().warm_up.as_ref(), Some(&w));
}

#[test]
fn a_bad_warm_up_budget_is_refused_by_name() {
    let mut e = engine();
    for bad in [f64::NAN, f64::INFINITY, -1.0, 10_000.5, 1e12] {
        match e.warm_up(bad) {
            Err(EngineError::Setting { name, .. }) => assert_eq!(name, "warm-up budget", "{bad}"),
            other => panic!("budget {bad}: {other:?}"),
        }
    }
    assert!(
        e.metrics().warm_up.is_none(),
        "a refused warm-up records nothing"
    );
}
