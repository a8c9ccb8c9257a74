//! Quantized weight formats: 4-bit with fp16 group scales ([`W4Matrix`]), int8 with fp16 block
//! scales ([`Q8Matrix`]) and f16 ([`F16Matrix`]), with their scalar reference kernels.
//!
//! # The w4 layout
//! A `rows × cols` matrix is stored row by row; each row is padded to whole groups of `G`
//! (32, 64 or 128) along `cols`, and each group is `G/32` blocks of 32 weights. A block is 16
//! bytes of nibbles laid out so that one 128-bit load yields all 32 weights with two operations
//! (`and 0x0F` for the first 16, `shr 4` for the last 16):
//!
//! ```text
//! block of 32 weights w0..w31, quantized to unsigned nibbles q0..q31:
//!
//! byte:        0          1          2               15
//!          +----------+----------+----------+ ... +-----------+
//!          | q16 | q0 | q17 | q1 | q18 | q2 |     | q31 | q15 |
//!          +----------+----------+----------+ ... +-----------+
//!           hi    lo    hi    lo
//! v128 load -> (v & 0x0F) = q0..q15 in lanes 0..15, (v >> 4) = q16..q31 in lanes 0..15
//!
//! row r:  [block 0][block 1] ... [block B-1]          B = rows' padded cols / 32
//! scales: one fp16 s(r, g) per row r and group g, in tiles of 4 rows (below)
//! mins:   one fp16 m(r, g) per row and group (asymmetric only), same tiling as the scales
//! ```
//!
//! Scales (and minimums) are stored in tiles of `ROW_TILE` = 4 rows (`layout.rs`), group-major
//! inside a tile, so the 4 scales a SIMD kernel needs for 4 output rows at one group are 8 contiguous
//! bytes (one load and one vector fp16→f32 conversion instead of 4 scalar ones). The last tile
//! holds the `rows mod 4` leftover rows with that width, so nothing is padded and the byte count
//! is unchanged:
//!
//! ```text
//! rows 0..4, G groups per row:  s(0,0) s(1,0) s(2,0) s(3,0) | s(0,1) s(1,1) s(2,1) s(3,1) | ...
//! rows 4..8:                    s(4,0) s(5,0) s(6,0) s(7,0) | s(4,1) ...
//! last tile, rows 8..10:        s(8,0) s(9,0) | s(8,1) s(9,1) | ...
//! index(r, g) = 4⌊r/4⌋·G + g·width + r mod 4,   width = min(4, rows − 4⌊r/4⌋)
//! ```
//!
//! This is ggml's `block_q4_0` / `block_q4_1` nibble order, so GGUF Q4_0 and Q4_1 tensors load by
//! copying their nibbles and scales (reordered into row tiles), without re-rounding: Q4_0 is the symmetric kind with
//! `G = 32`, Q4_1 the asymmetric one. Scales live apart from the nibbles so the nibble stream is
//! dense and 16-byte aligned within a row.
//!
//! - **Symmetric** (default, what NPU int4 units take): `w = (q − 8) · s`, `q ∈ 0..=15`. Rounding
//!   to nearest with `s = v_max / −8`, where `v_max` is the group's value of largest magnitude
//!   (with its sign), so that value is exact and all 16 levels are used.
//! - **Asymmetric** (`G = 32` only, GGUF Q4_1): `w = q · s + m`, `s = (max − min) / 15`, `m = min`.
//!
//! Bytes: `rows · ⌈cols/G⌉ · (G/2 + 2)` symmetric, `rows · ⌈cols/32⌉ · 20` asymmetric: exactly
//! `edgefit_estimate`'s `w4gG` and `q4_1` byte counts.
//!
//! # The int8 layout ([`Q8Matrix`])
//! Rows padded to blocks of 32; `w = q · s` with one fp16 scale per block: ggml's Q8_0 values, so
//! a GGUF Q8_0 tensor (the default model's embedding) loads without re-rounding (its blocks are
//! only moved). A block is ggml's 32 int8 values in order. The scales use the 4-row tiles of
//! the w4 scales; the blocks are stored in tiles of `Q8_TILE` = 8 rows (`layout.rs`),
//! block-major inside a tile: block `b` of the tile's 8 rows is 256 contiguous bytes, then block `b+1`. A kernel
//! computing 8 rows per pass thus reads one sequential stream of values (plus two small scale
//! streams), which the hardware prefetcher follows; 8 interleaved row streams of 576 bytes
//! (the default model's rows) it did not (wasm has no software prefetch: 2× slower GEMV in
//! Chromium). The last tile holds the `rows mod 8` leftover rows with that width:
//!
//! ```text
//! v(r, b) = the 32 bytes of row r, block b;  B blocks per row
//! rows 0..8:   v(0,0) v(1,0) ... v(7,0) | v(0,1) v(1,1) ... v(7,1) | ... | v(7,B-1)
//! rows 8..16:  v(8,0) ... v(15,0) | v(8,1) ...
//! last tile, rows 16..19:  v(16,0) v(17,0) v(18,0) | v(16,1) v(17,1) v(18,1) | ...
//! block index(r, b) = 8⌊r/8⌋·B + b·width + r mod 8,   width = min(8, rows − 8⌊r/8⌋)
//! value (r, c) at byte 32 · index(r, ⌊c/32⌋) + c mod 32
//! scales: s(r, b) at the 4-row scale index above (the w4 scale tiling with G = B)
//! ```
//!
//! One row (the embedding lookup) is `B` 32-byte reads at a stride of `32 · width`. Nothing is
//! padded beyond whole blocks, so the byte count is `rows · ⌈cols/32⌉ · 34`
//! (`edgefit_estimate`'s `q8_0`).
//!
//! # Reference kernels
//! `y[t][r] = Σ_b sx[t][b] · (s[r][g(b)] · Σ_j wq[r][b][j] · xq[t][b][j] + m[r][g(b)] · Σ_j
//! xq[t][b][j])`: integer sums per block of 32 (exact in i32), f32 from there on. Every SIMD
//! kernel computes the same integer sums, so it agrees with the reference to f32 rounding of the
//! per-block terms.

