//! Row ranges and threads give the same bits as one whole product: every format, every kernel
//! this build runs, odd row counts (not multiples of 8), one token and several (the GEMM paths),
//! split into 2, 3 and 7 ranges by hand (which runs on wasm32 too, so the simd128 range paths
//! are checked in Node) and on pools of 2, 3 and 7 threads natively.

use crate::ggml::{GgmlFormat, GgmlMatrix};
use crate::pool::split;
#[cfg(not(target_arch = "wasm32"))]
use crate::pool::Pool;
use crate::quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};
use crate::{pseudo_random, ActQ16, Kernel, Matrix, Prepared};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::ggml_tests::{blocks, Scales};

/// Every format as a `rows × cols` matrix.
fn matrices(rows: usize, cols: usize, seed: u64) -> Vec<Matrix> {
    let w = pseudo_random(seed, rows * cols);
    let mut out = vec![
        Matrix::F32 {
            data: w.clone(),
            rows,
            cols,
        },
        Matrix::F16(F16Matrix::from_f32(&w, rows, cols).expect("f16")),
        Matrix::Q8(Q8Matrix::quantize(&w, rows, cols).expect("q8")),
        Matrix::W4(W4Matrix::quantize(&w, rows, cols, 32, W4Kind::Asymmetric).expect("q4_1")),
    ];
    for group in [32, 64, 128] {
        if cols.is_multiple_of(group) {
            let m = W4Matrix::quantize(&w, rows, cols, group, W4Kind::Symmetric).expect("w4");
            out.push(Matrix::W4(m));
        }
    }
    for f in GgmlFormat::ALL {
        if cols.is_multiple_of(f.block_values()) {
            let data = blocks(f, rows, cols, seed, Scales::Random);
            out.push(Matrix::Ggml(
                GgmlMatrix::from_ggml(f, &data, rows, cols).expect("ggml"),
            ));
        }
    }
    out
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn row_ranges_give_the_bits_of_the_whole_product() {
    for (rows, cols) in [(203, 256), (61, 96), (5, 256)] {
        for w in matrices(rows, cols, rows as u64) {
            for kernel in Kernel::available() {
                for m in [1, 2, 7] {
                    let x = pseudo_random(7 + m as u64, m * cols);
                    let mut whole = vec![0.0; m * rows];
                    w.matmul_t(kernel, &x, m, &mut whole);
                    let mut prep = Prepared::default();
                    prep.prepare(kernel, &x, m, cols, [&w], &ActQ16::requantize);
                    for jobs in [2, 3, 7] {
                        let mut got = vec![f32::NAN; m * rows];
                        for j in 0..jobs {
                            let r = split(rows, jobs, j);
                            let mut block = vec![0.0; m * r.len()];
                            w.matmul_rows(&prep, &x, r.clone(), &mut block);
                            for t in 0..m {
                                got[t * rows + r.start..t * rows + r.end]
                                    .copy_from_slice(&block[t * r.len()..(t + 1) * r.len()]);
                            }
                        }
                        assert!(
                            same_bits(&got, &whole),
                            "{} {rows}x{cols} {} m={m} in {jobs} ranges",
                            w.format_name(),
                            kernel.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "multiple of 8")]
fn a_misaligned_range_is_refused() {
    let w = &matrices(16, 32, 1)[0];
    let x = pseudo_random(2, 32);
    let mut prep = Prepared::default();
    prep.prepare(Kernel::Scalar, &x, 1, 32, [w], &ActQ16::requantize);
    let mut out = vec![0.0; 5];
    w.matmul_rows(&prep, &x, 3..8, &mut out);
}

#[test]
#[should_panic(expected = "not prepared")]
fn a_matrix_the_input_was_not_prepared_for_is_refused() {
    let mats = matrices(16, 32, 1);
    let (f32m, q8) = (&mats[0], &mats[2]);
    let x = pseudo_random(2, 32);
    let mut prep = Prepared::default();
    prep.prepare(Kernel::best(), &x, 1, 32, [f32m], &ActQ16::requantize);
    let mut out = vec![0.0; 16];
    q8.matmul_rows(&prep, &x, 0..16, &mut out);
}

/// Pools of any size give the bits of one thread: each matrix alone and a q/k/v-like group of
/// three widths in one region.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn pools_of_any_size_give_the_bits_of_one_thread() {
    let pools: Vec<Pool> = [2, 3, 7].map(|n| Pool::new(n).expect("pool")).into();
    let cols = 256;
    let (big, small) = (matrices(203, cols, 3), matrices(61, cols, 4));
    for kernel in Kernel::available() {
        for m in [1, 2, 7] {
            let x = pseudo_random(11 + m as u64, m * cols);
            for (a, b) in big.iter().zip(&small) {
                let (mut w0, mut w1) = (vec![0.0; m * 203], vec![0.0; m * 61]);
                a.matmul_t(kernel, &x, m, &mut w0);
                b.matmul_t(kernel, &x, m, &mut w1);
                let want = [w0.clone(), w1, w0];
                for pool in &pools {
                    let (mut prep, mut scratch) = (Prepared::default(), Vec::new());
                    let (mut o0, mut o1, mut o2) = (Vec::new(), Vec::new(), Vec::new());
                    pool.linear(
                        kernel,
                        &mut prep,
                        &mut scratch,
                        &x,
                        m,
                        &mut [(a, &mut o0), (b, &mut o1), (a, &mut o2)],
                    );
                    let label = format!(
                        "{}/{} {} m={m} on {} threads",
                        a.format_name(),
                        b.format_name(),
                        kernel.name(),
                        pool.threads()
                    );
                    assert!(same_bits(&o0, &want[0]), "{label}: first");
                    assert!(same_bits(&o1, &want[1]), "{label}: second");
                    assert!(same_bits(&o2, &want[2]), "{label}: third");
                }
            }
        }
    }
}

/// Items (attention heads) on any pool: each item sees only its own index and a scratch run.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn items_on_any_pool_match_one_thread() {
    let f = |i: usize, out: &mut [f32], sc: &mut [f32]| {
        for (j, s) in sc.iter_mut().enumerate() {
            *s = (i * 31 + j) as f32 * 0.37;
        }
        let sum: f32 = sc.iter().take(i % 9 + 1).sum();
        for (j, o) in out.iter_mut().enumerate() {
            *o = sum * (j as f32 + 1.0).sqrt();
        }
    };
    let (items, len) = (67, 5);
    let mut want = vec![0.0; items * len];
    Pool::serial().for_each_item(&mut want, len, &mut Vec::new(), 13, &f);
    for n in [2, 3, 7] {
        let pool = Pool::new(n).expect("pool");
        let mut got = vec![f32::NAN; items * len];
        pool.for_each_item(&mut got, len, &mut Vec::new(), 13, &f);
        assert!(same_bits(&got, &want), "{n} threads");
    }
}
