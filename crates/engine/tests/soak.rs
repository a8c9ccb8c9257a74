//! Soak test: many conversations of many turns on the synthetic model through the engine's
//! public generation API, with the live heap counted by this binary's global allocator.
//!
//! Shows that, turn after turn and conversation after conversation,
//! * the live heap minus the KV cache's allocation (`Metrics::kv_reserved_bytes`) stays flat:
//!   after a warm-up conversation, every turn's figure is within [`TOLERANCE`] of the warm-up's,
//!   and the last conversation's peak is no higher than the first measured one's plus
//!   [`DRIFT`];
//! * the KV cache grows as documented: `kv_bytes` = `kv_tokens` × the estimator's bytes per
//!   token, and more tokens each kept turn;
//! * reaching the context gives [`EngineError::ContextFull`] ("context full … new
//!   conversation") and changes nothing; a new conversation empties the cache (its KV bytes are
//!   those of one turn again, the same as the first conversation's first turn).
//!
//! The sampled text repeats with a period of [`CYCLE`] conversations (the sampling seeds cycle):
//! the tokenizers crate caches the BPE split of each word it meets (a cache bounded at 10 000
//! words), so text with ever new words grows the heap until that cache is full; with the words
//! repeating, what is left to see is whether the engine itself holds on to anything.
//!
//! Run with `--nocapture` to see the figures. One test in this binary, so nothing else
//! allocates while it measures.
#![cfg(not(target_arch = "wasm32"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use edgefit_engine::native::NativePlatform;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{
    Engine, EngineError, FinishReason, GenerateOptions, LoadOptions, SamplerConfig,
};
use edgefit_estimate::kv_bytes_per_token;

/// Counts bytes allocated and freed (live = allocated − freed).
struct Counting;

static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to `System`, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            FREED.fetch_add(layout.size() as u64, Ordering::Relaxed);
            ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    ALLOCATED.load(Ordering::SeqCst) as i64 - FREED.load(Ordering::SeqCst) as i64
}

/// How far any turn's live heap minus KV allocation may stray from the warm-up conversation's
/// range: the conversation's own text (history, transcript, held token ids, per-token timings)
/// is legitimately live and bounded by the 128-token context: a few KB.
const TOLERANCE: i64 = 4 << 10;
/// How much higher the last conversation's peak may be than the first measured one's.
const DRIFT: i64 = 1 << 10;

const CONVERSATIONS: usize = 60;
/// Sampling seeds cycle with this period, so after one cycle every word the model writes has
/// been through the tokenizer once (see the module docs).
const CYCLE: usize = 4;
const MAX_TOKENS: usize = 12;

