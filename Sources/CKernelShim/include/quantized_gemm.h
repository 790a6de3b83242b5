#ifndef OSPREY_QUANTIZED_GEMM_H
#define OSPREY_QUANTIZED_GEMM_H

#include <stdint.h>

/// Columns per packed panel of the right-hand operand.
#define OSPREY_QGEMM_PANEL 16

/// C[M x N] (int32, row stride ldc) = A x B over 8-bit values already shifted by their zero points and widened to
/// int16, so every product and pairwise sum is exact (no u8 x s8 saturation as in vpmaddubsw kernels).
///
/// A: M rows of `kpairs` int16 pairs (row stride lda int16s, K padded to an even count with zeros).
/// packed_b: ceil(N / 16) panels; panel j holds, for each k pair p, 16 columns x 2 int16:
///   [b(2p, 16j + c), b(2p + 1, 16j + c)] for c in 0..<16, columns past N zero.
/// Uses AVX2 vpmaddwd when the CPU has it (checked once at run time), portable C otherwise.
void osprey_qgemm_s16(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, int32_t *c, int ldc);

/// 1 when the AVX2 path of osprey_qgemm_s16 runs on this CPU.
int osprey_qgemm_uses_avx2(void);

#endif
