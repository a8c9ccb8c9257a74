//! [`Matrix`]: one weight matrix in any format, and the kernel dispatch for `y = x · Wᵀ`:
//! an input is prepared once ([`Prepared`]), then any range of output rows of any matrix
//! reading it is computed by [`Matrix::matmul_rows`] (what [`crate::pool`] splits across
//! threads); the whole-matrix [`Matrix::matmul_t`] is a wrapper over the two.

use std::ops::Range;

use crate::act::ActQ16;
use crate::arch::{ArchPrep, PrepFor};
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

    /// What this matrix's SIMD kernels read from the prepared activations.
    fn prep_for(&self) -> PrepFor {
        match self {
            Matrix::W4(m) => PrepFor::W4 {
                symmetric: m.kind() == crate::W4Kind::Symmetric,
            },
            Matrix::Q8(_) => PrepFor::Q8,
            Matrix::Ggml(g) => PrepFor::Ggml {
                unit: g.format().unit(),
            },
            Matrix::F32 { .. } | Matrix::F16(_) => PrepFor::None,
        }
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
    /// `x` to [`ActQ16`] first; when several matrices read the same input, prepare it once
    /// ([`Prepared`]) and call [`Matrix::matmul_rows`]. A thin wrapper over those two.
    ///
    /// # Panics
    /// If the slice lengths do not match the shapes (a programming error).
    pub fn matmul_t(&self, kernel: Kernel, x: &[f32], m: usize, out: &mut [f32]) {
        let mut prep = Prepared::default();
        prep.prepare(kernel, x, m, self.cols(), [self], &ActQ16::requantize);
        self.matmul_rows(&prep, x, 0..self.rows(), out);
    }

    /// Like [`Matrix::matmul_t`] with the activations already quantized (`xq` is read only by
    /// integer formats, `x` only by float formats). A thin wrapper over [`Matrix::matmul_rows`].
    pub fn matmul_t_with(&self, kernel: Kernel, x: &[f32], xq: &ActQ16, m: usize, out: &mut [f32]) {
        let mut prep = Prepared::default();
        prep.prepare_q16(kernel, xq.clone(), m, self.cols(), [self]);
        self.matmul_rows(&prep, x, 0..self.rows(), out);
    }

    /// Output rows `rows` of `x · Wᵀ` from an input prepared for this matrix: `out[t][r −
    /// rows.start]` (`m × rows.len()`, token-major; for one token that is `out[r]` of the whole
    /// product's row range). A range starting on a multiple of [`ROW_SPLIT`] (and ending on one
    /// or at the last row) gives exactly the values the whole product has there, so a product
    /// split into such ranges, on any number of threads, is the same bits as one call.
    ///
    /// # Panics
    /// If the range is misaligned or out of bounds, the slice lengths do not match, or `prep`
    /// was not prepared for this matrix (programming errors).
    pub fn matmul_rows(&self, prep: &Prepared, x: &[f32], rows: Range<usize>, out: &mut [f32]) {
        let (n, k, m) = (self.rows(), self.cols(), prep.m);
        assert!(
            rows.start <= rows.end
                && rows.end <= n
                && rows.start.is_multiple_of(ROW_SPLIT)
                && (rows.end.is_multiple_of(ROW_SPLIT) || rows.end == n),
            "matmul_rows: rows {rows:?} of {n} do not start (and end) on a multiple of {ROW_SPLIT}"
        );
        assert_eq!(
            out.len(),
            m * rows.len(),
            "matmul_rows: out has the wrong length"
        );
        assert_eq!(
            prep.cols, k,
            "matmul_rows: prepared for {} columns, weights have {k}",
            prep.cols
        );
        let kernel = prep.kernel;
        if self.wants_q16() {
            assert!(
                prep.quantized && prep.arch.ready(kernel, self.prep_for()),
                "matmul_rows: the input was not prepared for this {} matrix",
                self.format_name()
            );
        } else {
            assert_eq!(x.len(), m * k, "matmul_rows: x has the wrong length");
        }
        if rows.is_empty() {
            return;
        }
        let xq = &prep.xq;
        match self {
            Matrix::F32 { data, cols, .. } => {
                f32_ops::matmul_t_rows(kernel, x, *cols, data, rows, out)
            }
            Matrix::F16(w) => arch::f16_rows(kernel, w, x, m, rows, out),
            Matrix::W4(w) => arch::w4_rows(kernel, w, xq, &prep.arch, rows, out),
            Matrix::Q8(w) => arch::q8_rows(kernel, w, xq, &prep.arch, rows, out),
            Matrix::Ggml(w) => arch::ggml_rows(kernel, w, xq, &prep.arch, rows, out),
        }
    }
}

