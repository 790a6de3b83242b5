// Integer GEMM for quantized operators: int16 operands (8-bit values minus their zero points), int32 accumulation.
//
// vpmaddwd multiplies 16 int16 pairs and adds each pair into an int32 lane: exact for |x| <= 255 (two products of
// at most 65025 sum to 130050), where vpmaddubsw's u8 x s8 pairs saturate at 32767. The tile kernels (AVX2 and
// portable) live in quantized_conv.c with their fused epilogues; this entry point stores the plain int32 sums.
#include "include/quantized_gemm.h"
#include "include/quantized_conv.h"
#include <string.h>

void osprey_qgemm_s16(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, int32_t *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (kpairs <= 0) {
        for (int i = 0; i < m; i++) memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(int32_t));
        return;
    }
    osprey_qepilogue ep = {NULL, NULL, NULL, 0, OSPREY_QOUT_INT32, 0};
    osprey_qgemm_s16_epilogue(m, n, kpairs, a, lda, packed_b, &ep, c, ldc);
}

int osprey_qgemm_uses_avx2(void) { return osprey_qconv_uses_avx2(); }