use std::ops::Range;

use half::f16;

use crate::act::ActQ16;
use crate::error::{KernelError, Result};
use crate::layout::{q8_block_index, scale_index, BLOCK};

/// Which 4-bit scheme a [`W4Matrix`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum W4Kind {
    /// `w = (q − 8) · s`.
    Symmetric,
    /// `w = q · s + m`.
    Asymmetric,
}

/// A `rows × cols` weight matrix in 4 bits with fp16 group scales. See the module docs.
#[derive(Debug, Clone)]
pub struct W4Matrix {
    rows: usize,
    cols: usize,
    group: usize,
    kind: W4Kind,
    /// `rows × blocks_per_row × 16` bytes.
    pub(crate) packed: Vec<u8>,
    /// `rows × groups_per_row`.
    pub(crate) scales: Vec<f16>,
    /// `rows × groups_per_row` for [`W4Kind::Asymmetric`], empty otherwise.
    pub(crate) mins: Vec<f16>,
}

fn check_dims(what: &'static str, rows: usize, cols: usize) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(KernelError::Shape {
            what,
            detail: format!("{rows}×{cols} has no values"),
        });
    }
    Ok(())
}

/// Checks that `w` holds `rows × cols` finite f32 weights (the input of every quantizer).
fn check_f32_weights(what: &'static str, w: &[f32], rows: usize, cols: usize) -> Result<()> {
    if w.len() != rows * cols {
        return Err(KernelError::DataLength {
            format: "f32",
            rows,
            cols,
            got: w.len() * 4,
            expected: rows * cols * 4,
        });
    }
    check_finite(what, w)
}

fn check_finite(what: &'static str, w: &[f32]) -> Result<()> {
    match w.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(KernelError::NotFinite {
            what,
            index,
            value: w[index],
        }),
        None => Ok(()),
    }
}

fn check_scales(what: &'static str, s: &[f16]) -> Result<()> {
    match s.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(KernelError::NotFinite {
            what,
            index,
            value: s[index].to_f32(),
        }),
        None => Ok(()),
    }
}

/// Reorders row-major per-group values (`rows × groups`) into the 4-row tiling.
fn tile_rows(v: &[f16], rows: usize, groups: usize) -> Vec<f16> {
    let mut out = vec![f16::ZERO; v.len()];
    for r in 0..rows {
        for g in 0..groups {
            out[scale_index(rows, groups, r, g)] = v[r * groups + g];
        }
    }
    out
}

