//! The hostile-file suite: model files that are truncated, mislabelled, inconsistent or crafted
//! to claim absurd sizes are refused with an error of the right kind whose message names the
//! problem, never a panic, never a large allocation, and fast. The cases are in
//! `common/hostile_cases.rs` (shared with the CLI's suite); run with `--nocapture` to see each
//! case's message.
#![cfg(not(target_arch = "wasm32"))]

#[path = "common/hostile_cases.rs"]
mod hostile_cases;

use std::io::{Cursor, Read, Seek, SeekFrom};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use edgefit_engine::gguf::{gguf_memory_need, load_gguf, load_gguf_within, read_estimate_metadata};
use edgefit_engine::hf::{load_hf, load_hf_within};
use edgefit_engine::synthetic::{gguf_bytes_with, SyntheticDType, Value};
use edgefit_engine::weights::MemoryNeed;
use edgefit_engine::{EngineError, LoadOptions, Model, TextTokenizer};
use hostile_cases::*;

fn kind(e: &EngineError) -> Option<Kind> {
    Some(match e {
        EngineError::Format(_) => Kind::Format,
        EngineError::Metadata { .. } => Kind::Metadata,
        EngineError::Unsupported(_) => Kind::Unsupported,
        EngineError::Config(_) => Kind::Config,
        EngineError::Tensor { .. } => Kind::Tensor,
        EngineError::Tokenizer(_) => Kind::Tokenizer,
        EngineError::OverBudget { .. } => Kind::OverBudget,
        _ => return None,
    })
}

fn load(bytes: &[u8]) -> Result<(Model, TextTokenizer), EngineError> {
    load_gguf(
        &mut Cursor::new(bytes),
        LoadOptions::default(),
        &mut |_, _| {},
    )
}

/// Checks one case's outcome; returns a description of what is wrong, if anything.
fn judge<T>(
    name: &str,
    outcome: std::thread::Result<Result<T, EngineError>>,
    want: Kind,
    needles: &[String],
) -> Option<String> {
    match outcome {
        Err(_) => Some(format!("{name}: panicked")),
        Ok(Ok(_)) => Some(format!("{name}: loaded")),
        Ok(Err(e)) => {
            let msg = e.to_string();
            println!("{name}: {msg}");
            if kind(&e) != Some(want) {
                return Some(format!("{name}: expected {want:?}, got {e:?}"));
            }
            let missing: Vec<&String> = needles.iter().filter(|n| !msg.contains(*n)).collect();
            if !missing.is_empty() || msg.lines().count() != 1 {
                return Some(format!(
                    "{name}: {missing:?} missing from (or not one line): {msg}"
                ));
            }
            None
        }
    }
}

