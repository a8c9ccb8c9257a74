//! Short micro-benchmarks that fill the estimator's `this-browser` device profile with figures
//! measured on the machine running the engine (in a browser tab through the wasm facade's
//! `measureBrowser()`, or natively).
//!
//! Three probes, each bounded in time (≤ [`MicrobenchConfig::budget_ms`], ~300 ms by default):
//! - **streaming read bandwidth**: sum a buffer larger than the last-level cache (64 MiB) with
//!   integer adds (associative, so the compiler vectorises them and the loop is bound by memory,
//!   not by an add-latency chain); GB/s = bytes / time.
//! - **f32 GEMM throughput**: [`edgefit_kernels::matmul_t`] with [`Kernel::best()`] on a small
//!   cache-resident problem (32 activation rows × 512 × 512); GFLOP/s = 2·M·K·N / time.
//! - **f32 weight rate of the engine's GEMV** (one activation row, as in decode): the same
//!   `matmul_t` on a 1536×576 weight matrix (SmolLM2-135M's MLP) and a larger 2048×2048 one;
//!   G weights/s = N·K / time, the best of the two. This is the estimator's third roof for f32
//!   weights. Only f32 is measured: the engine holds f32 weights until issue 4 adds w4 kernels.
//!
//! Time comes from the injected [`Platform`] clock, never from `Instant`, so the same code runs
//! in wasm32 (`performance.now()`) and natively, and tests can drive it with a fake clock. Each
//! probe times batches of calls (a batch lasts at least [`MicrobenchConfig::batch_ms`], so a
//! coarse browser clock — 0.1 ms in a tab that is not cross-origin isolated — still reads a
//! meaningful interval) and keeps the best batch, the usual way to filter out interruptions.

use std::collections::BTreeMap;
use std::hint::black_box;

use edgefit_estimate::{BrowserMeasurements, WeightFormat};
use edgefit_kernels::{matmul_t, Kernel};

use crate::engine::Platform;

/// Sizes and time limits of the probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MicrobenchConfig {
    /// Bytes of the buffer the bandwidth probe streams through (larger than any cache).
    pub buffer_bytes: usize,
    /// Time limit of each probe, ms (a probe may overrun by at most one batch).
    pub budget_ms: f64,
    /// A timed batch repeats the call until at least this long has passed, ms.
    pub batch_ms: f64,
    /// Upper bound on calls per batch, so a clock that never advances cannot hang a probe.
    pub max_calls_per_batch: u32,
    /// Upper bound on batches per probe.
    pub max_batches: u32,
}

impl Default for MicrobenchConfig {
    fn default() -> Self {
        MicrobenchConfig {
            buffer_bytes: 64 << 20,
            budget_ms: 250.0,
            batch_ms: 20.0,
            max_calls_per_batch: 4096,
            max_batches: 16,
        }
    }
}

/// The smallest interval a measurement is allowed to report, ms: keeps rates finite when the
/// clock did not advance during a batch.
const MIN_INTERVAL_MS: f64 = 1e-3;

/// Best time per call of `f`, ms, over batches of calls; at most `cfg.budget_ms` (plus one
/// batch) of clock time.
fn best_ms_per_call(p: &dyn Platform, cfg: &MicrobenchConfig, mut f: impl FnMut()) -> f64 {
    f(); // warm-up: page faults, caches, branch predictors
    let start = p.now_ms();
    let mut best = f64::INFINITY;
    for _ in 0..cfg.max_batches.max(1) {
        let t0 = p.now_ms();
        let mut calls = 0u32;
        let elapsed = loop {
            f();
            calls += 1;
            let el = p.now_ms() - t0;
            if el >= cfg.batch_ms || calls >= cfg.max_calls_per_batch.max(1) {
                break el;
            }
        };
        best = best.min(elapsed.max(MIN_INTERVAL_MS) / f64::from(calls));
        if p.now_ms() - start >= cfg.budget_ms {
            break;
        }
    }
    best
}