impl W4Matrix {
    /// Quantizes row-major f32 weights with round-to-nearest. `group` must be 32, 64 or 128;
    /// [`W4Kind::Asymmetric`] needs group 32.
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        group: usize,
        kind: W4Kind,
    ) -> Result<W4Matrix> {
        check_dims("w4 matrix", rows, cols)?;
        if !matches!(group, 32 | 64 | 128) {
            return Err(KernelError::Shape {
                what: "w4 group size",
                detail: format!("{group} (expected 32, 64 or 128)"),
            });
        }
        if kind == W4Kind::Asymmetric && group != 32 {
            return Err(KernelError::Shape {
                what: "w4 group size",
                detail: format!("{group}: the asymmetric kind uses groups of 32"),
            });
        }
        check_f32_weights("w4 input weights", w, rows, cols)?;
        let groups = cols.div_ceil(group);
        let blocks = groups * group / BLOCK;
        let mut m = W4Matrix {
            rows,
            cols,
            group,
            kind,
            packed: vec![0x88; rows * blocks * 16],
            scales: vec![f16::ZERO; rows * groups],
            mins: if kind == W4Kind::Asymmetric {
                vec![f16::ZERO; rows * groups]
            } else {
                Vec::new()
            },
        };
        if kind == W4Kind::Asymmetric {
            m.packed.fill(0);
        }
        let mut q = vec![0u8; group];
        for r in 0..rows {
            let row = &w[r * cols..(r + 1) * cols];
            for g in 0..groups {
                let vals = &row[g * group..((g + 1) * group).min(cols)];
                q.fill(if kind == W4Kind::Symmetric { 8 } else { 0 });
                match kind {
                    W4Kind::Symmetric => {
                        let vmax = vals.iter().copied().fold(0.0f32, |m, v| {
                            if v.abs() > m.abs() {
                                v
                            } else {
                                m
                            }
                        });
                        let s = f16::from_f32(vmax / -8.0);
                        let sf = s.to_f32();
                        if sf != 0.0 {
                            for (d, v) in q.iter_mut().zip(vals) {
                                *d = ((v / sf).round() + 8.0).clamp(0.0, 15.0) as u8;
                            }
                        }
                        m.scales[scale_index(rows, groups, r, g)] = s;
                    }
                    W4Kind::Asymmetric => {
                        let lo = vals.iter().copied().fold(f32::INFINITY, f32::min);
                        let hi = vals.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let s = f16::from_f32((hi - lo) / 15.0);
                        let mn = f16::from_f32(lo);
                        let (sf, mf) = (s.to_f32(), mn.to_f32());
                        for (d, v) in q.iter_mut().zip(vals) {
                            *d = if sf == 0.0 {
                                0
                            } else {
                                ((v - mf) / sf).round().clamp(0.0, 15.0) as u8
                            };
                        }
                        let at = scale_index(rows, groups, r, g);
                        m.scales[at] = s;
                        m.mins[at] = mn;
                    }
                }
                for (bi, qb) in q.chunks_exact(BLOCK).enumerate() {
                    let at = (r * blocks + g * group / BLOCK + bi) * 16;
                    for j in 0..16 {
                        m.packed[at + j] = qb[j] | (qb[j + 16] << 4);
                    }
                }
            }
        }
        check_scales("w4 scales (weights beyond f16 range)", &m.scales)?;
        check_scales("w4 minimums (weights beyond f16 range)", &m.mins)?;
        Ok(m)
    }

    /// Builds the symmetric `G = 32` matrix from ggml `block_q4_0` data (fp16 `d`, then 16
    /// bytes of nibbles; `w = (q − 8) · d`), without re-rounding. `cols` must be a multiple of 32.
    pub fn from_q4_0(data: &[u8], rows: usize, cols: usize) -> Result<W4Matrix> {
        W4Matrix::from_ggml(data, rows, cols, W4Kind::Symmetric)
    }

    /// Builds the asymmetric `G = 32` matrix from ggml `block_q4_1` data (fp16 `d`, fp16 `m`,
    /// then 16 bytes of nibbles; `w = q · d + m`), without re-rounding.
    pub fn from_q4_1(data: &[u8], rows: usize, cols: usize) -> Result<W4Matrix> {
        W4Matrix::from_ggml(data, rows, cols, W4Kind::Asymmetric)
    }

    fn from_ggml(data: &[u8], rows: usize, cols: usize, kind: W4Kind) -> Result<W4Matrix> {
        let (format, head) = match kind {
            W4Kind::Symmetric => ("q4_0", 2),
            W4Kind::Asymmetric => ("q4_1", 4),
        };
        check_dims(format, rows, cols)?;
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Shape {
                what: format,
                detail: format!("{cols} columns is not a multiple of 32"),
            });
        }
        let blocks = cols / BLOCK;
        let block_bytes = head + 16;
        let expected = rows
            .checked_mul(blocks)
            .and_then(|n| n.checked_mul(block_bytes))
            .ok_or(KernelError::Shape {
                what: format,
                detail: format!("{rows}×{cols} overflows"),
            })?;
        if data.len() != expected {
            return Err(KernelError::DataLength {
                format,
                rows,
                cols,
                got: data.len(),
                expected,
            });
        }
        let n = rows * blocks;
        let mut packed = Vec::with_capacity(n * 16);
        let mut scales = Vec::with_capacity(n);
        let mut mins = Vec::with_capacity(if head == 4 { n } else { 0 });
        for blk in data.chunks_exact(block_bytes) {
            scales.push(f16::from_le_bytes([blk[0], blk[1]]));
            if head == 4 {
                mins.push(f16::from_le_bytes([blk[2], blk[3]]));
            }
            packed.extend_from_slice(&blk[head..]);
        }
        check_scales("w4 scales", &scales)?;
        check_scales("w4 minimums", &mins)?;
        Ok(W4Matrix {
            rows,
            cols,
            group: BLOCK,
            kind,
            packed,
            scales: tile_rows(&scales, rows, blocks),
            mins: tile_rows(&mins, rows, if head == 4 { blocks } else { 0 }),
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Weights per scale along `cols`: 32, 64 or 128.
    pub fn group(&self) -> usize {
        self.group
    }

    pub fn kind(&self) -> W4Kind {
        self.kind
    }

    /// Groups per row (`⌈cols / group⌉`).
    pub fn groups_per_row(&self) -> usize {
        self.cols.div_ceil(self.group)
    }

    /// Blocks of 32 per row as stored (whole groups).
    pub fn blocks_per_row(&self) -> usize {
        self.groups_per_row() * self.group / BLOCK
    }

    /// Bytes held: nibbles, scales and minimums.
    pub fn bytes(&self) -> u64 {
        (self.packed.len() + 2 * self.scales.len() + 2 * self.mins.len()) as u64
    }

    /// The `edgefit_estimate` weight-format name whose byte count this matrix has:
    /// `w4g32` / `w4g64` / `w4g128` (symmetric) or `q4_1` (asymmetric).
    pub fn format_name(&self) -> &'static str {
        match (self.kind, self.group) {
            (W4Kind::Asymmetric, _) => "q4_1",
            (_, 32) => "w4g32",
            (_, 64) => "w4g64",
            _ => "w4g128",
        }
    }

    /// Writes the dequantized row `r` (`cols` values) into `out`.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let bpr = self.blocks_per_row();
        let gpr = self.groups_per_row();
        for (c, o) in out.iter_mut().enumerate().take(self.cols) {
            let b = c / BLOCK;
            let j = c % BLOCK;
            let byte = self.packed[(r * bpr + b) * 16 + j % 16];
            let q = if j < 16 { byte & 0x0F } else { byte >> 4 };
            let g = scale_index(self.rows, gpr, r, c / self.group);
            let s = self.scales[g].to_f32();
            *o = match self.kind {
                W4Kind::Symmetric => (f32::from(q) - 8.0) * s,
                W4Kind::Asymmetric => f32::from(q) * s + self.mins[g].to_f32(),
            };
        }
    }

    /// All weights as row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(r, row);
        }
        out
    }

    /// Reference kernel: `out[t][r] = x[t] · w[r]` for every activation row `t` (see the module
    /// docs for the exact arithmetic). `out` has `x.rows() × rows` values.
    pub fn matmul_scalar(&self, x: &ActQ16, out: &mut [f32]) {
        check_product("w4", self.rows, self.cols, x, out);
        self.matmul_scalar_rows(x, 0..self.rows, out);
    }

    /// [`W4Matrix::matmul_scalar`] for output rows `rows` only: `out` is `x.rows() ×
    /// rows.len()`, token-major (`out[t][r − rows.start]`).
    pub(crate) fn matmul_scalar_rows(&self, x: &ActQ16, rows: Range<usize>, out: &mut [f32]) {
        let bpr = self.blocks_per_row();
        let gpr = self.groups_per_row();
        let xb = x.blocks();
        let per_group = self.group / BLOCK;
        let (lo, len) = (rows.start, rows.len());
        for t in 0..x.rows() {
            for r in rows.clone() {
                let mut acc = 0.0f32;
                for b in 0..xb {
                    let bytes = &self.packed[(r * bpr + b) * 16..(r * bpr + b) * 16 + 16];
                    let xq = &x.q[(t * xb + b) * BLOCK..(t * xb + b + 1) * BLOCK];
                    let mut isum = 0i32;
                    for j in 0..16 {
                        let (lo, hi) = (i32::from(bytes[j] & 0x0F), i32::from(bytes[j] >> 4));
                        let (lo, hi) = match self.kind {
                            W4Kind::Symmetric => (lo - 8, hi - 8),
                            W4Kind::Asymmetric => (lo, hi),
                        };
                        isum += lo * i32::from(xq[j]) + hi * i32::from(xq[j + 16]);
                    }
                    let g = scale_index(self.rows, gpr, r, b / per_group);
                    let sx = x.scales[t * xb + b];
                    let mut term = self.scales[g].to_f32() * isum as f32;
                    if self.kind == W4Kind::Asymmetric {
                        term += self.mins[g].to_f32() * x.sums[t * xb + b] as f32;
                    }
                    acc += sx * term;
                }
                out[t * len + r - lo] = acc;
            }
        }
    }
}