#[test]
fn every_hostile_gguf_is_a_named_error() {
    let cases = gguf_cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let out = catch_unwind(AssertUnwindSafe(|| load(&c.bytes)));
            judge(c.name, out, c.kind, &c.needles)
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_hostile_hf_model_is_a_named_error() {
    let failures: Vec<String> = hf_cases()
        .iter()
        .filter_map(|c| {
            let (config, tok, tok_config, st) = &c.files;
            let out = catch_unwind(AssertUnwindSafe(|| {
                load_hf(
                    config,
                    tok.as_bytes(),
                    Some(tok_config),
                    &[st],
                    LoadOptions::default(),
                )
            }));
            judge(c.name, out, c.kind, &c.needles)
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The unpatched files load, so the cases above fail for their patch and not for the base.
#[test]
fn the_files_the_cases_patch_load() {
    for dtype in [SyntheticDType::Q8_0, SyntheticDType::F32] {
        load(&good(dtype)).unwrap();
    }
    let (config, tok, tok_config, st) = good_hf();
    let (h, d) = st_split(&st);
    let rejoined = st_join(&h, &d);
    load_hf(
        &config,
        tok.as_bytes(),
        Some(&tok_config),
        &[&rejoined],
        LoadOptions::default(),
    )
    .unwrap();
    // A valid alignment is accepted.
    let aligned = gguf_bytes_with(SEED, SyntheticDType::Q8_0, |md| {
        md.push(("general.alignment".into(), Value::U32(32)))
    })
    .unwrap();
    load(&aligned).unwrap();
}

/// Cut at every byte of the header and at 300 places across the tensor data: every prefix is
/// an error (never a panic), and all of them together take seconds, not minutes.
#[test]
fn truncated_at_every_header_offset_and_across_the_data() {
    for dtype in [SyntheticDType::Q8_0, SyntheticDType::F32] {
        let bytes = good(dtype);
        let l = layout(&bytes);
        let data = bytes.len() - l.data_start;
        let cuts: Vec<usize> = (0..=l.data_start)
            .chain((1..=300).map(|i| l.data_start + i * data / 301))
            .chain([bytes.len() - 1])
            .collect();
        let t0 = Instant::now();
        for &cut in &cuts {
            let prefix = &bytes[..cut];
            let out = catch_unwind(AssertUnwindSafe(|| load(prefix)));
            match out {
                Err(_) => panic!("{dtype:?} cut at {cut}: panicked"),
                Ok(Ok(_)) => panic!("{dtype:?} cut at {cut}: loaded"),
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    assert_eq!(msg.lines().count(), 1, "{msg}");
                    if cut > l.header_end {
                        // The header is whole: the tensor past the new end is named.
                        assert!(
                            matches!(e, EngineError::Tensor { .. })
                                && msg.contains("run past the end of the file"),
                            "{dtype:?} cut at {cut}: {msg}"
                        );
                    } else if (4..l.header_end).contains(&cut) {
                        // Inside the header: the prescan names what the file ends in.
                        assert!(
                            msg.contains("but the file ends at byte"),
                            "{dtype:?} cut at {cut}: {msg}"
                        );
                    }
                }
            }
            let meta = catch_unwind(AssertUnwindSafe(|| {
                read_estimate_metadata(&mut Cursor::new(prefix))
            }));
            assert!(
                matches!(meta, Ok(Err(_))),
                "{dtype:?} cut at {cut}: estimate metadata not an error"
            );
        }
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "{dtype:?}: {} truncations (header {} bytes, file {} bytes) refused in {secs:.2} s",
            cuts.len(),
            l.data_start,
            bytes.len()
        );
        assert!(secs < 60.0, "{} truncations took {secs} s", cuts.len());
    }
}

/// A reader that records the furthest byte read.
struct Watch<R> {
    inner: R,
    pos: u64,
    furthest: u64,
}

impl<R: Read> Read for Watch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        self.furthest = self.furthest.max(self.pos);
        Ok(n)
    }
}

impl<R: Seek> Seek for Watch<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// A header claiming 4096 hidden × 500 layers over a 100 kB file: under a 1 GiB budget the
/// preflight refuses it with the bytes, before a single tensor byte is read.
#[test]
fn a_header_claiming_a_big_model_is_refused_before_reading_tensors() {
    let bytes = claims_big_model();
    let data_start = layout(&bytes).data_start as u64;
    let mut reader = Watch {
        inner: Cursor::new(&bytes),
        pos: 0,
        furthest: 0,
    };
    let mut tensors_read = 0;
    let budget = 1u64 << 30;
    let err = load_gguf_within(
        &mut reader,
        LoadOptions::default(),
        Some(budget),
        &mut |done, _| tensors_read = done,
    )
    .map(|_| ())
    .expect_err("over budget");
    let msg = err.to_string();
    println!("claims 4096 hidden x 500 layers, budget 1 GiB: {msg}");
    let EngineError::OverBudget {
        needed, budget: b, ..
    } = err
    else {
        panic!("expected OverBudget, got {msg}");
    };
    assert_eq!(b, budget);
    assert!(
        needed > 40 << 30,
        "500 layers of 4096 × 16384 MLPs: {needed}"
    );
    assert!(
        msg.contains(&format!("needs {needed} bytes"))
            && msg.contains(&format!("budget is {budget} bytes"))
            && msg.contains("weights")
            && msg.contains("KV cache (32768 tokens)"),
        "{msg}"
    );
    assert_eq!(tensors_read, 0);
    assert!(
        reader.furthest <= data_start,
        "read up to byte {} of a header ending at {data_start}",
        reader.furthest
    );
    // Without a budget the first tensor's shape gives it away, still before reading data.
    let err = load(&bytes).map(|_| ()).expect_err("shape mismatch");
    let msg = err.to_string();
    println!("claims 4096 hidden x 500 layers, no budget: {msg}");
    assert!(
        msg.contains("token_embd.weight") && msg.contains("expected [") && msg.contains("4096"),
        "{msg}"
    );
}

