#ifndef OSPREY_NBITS_GEMM_H
#define OSPREY_NBITS_GEMM_H

#include <stdint.h>

// com.microsoft MatMulNBits with 4-bit weights kept packed. B is [n][blocks][block_size / 2] bytes: column c's k-th
// weight is the low (k even) or high (k odd) nibble of byte k / 2 of its row, dequantized as (q - zero) * scale with
// one scale and zero point per (column, block) at [c * blocks + b]; `zeros` null means 8 for every block.

/// Rows of A in the order the 4-bit gemv reads them: row r (k floats, `lda` apart) to out + r * padded, each group of
/// 16 values as its 8 even-indexed then its 8 odd ones (a byte's low then high nibbles), zero from k to `padded`
/// (blocks * block_size); sums[r * blocks + b] = the sum of row r's values in block b.
void osprey_nbits4_prepare_rows(long rows, const float *a, long lda, long k, long blocks, long block_size, float *out, float *sums);

/// y[r * ldy + c] = (bias ? bias[c] : 0) + sum over blocks b of scale * (dot(A_r, q_c) over b - zero * sums[r][b]),
/// for columns c in [c0, c1) and rows r < rows (1...4), A as `osprey_nbits4_prepare_rows` wrote it. AVX2 + FMA body
/// where the CPU has them (run-time check), the portable one otherwise.
void osprey_nbits4_gemv(long rows, const float *prepared, const float *sums, const uint8_t *b, const float *scales, const float *zeros,
                        long blocks, long block_size, const float *bias, float *y, long ldy, long c0, long c1);

/// `osprey_nbits4_gemv` as plain loops: the twin the tests compare the vector body with.
void osprey_nbits4_gemv_portable(long rows, const float *prepared, const float *sums, const uint8_t *b, const float *scales,
                                 const float *zeros, long blocks, long block_size, const float *bias, float *y, long ldy, long c0,
                                 long c1);

/// Columns [c0, c0 + 16) of B dequantized into a strip of the packed float product: panel[p * 16 + j] = (q - zero) *
/// scale of column c0 + j at depth p, for p < blocks * block_size; columns at or past n are zero. `portable` 1 runs
/// the plain loop (the tests' twin), 0 the AVX2 body where the CPU has it.
void osprey_nbits4_dequantize_strip(const uint8_t *b, const float *scales, const float *zeros, long blocks, long block_size, long n,
                                    long c0, float *panel, int portable);

/// y[r * ldy + c] = (bias ? bias[c] : 0) + sum_p a[r * lda + p] * w(p, c) for r < rows and c in [32 * pair0, 32 *
/// pair1) below n: each pair of 16-column strips is dequantized into `panel` (2 * blocks * block_size floats, the
/// caller's scratch) and multiplied by the packed float product's micro-kernel, so B stays 4-bit in memory.
void osprey_nbits4_gemm(long rows, const float *a, long lda, long k, const uint8_t *b, const float *scales, const float *zeros,
                        long blocks, long block_size, long n, const float *bias, float *y, long ldy, long pair0, long pair1,
                        float *panel);

#endif