/// Checks that `x` and `out` fit a `rows × cols` weight matrix.
///
/// # Panics
/// On a mismatch (a programming error, never user input).
pub(crate) fn check_product(what: &str, rows: usize, cols: usize, x: &ActQ16, out: &[f32]) {
    assert_eq!(
        x.cols(),
        cols,
        "{what}: activations have {} columns, weights {cols}",
        x.cols()
    );
    assert_eq!(
        out.len(),
        x.rows() * rows,
        "{what}: out has {} values, expected {}×{rows}",
        out.len(),
        x.rows()
    );
}

/// A `rows × cols` int8 matrix with one fp16 scale per block of 32 along `cols` (ggml Q8_0).
#[derive(Debug, Clone)]
pub struct Q8Matrix {
    rows: usize,
    cols: usize,
    /// `rows × blocks` blocks of 32 (zero padded), in 8-row tiles, block-major (see the module
    /// docs).
    pub(crate) values: Vec<i8>,
    /// `rows × blocks`, in the 4-row scale tiles of the w4 layout.
    pub(crate) scales: Vec<f16>,
}

impl Q8Matrix {
    /// Quantizes row-major f32 weights: `s = max|w| / 127` per block, round to nearest.
    pub fn quantize(w: &[f32], rows: usize, cols: usize) -> Result<Q8Matrix> {
        check_dims("int8 matrix", rows, cols)?;
        check_f32_weights("int8 input weights", w, rows, cols)?;
        let blocks = cols.div_ceil(BLOCK);
        let mut values = vec![0i8; rows * blocks * BLOCK];
        let mut scales = vec![f16::ZERO; rows * blocks];
        for r in 0..rows {
            for (b, chunk) in w[r * cols..(r + 1) * cols].chunks(BLOCK).enumerate() {
                let amax = chunk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let s = f16::from_f32(amax / 127.0);
                let sf = s.to_f32();
                scales[scale_index(rows, blocks, r, b)] = s;
                if sf == 0.0 {
                    continue;
                }
                let at = q8_block_index(rows, blocks, r, b) * BLOCK;
                for (d, v) in values[at..at + chunk.len()].iter_mut().zip(chunk) {
                    *d = (v / sf).round().clamp(-127.0, 127.0) as i8;
                }
            }
        }
        check_scales("int8 scales (weights beyond f16 range)", &scales)?;
        Ok(Q8Matrix {
            rows,
            cols,
            values,
            scales,
        })
    }

