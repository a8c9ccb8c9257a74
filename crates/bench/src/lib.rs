//! # edgefit-bench
//!
//! Kernel benchmarks: `y = x · Wᵀ` for the default model's weight shapes (SmolLM2-135M) and a
//! 4096×4096 matrix, for one activation row (decode, GEMV) and a prefill batch, with every edgefit
//! kernel this build can run ([`Kernel::available`]) on every weight format ([`Matrix`]), next to
//! the baselines measured in the same run: candle-core's f32 matmul, candle-core's `QMatMul` on
//! Q4_0 (w4a8; simd128 in wasm), edgefit's scalar reference kernel, and a streaming-read probe
//! (the practical memory limit). The same code runs natively (the `edgefit-bench` binary) and in
//! a browser (the wasm-bindgen exports in `wasm.rs`, driven by `cargo xtask bench kernels`), so
//! the two tables compare like with like.
//!
//! Timing: one warm-up call, then samples of enough back-to-back calls to last
//! [`Config::sample_ms`] each, until [`Config::budget_ms`] has passed and at least
//! [`Config::min_samples`] were taken (a call slower than [`Config::slow_ms`] is sampled once);
//! the figure is the median time per call. Time comes from an injected clock
//! (`performance.now()` in the browser, `Instant` natively). One thread everywhere.
//!
//! Each row also reports its error against candle's f32 result (`max |y − y_f32| / max |y_f32|`)
//! so a fast but wrong kernel cannot hide in the table.

use std::hint::black_box;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use edgefit_kernels::{
    pseudo_random, F16Matrix, GgmlFormat, GgmlMatrix, Kernel, Matrix, Q8Matrix, W4Kind, W4Matrix,
};
use serde::{Deserialize, Serialize};

pub mod gemma;
#[cfg(target_arch = "wasm32")]
mod wasm;

/// One weight shape: `n` output features × `k` inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub name: &'static str,
    pub n: usize,
    pub k: usize,
    /// Whether the int8 format is benchmarked too (the output head, which edgefit keeps in q8).
    pub q8: bool,
}

/// SmolLM2-135M's matrices (hidden 576, q 576, kv 192, ffn 1536, vocab 49152) and 4096×4096.
pub const SHAPES: [Shape; 6] = [
    Shape {
        name: "attn q,o",
        n: 576,
        k: 576,
        q8: false,
    },
    Shape {
        name: "attn k,v",
        n: 192,
        k: 576,
        q8: false,
    },
    Shape {
        name: "mlp gate,up",
        n: 1536,
        k: 576,
        q8: false,
    },
    Shape {
        name: "mlp down",
        n: 576,
        k: 1536,
        q8: false,
    },
    Shape {
        name: "head",
        n: 49152,
        k: 576,
        q8: true,
    },
    Shape {
        name: "large",
        n: 4096,
        k: 4096,
        q8: false,
    },
];

/// What to run and for how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Activation rows: 1 is decode (GEMV), more is a prefill batch.
    pub ms: Vec<usize>,
    /// Only shapes whose name or `n×k` contains one of these (all when empty).
    pub shapes: Vec<String>,
    /// Time per row, ms (a row may overrun by one sample).
    pub budget_ms: f64,
    /// Samples per row at least (unless a call is slower than `slow_ms`).
    pub min_samples: usize,
    /// Samples per row at most.
    pub max_samples: usize,
    /// A sample repeats the call until it lasts at least this long, ms (coarse browser clocks).
    pub sample_ms: f64,
    /// A call slower than this (its warm-up) is sampled once.
    pub slow_ms: f64,
    /// Bytes the streaming-read probe sums (larger than any cache).
    pub stream_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ms: vec![1, 64],
            shapes: Vec::new(),
            budget_ms: 300.0,
            min_samples: 5,
            max_samples: 200,
            sample_ms: 2.0,
            slow_ms: 1000.0,
            stream_bytes: 128 << 20,
        }
    }
}

impl Config {
    /// Decode only, shorter budgets: a first look in well under a minute.
    pub fn quick() -> Config {
        Config {
            ms: vec![1],
            budget_ms: 100.0,
            min_samples: 3,
            slow_ms: 300.0,
            ..Config::default()
        }
    }

    /// The shapes this configuration selects.
    pub fn selected_shapes(&self) -> Vec<Shape> {
        SHAPES
            .iter()
            .copied()
            .filter(|s| {
                self.shapes.is_empty()
                    || self.shapes.iter().any(|f| {
                        s.name.contains(f.as_str()) || format!("{}x{}", s.n, s.k).contains(f)
                    })
            })
            .collect()
    }
}

