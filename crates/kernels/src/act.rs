//! 16-bit activations for the integer kernels ("a16").
//!
//! The w4 and int8 kernels multiply weights by activations held as int16 with one f32 scale per
//! block of [`BLOCK`] values along `k`: `x ≈ q · s`, `s = max|x| / 32767` over the block, `q =
//! round(x / s)`. The relative error this adds to a dot product is about 2⁻¹⁶ of the block's
//! largest value (measured ~1.6e-5 on model activations), three orders of magnitude below the
//! 4-bit weights' own error, and it lets SIMD kernels use 16-bit integer dot products
//! (`i32x4.dot_i16x8_s`, AVX2 `vpmaddwd`), which is what makes an int4 GEMV fast in wasm (see
//! the repository's kernel notes).
//!
//! Rows are padded with zeros to a whole number of blocks. A block holding a NaN or infinity
//! gets a NaN scale, so the product comes out NaN rather than silently finite.

/// Values per activation block (one scale each). Every weight group is a multiple of it.
pub const BLOCK: usize = 32;

/// `rows` activation vectors of `cols` values, quantized to int16 per block of 32.
#[derive(Debug, Clone, Default)]
pub struct ActQ16 {
    rows: usize,
    cols: usize,
    blocks: usize,
    /// `rows × blocks × 32` int16 values (zero padded).
    pub(crate) q: Vec<i16>,
    /// `rows × blocks` scales.
    pub(crate) scales: Vec<f32>,
    /// `rows × blocks` sums of `q` over each block (for weights with a per-group minimum).
    pub(crate) sums: Vec<i32>,
}

impl ActQ16 {
    /// Quantizes `x` (`rows × cols`, row-major).
    ///
    /// # Panics
    /// If `x.len() != rows * cols` (a programming error).
    pub fn quantize(x: &[f32], rows: usize, cols: usize) -> ActQ16 {
        let mut a = ActQ16::default();
        a.requantize(x, rows, cols);
        a
    }

    /// Like [`ActQ16::quantize`], reusing this value's buffers.
    pub fn requantize(&mut self, x: &[f32], rows: usize, cols: usize) {
        assert_eq!(x.len(), rows * cols, "ActQ16: x has the wrong length");
        let blocks = cols.div_ceil(BLOCK);
        self.rows = rows;
        self.cols = cols;
        self.blocks = blocks;
        self.q.clear();
        self.q.resize(rows * blocks * BLOCK, 0);
        self.scales.clear();
        self.scales.resize(rows * blocks, 0.0);
        self.sums.clear();
        self.sums.resize(rows * blocks, 0);
        if cols == 0 {
            return;
        }
        for (r, row) in x.chunks_exact(cols).enumerate() {
            for (b, chunk) in row.chunks(BLOCK).enumerate() {
                // A NaN or infinity anywhere in the block poisons it (`f32::max` would drop a
                // NaN seen before a finite value, so test finiteness separately).
                let amax = if chunk.iter().all(|v| v.is_finite()) {
                    chunk.iter().fold(0.0f32, |m, v| m.max(v.abs()))
                } else {
                    f32::NAN
                };
                let i = r * blocks + b;
                if amax.is_nan() {
                    self.scales[i] = f32::NAN;
                    continue;
                }
                if amax == 0.0 {
                    continue;
                }
                let inv = 32767.0 / amax;
                self.scales[i] = amax / 32767.0;
                let q = &mut self.q[i * BLOCK..i * BLOCK + chunk.len()];
                let mut sum = 0i32;
                for (d, v) in q.iter_mut().zip(chunk) {
                    let v = (v * inv).round().clamp(-32767.0, 32767.0) as i16;
                    *d = v;
                    sum += i32::from(v);
                }
                self.sums[i] = sum;
            }
        }
    }

    /// Number of activation rows (tokens).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row before padding.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Blocks of 32 per row.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// The dequantized values of row `r` (padding dropped), for tests and error budgets.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.cols);
        for c in 0..self.cols {
            let b = r * self.blocks + c / BLOCK;
            out.push(f32::from(self.q[r * self.blocks * BLOCK + c]) * self.scales[b]);
        }
        out
    }
}
