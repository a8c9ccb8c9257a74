//! The engine's integration tests in one binary: each module here was its own test binary,
//! and every one of them linked candle, tokenizers and the engine again (about 10 s of CPU
//! each in release, a large part of a cold `cargo xtask test`). Each module keeps its own
//! documentation; `cargo test -p edgefit-engine --test it <module>::` runs one of them.
//! `tests/soak.rs` stays a binary of its own: it counts the heap with its global allocator, so
//! nothing else may allocate while it measures.

mod common;

mod arch_goldens;
mod arch_phi3;
mod arch_reference;
mod engine_prune;
mod export;
mod fuzz_regressions;
mod gemma3_270m;
mod ggml_formats;
mod golden;
mod hostile;
mod layering;
mod loaders;
mod perplexity;
mod prefill;
mod rope_scaling;
mod spm_tokenizer;
mod threads;
mod warm_up;
