//! Estimate vs measured: the rows of the page's "Estimate vs measured in this tab" table and of
//! `edgefit generate --estimate DEVICE`, computed once here so the two agree by construction.
//!
//! - [`Measured`] holds what the engine measured in a run: the fields its `Metrics` fills (same
//!   JSON names, so the engine's metrics JSON parses as it is; other fields are ignored).
//! - [`measured_deployment`] is the rule mapping that run to the [`Deployment`] that predicts
//!   it: the weight format the engine really holds (the stored format holding the most
//!   matrices: a GGUF Q4_1 loaded as `w4g32` keeps its asymmetric blocks and is stored as
//!   `q4_1`; for a llama.cpp K-quant file, the K-quant whose file layout holds the rest, so a
//!   Q4_K_M file is sized matrix by matrix as `q4_k`), the embedding's format, the run's KV
//!   format, the CPU, the run's prompt and generated tokens, the engine's prefill chunk
//!   ([`ENGINE_PREFILL_CHUNK`]), and a context of `max(prompt + generated, tokens the cache
//!   holds)` (the estimator requires the run to fit).
//! - [`comparison_rows`] pairs the report's figures with the measurements, each with its signed
//!   error `error % = (estimate − measured) / |measured| · 100` (none when nothing was
//!   measured: no decode rate with fewer than two generated tokens, no TTFT without one).

use serde::{Deserialize, Serialize};

use crate::deploy::{Deployment, Policy};
use crate::error::{EstimateError, Result};
use crate::format::{kv_bytes, ComputeUnit, KvFormat, WeightFormat};
use crate::report::Report;
use crate::spec::ModelSpec;

/// Tokens per prefill chunk of edgefit's engine (`edgefit_engine::PREFILL_CHUNK`, which asserts
/// it equals this).
pub const ENGINE_PREFILL_CHUNK: u32 = 64;

/// What the engine measured in one run (the fields of its `Metrics` this comparison reads).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Measured {
    /// Tokens fed before the first generated one.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Start to first generated token, ms.
    pub ttft_ms: f64,
    /// Prompt tokens per second of the prefill.
    pub prefill_tok_s: f64,
    /// Generated tokens after the first, per second.
    pub decode_tok_s: f64,
    /// Bytes of weights held.
    pub weights_bytes: u64,
    /// The linear layers' requested format (`w4g32`, ...).
    pub weights: String,
    /// The embedding / output head's format.
    pub embedding: String,
    /// The kernel the matrix products ran on.
    pub kernel: String,
    /// The KV cache's format.
    pub kv_format: String,
    /// Tokens the KV cache holds.
    pub kv_tokens: u64,
    /// Bytes of KV cache holding them.
    pub kv_bytes: u64,
}

/// One stored weight format of the engine's model: how many matrices it holds (the engine's
/// `info().weights.stored` rows; other fields are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredWeights {
    /// The format's estimator name (`q4_1`, `q8_0`, ...).
    pub format: String,
    /// Matrices held in it.
    pub matrices: u64,
}

/// One row of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// `ttft`, `prefill`, `decode`, `weights`, `kv`.
    pub key: String,
    /// What it is, for people.
    pub label: String,
    /// `ms`, `tok/s` or `bytes`.
    pub unit: String,
    /// The estimator's figure.
    pub estimate: Option<f64>,
    /// The engine's figure (none when the run did not measure it).
    pub measured: Option<f64>,
    /// Signed error of the estimate, percent (none without a measurement).
    pub error_pct: Option<f64>,
}

