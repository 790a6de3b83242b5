#ifndef OSPREY_NBITS_INT8_H
#define OSPREY_NBITS_INT8_H

#include <stdint.h>

// com.microsoft MatMulNBits at accuracy_level 4 with 4-bit B (layout as in nbits_gemm.h, block_size >= 32): A is
// quantized to int8 per block of B (symmetric, scale = max|a| / 127, codes round-to-nearest-even of a * 127 / max|a|),
// each 32-value group of a block is multiplied with B's unsigned nibbles in integers, and
// y = bias + sum_groups (a_scale * g_scale) * dot(qa, q) - sum_blocks scale * zero * (a_scale * sum(qa)),
// where g_scale is B's scale per 32-value group (its block's) and zero its zero point (8 when absent).
// A's codes are stored per span (128 values for the AVX512-VNNI body, 64 otherwise) as the span's even-indexed
// values then its odd ones, so that a load of B's bytes split into low and high nibbles meets them directly.

/// The span (128 or 64) of A's code layout that `osprey_nbits4_int8_gemv` reads with `path` (OSPREY_QPATH_*).
long osprey_nbits4_int8_span(int path);

/// 1 when this CPU runs `path` (OSPREY_QPATH_*; the portable one always): the tests run every body the CPU has.
int osprey_nbits4_int8_supports(int path);

/// Rows of A quantized per block: codes (rows * padded bytes, padded = blocks * block_size, zero past k, in `span`
/// order), a_lanes (rows * padded / 8 floats: each 32-value group's block scale, repeated 4 times) and a_sums
/// (rows * blocks floats: block scale * sum of the block's codes). `portable` 1 runs the plain loops (the tests' twin),
/// 0 the AVX2 body for whole blocks where the CPU has it (the same bits).
void osprey_nbits4_int8_quantize(long rows, const float *a, long lda, long k, long blocks, long block_size, long span, int8_t *codes,
                                 float *a_lanes, float *a_sums, int portable);

/// y[r * ldy + c] for r < rows (1...4) and c in [c0, c1), from A as `osprey_nbits4_int8_quantize` wrote it with
/// `osprey_nbits4_int8_span(path)`; g_scales is B's scale per 32-value group ([n][padded / 32]: `scales` itself for
/// blocks of 32), scales and zero_bytes one per block ([n][blocks]; zero_bytes null: 8). `path` picks the
/// AVX512-VNNI, AVX-VNNI, AVX2 or portable body (the caller checks the CPU
/// has it through `osprey_qkernels_path`).
void osprey_nbits4_int8_gemv(int path, long rows, const int8_t *codes, const float *a_lanes, const float *a_sums, const uint8_t *b,
                             const float *g_scales, const float *scales, const uint8_t *zero_bytes, long blocks, long block_size, const float *bias, float *y,
                             long ldy, long c0, long c1);

/// `osprey_nbits4_int8_gemv`'s portable body over codes in `span` order: plain loops, an int32 dot per 32-value
/// group, the twin the tests compare the vector bodies with.
void osprey_nbits4_int8_gemv_portable(long rows, long span, const int8_t *codes, const float *a_lanes, const float *a_sums,
                                      const uint8_t *b, const float *g_scales, const float *scales, const uint8_t *zero_bytes, long blocks, long block_size,
                                      const float *bias, float *y, long ldy, long c0, long c1);

#endif
