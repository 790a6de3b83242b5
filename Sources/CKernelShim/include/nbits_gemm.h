#ifndef OSPREY_NBITS_GEMM_H
#define OSPREY_NBITS_GEMM_H

#include <stdint.h>

// com.microsoft MatMulNBits with 4-bit weights kept packed. B is [n][blocks][block_size / 2] bytes: column c's k-th
// weight is the low (k even) or high (k odd) nibble of byte k / 2 of its row, dequantized as (q - zero) * scale with
// one scale and zero point per (column, block) at [c * blocks + b]: the zero points are floats (`zeros`), or bytes
// (`zero_bytes`, the packed uint8 ones unpacked: a quarter of the floats' traffic per decode step), or 8 where both
// are null.

/// The group size (16 or 32) the gemv's fastest body here reads A in: 32 with AVX-512F and blocks of 32 or more.
long osprey_nbits4_group(long block_size);

/// Rows of A in the order the 4-bit gemv reads them: row r (k floats, `lda` apart) to out + r * padded, each group of
/// `group` (16 or 32, dividing block_size) values as its even-indexed then its odd ones (bytes' low then high
/// nibbles), zero from k to `padded` (blocks * block_size).
void osprey_nbits4_prepare_rows(long rows, const float *a, long lda, long k, long blocks, long block_size, long group, float *out);

/// y[r * ldy + c] = (bias ? bias[c] : 0) + sum_k A[r][k] * (q(k, c) * scale - zero * scale) with each block's scale
/// and zero point, for columns c in [c0, c1) and rows r < rows (1...4), A as `osprey_nbits4_prepare_rows` wrote it
/// with `group`.
/// AVX-512F body for groups of 32 where `osprey_float_avx512()`, AVX2 + FMA where the CPU has them (run-time checks),
/// the portable one otherwise.
void osprey_nbits4_gemv(long rows, const float *prepared, const uint8_t *b, const float *scales, const float *zeros,
                        const uint8_t *zero_bytes, long blocks, long block_size, long group, const float *bias, float *y, long ldy,
                        long c0, long c1);

/// `osprey_nbits4_gemv` as plain loops: the twin the tests compare the vector body with.
void osprey_nbits4_gemv_portable(long rows, const float *prepared, const uint8_t *b, const float *scales, const float *zeros,
                                 const uint8_t *zero_bytes, long blocks, long block_size, long group, const float *bias, float *y,
                                 long ldy, long c0, long c1);

/// Columns [c0, c0 + 16) of B dequantized into a strip of the packed float product: panel[p * 16 + j] = (q - zero) *
/// scale of column c0 + j at depth p, for p < blocks * block_size; columns at or past n are zero. `portable` 1 runs
/// the plain loop (the tests' twin), 0 the AVX-512F body where `osprey_float_avx512()`, else AVX2 where the CPU has it.
void osprey_nbits4_dequantize_strip(const uint8_t *b, const float *scales, const float *zeros, const uint8_t *zero_bytes,
                                    long blocks, long block_size, long n, long c0, float *panel, int portable);

/// y[r * ldy + c] = (bias ? bias[c] : 0) + sum_p a[r * lda + p] * w(p, c) for r < rows and c in [32 * pair0, 32 *
/// pair1) below n: each pair of 16-column strips is dequantized into `panel` (2 * blocks * block_size floats, the
/// caller's scratch) and multiplied by the packed float product's micro-kernel, so B stays 4-bit in memory.
void osprey_nbits4_gemm(long rows, const float *a, long lda, long k, const uint8_t *b, const float *scales, const float *zeros,
                        const uint8_t *zero_bytes, long blocks, long block_size, long n, const float *bias, float *y, long ldy,
                        long pair0, long pair1, float *panel);

#endif
