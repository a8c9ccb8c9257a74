//! Next-token sampling: greedy, temperature, top-p (nucleus), seeded.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
use crate::ops::softmax;

/// How to pick the next token. `temperature == 0` means greedy (argmax, lowest id on ties).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplerConfig {
    pub temperature: f32,
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// Highest temperature accepted; beyond it sampling is indistinguishable from uniform noise.
pub const MAX_TEMPERATURE: f32 = 10.0;

impl SamplerConfig {
    /// Rejects settings outside their meaningful range rather than clamping them.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && (0.0..=MAX_TEMPERATURE).contains(&self.temperature)) {
            return Err(EngineError::Setting {
                name: "temperature",
                value: self.temperature.to_string(),
                expected: format!("a number from 0 (greedy) to {MAX_TEMPERATURE}"),
            });
        }
        if !(self.top_p.is_finite() && self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(EngineError::Setting {
                name: "top_p",
                value: self.top_p.to_string(),
                expected: "a number in (0, 1]".to_string(),
            });
        }
        Ok(())
    }
}

/// A sampler with its own random stream, so a seed reproduces a generation exactly.
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplerConfig,
    rng: StdRng,
}

impl Sampler {
    /// A validated sampler.
    pub fn new(config: SamplerConfig) -> Result<Self> {
        config.validate()?;
        Ok(Sampler {
            config,
            rng: StdRng::seed_from_u64(config.seed),
        })
    }

    /// Picks a token from one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.config.temperature == 0.0 {
            return argmax(logits);
        }
        let mut probs: Vec<f32> = logits.iter().map(|l| l / self.config.temperature).collect();
        softmax(&mut probs);
        let mut order: Vec<u32> = (0..probs.len() as u32).collect();
        order.sort_unstable_by(|a, b| {
            probs[*b as usize]
                .total_cmp(&probs[*a as usize])
                .then(a.cmp(b))
        });
        // Smallest prefix whose mass reaches top_p (always at least one token).
        let mut mass = 0.0;
        let mut keep = 0;
        for &id in &order {
            mass += probs[id as usize];
            keep += 1;
            if mass >= self.config.top_p {
                break;
            }
        }
        let r: f32 = self.rng.random::<f32>() * mass;
        let mut acc = 0.0;
        for &id in &order[..keep] {
            acc += probs[id as usize];
            if r < acc {
                return id;
            }
        }
        order[keep - 1]
    }
}

/// Index of the largest value (the first one on ties; NaN never wins; all NaN: the last
/// index, as [`argmax_scan`]; empty: 0).
///
/// Two passes the compiler vectorises (Gemma's 262,144 logits per greedy token: the
/// one-chain scan was 1.9% of a decode step in Chromium): the largest non-NaN value `m`
/// (16 independent lanes of `if x > acc { acc = x }`, from −∞: a NaN never compares
/// greater; simd128's `f32x4.pmax`), then the first index holding `m`. That is where
/// [`argmax_scan`] ends: it moves only to a strictly larger value or away from a NaN, so it
/// stops at the first occurrence of the largest non-NaN value, and on the last index when
/// every value is NaN (no index holds `m` then, as `m` stays −∞ and NaN ≠ −∞).
pub fn argmax(v: &[f32]) -> u32 {
    const LANES: usize = 16;
    let pmax = |a: f32, x: f32| if x > a { x } else { a };
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = pmax(acc[i], c[i]);
        }
    }
    let m = tail
        .iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |a, &x| pmax(a, x));
    match v.iter().position(|&x| x == m) {
        Some(i) => i as u32,
        // Every value is NaN (or there are none).
        None => v.len().saturating_sub(1) as u32,
    }
}

/// The reference for [`argmax`]: one scan in index order, moving to a strictly larger value
/// or away from a NaN.
pub fn argmax_scan(v: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_argmax() {
        let mut s = Sampler::new(SamplerConfig::default()).unwrap();
        assert_eq!(s.sample(&[0.1, 3.0, -2.0, 3.0]), 1);
    }

    #[test]
    fn seeded_sampling_repeats_and_top_p_cuts_the_tail() {
        let logits = [2.0, 1.9, -5.0, -6.0, -7.0];
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_p: 0.9,
            seed: 42,
        };
        let draw = |cfg| {
            let mut s = Sampler::new(cfg).unwrap();
            (0..200).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draw(cfg);
        assert_eq!(a, draw(cfg));
        assert!(
            a.iter().all(|&t| t < 2),
            "top-p 0.9 keeps only the first two tokens"
        );
        assert!(a.contains(&0) && a.contains(&1));
        assert_ne!(a, draw(SamplerConfig { seed: 43, ..cfg }));
    }

    #[test]
    fn argmax_matches_the_scan_on_ties_nans_and_infinities() {
        let mut cases: Vec<Vec<f32>> = vec![
            vec![],
            vec![f32::NAN],
            vec![f32::NAN; 40],
            vec![f32::NEG_INFINITY; 37],
            vec![0.0, -0.0, 0.0],
            vec![-0.0, 0.0],
            vec![f32::NAN, 1.0, 3.0, f32::NAN, 3.0],
            vec![f32::INFINITY, f32::NAN, f32::INFINITY],
            vec![-1.0, f32::NAN, -2.0],
        ];
        // Random rows of many lengths (remainders of the 16 lanes), some with NaN, repeated
        // maxima and ±∞ planted at random places.
        for len in [1usize, 15, 16, 17, 33, 100, 1000, 4099] {
            for seed in 0..6u64 {
                let mut v = edgefit_kernels::pseudo_random(seed * 31 + len as u64, len);
                let r = edgefit_kernels::pseudo_random(seed + 7, 4);
                let at = |i: usize| ((r[i] + 1.0) * 0.5 * len as f32) as usize % len;
                match seed {
                    1 => v[at(0)] = f32::NAN,
                    2 => {
                        let m = v.iter().cloned().fold(f32::MIN, f32::max);
                        v[at(1)] = m;
                        v[at(2)] = m;
                    }
                    3 => v[at(0)] = f32::INFINITY,
                    4 => v.iter_mut().for_each(|x| *x = x.round()),
                    5 => {
                        v[at(0)] = f32::NAN;
                        v[at(3)] = f32::NEG_INFINITY;
                    }
                    _ => {}
                }
                cases.push(v);
            }
        }
        for v in &cases {
            assert_eq!(argmax(v), argmax_scan(v), "{v:?}");
        }
    }

    #[test]
    fn bad_settings_are_rejected() {
        for (t, p) in [
            (-1.0, 1.0),
            (f32::NAN, 1.0),
            (11.0, 1.0),
            (1.0, 0.0),
            (1.0, 1.5),
        ] {
            let cfg = SamplerConfig {
                temperature: t,
                top_p: p,
                seed: 0,
            };
            assert!(Sampler::new(cfg).is_err(), "{t} {p}");
        }
    }
}