    /// Builds from ggml `block_q8_0` data (fp16 `d`, then 32 int8), without re-rounding.
    /// `cols` must be a multiple of 32.
    pub fn from_q8_0(data: &[u8], rows: usize, cols: usize) -> Result<Q8Matrix> {
        check_dims("q8_0", rows, cols)?;
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Shape {
                what: "q8_0",
                detail: format!("{cols} columns is not a multiple of 32"),
            });
        }
        let expected = rows
            .checked_mul(cols / BLOCK)
            .and_then(|n| n.checked_mul(34))
            .ok_or(KernelError::Shape {
                what: "q8_0",
                detail: format!("{rows}×{cols} overflows"),
            })?;
        if data.len() != expected {
            return Err(KernelError::DataLength {
                format: "q8_0",
                rows,
                cols,
                got: data.len(),
                expected,
            });
        }
        let blocks = cols / BLOCK;
        let mut values = vec![0i8; rows * cols];
        let mut scales = vec![f16::ZERO; rows * blocks];
        for (i, blk) in data.chunks_exact(34).enumerate() {
            let (r, b) = (i / blocks, i % blocks);
            scales[scale_index(rows, blocks, r, b)] = f16::from_le_bytes([blk[0], blk[1]]);
            let at = q8_block_index(rows, blocks, r, b);
            for (d, &v) in values[at * BLOCK..(at + 1) * BLOCK]
                .iter_mut()
                .zip(&blk[2..])
            {
                *d = v as i8;
            }
        }
        check_scales("int8 scales", &scales)?;
        Ok(Q8Matrix {
            rows,
            cols,
            values,
            scales,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Blocks of 32 per row.
    pub fn blocks_per_row(&self) -> usize {
        self.cols.div_ceil(BLOCK)
    }

    /// Bytes held: `rows · ⌈cols/32⌉ · 34` (`edgefit_estimate`'s `q8_0`).
    pub fn bytes(&self) -> u64 {
        (self.values.len() + 2 * self.scales.len()) as u64
    }

    /// Writes the dequantized row `r` into `out` (`cols` values).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let bpr = self.blocks_per_row();
        for (b, o) in out[..self.cols].chunks_mut(BLOCK).enumerate() {
            let s = self.scales[scale_index(self.rows, bpr, r, b)].to_f32();
            let at = q8_block_index(self.rows, bpr, r, b);
            for (o, &v) in o.iter_mut().zip(&self.values[at * BLOCK..(at + 1) * BLOCK]) {
                *o = f32::from(v) * s;
            }
        }
    }

    /// All weights as row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(r, row);
        }
        out
    }

    /// Reference kernel: `out[t][r] = Σ_b sx[t][b] · s[r][b] · Σ_j q[r][b][j] · xq[t][b][j]`.
    pub fn matmul_scalar(&self, x: &ActQ16, out: &mut [f32]) {
        check_product("int8", self.rows, self.cols, x, out);
        self.matmul_scalar_rows(x, 0..self.rows, out);
    }

    /// [`Q8Matrix::matmul_scalar`] for output rows `rows` only (`out`: `x.rows() × rows.len()`).
    pub(crate) fn matmul_scalar_rows(&self, x: &ActQ16, rows: Range<usize>, out: &mut [f32]) {
        let bpr = self.blocks_per_row();
        let (lo, len) = (rows.start, rows.len());
        for t in 0..x.rows() {
            for r in rows.clone() {
                let mut acc = 0.0f32;
                for b in 0..bpr {
                    let at = q8_block_index(self.rows, bpr, r, b);
                    let w = &self.values[at * BLOCK..(at + 1) * BLOCK];
                    let xq = &x.q[(t * bpr + b) * BLOCK..(t * bpr + b + 1) * BLOCK];
                    let isum: i32 = w
                        .iter()
                        .zip(xq)
                        .map(|(a, b)| i32::from(*a) * i32::from(*b))
                        .sum();
                    let s = self.scales[scale_index(self.rows, bpr, r, b)].to_f32();
                    acc += x.scales[t * bpr + b] * (s * isum as f32);
                }
                out[t * len + r - lo] = acc;
            }
        }
    }
}

