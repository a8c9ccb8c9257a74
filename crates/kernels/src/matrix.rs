//! [`Matrix`]: one weight matrix in any format, and the kernel dispatch for `y = x · Wᵀ`.

use crate::act::ActQ16;
use crate::ggml::GgmlMatrix;
use crate::quant::{F16Matrix, Q8Matrix, W4Matrix};
use crate::{arch, f32_ops, Kernel};

/// A `rows × cols` weight matrix (rows = output features) in one of the formats.
#[derive(Debug, Clone)]
pub enum Matrix {
    /// Row-major f32.
    F32 {
        data: Vec<f32>,
        rows: usize,
        cols: usize,
    },
    F16(F16Matrix),
    W4(W4Matrix),
    Q8(Q8Matrix),
    /// ggml block formats kept as their GGUF bytes: Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
    Ggml(GgmlMatrix),
}

impl Matrix {
    pub fn rows(&self) -> usize {
        match self {
            Matrix::F32 { rows, .. } => *rows,
            Matrix::F16(m) => m.rows(),
            Matrix::W4(m) => m.rows(),
            Matrix::Q8(m) => m.rows(),
            Matrix::Ggml(m) => m.rows(),
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            Matrix::F32 { cols, .. } => *cols,
            Matrix::F16(m) => m.cols(),
            Matrix::W4(m) => m.cols(),
            Matrix::Q8(m) => m.cols(),
            Matrix::Ggml(m) => m.cols(),
        }
    }

    /// Bytes of weight storage (scales included).
    pub fn bytes(&self) -> u64 {
        match self {
            Matrix::F32 { data, .. } => 4 * data.len() as u64,
            Matrix::F16(m) => m.bytes(),
            Matrix::W4(m) => m.bytes(),
            Matrix::Q8(m) => m.bytes(),
            Matrix::Ggml(m) => m.bytes(),
        }
    }

    /// The `edgefit_estimate` weight-format name with this matrix's byte count: `f32`, `f16`,
    /// `w4g32`, `w4g64`, `w4g128`, `q4_1` (asymmetric 4-bit), `q8_0`, or a ggml block format
    /// (`q5_0`, `q5_1`, `q4_k`, `q5_k`, `q6_k`).
    pub fn format_name(&self) -> &'static str {
        match self {
            Matrix::F32 { .. } => "f32",
            Matrix::F16(_) => "f16",
            Matrix::W4(m) => m.format_name(),
            Matrix::Q8(_) => "q8_0",
            Matrix::Ggml(m) => m.format_name(),
        }
    }

    /// Whether the kernels read 16-bit quantized activations ([`ActQ16`]) for this format.
    pub fn wants_q16(&self) -> bool {
        matches!(self, Matrix::W4(_) | Matrix::Q8(_) | Matrix::Ggml(_))
    }

    /// Writes row `r` as f32 into `out` (`cols` values): the embedding lookup.
    pub fn row(&self, r: usize, out: &mut [f32]) {
        match self {
            Matrix::F32 { data, cols, .. } => out.copy_from_slice(&data[r * cols..(r + 1) * cols]),
            Matrix::F16(m) => m.dequantize_row(r, out),
            Matrix::W4(m) => m.dequantize_row(r, out),
            Matrix::Q8(m) => m.dequantize_row(r, out),
            Matrix::Ggml(m) => m.dequantize_row(r, out),
        }
    }

    /// All weights as row-major f32.
    pub fn to_f32(&self) -> Vec<f32> {
        let (rows, cols) = (self.rows(), self.cols());
        let mut out = vec![0.0; rows * cols];
        if cols > 0 {
            for (r, row) in out.chunks_exact_mut(cols).enumerate() {
                self.row(r, row);
            }
        }
        out
    }

    /// `out[t][n] = Σ_k x[t][k] · w[n][k]` for `m` activation rows. Integer formats quantize
    /// `x` to [`ActQ16`] first; when several matrices read the same input, quantize once and
    /// call [`Matrix::matmul_t_with`].
    ///
    /// # Panics
    /// If the slice lengths do not match the shapes (a programming error).
    pub fn matmul_t(&self, kernel: Kernel, x: &[f32], m: usize, out: &mut [f32]) {
        let xq = if self.wants_q16() {
            ActQ16::quantize(x, m, self.cols())
        } else {
            ActQ16::default()
        };
        self.matmul_t_with(kernel, x, &xq, m, out);
    }

    /// Like [`Matrix::matmul_t`] with the activations already quantized (`xq` is read only by
    /// integer formats, `x` only by float formats).
    pub fn matmul_t_with(&self, kernel: Kernel, x: &[f32], xq: &ActQ16, m: usize, out: &mut [f32]) {
        let kernel = kernel.resolve();
        match self {
            Matrix::F32 { data, rows, cols } => {
                f32_ops::matmul_t(kernel, x, m, *cols, data, *rows, out)
            }
            Matrix::F16(w) => arch::f16_matmul(kernel, w, x, m, out),
            Matrix::W4(w) => {
                debug_assert_eq!(xq.rows(), m);
                arch::w4_matmul(kernel, w, xq, out)
            }
            Matrix::Q8(w) => {
                debug_assert_eq!(xq.rows(), m);
                arch::q8_matmul(kernel, w, xq, out)
            }
            Matrix::Ggml(w) => {
                debug_assert_eq!(xq.rows(), m);
                arch::ggml_matmul(kernel, w, xq, out)
            }
        }
    }
}