/// How [`Prepared::prepare`] quantizes `x` (`m × cols`) into an [`ActQ16`]: `(xq, x, m,
/// cols)`.
pub type Quantize<'a> = dyn Fn(&mut ActQ16, &[f32], usize, usize) + 'a;

/// The row granularity of [`Matrix::matmul_rows`]: 8, the widest pass any kernel makes over
/// rows (int8 value tiles, simd128's pairs of 4-row w4 tiles and its 8-row GEMM tiles), so a
/// range starting on a multiple of it runs the same passes as the whole matrix.
pub const ROW_SPLIT: usize = 8;

/// An input `x` (`m × cols`) prepared once for every matrix that reads it (q/k/v, gate/up) and
/// every row range of those: its int16 quantization ([`ActQ16`]) when an integer format reads
/// it, the reordered activations and factors the SIMD kernels of those formats read, and the
/// kernel, resolved once here (an unavailable one runs [`Kernel::best`]). Reused from input to
/// input, so its buffers are allocated once per model, not per call.
#[derive(Debug)]
pub struct Prepared {
    kernel: Kernel,
    m: usize,
    cols: usize,
    quantized: bool,
    xq: ActQ16,
    arch: ArchPrep,
}

impl Default for Prepared {
    fn default() -> Prepared {
        Prepared {
            kernel: Kernel::Scalar,
            m: 0,
            cols: 0,
            quantized: false,
            xq: ActQ16::default(),
            arch: ArchPrep::default(),
        }
    }
}

impl Prepared {
    /// Prepares `x` (`m × cols`) for the matrices `mats` (all `cols` wide) on `kernel`,
    /// quantizing it, if a matrix reads int16 activations, with `quantize(xq, x, m, cols)`, which
    /// must leave in `xq` what [`ActQ16::requantize`] would: pass `&ActQ16::requantize` itself,
    /// or the pool's split of it ([`crate::Pool::requantize`]).
    ///
    /// # Panics
    /// If `x.len() != m · cols` or a matrix is not `cols` wide (programming errors).
    pub fn prepare<'a>(
        &mut self,
        kernel: Kernel,
        x: &[f32],
        m: usize,
        cols: usize,
        mats: impl IntoIterator<Item = &'a Matrix>,
        quantize: &Quantize<'_>,
    ) {
        assert_eq!(x.len(), m * cols, "Prepared: x has the wrong length");
        self.begin(kernel, m, cols);
        for w in mats {
            assert_eq!(
                w.cols(),
                cols,
                "Prepared: a matrix is {} wide, x {cols}",
                w.cols()
            );
            if w.wants_q16() {
                if !self.quantized {
                    quantize(&mut self.xq, x, m, cols);
                    self.quantized = true;
                }
                self.arch.fill(self.kernel, w.prep_for(), &self.xq);
            }
        }
    }

    /// [`Prepared::prepare`] from activations already quantized (`xq`: `m × cols`).
    pub fn prepare_q16<'a>(
        &mut self,
        kernel: Kernel,
        xq: ActQ16,
        m: usize,
        cols: usize,
        mats: impl IntoIterator<Item = &'a Matrix>,
    ) {
        assert!(
            xq.rows() == m && xq.cols() == cols,
            "Prepared: xq is not {m}×{cols}"
        );
        self.begin(kernel, m, cols);
        self.xq = xq;
        self.quantized = true;
        for w in mats {
            assert_eq!(
                w.cols(),
                cols,
                "Prepared: a matrix is {} wide, x {cols}",
                w.cols()
            );
            self.arch.fill(self.kernel, w.prep_for(), &self.xq);
        }
    }

    fn begin(&mut self, kernel: Kernel, m: usize, cols: usize) {
        self.kernel = kernel.resolve();
        self.m = m;
        self.cols = cols;
        self.quantized = false;
        self.arch.reset();
    }

    /// The kernel the products run on (resolved).
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Activation rows (tokens) of the prepared input.
    pub fn rows(&self) -> usize {
        self.m
    }
}