/// One measured row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub shape: String,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    /// `candle` or `edgefit`.
    pub engine: String,
    /// `matmul` / `QMatMul` (candle) or an edgefit [`Kernel::name`].
    pub kernel: String,
    /// Weight format: `f32`, `q4_0` (candle), or [`Matrix::format_name`].
    pub format: String,
    /// Weight bytes read per call (packed values, scales and minimums).
    pub bytes: u64,
    /// Median time per call, ms.
    pub ms: f64,
    /// Samples taken.
    pub samples: usize,
    /// `max |y − y_f32| / max |y_f32|` against candle's f32 result.
    pub err: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where it ran (`native x86_64`, `Chromium …, wasm32 simd128`).
    pub runtime: String,
    /// [`Kernel::available`] names.
    pub kernels: Vec<String>,
    /// Streaming-read rate, GB/s (10⁹ bytes per second).
    pub stream_gbs: f64,
    pub stream_bytes: usize,
    pub rows: Vec<Row>,
}

/// Median time per call of `f`, ms, and the number of samples (see the crate docs).
pub fn time_ms(clock: &dyn Fn() -> f64, cfg: &Config, mut f: impl FnMut()) -> (f64, usize) {
    let t0 = clock();
    f();
    let warm = (clock() - t0).max(1e-4);
    let calls = if warm >= cfg.sample_ms {
        1
    } else {
        ((cfg.sample_ms / warm).ceil() as usize).clamp(1, 1 << 20)
    };
    let slow = warm >= cfg.slow_ms;
    let start = clock();
    let mut per_call = Vec::new();
    loop {
        let t = clock();
        for _ in 0..calls {
            f();
        }
        per_call.push((clock() - t).max(1e-6) / calls as f64);
        let elapsed = clock() - start;
        if slow
            || per_call.len() >= cfg.max_samples.max(1)
            || (elapsed >= cfg.budget_ms && per_call.len() >= cfg.min_samples.max(1))
        {
            break;
        }
    }
    (median(&mut per_call), per_call.len())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Streaming-read rate over `cfg.stream_bytes`, GB/s (median pass).
pub fn stream_gbs(clock: &dyn Fn() -> f64, cfg: &Config) -> f64 {
    let words = (cfg.stream_bytes / 4).max(1024);
    let buf: Vec<u32> = (0..words as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let (ms, _) = time_ms(clock, cfg, || {
        black_box(edgefit_kernels::wrapping_sum(black_box(&buf)));
    });
    (words * 4) as f64 / (ms * 1e6)
}

fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
    let diff = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max(f64::from((g - w).abs())));
    if got.len() != want.len() || got.iter().any(|v| !v.is_finite()) {
        f64::INFINITY
    } else if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}

fn candle_err(e: candle_core::Error) -> String {
    format!("candle: {e}")
}

