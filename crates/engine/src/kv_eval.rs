//! What each KV format costs in accuracy and speed over a long generation, against an f32
//! cache: the numbers `edgefit kv-eval` and `cargo xtask bench kv` print.
//!
//! # Method
//! One reference run with an f32 cache generates `tokens` tokens after the prompt (sampled with
//! the given sampler, so the text does not collapse into the loops greedy decoding falls into).
//! Every other format runs **in lockstep, teacher-forced**: it is fed the same prompt and then
//! the same tokens, one per decode step, each into its own cache. At every decode position `i`
//! (the step that predicts generated token `i`) it compares:
//! - **KL divergence** of the next-token distributions, `KL(P_f32 ‖ P_fmt) = Σ_v p_v (ln p_v −
//!   ln q_v)` in nats, from log-softmax in f64. Averaged over the positions of each bucket of
//!   [`KvEvalOptions::bucket`] positions, that is the curve over positions (errors in the cache
//!   accumulate as it grows);
//! - **top-1 agreement**: how often the two distributions' most likely tokens are the same;
//! - **cosine similarity of the attention outputs** (each layer's `n_heads × v_dim` output
//!   before the output projection), averaged over layers and positions, and the minimum.
//!   These are end to end: a layer's input already carries the earlier layers' differences.
//!
//! Decode time per format is the mean wall time of its teacher-forced decode steps (the same
//! forward pass generation runs, over contexts from the prompt's length to the end), read from
//! the caller's [`Platform`] clock. Bytes at 512 and 2048 tokens come from the estimator's
//! `kv_bytes`, which the cache's own accounting equals (tests check it).

use edgefit_estimate::KvFormat;
use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::model::{Logits, Model, ProbePoint};
use crate::ops::{cosine, kl_divergence, log_softmax};
use crate::platform::Platform;
use crate::sampler::{Sampler, SamplerConfig};

/// Settings of a KV-format evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvEvalOptions {
    /// Tokens generated (and compared) after the prompt.
    pub tokens: usize,
    /// Positions per point of the KL curve.
    pub bucket: usize,
    /// How the reference picks each next token.
    pub sampler: SamplerConfig,
}

impl Default for KvEvalOptions {
    fn default() -> Self {
        KvEvalOptions {
            tokens: 1024,
            bucket: 128,
            sampler: SamplerConfig {
                temperature: 0.8,
                top_p: 0.95,
                seed: 1,
            },
        }
    }
}

/// One format's figures against the f32 reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvFormatEval {
    pub format: String,
    /// KV bytes holding 512 and 2048 tokens of this model.
    pub kv_bytes_512: u64,
    pub kv_bytes_2048: u64,
    /// Mean KL divergence from the f32 distribution over all compared positions, nats.
    pub kl_mean: f64,
    /// Mean KL per bucket of positions (the curve over positions), nats.
    pub kl_by_bucket: Vec<f64>,
    /// Fraction of positions whose most likely token equals the reference's.
    pub top1_agreement: f64,
    /// Cosine similarity of the attention outputs to the reference's: mean and minimum over
    /// layers × positions.
    pub attn_cos_mean: f64,
    pub attn_cos_min: f64,
    /// Mean milliseconds per decode step, and its inverse.
    pub decode_ms: f64,
    pub decode_tok_s: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvEvalReport {
    pub prompt_tokens: usize,
    /// Positions compared (generated tokens).
    pub tokens: usize,
    pub bucket: usize,
    /// The reference format (f32) first, then the others, in the order asked.
    pub formats: Vec<KvFormatEval>,
}