/// The preflight's figure is the bar: the synthetic model loads under a budget of exactly its
/// need and is refused one byte below; the need counts exactly what the loaded weights hold
/// (the GGUF Q8_0 matrices kept as they are by the default `auto`; the HF f32 ones as w4g32
/// with a q8_0 embedding).
#[test]
fn preflight_passes_at_the_need_and_refuses_one_byte_below() {
    let bytes = good(SyntheticDType::Q8_0);
    let (model, _) = load(&bytes).unwrap();
    let options = LoadOptions::default();
    let need = gguf_memory_need(&mut Cursor::new(&bytes), &model.config, &options).unwrap();
    assert_eq!(
        need.weights + need.embedding + need.norms,
        model.weights.bytes(),
        "{need:?} vs {} bytes loaded",
        model.weights.bytes()
    );
    let at = |budget| {
        load_gguf_within(
            &mut Cursor::new(&bytes),
            LoadOptions::default(),
            Some(budget),
            &mut |_, _| {},
        )
    };
    at(need.total()).unwrap();
    let err = at(need.total() - 1).map(|_| ()).unwrap_err();
    assert!(
        matches!(err, EngineError::OverBudget { needed, .. } if needed == need.total()),
        "{err}"
    );
    // The same bar for the HF loader, with its own (float-source) need.
    let (config, tok, tok_config, st) = good_hf();
    let hf_model = load_hf(&config, tok.as_bytes(), Some(&tok_config), &[&st], options)
        .unwrap()
        .0;
    let need = MemoryNeed::of(&hf_model.config, &options);
    assert_eq!(
        need.weights + need.embedding + need.norms,
        hf_model.weights.bytes()
    );
    let hf = |budget| {
        load_hf_within(
            &config,
            tok.as_bytes(),
            Some(&tok_config),
            &[&st],
            LoadOptions::default(),
            Some(budget),
        )
    };
    hf(need.total()).unwrap();
    assert!(matches!(
        hf(need.total() - 1),
        Err(EngineError::OverBudget { .. })
    ));
}

/// The real model (SmolLM2-135M Q4_1) through the same checks: its header passes the prescan
/// and layout checks, its preflight need is at least what the loaded weights hold and fits
/// the 4 GiB a wasm32 memory can grow to, and under a 64 MB budget it is refused before any
/// tensor is read.
#[test]
fn the_real_model_passes_the_checks_and_its_need_fits_a_browser() {
    let path = std::env::var_os("EDGEFIT_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../models/smollm2-135m-instruct-q4_1.gguf")
        });
    let open = || {
        std::io::BufReader::new(std::fs::File::open(&path).unwrap_or_else(|e| {
            panic!(
                "the default model is needed at {} ({e}); `cargo xtask setup` fetches it",
                path.display()
            )
        }))
    };
    let options = LoadOptions::default();
    let wasm32_memory = 4u64 << 30;
    let (model, _) =
        load_gguf_within(&mut open(), options, Some(wasm32_memory), &mut |_, _| {}).unwrap();
    let need = gguf_memory_need(&mut open(), &model.config, &options).unwrap();
    println!(
        "SmolLM2-135M, default options: need {} bytes = {need:?}; loaded weights {} bytes",
        need.total(),
        model.weights.bytes()
    );
    assert_eq!(
        need.weights + need.embedding + need.norms,
        model.weights.bytes()
    );
    assert!(need.total() < wasm32_memory);
    let mut tensors_read = 0;
    let err = load_gguf_within(&mut open(), options, Some(64 << 20), &mut |done, _| {
        tensors_read = done
    })
    .map(|_| ())
    .unwrap_err();
    println!("SmolLM2-135M under 64 MiB: {err}");
    assert!(matches!(err, EngineError::OverBudget { .. }), "{err}");
    assert_eq!(tensors_read, 0);
}
