//! Gemma 3 270M's matrix products, one at a time (`edgefit-bench --gemma`, `runGemma` in
//! wasm): each weight shape of the Q4_K_M file in the formats that file holds it in (and the
//! other ggml formats whose blocks fit its rows), plus the q8_0 output head (262,144 × 640, the
//! tied embedding). One token (decode), [`Kernel::best`], one thread; the time is
//! [`Matrix::matmul_rows`] over the whole matrix from an input prepared once
//! ([`Prepared`]), i.e. the product without the activations' quantization, which the engine
//! shares between the matrices reading one input.
//!
//! `cfg.shapes` picks cases by name or format substring (`--shapes q6_k,head`).
//!
//! The weights are random blocks with small finite fp16 scales (every kernel's work is
//! independent of the values), so the bench needs neither the model file nor candle.

use std::hint::black_box;

use edgefit_kernels::{
    pseudo_random, ActQ16, GgmlFormat, GgmlMatrix, Kernel, Matrix, Prepared, Q8Matrix,
};

use crate::Config;

/// Median and minimum time per call of `f`, ms, and the samples: one warm-up call, then
/// samples of enough calls to last `cfg.sample_ms`, for `cfg.budget_ms` (at least
/// `cfg.min_samples`, at most `cfg.max_samples`). The minimum is the least disturbed sample
/// when other work shares the CPU.
fn time_min_ms(clock: &dyn Fn() -> f64, cfg: &Config, mut f: impl FnMut()) -> (f64, f64, usize) {
    let t0 = clock();
    f();
    let warm = (clock() - t0).max(1e-4);
    let calls = ((cfg.sample_ms / warm).ceil() as usize).clamp(1, 1 << 20);
    let start = clock();
    let mut per_call = Vec::new();
    while per_call.len() < cfg.max_samples.max(1)
        && (clock() - start < cfg.budget_ms || per_call.len() < cfg.min_samples.max(1))
    {
        let t = clock();
        for _ in 0..calls {
            f();
        }
        per_call.push((clock() - t).max(1e-6) / calls as f64);
    }
    per_call.sort_by(f64::total_cmp);
    let median = per_call[per_call.len() / 2];
    (median, per_call[0], per_call.len())
}

/// One product: `name`, format, `n` outputs × `k` inputs.
#[derive(Debug, Clone, Copy)]
pub struct GemmaCase {
    pub name: &'static str,
    pub format: &'static str,
    pub n: usize,
    pub k: usize,
}

const fn case(name: &'static str, format: &'static str, n: usize, k: usize) -> GemmaCase {
    GemmaCase { name, format, n, k }
}

/// Gemma 3 270M (hidden 640, 4 query heads and 1 KV head of 256, FFN 2048, vocabulary
/// 262,144): the file's formats first (`ffn_gate`/`ffn_up`, `attn_q`: q5_0; `ffn_down`: q4_k
/// or q6_k; `attn_output`: q4_k; the head q8_0), then the other formats at those shapes.
pub const GEMMA_CASES: [GemmaCase; 12] = [
    case("ffn gate,up 640→2048", "q5_0", 2048, 640),
    case("attn q 640→1024", "q5_0", 1024, 640),
    case("ffn down 2048→640", "q4_k", 640, 2048),
    case("ffn down 2048→640", "q6_k", 640, 2048),
    case("attn out 1024→640", "q4_k", 640, 1024),
    case("head 640→262144", "q8_0", 262_144, 640),
    case("ffn gate,up 640→2048", "q5_1", 2048, 640),
    case("attn q 640→1024", "q5_1", 1024, 640),
    case("ffn down 2048→640", "q5_0", 640, 2048),
    case("ffn down 2048→640", "q5_1", 640, 2048),
    case("ffn down 2048→640", "q5_k", 640, 2048),
    case("attn out 1024→640", "q6_k", 640, 1024),
];

/// Random blocks of `format` for `n × k` with fp16 scales (and minimums) of either sign in
/// `[2⁻⁵, 2⁻⁴)` (exponent bits `0x2800`, a random mantissa).
fn matrix(format: &str, n: usize, k: usize, seed: u64) -> Result<Matrix, String> {
    let err = |e: edgefit_kernels::KernelError| e.to_string();
    let (block, bytes, fields): (usize, usize, &[usize]) = match format {
        "q8_0" => (32, 34, &[0]),
        "q5_0" => (32, 22, &[0]),
        "q5_1" => (32, 24, &[0, 2]),
        "q4_k" => (256, 144, &[0, 2]),
        "q5_k" => (256, 176, &[0, 2]),
        "q6_k" => (256, 210, &[208]),
        other => return Err(format!("no such format `{other}`")),
    };
    let blocks = n * k / block;
    let noise = pseudo_random(seed, blocks * bytes / 4 + 1);
    let mut data: Vec<u8> = noise
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .take(blocks * bytes)
        .collect();
    for blk in data.chunks_exact_mut(bytes) {
        for &at in fields {
            let r = u16::from_le_bytes([blk[at], blk[at + 1]]);
            let h = 0x2800 | (r & 0x83FF);
            blk[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    if format == "q8_0" {
        return Ok(Matrix::Q8(Q8Matrix::from_q8_0(&data, n, k).map_err(err)?));
    }
    let f = GgmlFormat::ALL
        .into_iter()
        .find(|f| f.name() == format)
        .ok_or(format!("no such format `{format}`"))?;
    Ok(Matrix::Ggml(
        GgmlMatrix::from_ggml(f, &data, n, k).map_err(err)?,
    ))
}

/// Times every case (one token, [`Kernel::best`]) and returns the table.
pub fn run_gemma(runtime: &str, cfg: &Config, clock: &dyn Fn() -> f64) -> Result<String, String> {
    use std::fmt::Write;
    let kernel = Kernel::best();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Gemma 3 270M matrix products: {runtime}; kernel {}; 1 thread; m = 1 (decode); \
         ms = median per call of the product alone (input prepared once), min ms = fastest sample \
         (the figure to compare on a shared machine)",
        kernel.name()
    );
    let _ = writeln!(
        s,
        "{:<22} {:<6} {:>7} {:>5} {:>8} {:>10} {:>10} {:>5} {:>7}",
        "matrix", "format", "n", "k", "MB", "ms", "min ms", "n", "GB/s(min)"
    );
    for (i, c) in GEMMA_CASES.iter().enumerate() {
        // `cfg.shapes`: only cases whose name or format contains one of them (all if empty).
        let picked = cfg.shapes.is_empty()
            || cfg
                .shapes
                .iter()
                .any(|f| c.name.contains(f.as_str()) || c.format == f);
        if !picked {
            continue;
        }
        let w = matrix(c.format, c.n, c.k, 7 + i as u64)?;
        let x = pseudo_random(99 + i as u64, c.k);
        let mut prep = Prepared::default();
        prep.prepare(kernel, &x, 1, c.k, [&w], &ActQ16::requantize);
        let mut out = vec![0.0f32; c.n];
        let (ms, min, samples) = time_min_ms(clock, cfg, || {
            w.matmul_rows(&prep, black_box(&x), 0..c.n, &mut out);
            black_box(&out);
        });
        let _ = writeln!(
            s,
            "{:<22} {:<6} {:>7} {:>5} {:>8.2} {:>10.4} {:>10.4} {:>5} {:>7.2}",
            c.name,
            c.format,
            c.n,
            c.k,
            w.bytes() as f64 / 1e6,
            ms,
            min,
            samples,
            w.bytes() as f64 / (min * 1e6)
        );
    }
    Ok(s)
}
