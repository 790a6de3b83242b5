#ifndef OSPREY_CONV_SGEMM_AVX512_H
#define OSPREY_CONV_SGEMM_AVX512_H

// The tiles below may run when `osprey_float_avx512()` (float_activations.h: the one AVX-512F check of the float
// kernels, which tests switch off to cover the AVX2 path) answers 1; callers keep their AVX2 (Swift SIMD) kernels otherwise.

/// One weight panel times one or two adjacent packed column strips of the dense convolution (ConvGemm.swift):
/// c[r][j] = start[r] + sum_k a[k * 6 + r] * b[(j / 16) * strip_stride + k * 16 + j % 16] for r < 6, j < width
/// (1...32; b's second strip is read only when width > 16). Rows r < rows (1...6) are stored at out + r * ldo,
/// lanes j < width (masked); with `residual` non-null, residual[r * ldr + j] is added first. Every stored value is
/// clamped to [low, high] (pass -inf, inf for none; NaN stays NaN). `start` holds 6 floats or is null (zeros).
/// Only call when `osprey_float_avx512()` is 1.
void osprey_conv_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long strip_stride,
                             const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high);

/// The same product with B read in place from NCHW planes: c[r][j] = start[r] + sum_k a[k * 6 + r] * b[k * ldb + j]
/// for j < width (1...32, loads masked to those lanes); stores, residual and clamp as `osprey_conv_tile_avx512`.
/// `ahead` non-zero: also prefetches b[k * ldb + ahead ..< + 32] (the next block's columns). Only call when
/// `osprey_float_avx512()` is 1.
void osprey_conv_planes_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long ldb, long ahead,
                                    const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high);

/// The same product with A in rows (Winograd's tiles x channels): c[r][j] = sum_k a[r' * lda + k] * b[...] as above,
/// where r' = r for r < rows and 0 past them (missing rows repeat row 0 and are not stored). No residual, no clamp.
void osprey_rows_tile_avx512(long rows, long width, long depth, const float *a, long lda, const float *b, long strip_stride,
                             float *out, long ldo);

/// Four output channels of one group of GroupedConvolution.swift's direct filter over flat outputs j < count (a
/// multiple of 16): output[r * count + j] = start[r] + sum_k panel[k * 4 + r] * scratch[offsets[k] + j] for r < 4
/// (`depth` taps). Only call when `osprey_float_avx512()` is 1.
void osprey_grouped_block_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                 long count, float *output);

/// The same four rows stored straight into output planes `plane` floats apart (rows r < `rows` only): flat chunk i
/// (outputs 16i..16i+15) keeps the lanes of masks[i] (columns inside the output width), which land in order at
/// out[r * plane + dest[i]...]; residual (same layout, or NULL) added, then clamped to [low, high].
void osprey_grouped_block_direct_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                        long count, const unsigned short *masks, const long *dest, long rows, float *out,
                                        long plane, const float *residual, float low, float high);

/// Winograd F(4x4, 3x3)'s output transform of one whole 4x4 tile for 16 output channels: A^T m A of the 36 products
/// (position p's 16 channels at m + p * position_stride), plus bias[0..16), clamped to [low, high], then channel c's
/// row r stored at out + c * plane + r * row_stride (4 floats). Only call when `osprey_float_avx512()` is 1.
void osprey_winograd_output_avx512(const float *m, long position_stride, const float *bias, float *out, long plane,
                                   long row_stride, float low, float high);

#endif
