// The channels-last pointwise convolution: a product of the pixels' channel rows (read in place) with weights packed
// once, bias, residual and activation applied to the accumulators before the single store. The packed product's
// own driver (PackedMatrixMultiply.swift) applies anything but GELU to a copied tile in Swift; MobileNet-style
// blocks put Relu6 or HardSwish and a residual after nearly every 1x1 conv, so here they stay in registers.
#include "include/nhwc_pointwise.h"
#include "include/depthwise_plane.h"
#include "include/float_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx512_math.h"

int osprey_nhwc_pointwise_fast(void) { return osprey_float_avx512(); }

/// ROWS (1...6) rows times WIDTH (1 or 2) strips from column `column`: one zmm accumulator per row and strip; the
/// columns past `columns` are masked off in the epilogue's loads and the store.
OSPREY_AVX512 __attribute__((always_inline))
static inline void block(const int ROWS, const int WIDTH, long depth, const float *a, long lda, const float *b, long strip_size,
                         long column, long columns, const float *bias, const float *residual, float *out, int epilogue, __m512 lo, __m512 hi) {
    __m512 c[6][2];
    for (int r = 0; r < ROWS; r++)
        for (int h = 0; h < WIDTH; h++) c[r][h] = _mm512_setzero_ps();
    const float *a0 = a, *a3 = a + 3 * lda, *b1 = b + strip_size;
    for (long p = 0; p < depth; p++) {
        const __m512 x0 = _mm512_loadu_ps(b + p * 16);
        const __m512 x1 = WIDTH == 2 ? _mm512_loadu_ps(b1 + p * 16) : x0;
        for (int r = 0; r < ROWS; r++) {
            const __m512 v = _mm512_set1_ps(((r < 3 ? a0 : a3) + (r % 3) * lda)[p]);
            c[r][0] = _mm512_fmadd_ps(v, x0, c[r][0]);
            if (WIDTH == 2) c[r][1] = _mm512_fmadd_ps(v, x1, c[r][1]);
        }
    }
    for (int h = 0; h < WIDTH; h++) {
        const long j = column + 16 * h;
        const long left = columns - j;
        // Whole strips load and store plainly: masked loads of data not in cache run far slower (AMD Zen 4), so the
        // mask is kept for the last strip's tail only.
        if (left >= 16) {
            const __m512 bv = bias ? _mm512_loadu_ps(bias + j) : _mm512_setzero_ps();
            for (int r = 0; r < ROWS; r++) {
                __m512 v = _mm512_add_ps(c[r][h], bv);
                if (residual) v = _mm512_add_ps(v, _mm512_loadu_ps(residual + r * columns + j));
                _mm512_storeu_ps(out + r * columns + j, finish16(v, epilogue, lo, hi));
            }
            continue;
        }
        const __mmask16 m = (__mmask16)((1u << left) - 1);
        const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + j) : _mm512_setzero_ps();
        for (int r = 0; r < ROWS; r++) {
            __m512 v = _mm512_add_ps(c[r][h], bv);
            if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual + r * columns + j));
            _mm512_mask_storeu_ps(out + r * columns + j, m, finish16(v, epilogue, lo, hi));
        }
    }
}

#define BAND_KERNEL(ROWS)                                                                                              \
    OSPREY_AVX512 static void band_##ROWS(long depth, const float *a, long lda, const float *packed, long first_strip, long end_strip, \
                                          long columns, const float *bias, const float *residual, float *out, int epilogue, \
                                          __m512 lo, __m512 hi) {                                                         \
        long s = first_strip;                                                                                          \
        for (; s + 2 <= end_strip; s += 2)                                                                             \
            block(ROWS, 2, depth, a, lda, packed + s * depth * 16, depth * 16, s * 16, columns, bias, residual, out, epilogue, lo, hi); \
        if (s < end_strip)                                                                                             \
            block(ROWS, 1, depth, a, lda, packed + s * depth * 16, depth * 16, s * 16, columns, bias, residual, out, epilogue, lo, hi); \
    }

BAND_KERNEL(1)
BAND_KERNEL(2)
BAND_KERNEL(3)
BAND_KERNEL(4)
BAND_KERNEL(5)
BAND_KERNEL(6)

OSPREY_AVX512
void osprey_nhwc_pointwise_f32_strips(long first_row, long end_row, long first_strip, long end_strip, long depth, const float *a,
                                      long lda, const float *packed, long columns, const float *bias, const float *residual,
                                      float *out, int epilogue, float lo_value, float hi_value) {
    const __m512 lo = _mm512_set1_ps(lo_value), hi = _mm512_set1_ps(hi_value);
    const long all_strips = (columns + 15) / 16;
    const long strips = end_strip < all_strips ? end_strip : all_strips;
    // Column blocks of about 192 KB of packed B stay in L2 while every band of the rows passes over them.
    long per_block = 196608 / (depth * 16 * 4 > 0 ? depth * 16 * 4 : 1);
    if (per_block < 2) per_block = 2;
    for (long first = first_strip; first < strips; first += per_block) {
        const long last = first + per_block < strips ? first + per_block : strips;
        long r = first_row;
        for (; r < end_row; r += 6) {
            const long n = end_row - r < 6 ? end_row - r : 6;
            const float *ar = a + r * lda;
            const float *res = residual ? residual + r * columns : 0;
            float *o = out + r * columns;
            switch (n) {
            case 6: band_6(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            case 5: band_5(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            case 4: band_4(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            case 3: band_3(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            case 2: band_2(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            default: band_1(depth, ar, lda, packed, first, last, columns, bias, res, o, epilogue, lo, hi); break;
            }
        }
    }
}

void osprey_nhwc_pointwise_f32(long first_row, long end_row, long depth, const float *a, long lda, const float *packed, long columns,
                               const float *bias, const float *residual, float *out, int epilogue, float lo, float hi) {
    osprey_nhwc_pointwise_f32_strips(first_row, end_row, 0, (columns + 15) / 16, depth, a, lda, packed, columns, bias, residual, out,
                                     epilogue, lo, hi);
}

#else

int osprey_nhwc_pointwise_fast(void) { return 0; }

void osprey_nhwc_pointwise_f32_strips(long first_row, long end_row, long first_strip, long end_strip, long depth, const float *a,
                                      long lda, const float *packed, long columns, const float *bias, const float *residual,
                                      float *out, int epilogue, float lo, float hi) {
    (void)first_row; (void)end_row; (void)first_strip; (void)end_strip; (void)depth; (void)a; (void)lda; (void)packed; (void)columns;
    (void)bias; (void)residual; (void)out; (void)epilogue; (void)lo; (void)hi;
}

void osprey_nhwc_pointwise_f32(long first_row, long end_row, long depth, const float *a, long lda, const float *packed, long columns,
                               const float *bias, const float *residual, float *out, int epilogue, float lo, float hi) {
    (void)first_row; (void)end_row; (void)depth; (void)a; (void)lda; (void)packed; (void)columns;
    (void)bias; (void)residual; (void)out; (void)epilogue; (void)lo; (void)hi;
}

#endif