fn weight_format(what: &str, name: &str) -> Result<WeightFormat> {
    name.parse().map_err(|_| EstimateError::UnknownName {
        kind: "weight format",
        value: format!("{name} ({what})"),
        expected: WeightFormat::ALL
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The deployment that predicts the run `m` measured (see the module docs for the rule).
/// `stored`: the engine's stored formats; empty means "use `m.weights`".
///
/// Refuses a run with no prompt or no generated token (nothing to compare) and format names
/// the estimator does not know.
pub fn measured_deployment(m: &Measured, stored: &[StoredWeights]) -> Result<Deployment> {
    for (what, v) in [
        ("prompt_tokens", m.prompt_tokens),
        ("generated_tokens", m.generated_tokens),
    ] {
        if v < 1 {
            return Err(EstimateError::OutOfRange {
                what: format!("measured {what}"),
                value: v.to_string(),
                reason: "a run to compare needs at least one prompt and one generated token".into(),
            });
        }
    }
    let to_u32 = |what: &str, v: u64| {
        u32::try_from(v).map_err(|_| EstimateError::OutOfRange {
            what: format!("measured {what}"),
            value: v.to_string(),
            reason: "more tokens than a deployment can describe".into(),
        })
    };
    let mut weights = weight_format("the engine's weights", &m.weights)?;
    let held = stored
        .iter()
        .map(|s| Ok((weight_format("a stored format", &s.format)?, s.matrices)))
        .collect::<Result<Vec<_>>>()?;
    if let Some(k) = k_quant_file(&held)? {
        weights = k;
    } else if let Some(most) = held.iter().max_by_key(|s| s.1) {
        weights = most.0;
    }
    let embedding = if m.embedding.is_empty() {
        weights
    } else {
        weight_format("the engine's embedding", &m.embedding)?
    };
    let kv: KvFormat = m.kv_format.parse()?;
    let prompt = to_u32("prompt_tokens", m.prompt_tokens)?;
    let gen = to_u32("generated_tokens", m.generated_tokens)?;
    let context = to_u32(
        "context",
        (m.prompt_tokens + m.generated_tokens).max(m.kv_tokens),
    )?;
    Ok(Deployment {
        weights,
        embedding_weights: Some(embedding),
        kv,
        unit: Some(ComputeUnit::Cpu),
        policy: Policy::FlatOut,
        prompt_tokens: prompt,
        gen_tokens: gen,
        context,
        prefill_chunk: Some(ENGINE_PREFILL_CHUNK.min(prompt)),
        ..Deployment::default()
    })
}

/// The K-quant whose llama.cpp file layout explains every held format, if any: a Q4_K_M file
/// holds Q4_K beside the Q6_K of its `use_more_bits` layers, the Q5_0 of rows a 256-wide block
/// cannot hold, a Q8_0 / Q6_K head and f32 norms, so its most numerous format can be Q5_0 (Gemma
/// 3 270M: 81 of 127 matrices), which would size every matrix as Q5_0. The lowest K-quant held
/// whose layout (the `edgefit` runtime's `file_layers`: more bits, block fallback) covers the
/// rest names the deployment, and the estimator then sizes the file matrix by matrix. A file with
/// formats outside that layout (a Q3_K_M whose Q3_K the engine converted) keeps the rule of the
/// most matrices.
fn k_quant_file(held: &[(WeightFormat, u64)]) -> Result<Option<WeightFormat>> {
    let layout = crate::runtime::runtime_profile(crate::deploy::Runtime::Edgefit)?.file_layers;
    let Some(layout) = layout else {
        return Ok(None);
    };
    let ks = [WeightFormat::Q4K, WeightFormat::Q5K, WeightFormat::Q6K];
    Ok(ks.into_iter().find(|&k| {
        let explained = |f: WeightFormat| {
            f == k
                || layout.more_bits.get(&k) == Some(&f)
                || (layout.block_fallback && k.ggml_block_fallback() == Some(f))
                || matches!(
                    f,
                    WeightFormat::Q6K | WeightFormat::Q8_0 | WeightFormat::F16 | WeightFormat::F32
                )
        };
        held.iter().any(|h| h.0 == k) && held.iter().all(|h| explained(h.0))
    }))
}

/// `(estimate − measured) / |measured| · 100`; none when either is not a finite number or the
/// measurement is 0.
pub fn percent_error(estimate: f64, measured: f64) -> Option<f64> {
    if !estimate.is_finite() || !measured.is_finite() || measured == 0.0 {
        return None;
    }
    Some((estimate - measured) / measured.abs() * 100.0)
}

/// The rows of the comparison of `report` (the estimate of [`measured_deployment`] for `m`)
/// with the run `m` of the model `spec`.
///
/// The KV row compares the estimator's exact bytes ([`kv_bytes`]) for the tokens the cache
/// holds (`m.kv_tokens`, in the run's KV format) with the bytes the engine holds.
pub fn comparison_rows(
    spec: &ModelSpec,
    report: &Report,
    m: &Measured,
) -> Result<Vec<ComparisonRow>> {
    let kv: KvFormat = m.kv_format.parse()?;
    let lat = &report.latency;
    let mem = &report.memory;
    let kv_held = kv_bytes(spec, kv, m.kv_tokens) as f64;
    let gen = m.generated_tokens;
    let rows: [(&str, &str, &str, f64, Option<f64>); 5] = [
        (
            "ttft",
            "Time to first token",
            "ms",
            lat.ttft_ms,
            (gen >= 1).then_some(m.ttft_ms),
        ),
        (
            "prefill",
            "Prefill",
            "tok/s",
            lat.prefill_tok_s,
            (gen >= 1).then_some(m.prefill_tok_s),
        ),
        (
            "decode",
            "Decode",
            "tok/s",
            lat.decode_tok_s,
            (gen >= 2).then_some(m.decode_tok_s),
        ),
        (
            "weights",
            "Weights",
            "bytes",
            mem.weights_bytes as f64,
            Some(m.weights_bytes as f64),
        ),
        (
            "kv",
            "KV cache (tokens held)",
            "bytes",
            kv_held,
            Some(m.kv_bytes as f64),
        ),
    ];
    Ok(rows
        .into_iter()
        .map(|(key, label, unit, estimate, measured)| {
            let estimate = estimate.is_finite().then_some(estimate);
            let measured = measured.filter(|v| v.is_finite());
            ComparisonRow {
                key: key.into(),
                label: label.into(),
                unit: unit.into(),
                error_pct: estimate
                    .zip(measured)
                    .and_then(|(e, v)| percent_error(e, v)),
                estimate,
                measured,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{device, estimate, preset};

    fn run() -> Measured {
        Measured {
            prompt_tokens: 6,
            generated_tokens: 16,
            ttft_ms: 100.0,
            prefill_tok_s: 60.0,
            decode_tok_s: 25.0,
            weights_bytes: 1000,
            weights: "w4g32".into(),
            embedding: "q8_0".into(),
            kernel: "simd128".into(),
            kv_format: "int8".into(),
            kv_tokens: 21,
            kv_bytes: 160,
        }
    }

    #[test]
    fn the_deployment_mirrors_the_engine() {
        let stored = [
            StoredWeights {
                format: "q8_0".into(),
                matrices: 1,
            },
            StoredWeights {
                format: "q4_1".into(),
                matrices: 210,
            },
        ];
        let d = measured_deployment(&run(), &stored).unwrap();
        assert_eq!(
            d.weights,
            WeightFormat::Q4_1,
            "the stored format with most matrices"
        );
        assert_eq!(d.embedding_weights, Some(WeightFormat::Q8_0));
        assert_eq!(d.kv, KvFormat::Int8);
        assert_eq!(d.unit, Some(ComputeUnit::Cpu));
        assert_eq!((d.prompt_tokens, d.gen_tokens, d.context), (6, 16, 22));
        assert_eq!(d.prefill_chunk, Some(6));
        // A llama.cpp Q4_K_M file (Gemma 3 270M's counts): most matrices are Q5_0 (rows a
        // 256-wide block cannot hold), but the file is a q4_k one.
        let held = |list: &[(&str, u64)]| {
            list.iter()
                .map(|(f, n)| StoredWeights {
                    format: (*f).into(),
                    matrices: *n,
                })
                .collect::<Vec<_>>()
        };
        let q4_k_m = held(&[("q8_0", 10), ("q5_0", 81), ("q4_k", 27), ("q6_k", 9)]);
        let d = measured_deployment(&run(), &q4_k_m).unwrap();
        assert_eq!(d.weights, WeightFormat::Q4K);
        let q5_k_m = held(&[("q5_1", 50), ("q5_k", 20), ("q6_k", 9), ("q8_0", 1)]);
        let d = measured_deployment(&run(), &q5_k_m).unwrap();
        assert_eq!(d.weights, WeightFormat::Q5K);
        // A format the layout does not explain (a converted Q3_K): the most matrices again.
        let mixed = held(&[("w4g32", 90), ("q4_k", 20), ("q6_k", 9)]);
        let d = measured_deployment(&run(), &mixed).unwrap();
        assert_eq!(d.weights, WeightFormat::W4g32);
        // Without the stored list: the requested format.
        assert_eq!(
            measured_deployment(&run(), &[]).unwrap().weights,
            WeightFormat::W4g32
        );
        // A conversation whose cache holds more than this turn: the context covers it.
        let long = Measured {
            kv_tokens: 500,
            prompt_tokens: 200,
            ..run()
        };
        let d = measured_deployment(&long, &[]).unwrap();
        assert_eq!(
            (d.context, d.prefill_chunk),
            (500, Some(ENGINE_PREFILL_CHUNK))
        );
    }

    #[test]
    fn the_deployment_refuses_what_it_cannot_compare() {
        let none = Measured {
            generated_tokens: 0,
            ..run()
        };
        let e = measured_deployment(&none, &[]).unwrap_err().to_string();
        assert!(e.contains("generated_tokens"), "{e}");
        let odd = Measured {
            weights: "w9".into(),
            ..run()
        };
        let e = measured_deployment(&odd, &[]).unwrap_err().to_string();
        assert!(e.contains("w9"), "{e}");
        let odd_kv = Measured {
            kv_format: "int3".into(),
            ..run()
        };
        assert!(measured_deployment(&odd_kv, &[]).is_err());
    }

    #[test]
    fn percent_error_is_signed_and_refuses_zero() {
        assert_eq!(percent_error(110.0, 100.0), Some(10.0));
        assert_eq!(percent_error(90.0, 100.0), Some(-10.0));
        assert_eq!(percent_error(1.0, 0.0), None);
        assert_eq!(percent_error(f64::NAN, 1.0), None);
        assert_eq!(percent_error(1.0, f64::INFINITY), None);
    }

    #[test]
    fn rows_pair_the_report_with_the_run() {
        let spec = preset("smollm2-135m").unwrap();
        let m = run();
        let dep = measured_deployment(&m, &[]).unwrap();
        let report = estimate(&spec, &dep, &device("this-browser").unwrap()).unwrap();
        let rows = comparison_rows(&spec, &report, &m).unwrap();
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["ttft", "prefill", "decode", "weights", "kv"]);
        let by = |k: &str| rows.iter().find(|r| r.key == k).unwrap();
        let ttft = by("ttft");
        let want = (report.latency.ttft_ms - 100.0) / 100.0 * 100.0;
        assert!((ttft.error_pct.unwrap() - want).abs() < 1e-9);
        assert_eq!(by("decode").measured, Some(25.0));
        // KV: the estimator's exact bytes for the tokens held.
        let kv = by("kv");
        assert_eq!(
            kv.estimate,
            Some(kv_bytes(&spec, KvFormat::Int8, 21) as f64)
        );
        assert_eq!(kv.measured, Some(160.0));
        // One generated token: no decode rate was measured, so no error.
        let one = Measured {
            generated_tokens: 1,
            ..m
        };
        let rows = comparison_rows(&spec, &report, &one).unwrap();
        let dec = rows.iter().find(|r| r.key == "decode").unwrap();
        assert_eq!((dec.measured, dec.error_pct), (None, None));
    }

    #[test]
    fn engine_metrics_json_parses_as_measured() {
        // Extra fields (token_ms, finish_reason, ...) are ignored; missing ones take defaults.
        let m: Measured = serde_json::from_str(
            r#"{"prompt_tokens":3,"generated_tokens":2,"ttft_ms":5.5,"token_ms":[1.0],"finish_reason":"length","kv_format":"f16"}"#,
        )
        .unwrap();
        assert_eq!(
            (m.prompt_tokens, m.generated_tokens, m.ttft_ms),
            (3, 2, 5.5)
        );
        assert_eq!(m.kv_format, "f16");
    }
}