fn load() -> Engine {
    let bytes = gguf_bytes(11, SyntheticDType::Q8_0).expect("synthetic GGUF");
    Engine::load_gguf(
        &mut std::io::Cursor::new(bytes),
        Box::new(NativePlatform::default()),
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .expect("synthetic model loads")
}

/// One turn's figures.
#[derive(Debug, Clone, Copy)]
struct Turn {
    live: i64,
    other: i64,
    kv_tokens: usize,
    kv_bytes: u64,
    kv_reserved: u64,
}

fn snapshot(engine: &Engine) -> Turn {
    let m = engine.metrics();
    let live = live();
    Turn {
        live,
        other: live - m.kv_reserved_bytes as i64,
        kv_tokens: m.kv_tokens,
        kv_bytes: m.kv_bytes,
        kv_reserved: m.kv_reserved_bytes,
    }
}

#[test]
fn memory_stays_flat_over_many_turns_apart_from_the_kv_cache() {
    // The test's own records, allocated before anything is measured so they add nothing live.
    let mut log: Vec<(usize, Turn)> = Vec::with_capacity(CONVERSATIONS * 32);
    let before_load = live();
    let mut engine = load();
    let after_load = live();
    let per_token = kv_bytes_per_token(&engine.model_spec(), engine.model().kv_format);
    let limit = engine.metrics().kv_limit;
    assert!(per_token > 0);
    println!(
        "soak: synthetic model, KV format {}, {per_token} KV bytes per token, context {limit}",
        engine.model().kv_format
    );
    println!(
        "soak: live heap before load {before_load} B, after load {after_load} B (KV reserved {} B)",
        engine.metrics().kv_reserved_bytes
    );

    let prompts = [
        "the cat",
        " and the dog",
        " then the theme",
        " 42 ü",
        " the thesis",
    ];
    let mut tokens_fed = 0usize;
    let mut turns = 0usize;
    let mut first_turn: [Option<Turn>; 2] = [None, None];
    for c in 0..CONVERSATIONS {
        let options = GenerateOptions {
            chat: c % 2 == 0,
            max_tokens: MAX_TOKENS,
            sampler: SamplerConfig {
                temperature: 0.8,
                top_p: 0.95,
                seed: (c % CYCLE) as u64,
            },
            keep: false,
        };
        // A new conversation: the cache holds only this turn afterwards. Its first turn is
        // greedy, so it is the same turn as in the first conversation of the same kind.
        let opening = GenerateOptions {
            sampler: SamplerConfig::default(),
            ..options
        };
        engine
            .generate(prompts[0], opening, &mut |_| {})
            .expect("a first turn fits");
        let m = engine.metrics();
        tokens_fed += m.prompt_tokens + m.generated_tokens;
        turns += 1;
        let t = snapshot(&engine);
        // Every token fed is held: the prompt and each generated token but the last one
        // sampled (fed only if generation goes on; with a stop token, the stop token is that
        // one).
        let fed_back = match m.finish_reason {
            Some(FinishReason::Stop) => m.generated_tokens,
            _ => m.generated_tokens - 1,
        };
        assert_eq!(t.kv_tokens, m.prompt_tokens + fed_back);
        assert_eq!(m.reused_tokens, 0, "a new conversation reuses nothing");
        assert_eq!(t.kv_bytes, per_token * t.kv_tokens as u64);
        match first_turn[c % 2] {
            None => first_turn[c % 2] = Some(t),
            Some(f) => assert_eq!(
                (t.kv_tokens, t.kv_bytes),
                (f.kv_tokens, f.kv_bytes),
                "conversation {c}: a new conversation holds only its first turn, as the first did"
            ),
        }
        log.push((c, t));
        // Kept turns until the context is full.
        let keep = GenerateOptions {
            keep: true,
            ..options
        };
        let mut k = 1;
        let err = loop {
            let held = engine.metrics().kv_tokens;
            match engine.generate(prompts[k % prompts.len()], keep, &mut |_| {}) {
                Ok(_) => {
                    let m = engine.metrics();
                    tokens_fed += m.prompt_tokens + m.generated_tokens;
                    turns += 1;
                    let t = snapshot(&engine);
                    assert!(t.kv_tokens > held, "a kept turn adds to the cache");
                    assert!(m.reused_tokens > 0 && m.reused_tokens <= held);
                    assert_eq!(t.kv_bytes, per_token * t.kv_tokens as u64);
                    assert!(t.kv_reserved >= t.kv_bytes);
                    log.push((c, t));
                    k += 1;
                }
                Err(e) => {
                    assert_eq!(
                        engine.metrics().kv_tokens,
                        held,
                        "a refused turn changes nothing"
                    );
                    break e;
                }
            }
        };
        let msg = err.to_string();
        assert!(
            matches!(err, EngineError::ContextFull { limit: l, needed } if l == limit && needed > limit),
            "{msg}"
        );
        assert!(
            msg.starts_with("context full") && msg.contains("new conversation"),
            "{msg}"
        );
        let turns_here = log.iter().filter(|(i, _)| *i == c).count();
        assert!(turns_here >= 2, "conversation {c}: at least one kept turn");
    }

    // Warm-up: the first cycle of conversations (lazily built state, the KV allocation, the
    // tokenizer's word cache meeting each word once); the second cycle is the baseline.
    let conv = |c: usize| -> Vec<Turn> {
        log.iter()
            .filter(|(i, _)| *i == c)
            .map(|(_, t)| *t)
            .collect()
    };
    let range = |cs: std::ops::Range<usize>| {
        let turns: Vec<Turn> = cs.flat_map(conv).collect();
        let lo = turns.iter().map(|t| t.other).min().unwrap_or(0);
        let hi = turns.iter().map(|t| t.other).max().unwrap_or(0);
        (lo, hi)
    };
    let (base_lo, base_hi) = range(CYCLE..2 * CYCLE);
    let (all_lo, all_hi) = range(CYCLE..CONVERSATIONS);
    for c in 0..CONVERSATIONS {
        let (lo, hi) = range(c..c + 1);
        let turns = conv(c);
        if c < 2 * CYCLE || c + CYCLE >= CONVERSATIONS {
            println!(
                "soak: conversation {c}: {} turns, live minus KV allocation {lo}..{hi} B, KV {} \
                 tokens at the end",
                turns.len(),
                turns.last().unwrap().kv_tokens
            );
        }
        if c >= CYCLE {
            assert!(
                lo >= base_lo - TOLERANCE && hi <= base_hi + TOLERANCE,
                "conversation {c}: live heap minus KV allocation {lo}..{hi} B strays more than \
                 {TOLERANCE} B from the baseline cycle's {base_lo}..{base_hi} B"
            );
        }
    }
    let first_measured_peak = base_hi;
    let (_, last_peak) = range(CONVERSATIONS - CYCLE..CONVERSATIONS);
    assert!(
        last_peak <= first_measured_peak + DRIFT,
        "the live heap minus KV creeps up: last cycle's peak {last_peak} B, the baseline \
         cycle's {first_measured_peak} B"
    );
    let reserved_max = log.iter().map(|(_, t)| t.kv_reserved).max().unwrap();
    assert!(
        reserved_max <= per_token * limit as u64 * 2,
        "the KV allocation stays within the context: {reserved_max} B"
    );
    let first = first_turn[(CONVERSATIONS - 1) % 2].unwrap();
    let last_conv = conv(CONVERSATIONS - 1);
    let full = *last_conv.last().unwrap();
    let after_new = last_conv[0];
    println!(
        "soak: {CONVERSATIONS} conversations, {turns} turns, {tokens_fed} tokens fed (prompt + \
         generated)"
    );
    println!(
        "soak: first turn: live {} B = KV reserved {} B + other {} B; KV {} tokens = {} B",
        first.live, first.kv_reserved, first.other, first.kv_tokens, first.kv_bytes
    );
    println!(
        "soak: live minus KV allocation over conversations {CYCLE}..{CONVERSATIONS}: \
         {all_lo}..{all_hi} B (baseline, conversations {CYCLE}..{}: {base_lo}..{base_hi} B, \
         tolerance {TOLERANCE} B); last cycle's peak {last_peak} B",
        2 * CYCLE
    );
    println!(
        "soak: last conversation full: KV {} tokens = {} B (reserved {} B), live {} B",
        full.kv_tokens, full.kv_bytes, full.kv_reserved, full.live
    );
    println!(
        "soak: new conversation frees the cache: KV {} tokens = {} B after its first turn \
         (first conversation's first turn: {} tokens = {} B)",
        after_new.kv_tokens, after_new.kv_bytes, first.kv_tokens, first.kv_bytes
    );
    assert!(after_new.kv_tokens < full.kv_tokens);
    drop(engine);
    let after_drop = live();
    // What stays is built once per process (lazily initialised statics of the dependencies):
    // a second engine, loaded, run and dropped, leaves the heap where the first one left it.
    let mut again = load();
    again
        .generate("the cat", GenerateOptions::default(), &mut |_| {})
        .expect("a second engine generates");
    drop(again);
    let after_second = live();
    println!(
        "soak: live heap after dropping the engine {after_drop} B (before load {before_load} B; \
         the rest is built once per process); after a second engine loaded, run and dropped \
         {after_second} B"
    );
    assert!(
        (after_second - after_drop).abs() < DRIFT,
        "a second engine leaves {} B more live than the first: {after_second} B vs {after_drop} B",
        after_second - after_drop
    );
    assert!(tokens_fed >= 2000, "thousands of tokens: {tokens_fed}");
}
