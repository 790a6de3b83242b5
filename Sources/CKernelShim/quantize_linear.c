// The float <-> 8-bit conversions the quantized graphs run between their integer operators (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, a run-time QLinearMatMul's requantization), 32 values per AVX2 step. Each
// AVX2 body computes its portable body's values bit for bit: the same float division or product, NaN to 0, clamping
// to the output range minus the zero point (integers, so clamping before rounding equals clamping after), round half
// to even (cvtps2dq under the default MXCSR, nearbyintf in the portable body). The portable bodies are the reference
// twins the tests compare with (`osprey_qkernels_force_portable`).
#include "include/quantize_linear.h"
#include "include/quantized_conv.h"
#include <math.h>
#include <stddef.h>

/// One value already divided or scaled: NaN to -zero, clamped to [lo, hi] (the range minus zero), rounded, + zero.
static inline uint8_t quantize_one(float v, float zero, float lo, float hi) {
    if (v != v) v = -zero;
    v = v < lo ? lo : v > hi ? hi : v;
    return (uint8_t)(int32_t)((int32_t)nearbyintf(v) + (int32_t)zero);
}

static int vector_bodies(void) { return !osprey_qkernels_portable_forced() && osprey_qconv_uses_avx2(); }

#if defined(__x86_64__)
#include <immintrin.h>

/// 32 floats (four vectors, already divided or scaled) to 32 bytes: NaN to -zero, clamp, round, + zero, pack.
__attribute__((target("avx2"), always_inline))
static inline void quantize32_avx2(__m256 v[4], __m256 negzero, __m256 lo, __m256 hi, __m256i zp, int is_signed, uint8_t *out) {
    __m256i q[4];
    for (int i = 0; i < 4; i++) {
        __m256 t = _mm256_blendv_ps(v[i], negzero, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
        t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
        q[i] = _mm256_add_epi32(_mm256_cvtps_epi32(t), zp);
    }
    // In range already, so the packs only narrow; units [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7] reordered.
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i bytes = is_signed ? _mm256_packs_epi16(p01, p23) : _mm256_packus_epi16(p01, p23);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)out, bytes);
}

/// Floats divided by `factor` (`sums` NULL) or int32 sums times `factor`, 32 at a time, to bytes.
__attribute__((target("avx2"), always_inline))
static inline long convert_avx2(const float *x, const int32_t *sums, long count, float factor, float zero, float lo, float hi, int is_signed,
                                uint8_t *out) {
    __m256 f = _mm256_set1_ps(factor), nz = _mm256_set1_ps(-zero), l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    __m256i zp = _mm256_set1_epi32((int32_t)zero);
    long i = 0;
    for (; i + 32 <= count; i += 32) {
        __m256 v[4];
        for (int j = 0; j < 4; j++)
            v[j] = sums ? _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(sums + i + 8 * j))), f)
                        : _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * j), f);
        quantize32_avx2(v, nz, l, h, zp, is_signed, out + i);
    }
    return i;
}

__attribute__((target("avx2")))
static long quantize_avx2(const float *x, long count, float scale, float zero, float lo, float hi, int is_signed, uint8_t *out) {
    return convert_avx2(x, NULL, count, scale, zero, lo, hi, is_signed, out);
}

__attribute__((target("avx2")))
static long requantize_avx2(const int32_t *sums, long count, float multiplier, float zero, float lo, float hi, int is_signed, uint8_t *out) {
    return convert_avx2(NULL, sums, count, multiplier, zero, lo, hi, is_signed, out);
}

__attribute__((target("avx2")))
static long dequantize_avx2(const uint8_t *q, long count, float scale, float zero, int is_signed, float *out) {
    __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero);
    long i = 0;
    for (; i + 16 <= count; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(q + i));
        __m256i w0 = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
        __m256i w1 = is_signed ? _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)) : _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w0), z), s));
        _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w1), z), s));
    }
    return i;
}

__attribute__((target("avx2")))
static long range_avx2(const float *x, long count, float *low, float *high) {
    // min/max_ps return their second operand when either is NaN: the running bound, so NaN values are skipped.
    __m256 lo0 = _mm256_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    long i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        lo0 = _mm256_min_ps(a, lo0); hi0 = _mm256_max_ps(a, hi0);
        lo1 = _mm256_min_ps(b, lo1); hi1 = _mm256_max_ps(b, hi1);
    }
    _Alignas(32) float l[8], h[8];
    _mm256_store_ps(l, _mm256_min_ps(lo0, lo1));
    _mm256_store_ps(h, _mm256_max_ps(hi0, hi1));
    for (int j = 0; j < 8; j++) {
        if (l[j] < *low) *low = l[j];
        if (h[j] > *high) *high = h[j];
    }
    return i;
}
#endif

/// Both conversions to bytes: floats divided by `factor` (`sums` NULL) or int32 sums times `factor`.
static void convert(const float *x, const int32_t *sums, long count, float factor, float zero, int is_signed, uint8_t *out) {
    float lo = (is_signed ? -128.0f : 0.0f) - zero, hi = (is_signed ? 127.0f : 255.0f) - zero;
    long i = 0;
#if defined(__x86_64__)
    if (vector_bodies()) i = sums ? requantize_avx2(sums, count, factor, zero, lo, hi, is_signed, out) : quantize_avx2(x, count, factor, zero, lo, hi, is_signed, out);
#endif
    for (; i < count; i++) out[i] = quantize_one(sums ? (float)sums[i] * factor : x[i] / factor, zero, lo, hi);
}

void osprey_quantize_f32(const float *x, long count, float scale, float zero, int is_signed, uint8_t *out) {
    convert(x, NULL, count, scale, zero, is_signed, out);
}

void osprey_requantize_i32(const int32_t *sums, long count, float multiplier, float zero, int is_signed, uint8_t *out) {
    convert(NULL, sums, count, multiplier, zero, is_signed, out);
}

void osprey_dequantize_u8(const uint8_t *q, long count, float scale, float zero, int is_signed, float *out) {
    long i = 0;
#if defined(__x86_64__)
    if (vector_bodies()) i = dequantize_avx2(q, count, scale, zero, is_signed, out);
#endif
    for (; i < count; i++) out[i] = ((is_signed ? (float)(int8_t)q[i] : (float)q[i]) - zero) * scale;
}

void osprey_range_with_zero_f32(const float *x, long count, float *low, float *high) {
    *low = 0;
    *high = 0;
    long i = 0;
#if defined(__x86_64__)
    if (vector_bodies()) i = range_avx2(x, count, low, high);
#endif
    for (; i < count; i++) {
        if (x[i] < *low) *low = x[i];
        if (x[i] > *high) *high = x[i];
    }
}