/// A `rows × cols` matrix of IEEE halves; the kernels widen to f32 and accumulate in f32.
#[derive(Debug, Clone)]
pub struct F16Matrix {
    rows: usize,
    cols: usize,
    pub(crate) values: Vec<f16>,
}

impl F16Matrix {
    /// Rounds f32 weights to f16; a weight outside f16's range is an error, not an infinity.
    pub fn from_f32(w: &[f32], rows: usize, cols: usize) -> Result<F16Matrix> {
        check_dims("f16 matrix", rows, cols)?;
        check_f32_weights("f16 input weights", w, rows, cols)?;
        let values: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        check_scales("f16 weights (beyond ±65504)", &values)?;
        Ok(F16Matrix { rows, cols, values })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held: `2 · rows · cols`.
    pub fn bytes(&self) -> u64 {
        2 * self.values.len() as u64
    }

    /// Writes row `r` as f32 into `out`.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        for (o, v) in out
            .iter_mut()
            .zip(&self.values[r * self.cols..(r + 1) * self.cols])
        {
            *o = v.to_f32();
        }
    }

    /// Reference kernel over f32 activations `x` (`m × cols`).
    pub fn matmul_scalar(&self, x: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(x.len(), m * self.cols, "f16: x has the wrong length");
        assert_eq!(out.len(), m * self.rows, "f16: out has the wrong length");
        self.matmul_scalar_rows(x, m, 0..self.rows, out);
    }

