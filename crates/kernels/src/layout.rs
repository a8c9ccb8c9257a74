//! The storage layouts every kernel shares: block and group sizes, the row tilings of the
//! weight scales and int8 blocks, the int4 nibble order of the KV cache, and the fp16 bit
//! conversions of stored scales. A leaf: it imports nothing from the crate, so the format
//! modules ([`crate::quant`], [`crate::ggml`], [`crate::attn`]) and the ISA kernels
//! (`crate::arch`) all read it without reaching into each other. The drawings of the tilings
//! are in [`crate::quant`]'s module docs.

/// Values per activation block (one scale each). Every weight group is a multiple of it.
pub const BLOCK: usize = 32;

/// Values per int4 group (one scale each) and bytes per packed group.
pub const I4_GROUP: usize = 32;
/// Bytes of nibbles per int4 group.
pub const I4_GROUP_BYTES: usize = 16;

/// Rows whose w4 scales (and minimums, and int8 block scales) are stored together,
/// group-major (see [`crate::quant`]).
pub(crate) const ROW_TILE: usize = 4;

/// Where the scale of row `r`, group `g` lives in a matrix of `rows` rows with `groups` groups
/// per row (the 4-row tiling of [`crate::quant`]):
/// `4⌊r/4⌋·groups + g·width + r mod 4`, `width = min(4, rows − 4⌊r/4⌋)`.
#[inline]
pub(crate) fn scale_index(rows: usize, groups: usize, r: usize, g: usize) -> usize {
    let base = r / ROW_TILE * ROW_TILE;
    let width = (rows - base).min(ROW_TILE);
    base * groups + g * width + (r - base)
}

/// Rows whose int8 blocks are stored together, block-major (see [`crate::quant`]).
pub(crate) const Q8_TILE: usize = 8;

/// Which block of a [`crate::Q8Matrix`]'s values holds row `r`, block `b` (its values are the
/// 32 from `32 ·` this index): the 8-row tiling of [`crate::quant`],
/// `8⌊r/8⌋·blocks + b·width + r mod 8`, `width = min(8, rows − 8⌊r/8⌋)`.
#[inline]
pub(crate) fn q8_block_index(rows: usize, blocks: usize, r: usize, b: usize) -> usize {
    let base = r / Q8_TILE * Q8_TILE;
    let width = (rows - base).min(Q8_TILE);
    base * blocks + b * width + (r - base)
}

/// Nibble `i` (0..32) of a 16-byte int4 group, minus 8: byte `i mod 16`, its low nibble for
/// `i < 16`, its high one from 16 on (the layout of [`crate::attn`]).
#[inline(always)]
pub(crate) fn nibble(bytes: &[u8], i: usize) -> f32 {
    let b = bytes[i % I4_GROUP_BYTES];
    let n = if i < I4_GROUP_BYTES { b & 0x0F } else { b >> 4 };
    f32::from(n) - 8.0
}

/// fp16 bits to f32 for finite values, branch-free (the formats reject non-finite scales and
/// weights): move the half into the top of a word, shift the exponent and mantissa into f32
/// position, drop the sign copies, then rescale the exponent bias by 2¹¹² (which also turns
/// f16 subnormals into the right f32 normals). Exact for every finite f16.
#[inline(always)]
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let w = (i32::from(h as i16) << 16) >> 3;
    f32::from_bits(w as u32 & 0x8FFF_E000) * f32::from_bits(0x7780_0000)
}

/// fp16 bits to f32 for every half, branch-free (so loops over it vectorise): the finite bit
/// trick of [`f16_bits_to_f32`], which turns exponent 31 (infinity, NaN) into `±2¹⁶ · 1.m`,
/// with the f32 exponent bits then set for those: `±∞` for a zero mantissa, a NaN otherwise.
#[inline(always)]
pub(crate) fn f16_bits_to_f32_exact(h: u16) -> f32 {
    let v = f16_bits_to_f32(h).to_bits();
    let inf_nan = if h & 0x7C00 == 0x7C00 { 0x7F80_0000 } else { 0 };
    f32::from_bits(v | inf_nan)
}