/// Runs the evaluation (method in the module docs) for `formats` (f32 is always the reference
/// and is reported first with zero divergence) after the prompt `prompt`.
pub fn kv_eval(
    model: &Model,
    prompt: &[u32],
    formats: &[KvFormat],
    options: KvEvalOptions,
    platform: &dyn Platform,
) -> Result<KvEvalReport> {
    if prompt.is_empty() {
        return Err(EngineError::Setting {
            name: "prompt",
            value: "\"\"".into(),
            expected: "at least one token".into(),
        });
    }
    if options.tokens == 0 || options.bucket == 0 {
        return Err(EngineError::Setting {
            name: "tokens / bucket",
            value: format!("{} / {}", options.tokens, options.bucket),
            expected: "at least 1 each".into(),
        });
    }
    let mut all = vec![KvFormat::F32];
    all.extend(formats.iter().copied().filter(|&f| f != KvFormat::F32));
    let needed = prompt.len() + options.tokens;
    let mut runs: Vec<Run> = all
        .iter()
        .map(|&f| {
            let cache = model.new_cache_in(f, needed);
            Run::new(f, cache, options.tokens.div_ceil(options.bucket))
        })
        .collect();
    if runs[0].cache.max_tokens() < needed {
        return Err(EngineError::ContextFull {
            needed,
            limit: runs[0].cache.max_tokens(),
        });
    }
    let mut sampler = Sampler::new(options.sampler)?;
    let widths: Vec<usize> = model
        .config
        .layer_shapes()
        .iter()
        .map(|l| l.o_width())
        .collect();
    let offsets: Vec<usize> = widths
        .iter()
        .scan(0, |acc, w| {
            let at = *acc;
            *acc += w;
            Some(at)
        })
        .collect();
    let layers = widths.len();
    let mut reference_att = vec![0.0f32; widths.iter().sum()];

    // The prompt: one batched forward per format; the last position is position 0.
    let mut input: Vec<u32> = prompt.to_vec();
    let mut next = 0;
    for pos in 0..options.tokens {
        let mut ref_logp = Vec::new();
        for (r, run) in runs.iter_mut().enumerate() {
            let mut att_cos = Vec::with_capacity(layers);
            let t0 = platform.now_ms();
            let logits = model.forward_probed(
                &input,
                &mut run.cache,
                Logits::Last,
                &mut |layer, point, att| {
                    if point != ProbePoint::AttnOut {
                        return;
                    }
                    let width = widths[layer];
                    let last = &att[att.len() - width..];
                    let slot = &mut reference_att[offsets[layer]..offsets[layer] + width];
                    if r == 0 {
                        slot.copy_from_slice(last);
                    } else {
                        att_cos.push(cosine(slot, last));
                    }
                },
            )?;
            if pos > 0 {
                run.decode_ms += platform.now_ms() - t0;
            }
            let logp = log_softmax(&logits);
            if r == 0 {
                ref_logp = logp;
                run.top1 += 1;
            } else {
                let kl = kl_divergence(&ref_logp, &logp);
                run.kl_sum += kl;
                run.kl_bucket[pos / options.bucket] += kl;
                if argmax(&ref_logp) == argmax(&logp) {
                    run.top1 += 1;
                }
                for c in att_cos {
                    run.cos_sum += c;
                    run.cos_n += 1;
                    run.cos_min = run.cos_min.min(c);
                }
            }
            if r == 0 {
                // The reference picks the next token; every format is fed it next step.
                next = sampler.sample(&logits);
            }
        }
        input = vec![next];
    }
    let spec = model.config.to_spec();
    let n = options.tokens as f64;
    let steps = options.tokens.saturating_sub(1).max(1) as f64;
    let formats = runs
        .into_iter()
        .map(|run| {
            let buckets = run
                .kl_bucket
                .iter()
                .enumerate()
                .map(|(b, s)| {
                    let len = (options.tokens - b * options.bucket).min(options.bucket);
                    s / len as f64
                })
                .collect();
            let decode_ms = run.decode_ms / steps;
            KvFormatEval {
                format: run.format.to_string(),
                kv_bytes_512: edgefit_estimate::kv_bytes(&spec, run.format, 512),
                kv_bytes_2048: edgefit_estimate::kv_bytes(&spec, run.format, 2048),
                kl_mean: run.kl_sum / n,
                kl_by_bucket: buckets,
                top1_agreement: run.top1 as f64 / n,
                attn_cos_mean: if run.cos_n > 0 {
                    run.cos_sum / run.cos_n as f64
                } else {
                    1.0
                },
                attn_cos_min: run.cos_min,
                decode_ms,
                decode_tok_s: if decode_ms > 0.0 {
                    1000.0 / decode_ms
                } else {
                    0.0
                },
            }
        })
        .collect();
    Ok(KvEvalReport {
        prompt_tokens: prompt.len(),
        tokens: options.tokens,
        bucket: options.bucket,
        formats,
    })
}