    /// [`F16Matrix::matmul_scalar`] for output rows `rows` only (`out`: `m × rows.len()`).
    pub(crate) fn matmul_scalar_rows(
        &self,
        x: &[f32],
        m: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let (lo, len) = (rows.start, rows.len());
        for t in 0..m {
            let xr = &x[t * self.cols..(t + 1) * self.cols];
            for r in rows.clone() {
                let w = &self.values[r * self.cols..(r + 1) * self.cols];
                let mut acc = 0.0f32;
                for (a, b) in xr.iter().zip(w) {
                    acc += a * b.to_f32();
                }
                out[t * len + r - lo] = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn f64_matmul(x: &[f32], m: usize, w: &[f32], n: usize, k: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for t in 0..m {
            for r in 0..n {
                out[t * n + r] = (0..k)
                    .map(|c| x[t * k + c] as f64 * w[r * k + c] as f64)
                    .sum();
            }
        }
        out
    }

    #[test]
    fn reference_kernels_match_the_dequantized_product() {
        let (m, n, k) = (3, 5, 100);
        let x = crate::pseudo_random(1, m * k);
        let w = crate::pseudo_random(2, n * k);
        let xq = ActQ16::quantize(&x, m, k);
        let mats: Vec<(Vec<f32>, Vec<f32>)> = vec![
            {
                let q = W4Matrix::quantize(&w, n, k, 32, W4Kind::Symmetric).unwrap();
                let mut o = vec![0.0; m * n];
                q.matmul_scalar(&xq, &mut o);
                (q.dequantize(), o)
            },
            {
                let q = W4Matrix::quantize(&w, n, k, 128, W4Kind::Symmetric).unwrap();
                let mut o = vec![0.0; m * n];
                q.matmul_scalar(&xq, &mut o);
                (q.dequantize(), o)
            },
            {
                let q = W4Matrix::quantize(&w, n, k, 32, W4Kind::Asymmetric).unwrap();
                let mut o = vec![0.0; m * n];
                q.matmul_scalar(&xq, &mut o);
                (q.dequantize(), o)
            },
            {
                let q = Q8Matrix::quantize(&w, n, k).unwrap();
                let mut o = vec![0.0; m * n];
                q.matmul_scalar(&xq, &mut o);
                (q.dequantize(), o)
            },
        ];
        for (deq, got) in mats {
            let exact = f64_matmul(&x, m, &deq, n, k);
            for (g, e) in got.iter().zip(&exact) {
                assert!((*g as f64 - e).abs() < 2e-3, "{g} vs {e}");
            }
        }
    }
}