/// Deterministic values in [-1, 1) (a cheap LCG): real data, so nothing is a zero page.
fn fill(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Wrapping sum of `words` with 16 independent lanes, which the compiler turns into vector adds
/// (four i32x4 on simd128), so the loop waits on memory rather than on an add chain.
fn sum_words(words: &[u32]) -> u32 {
    const LANES: usize = 16;
    let mut acc = [0u32; LANES];
    let chunks = words.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    let mut sum = tail.iter().fold(0u32, |a, &x| a.wrapping_add(x));
    for a in acc {
        sum = sum.wrapping_add(a);
    }
    sum
}

/// Streaming read bandwidth, GB/s (10^9 bytes/s), over a buffer of `cfg.buffer_bytes`.
pub fn read_bandwidth_gbs(p: &dyn Platform, cfg: &MicrobenchConfig) -> f64 {
    let words = (cfg.buffer_bytes / 4).max(1024);
    let buf: Vec<u32> = (0..words as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let ms = best_ms_per_call(p, cfg, || {
        black_box(sum_words(black_box(&buf)));
    });
    (words * 4) as f64 / (ms * 1e6)
}

/// f32 GEMM throughput of `matmul_t` with the default kernel, GFLOP/s.
pub fn f32_gemm_gflops(p: &dyn Platform, cfg: &MicrobenchConfig) -> f64 {
    let (rows, k, n) = (32, 512, 512);
    let x = fill(rows * k, 1);
    let w = fill(n * k, 2);
    let mut out = vec![0.0f32; rows * n];
    let ms = best_ms_per_call(p, cfg, || {
        matmul_t(
            Kernel::best(),
            black_box(&x),
            rows,
            k,
            black_box(&w),
            n,
            &mut out,
        );
        black_box(&out);
    });
    2.0 * (rows * k * n) as f64 / (ms * 1e6)
}

/// Weights per second (10^9) of the engine's f32 GEMV (one activation row through
/// `matmul_t`), the best of a 1536×576 and a 2048×2048 weight matrix, each probed for half the
/// budget.
pub fn f32_gemv_weight_rate_gws(p: &dyn Platform, cfg: &MicrobenchConfig) -> f64 {
    let half = MicrobenchConfig {
        budget_ms: cfg.budget_ms / 2.0,
        ..*cfg
    };
    [(1536usize, 576usize), (2048, 2048)]
        .into_iter()
        .map(|(n, k)| {
            let x = fill(k, 3);
            let w = fill(n * k, 4);
            let mut out = vec![0.0f32; n];
            let ms = best_ms_per_call(p, &half, || {
                matmul_t(
                    Kernel::best(),
                    black_box(&x),
                    1,
                    k,
                    black_box(&w),
                    n,
                    &mut out,
                );
                black_box(&out);
            });
            (n * k) as f64 / (ms * 1e6)
        })
        .fold(0.0, f64::max)
}

/// Runs the three probes and returns what the estimator's
/// `DeviceProfile::this_browser` takes. Only the `f32` weight rate is measured (the other
/// formats keep their bundled figures there).
pub fn measure(
    p: &dyn Platform,
    cfg: &MicrobenchConfig,
    wasm_limit_bytes: Option<u64>,
) -> BrowserMeasurements {
    let read_bandwidth_gbs = read_bandwidth_gbs(p, cfg);
    let f32_gflops = f32_gemm_gflops(p, cfg);
    let f32_rate = f32_gemv_weight_rate_gws(p, cfg);
    BrowserMeasurements {
        read_bandwidth_gbs,
        f32_gflops,
        weight_rate_gws: BTreeMap::from([(WeightFormat::F32, f32_rate)]),
        wasm_limit_bytes,
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::native::NativePlatform;
    use std::cell::Cell;

    /// A clock that advances `step_ms` every time it is read, and counts the reads.
    struct FakeClock {
        t: Cell<f64>,
        reads: Cell<u64>,
        step_ms: f64,
    }

    impl Platform for FakeClock {
        fn now_ms(&self) -> f64 {
            self.reads.set(self.reads.get() + 1);
            let t = self.t.get() + self.step_ms;
            self.t.set(t);
            t
        }
        fn peak_bytes(&self) -> u64 {
            0
        }
    }

    fn small() -> MicrobenchConfig {
        MicrobenchConfig {
            buffer_bytes: 1 << 20,
            budget_ms: 100.0,
            ..MicrobenchConfig::default()
        }
    }

    fn assert_sane(m: &BrowserMeasurements) {
        for (what, v) in [
            ("bandwidth", m.read_bandwidth_gbs),
            ("gflops", m.f32_gflops),
            ("f32 rate", m.weight_rate_gws[&WeightFormat::F32]),
        ] {
            assert!(v.is_finite() && v > 0.0, "{what} = {v}");
        }
        assert_eq!(m.weight_rate_gws.len(), 1, "only f32 is measured");
    }

    #[test]
    fn sum_words_is_the_wrapping_sum() {
        let w: Vec<u32> = (0..1000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let want = w.iter().fold(0u32, |a, &x| a.wrapping_add(x));
        assert_eq!(sum_words(&w), want);
        assert_eq!(
            sum_words(&w[..7]),
            w[..7].iter().fold(0u32, |a, &x| a.wrapping_add(x))
        );
    }

    #[test]
    fn a_fake_clock_bounds_the_work() {
        let clock = FakeClock {
            t: Cell::new(0.0),
            reads: Cell::new(0),
            step_ms: 1.0,
        };
        let cfg = small();
        let m = measure(&clock, &cfg, Some(4 << 30));
        assert_sane(&m);
        assert_eq!(m.wasm_limit_bytes, Some(4 << 30));
        // Each probe stops once its budget of fake time is spent: a bounded number of reads.
        let per_probe = (cfg.budget_ms + 2.0 * cfg.batch_ms + 4.0) as u64;
        assert!(
            clock.reads.get() <= 4 * per_probe,
            "{} clock reads",
            clock.reads.get()
        );
        // With 1 ms per read, a batch of `batch_ms` reads is ~batch_ms calls: the GEMV rate
        // follows from the fake time, not the real one.
        let expect = 1536.0 * 576.0 / (1e6 * 1.0);
        assert!(m.weight_rate_gws[&WeightFormat::F32] >= expect * 0.9);
    }

    #[test]
    fn a_stuck_clock_cannot_hang_or_divide_by_zero() {
        struct Stuck;
        impl Platform for Stuck {
            fn now_ms(&self) -> f64 {
                5.0
            }
            fn peak_bytes(&self) -> u64 {
                0
            }
        }
        let cfg = MicrobenchConfig {
            buffer_bytes: 1 << 16,
            max_calls_per_batch: 4,
            max_batches: 2,
            ..MicrobenchConfig::default()
        };
        assert_sane(&measure(&Stuck, &cfg, None));
    }

    #[test]
    fn real_clock_runs_within_its_budget() {
        let p = NativePlatform::default();
        let cfg = MicrobenchConfig {
            buffer_bytes: 8 << 20,
            budget_ms: 60.0,
            batch_ms: 10.0,
            ..MicrobenchConfig::default()
        };
        let t0 = p.now_ms();
        let m = measure(&p, &cfg, None);
        let took = p.now_ms() - t0;
        assert_sane(&m);
        // Three probes of 60 ms each, plus set-up and one batch overrun each; generous for a
        // busy machine.
        assert!(took < 3000.0, "took {took} ms");
        // Sanity: a machine that runs these tests streams more than 0.1 GB/s.
        assert!(m.read_bandwidth_gbs > 0.1, "{m:?}");
    }
}
