// Direct 3x3 depthwise convolution on NCHW planes (MobileNet, EfficientNet, PP-LCNet blocks).
//
// Input rows are copied once each, as they are first needed, into a ring of four zero-bordered row slots that stays
// in L1 (stride 2: split into even and odd columns on the way, so every tap is a plain unaligned load). Each output
// row is then nine FMAs per eight outputs over nine tap pointers, with two accumulators per vector and four vectors
// in flight so the FMA latency is hidden; no padded plane, flat buffer or second pass as in the generic kernel.
#include "include/depthwise_conv.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

int osprey_depthwise3x3_available(void) {
    static int cached = -1;
    if (cached < 0) { __builtin_cpu_init(); cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0; }
    return cached;
}

// Output columns rounded up to whole vectors.
static int vector_columns(int out_width) { return (out_width + 7) & ~7; }

// Floats of one row slot: the padded row (stride 1), or its even and odd halves of `half` floats each (stride 2).
static int slot_floats(int width, int out_width, int stride, int pad_left) {
    int columns = vector_columns(out_width);
    if (stride == 1) {
        int padded = columns + 2 > pad_left + width ? columns + 2 : pad_left + width;
        return (padded + 15) & ~15;
    }
    int half = columns + 1 > (pad_left + width + 1) / 2 ? columns + 1 : (pad_left + width + 1) / 2;
    return 2 * ((half + 15) & ~15);
}

int osprey_depthwise3x3_scratch(int width, int out_width, int stride, int pad_left) {
    int slot = slot_floats(width, out_width, stride, pad_left);
    // Four ring slots, one zero slot (rows above and below the input), one padded row for the stride-2 split.
    return 6 * slot + 32;
}

// Evens and odds of 16 consecutive floats.
__attribute__((target("avx2"), always_inline))
static inline void split16(const float *p, float *even, float *odd) {
    __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
    __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));  // lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6
    __m256 o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(even, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(odd, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0))));
}

// `vectors` vectors of eight outputs from x: taps t[k] + x, two accumulators per vector.
__attribute__((target("avx2,fma"), always_inline))
static inline void tap_block(int vectors, const float *const t[9], const __m256 w[9], __m256 bias, int x, float *out) {
    __m256 a[4], b[4];
    for (int v = 0; v < vectors; v++) { a[v] = bias; b[v] = _mm256_setzero_ps(); }
    for (int k = 0; k < 9; k += 2) {
        for (int v = 0; v < vectors; v++) a[v] = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(t[k] + x + 8 * v), a[v]);
        if (k + 1 < 9) {
            for (int v = 0; v < vectors; v++) b[v] = _mm256_fmadd_ps(w[k + 1], _mm256_loadu_ps(t[k + 1] + x + 8 * v), b[v]);
        }
    }
    for (int v = 0; v < vectors; v++) _mm256_storeu_ps(out + 8 * v, _mm256_add_ps(a[v], b[v]));
}

__attribute__((target("avx2,fma")))
void osprey_depthwise3x3_plane(const float *in, int height, int width, const float *filter, float bias, int stride,
                               int pad_top, int pad_left, float *out, int out_height, int out_width, float *scratch) {
    int slot = slot_floats(width, out_width, stride, pad_left), half = slot / 2;
    // Slots 0-3: ring; slot 4: zeros; slot 5: the padded row split at stride 2. All zero, so borders stay zero.
    memset(scratch, 0, (size_t)(6 * slot + 32) * sizeof(float));
    float *zeros = scratch + 4 * slot, *padded = scratch + 5 * slot;
    int held[4] = {-1, -1, -1, -1};
    __m256 w[9];
    for (int k = 0; k < 9; k++) w[k] = _mm256_set1_ps(filter[k]);
    __m256 b = _mm256_set1_ps(bias);
    int columns = vector_columns(out_width);
    for (int y = 0; y < out_height; y++) {
        const float *t[9];
        for (int ky = 0; ky < 3; ky++) {
            int iy = y * stride - pad_top + ky;
            const float *row = zeros;
            if (iy >= 0 && iy < height) {
                float *s = scratch + (iy & 3) * slot;
                if (held[iy & 3] != iy) {
                    held[iy & 3] = iy;
                    if (stride == 1) {
                        memcpy(s + pad_left, in + (size_t)iy * width, (size_t)width * sizeof(float));
                    } else {
                        memcpy(padded + pad_left, in + (size_t)iy * width, (size_t)width * sizeof(float));
                        for (int c = 0; c < half; c += 8) split16(padded + 2 * c, s + c, s + half + c);
                    }
                }
                row = s;
            }
            if (stride == 1) {
                t[3 * ky] = row; t[3 * ky + 1] = row + 1; t[3 * ky + 2] = row + 2;
            } else {
                // Padded column 2x + kx: even column x (kx = 0), odd column x (kx = 1), even column x + 1 (kx = 2).
                t[3 * ky] = row; t[3 * ky + 1] = row + half; t[3 * ky + 2] = row + 1;
            }
        }
        float *o = out + (size_t)y * out_width;
        int x = 0;
        for (; x + 32 <= out_width; x += 32) tap_block(4, t, w, b, x, o + x);
        for (; x + 8 <= out_width; x += 8) tap_block(1, t, w, b, x, o + x);
        if (x < columns) {
            float tail[8];
            tap_block(1, t, w, b, x, tail);
            memcpy(o + x, tail, (size_t)(out_width - x) * sizeof(float));
        }
    }
}

#else
int osprey_depthwise3x3_available(void) { return 0; }
int osprey_depthwise3x3_scratch(int width, int out_width, int stride, int pad_left) { (void)width; (void)out_width; (void)stride; (void)pad_left; return 0; }
void osprey_depthwise3x3_plane(const float *in, int height, int width, const float *filter, float bias, int stride,
                               int pad_top, int pad_left, float *out, int out_height, int out_width, float *scratch) {
    (void)in; (void)height; (void)width; (void)filter; (void)bias; (void)stride; (void)pad_top; (void)pad_left;
    (void)out; (void)out_height; (void)out_width; (void)scratch;
}
#endif