/// Runs every row of one shape, for each `m` of `cfg`. `progress` gets a line per row.
pub fn run_shape(
    shape: &Shape,
    cfg: &Config,
    clock: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, String> {
    let (n, k) = (shape.n, shape.k);
    let seed = (n * 31 + k) as u64;
    let w = pseudo_random(seed, n * k);
    let dev = Device::Cpu;
    let cw = Tensor::from_slice(&w, (n, k), &dev).map_err(candle_err)?;
    let cwt = cw.t().map_err(candle_err)?;
    let q4 = QMatMul::from_qtensor(QTensor::quantize(&cw, GgmlDType::Q4_0).map_err(candle_err)?)
        .map_err(candle_err)?;
    if !matches!(q4, QMatMul::QTensor(_)) {
        return Err("candle dequantized Q4_0 to floats (CANDLE_DEQUANTIZE_ALL is set?)".into());
    }
    let kerr = |e: edgefit_kernels::KernelError| e.to_string();
    let mut mats = vec![
        Matrix::W4(W4Matrix::quantize(&w, n, k, 32, W4Kind::Symmetric).map_err(kerr)?),
        Matrix::W4(W4Matrix::quantize(&w, n, k, 128, W4Kind::Symmetric).map_err(kerr)?),
        Matrix::W4(W4Matrix::quantize(&w, n, k, 32, W4Kind::Asymmetric).map_err(kerr)?),
    ];
    // ggml's block formats, quantized by candle (ggml's quantizers) and kept as those blocks.
    for format in GgmlFormat::ALL {
        if !k.is_multiple_of(format.block_values()) {
            continue; // K-quants need rows of whole 256-value super-blocks
        }
        let dtype = match format {
            GgmlFormat::Q5_0 => GgmlDType::Q5_0,
            GgmlFormat::Q5_1 => GgmlDType::Q5_1,
            GgmlFormat::Q4K => GgmlDType::Q4K,
            GgmlFormat::Q5K => GgmlDType::Q5K,
            GgmlFormat::Q6K => GgmlDType::Q6K,
        };
        let q = QTensor::quantize(&cw, dtype).map_err(candle_err)?;
        let data = q.data().map_err(candle_err)?;
        mats.push(Matrix::Ggml(
            GgmlMatrix::from_ggml(format, &data, n, k).map_err(kerr)?,
        ));
    }
    if shape.q8 {
        mats.push(Matrix::Q8(Q8Matrix::quantize(&w, n, k).map_err(kerr)?));
    }
    drop(cw);
    mats.push(Matrix::F16(F16Matrix::from_f32(&w, n, k).map_err(kerr)?));
    mats.push(Matrix::F32 {
        data: w,
        rows: n,
        cols: k,
    });

    let mut rows = Vec::new();
    let mut push = |rows: &mut Vec<Row>, row: Row| {
        progress(&row);
        rows.push(row);
    };
    for &m in &cfg.ms {
        let x = pseudo_random(seed ^ 0xA5A5 ^ m as u64, m * k);
        let cx = Tensor::from_slice(&x, (m, k), &dev).map_err(candle_err)?;
        let row = |engine: &str, kernel: &str, format: &str, bytes: u64, t: (f64, usize)| Row {
            shape: shape.name.to_string(),
            n,
            k,
            m,
            engine: engine.into(),
            kernel: kernel.into(),
            format: format.into(),
            bytes,
            ms: t.0,
            samples: t.1,
            err: 0.0,
        };

        // candle f32: also the reference result for every error column.
        let reference: Vec<f32> = cx
            .matmul(&cwt)
            .and_then(|y| y.flatten_all())
            .and_then(|y| y.to_vec1())
            .map_err(candle_err)?;
        let t = time_ms(clock, cfg, || {
            black_box(cx.matmul(&cwt).expect("candle matmul"));
        });
        push(
            &mut rows,
            row("candle", "matmul", "f32", (n * k * 4) as u64, t),
        );

        let got: Vec<f32> = q4
            .forward(&cx)
            .and_then(|y| y.flatten_all())
            .and_then(|y| y.to_vec1())
            .map_err(candle_err)?;
        let t = time_ms(clock, cfg, || {
            black_box(q4.forward(&cx).expect("candle QMatMul"));
        });
        let mut r = row("candle", "QMatMul", "q4_0", (n * k / 32 * 18) as u64, t);
        r.err = rel_err(&got, &reference);
        push(&mut rows, r);

        let mut out = vec![0.0f32; m * n];
        for mat in &mats {
            for kernel in Kernel::available() {
                out.fill(f32::NAN);
                mat.matmul_t(kernel, &x, m, &mut out);
                let err = rel_err(&out, &reference);
                let t = time_ms(clock, cfg, || {
                    mat.matmul_t(kernel, black_box(&x), m, &mut out);
                    black_box(&out);
                });
                let mut r = row("edgefit", kernel.name(), mat.format_name(), mat.bytes(), t);
                r.err = err;
                push(&mut rows, r);
            }
        }
    }
    Ok(rows)
}

/// The kernels this build can run, by name.
pub fn kernel_names() -> Vec<String> {
    Kernel::available()
        .into_iter()
        .map(|k| k.name().to_string())
        .collect()
}

/// Runs everything `cfg` selects.
pub fn run_all(
    runtime: &str,
    cfg: &Config,
    clock: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(&Row),
) -> Result<Report, String> {
    let stream = stream_gbs(clock, cfg);
    let mut rows = Vec::new();
    for shape in cfg.selected_shapes() {
        rows.extend(run_shape(&shape, cfg, clock, progress)?);
    }
    Ok(Report {
        runtime: runtime.to_string(),
        kernels: kernel_names(),
        stream_gbs: stream,
        stream_bytes: cfg.stream_bytes,
        rows,
    })
}

fn mb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e6)
}

fn ratio(base: Option<f64>, ms: f64) -> String {
    match base {
        Some(b) if b.is_finite() && ms > 0.0 => format!("{:.2}", b / ms),
        _ => "-".into(),
    }
}

/// One progress line for a row (for logs while the bench runs).
pub fn progress_line(r: &Row) -> String {
    format!(
        "  {} {}x{} m={} {} {} {}: {:.4} ms ({} samples)",
        r.shape, r.n, r.k, r.m, r.engine, r.kernel, r.format, r.ms, r.samples
    )
}

