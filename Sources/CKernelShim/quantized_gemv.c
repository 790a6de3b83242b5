// Few rows of 8-bit activations times a constant u8 x s8 weight matrix (a Gemm or MatMul at batch 1). The MatMul
// GEMM computes C^T = W^T x A^T with A's rows as the 16-column panels, which leaves 15 of 16 lanes idle when A has
// one row; here the activations are the broadcast operand (u8 quads, vpmaddubsw's unsigned side) and the weights
// the panels packed once (s8, |w| <= 64 so a pair of products cannot saturate), so every lane is an output column.
// The portable body is the reference twin the tests compare with.
#include "include/quantized_conv.h"
#include <math.h>
#include <string.h>

#define PANEL 16

/// Quad q of row x (K bytes) XOR `flip`, bytes past K zero.
static inline int32_t quad_at(const uint8_t *x, int k, int q, uint8_t flip) {
    uint8_t b[4] = {0, 0, 0, 0};
    for (int t = 0; t < 4 && 4 * q + t < k; t++) b[t] = x[4 * q + t] ^ flip;
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}

static inline int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/// Element c of a row: acc + bias[c] through the epilogue's kind with column c's parameters.
static inline void store_column(const osprey_qepilogue *ep, int c, int32_t acc, void *o) {
    int32_t v = acc + (ep->bias ? ep->bias[c] : 0);
    switch (ep->kind) {
    case OSPREY_QOUT_INT32: *(int32_t *)o = v; break;
    case OSPREY_QOUT_F32: *(float *)o = (float)v * ep->scale[c] + (ep->float_bias ? ep->float_bias[c] : 0.0f); break;
    default: {
        int32_t q = (int32_t)nearbyintf((float)v * ep->scale[c]) + ep->zero_point;
        if (ep->kind == OSPREY_QOUT_U8) *(uint8_t *)o = (uint8_t)clamp(q, 0, 255);
        else *(int8_t *)o = (int8_t)clamp(q, -128, 127);
    }
    }
}

static void gemv_portable(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                          const osprey_qepilogue *ep, void *out, int ldo, int size) {
    int kquads = (k + 3) / 4;
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            const uint8_t *panel = packed + (size_t)(c / PANEL) * kquads * 64 + 4 * (c % PANEL);
            int32_t acc = 0;
            for (int q = 0; q < kquads; q++) {
                int32_t four = quad_at(x + (size_t)r * ldx, k, q, flip);
                const uint8_t *xb = (const uint8_t *)&four;
                for (int t = 0; t < 4; t++) acc += (int32_t)xb[t] * (int8_t)panel[(size_t)q * 64 + t];
            }
            store_column(ep, c, acc, (char *)out + ((size_t)r * ldo + c) * size);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2")))
static void gemv_avx2(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                      const osprey_qepilogue *ep, void *out, int ldo, int size) {
    int kquads = (k + 3) / 4, whole = k / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    const uint32_t flip4 = flip * 0x01010101u;
    for (int r = 0; r < m; r++) {
        const uint8_t *row = x + (size_t)r * ldx;
        for (int j = 0; j * PANEL < n; j++) {
            int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL, c0 = j * PANEL;
            const uint8_t *panel = packed + (size_t)j * kquads * 64;
            // Two accumulator pairs over alternate quads shorten the add chains.
            __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256(), b0 = a0, b1 = a0;
            int q = 0;
            for (; q + 1 < whole; q += 2) {
                uint32_t f0, f1;
                memcpy(&f0, row + 4 * q, 4);
                memcpy(&f1, row + 4 * q + 4, 4);
                __m256i x0 = _mm256_set1_epi32((int32_t)(f0 ^ flip4)), x1 = _mm256_set1_epi32((int32_t)(f1 ^ flip4));
                const uint8_t *p = panel + (size_t)q * 64;
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, _mm256_loadu_si256((const __m256i *)p)), ones));
                a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, _mm256_loadu_si256((const __m256i *)(p + 32))), ones));
                b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, _mm256_loadu_si256((const __m256i *)(p + 64))), ones));
                b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, _mm256_loadu_si256((const __m256i *)(p + 96))), ones));
            }
            for (; q < kquads; q++) {
                __m256i x0 = _mm256_set1_epi32(quad_at(row, k, q, flip));
                const uint8_t *p = panel + (size_t)q * 64;
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, _mm256_loadu_si256((const __m256i *)p)), ones));
                a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, _mm256_loadu_si256((const __m256i *)(p + 32))), ones));
            }
            _Alignas(32) int32_t acc[PANEL];
            _mm256_store_si256((__m256i *)acc, _mm256_add_epi32(a0, b0));
            _mm256_store_si256((__m256i *)(acc + 8), _mm256_add_epi32(a1, b1));
            // One output row per call: the per-column epilogue is a small share, kept scalar (the portable one).
            char *o = (char *)out + ((size_t)r * ldo + c0) * size;
            for (int c = 0; c < cols; c++) store_column(ep, c0 + c, acc[c], o + (size_t)c * size);
        }
    }
}
#endif

void osprey_qgemv_u8s8(int m, int n, int k, const uint8_t *x, int ldx, int flip, const uint8_t *packed, const osprey_qepilogue *ep,
                       void *out, int ldo) {
    if (m <= 0 || n <= 0) return;
    int size = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    uint8_t f = flip ? 0x80 : 0;
#if defined(__x86_64__)
    if (!osprey_qkernels_portable_forced() && osprey_qconv_uses_avx2()) { gemv_avx2(m, n, k, x, ldx, f, packed, ep, out, ldo, size); return; }
#endif
    gemv_portable(m, n, k, x, ldx, f, packed, ep, out, ldo, size);
}