/// One format's cache and running sums.
struct Run {
    format: KvFormat,
    cache: crate::KvCache,
    kl_sum: f64,
    kl_bucket: Vec<f64>,
    top1: usize,
    cos_sum: f64,
    cos_n: usize,
    cos_min: f64,
    decode_ms: f64,
}

impl Run {
    fn new(format: KvFormat, cache: crate::KvCache, buckets: usize) -> Run {
        Run {
            format,
            cache,
            kl_sum: 0.0,
            kl_bucket: vec![0.0; buckets],
            top1: 0,
            cos_sum: 0.0,
            cos_n: 0,
            cos_min: 1.0,
            decode_ms: 0.0,
        }
    }
}

fn argmax(x: &[f64]) -> usize {
    x.iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv {
                (i, v)
            } else {
                (bi, bv)
            }
        })
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_by_hand() {
        assert_eq!(argmax(&[0.1, 0.7, 0.2]), 1);
    }

    struct Clock(std::cell::Cell<f64>);
    impl Platform for Clock {
        fn now_ms(&self) -> f64 {
            self.0.set(self.0.get() + 1.0);
            self.0.get()
        }
        fn peak_bytes(&self) -> u64 {
            0
        }
    }

    /// On the synthetic model: f32 against itself is exact, f16 and k8v16 stay close, int4
    /// diverges more, and the curve and bytes have the documented shape.
    #[test]
    fn formats_rank_as_their_precision_on_the_synthetic_model() {
        use crate::synthetic::{gguf_bytes, SyntheticDType};
        let bytes = gguf_bytes(7, SyntheticDType::F32).unwrap();
        let options = crate::LoadOptions {
            weights: crate::WeightsFormat::F32,
            ..Default::default()
        };
        let (model, _) =
            crate::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
                .unwrap();
        let formats = [
            KvFormat::F16,
            KvFormat::K8v16,
            KvFormat::Int4g32,
            KvFormat::Kivi4,
        ];
        let options = KvEvalOptions {
            tokens: 40,
            bucket: 16,
            ..Default::default()
        };
        let r = kv_eval(&model, &[1, 2, 3], &formats, options, &Clock(0.0.into())).unwrap();
        assert_eq!(r.formats.len(), 5);
        let get = |name: &str| r.formats.iter().find(|f| f.format == name).unwrap();
        let f32r = get("f32");
        assert_eq!(f32r.kl_mean, 0.0);
        assert_eq!(f32r.top1_agreement, 1.0);
        assert_eq!(f32r.kl_by_bucket.len(), 3, "40 positions in buckets of 16");
        // Two clock reads per step, one ms apart: 1 ms per decode step.
        assert_eq!(f32r.decode_ms, 1.0);
        let (f16, int4) = (get("f16"), get("int4g32"));
        assert!(
            f16.kl_mean > 0.0 && f16.kl_mean < int4.kl_mean,
            "{f16:?} {int4:?}"
        );
        assert!(f16.attn_cos_mean > int4.attn_cos_mean);
        assert!(f16.attn_cos_min <= f16.attn_cos_mean && f16.attn_cos_mean <= 1.0);
        assert!(get("k8v16").kv_bytes_512 < f16.kv_bytes_512);
        assert_eq!(get("kivi4").kv_bytes_2048 % 64, 0);
        // Refusals: an empty prompt, zero tokens, a context too small.
        let clock = Clock(0.0.into());
        assert!(kv_eval(&model, &[], &formats, options, &clock).is_err());
        let zero = KvEvalOptions {
            tokens: 0,
            ..options
        };
        assert!(kv_eval(&model, &[1], &formats, zero, &clock).is_err());
        let long = KvEvalOptions {
            tokens: 1000,
            ..options
        };
        assert!(matches!(
            kv_eval(&model, &[1], &formats, long, &clock),
            Err(EngineError::ContextFull { .. })
        ));
    }
}
