// Transcendental epilogues of the float kernels (SiLU / Swish and Sigmoid after a Conv) in AVX2 + FMA, chosen at run
// time. Swift's SIMD16 spelling of the same math (VectorMath.swift) compiled to an out-of-line call per 16 floats on
// 128-bit halves without FMA: a quarter of EfficientNet-B0's time. The Swift version stays the portable path and the
// reference of the tests.
#include "include/float_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_logistic.h"
#include "avx512_math.h"

int osprey_float_activations_fast(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    }
    return cached;
}

/// -1 until the first check; then 1 when the CPU has AVX-512F (compiler-rt also checks that the OS saves zmm state).
static int avx512_present = -1;
static int avx512_on = 1;

int osprey_float_avx512(void) {
    if (avx512_present < 0) {
        __builtin_cpu_init();
        avx512_present = osprey_float_activations_fast() && __builtin_cpu_supports("avx512f") ? 1 : 0;
    }
    return avx512_present & avx512_on;
}

int osprey_float_avx512_enable(int on) {
    avx512_on = on ? 1 : 0;
    return osprey_float_avx512();
}

/// The whole-pair loop of both bodies, at the width of vector type V, intrinsic prefix P (_mm256, _mm512), W lanes and
/// lane function LOGISTIC: from i, two vectors a step, data = LOGISTIC(data + add (+ residual)).
#define LOGISTIC_PAIRS(V, P, W, LOGISTIC)                                    \
    for (; i + 2 * (W) <= count; i += 2 * (W)) {                             \
        V a = P##_add_ps(P##_loadu_ps(data + i), add);                       \
        V b = P##_add_ps(P##_loadu_ps(data + i + (W)), add);                 \
        if (residual) {                                                      \
            a = P##_add_ps(a, P##_loadu_ps(residual + i));                   \
            b = P##_add_ps(b, P##_loadu_ps(residual + i + (W)));             \
        }                                                                    \
        P##_storeu_ps(data + i, LOGISTIC(a, silu));                          \
        P##_storeu_ps(data + i + (W), LOGISTIC(b, silu));                    \
    }

/// logistic_avx2 on 16 lanes, 32 a step; the last 1-31 through masked loads and stores.
OSPREY_AVX512
static void logistic_avx512(float *data, long count, float addend, const float *residual, int silu) {
    const __m512 add = _mm512_set1_ps(addend);
    long i = 0;
    LOGISTIC_PAIRS(__m512, _mm512, 16, logistic16);
    for (; i < count; i += 16) {
        const long left = count - i;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __m512 a = _mm512_add_ps(_mm512_maskz_loadu_ps(m, data + i), add);
        if (residual) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, residual + i));
        _mm512_mask_storeu_ps(data + i, m, logistic16(a, silu));
    }
}

__attribute__((target("avx2,fma")))
static void logistic_avx2(float *data, long count, float addend, const float *residual, int silu) {
    const __m256 add = _mm256_set1_ps(addend);
    long i = 0;
    LOGISTIC_PAIRS(__m256, _mm256, 8, logistic8);
    if (i < count) {
        // The last 1-15 through a buffer on the stack, so every element sees the same arithmetic (a masked
        // vmaskmovps store is slow on AMD Zen).
        float buffer[16] = {0};
        long left = count - i;
        for (long k = 0; k < left; k++) buffer[k] = (data[i + k] + addend) + (residual ? residual[i + k] : 0.0f);
        _mm256_storeu_ps(buffer, logistic8(_mm256_loadu_ps(buffer), silu));
        _mm256_storeu_ps(buffer + 8, logistic8(_mm256_loadu_ps(buffer + 8), silu));
        for (long k = 0; k < left; k++) data[i + k] = buffer[k];
    }
}

void osprey_logistic_f32(float *data, long count, float addend, const float *residual, int silu) {
    if (count <= 0) return;
    if (osprey_float_avx512()) {
        if (silu) logistic_avx512(data, count, addend, residual, 1);
        else logistic_avx512(data, count, addend, residual, 0);
        return;
    }
    if (silu) logistic_avx2(data, count, addend, residual, 1);
    else logistic_avx2(data, count, addend, residual, 0);
}

#else

int osprey_float_activations_fast(void) { return 0; }
int osprey_float_avx512(void) { return 0; }
int osprey_float_avx512_enable(int on) { (void)on; return 0; }

void osprey_logistic_f32(float *data, long count, float addend, const float *residual, int silu) {
    (void)data; (void)count; (void)addend; (void)residual; (void)silu;
}

#endif
