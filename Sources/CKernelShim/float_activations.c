// Transcendental epilogues of the float kernels (SiLU / Swish and Sigmoid after a Conv) in AVX2 + FMA, chosen at run
// time. Swift's SIMD16 spelling of the same math (VectorMath.swift) compiled to an out-of-line call per 16 floats on
// 128-bit halves without FMA: a quarter of EfficientNet-B0's time. The Swift version stays the portable path and the
// reference of the tests.
#include "include/float_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_logistic.h"

int osprey_float_activations_fast(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    }
    return cached;
}

__attribute__((target("avx2,fma")))
static void logistic_avx2(float *data, long count, float addend, const float *residual, int silu) {
    const __m256 add = _mm256_set1_ps(addend);
    long i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256 a = _mm256_add_ps(_mm256_loadu_ps(data + i), add);
        __m256 b = _mm256_add_ps(_mm256_loadu_ps(data + i + 8), add);
        if (residual) {
            a = _mm256_add_ps(a, _mm256_loadu_ps(residual + i));
            b = _mm256_add_ps(b, _mm256_loadu_ps(residual + i + 8));
        }
        _mm256_storeu_ps(data + i, logistic8(a, silu));
        _mm256_storeu_ps(data + i + 8, logistic8(b, silu));
    }
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
    if (silu) logistic_avx2(data, count, addend, residual, 1);
    else logistic_avx2(data, count, addend, residual, 0);
}

#else

int osprey_float_activations_fast(void) { return 0; }

void osprey_logistic_f32(float *data, long count, float addend, const float *residual, int silu) {
    (void)data; (void)count; (void)addend; (void)residual; (void)silu;
}

#endif