/// The report as a plain-text table: one block per shape and `m`, ratios against the baselines
/// of the same block.
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "edgefit kernel bench: {}; 1 thread; edgefit kernels available: {}",
        report.runtime,
        report.kernels.join(", ")
    );
    let _ = writeln!(
        s,
        "streaming read ({} MiB, u32 sums): {:.1} GB/s",
        report.stream_bytes >> 20,
        report.stream_gbs
    );
    let _ = writeln!(
        s,
        "ms = median per call after a warm-up (n = samples); edgefit times include quantizing \
         x to int16 for w4/q8 (candle's QMatMul includes its q8_0 step)\n\
         GB/s = weight bytes (packed + scales) / time; %read = GB/s / streaming read\n\
         xf32, xq4_0, xscalar = speed-up over candle f32 matmul, candle QMatMul Q4_0 and edgefit \
         scalar (same format), same run\n\
         err = max|y - y_f32| / max|y_f32| against candle f32"
    );
    let mut blocks: Vec<(String, usize, usize, usize)> = Vec::new();
    for r in &report.rows {
        let key = (r.shape.clone(), r.n, r.k, r.m);
        if !blocks.contains(&key) {
            blocks.push(key);
        }
    }
    for (shape, n, k, m) in blocks {
        let rows: Vec<&Row> = report
            .rows
            .iter()
            .filter(|r| r.shape == shape && r.n == n && r.k == k && r.m == m)
            .collect();
        let find = |engine: &str, kernel: &str, format: &str| {
            rows.iter()
                .find(|r| r.engine == engine && r.kernel == kernel && r.format == format)
                .map(|r| r.ms)
        };
        let f32_ms = find("candle", "matmul", "f32");
        let q4_ms = find("candle", "QMatMul", "q4_0");
        let what = if m == 1 { "decode" } else { "prefill" };
        let _ = writeln!(s, "\ny = x·Wᵀ, W {n}×{k} ({shape}), m = {m} ({what})");
        let _ = writeln!(
            s,
            "{:<8} {:<9} {:<7} {:>8} {:>11} {:>4} {:>8} {:>7} {:>6} {:>6} {:>6} {:>8} {:>8}",
            "engine",
            "kernel",
            "format",
            "MB",
            "ms",
            "n",
            "GFLOP/s",
            "GB/s",
            "%read",
            "xf32",
            "xq4_0",
            "xscalar",
            "err"
        );
        for r in rows.iter() {
            let flops = 2.0 * (r.m * r.n * r.k) as f64;
            let gbs = r.bytes as f64 / (r.ms * 1e6);
            let scalar = if r.engine == "edgefit" {
                find("edgefit", "scalar", &r.format)
            } else {
                None
            };
            let _ = writeln!(
                s,
                "{:<8} {:<9} {:<7} {:>8} {:>11.4} {:>4} {:>8.2} {:>7.2} {:>5.0}% {:>6} {:>6} {:>8} {:>8.1e}",
                r.engine,
                r.kernel,
                r.format,
                mb(r.bytes),
                r.ms,
                r.samples,
                flops / (r.ms * 1e6),
                gbs,
                100.0 * gbs / report.stream_gbs,
                ratio(f32_ms, r.ms),
                ratio(q4_ms, r.ms),
                ratio(scalar, r.ms),
                r.err
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_timing_are_bounded() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        // A fake clock that advances 1 ms per read: bounded work, finite result.
        let t = std::cell::Cell::new(0.0);
        let clock = || {
            t.set(t.get() + 1.0);
            t.get()
        };
        let cfg = Config::default();
        let mut calls = 0;
        let (ms, n) = time_ms(&clock, &cfg, || calls += 1);
        assert!(ms.is_finite() && ms > 0.0);
        assert!(n >= cfg.min_samples && n <= cfg.max_samples);
        assert!(calls < 10_000);
    }

    #[test]
    fn a_tiny_run_renders_every_row_with_small_errors() {
        let cfg = Config {
            ms: vec![1, 3],
            shapes: vec!["k,v".into()],
            budget_ms: 1.0,
            min_samples: 1,
            stream_bytes: 1 << 16,
            ..Config::default()
        };
        let start = std::time::Instant::now();
        let clock = || start.elapsed().as_secs_f64() * 1e3;
        let report = run_all("test", &cfg, &clock, &mut |_| {}).unwrap();
        // w4g32, w4g128, q4_1, q5_0, q5_1 (k = 576 has no whole K-quant super-blocks), f16, f32.
        let per_m = 2 + 7 * Kernel::available().len();
        assert_eq!(report.rows.len(), 2 * per_m);
        for r in &report.rows {
            // f16 rounds the weights (~1e-4), 4-bit formats much more.
            let budget = match r.format.as_str() {
                "f32" => 1e-5,
                "f16" | "q8_0" => 1e-2,
                _ => 0.1,
            };
            assert!(r.err <= budget, "{r:?}");
        }
        let table = render(&report);
        assert!(
            table.contains("W 192×576 (attn k,v), m = 3 (prefill)"),
            "{table}"
        );
        assert!(table.contains("q4_1"), "{table}");
        assert!(table.contains("q5_1"), "{table}");
    }
}
