// MaxPool 3x3 stride 2 (ResNet, DenseNet and SqueezeNet stems) in AVX-512F. The Swift flat-window pool splits each
// plane into four parity planes first (compiled for AVX2, the deinterleave was most of its time); here the three
// input rows of an output row are folded with contiguous loads, and the stride-2 column maxima are two permutes of
// that one row. `maxPool2DReference` is the twin the tests compare it with.
#include "include/max_pool_avx512.h"

long osprey_max_pool_3x3s2_row_floats(long out_width, long in_width, long pad_left) {
    // Reads reach column 2 * (out_width rounded up to 16) + 2 + 32 of the padded row; the interior takes the input row.
    const long reads = 2 * ((out_width + 15) / 16 * 16) + 64, interior = pad_left + in_width;
    return ((reads > interior ? reads : interior) + 15) / 16 * 16;
}

#if defined(__x86_64__)
#include <immintrin.h>

// (b > a ? b : a): the Swift fold's order, so a NaN in `a` stays and one in `b` is skipped, as there.
__attribute__((target("avx512f"), always_inline))
static inline __m512 fold(__m512 a, __m512 b) { return _mm512_max_ps(b, a); }

__attribute__((target("avx512f")))
void osprey_max_pool_3x3s2_avx512(const float *in, long in_height, long in_width, float *out, long out_height, long out_width,
                                  long pad_top, long pad_left, float *row) {
    const long row_floats = osprey_max_pool_3x3s2_row_floats(out_width, in_width, pad_left);
    const __m512 low = _mm512_set1_ps(-__builtin_inff());
    for (long i = 0; i < row_floats; i += 16) _mm512_storeu_ps(row + i, low);
    float *interior = row + pad_left;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (long y = 0; y < out_height; y++) {
        const long top = 2 * y - pad_top;
        const float *rows[3];
        int valid = 0;
        for (long i = 0; i < 3; i++) {
            if (top + i >= 0 && top + i < in_height) rows[valid++] = in + (top + i) * in_width;
        }
        // Vertical fold into the row's interior (its borders stay -inf).
        for (long x = 0; x < in_width; x += 16) {
            const __mmask16 m = in_width - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (in_width - x)) - 1);
            __m512 v = low;
            for (int i = 0; i < valid; i++) v = fold(v, _mm512_mask_loadu_ps(low, m, rows[i] + x));
            _mm512_mask_storeu_ps(interior + x, m, v);
        }
        // Columns 2x, 2x + 1, 2x + 2 of the padded row.
        float *o = out + y * out_width;
        for (long x = 0; x < out_width; x += 16) {
            const float *p = row + 2 * x;
            const __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + 16);
            const __m512 b0 = _mm512_loadu_ps(p + 2), b1 = _mm512_loadu_ps(p + 18);
            __m512 v = _mm512_permutex2var_ps(a0, even, a1);
            v = fold(v, _mm512_permutex2var_ps(a0, odd, a1));
            v = fold(v, _mm512_permutex2var_ps(b0, even, b1));
            const __mmask16 m = out_width - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (out_width - x)) - 1);
            _mm512_mask_storeu_ps(o + x, m, v);
        }
    }
}

#else

void osprey_max_pool_3x3s2_avx512(const float *in, long in_height, long in_width, float *out, long out_height, long out_width,
                                  long pad_top, long pad_left, float *row) {
    (void)in; (void)in_height; (void)in_width; (void)out; (void)out_height; (void)out_width; (void)pad_top; (void)pad_left;
    (void)row;
}

#endif
