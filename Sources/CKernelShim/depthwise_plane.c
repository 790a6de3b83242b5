// The depthwise convolution's inner plane loop in AVX2 + FMA (chosen at run time by the Swift caller): taps over the
// flat-window scratch straight into the output plane with bias, residual and activation in registers. The Swift
// path it replaces filtered into a flat buffer and copied it out in a second pass (MobileNetV2 batch 8: that copy
// took more time than the filter). Engine's `depthwiseConvolution` keeps that path for other CPUs and as the twin.
#include "include/depthwise_plane.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_logistic.h"
#include "avx512_math.h"
#include "include/float_activations.h"

/// Residual and epilogue on `n` (<= 16) outputs at `out` from the accumulators u (first 8) and v (next 8). While a
/// whole 16-lane store stays inside the plane (`room` floats from `out` to its end), it is one: lanes past the row's
/// end land in the next rows, which are written after this one and overwrite them (no masked stores: on AMD Zen a
/// vmaskmovps store took 40% of the kernel). The plane's last outputs go through a buffer on the stack.
__attribute__((target("avx2,fma"), always_inline))
static inline void store16(__m256 u, __m256 v, int n, long room, float *out, const float *residual, int epilogue, __m256 lo, __m256 hi) {
    if (room >= 16) {
        if (residual) {
            u = _mm256_add_ps(u, _mm256_loadu_ps(residual));
            v = _mm256_add_ps(v, _mm256_loadu_ps(residual + 8));
        }
        _mm256_storeu_ps(out, finish8(u, epilogue, lo, hi));
        if (n > 8) _mm256_storeu_ps(out + 8, finish8(v, epilogue, lo, hi));
        return;
    }
    float buffer[16] = {0};
    if (residual) {
        for (int i = 0; i < n; i++) buffer[i] = residual[i];
        u = _mm256_add_ps(u, _mm256_loadu_ps(buffer));
        v = _mm256_add_ps(v, _mm256_loadu_ps(buffer + 8));
    }
    _mm256_storeu_ps(buffer, finish8(u, epilogue, lo, hi));
    _mm256_storeu_ps(buffer + 8, finish8(v, epilogue, lo, hi));
    for (int i = 0; i < n; i++) out[i] = buffer[i];
}

/// 3x3: the nine weights stay in registers; 16 outputs per step with two accumulators for the FMA latency.
__attribute__((target("avx2,fma"), always_inline))
static inline void plane3x3(const float *const *bases, const float *weights, float bias, int rows, int row_width, int width,
                            float *out, const float *residual, int epilogue, float lo_value, float hi_value) {
    const __m256 w0 = _mm256_set1_ps(weights[0]), w1 = _mm256_set1_ps(weights[1]), w2 = _mm256_set1_ps(weights[2]);
    const __m256 w3 = _mm256_set1_ps(weights[3]), w4 = _mm256_set1_ps(weights[4]), w5 = _mm256_set1_ps(weights[5]);
    const __m256 w6 = _mm256_set1_ps(weights[6]), w7 = _mm256_set1_ps(weights[7]), w8 = _mm256_set1_ps(weights[8]);
    const float *p0 = bases[0], *p1 = bases[1], *p2 = bases[2], *p3 = bases[3], *p4 = bases[4];
    const float *p5 = bases[5], *p6 = bases[6], *p7 = bases[7], *p8 = bases[8];
    const __m256 start = _mm256_set1_ps(bias), lo = _mm256_set1_ps(lo_value), hi = _mm256_set1_ps(hi_value);
#define TAPS3x3(acc, j) do { \
        __m256 a_ = _mm256_fmadd_ps(_mm256_loadu_ps(p0 + (j)), w0, start); \
        __m256 b_ = _mm256_mul_ps(_mm256_loadu_ps(p1 + (j)), w1); \
        a_ = _mm256_fmadd_ps(_mm256_loadu_ps(p2 + (j)), w2, a_); \
        b_ = _mm256_fmadd_ps(_mm256_loadu_ps(p3 + (j)), w3, b_); \
        a_ = _mm256_fmadd_ps(_mm256_loadu_ps(p4 + (j)), w4, a_); \
        b_ = _mm256_fmadd_ps(_mm256_loadu_ps(p5 + (j)), w5, b_); \
        a_ = _mm256_fmadd_ps(_mm256_loadu_ps(p6 + (j)), w6, a_); \
        b_ = _mm256_fmadd_ps(_mm256_loadu_ps(p7 + (j)), w7, b_); \
        a_ = _mm256_fmadd_ps(_mm256_loadu_ps(p8 + (j)), w8, a_); \
        acc = _mm256_add_ps(a_, b_); \
    } while (0)
    const long plane = (long)rows * width;
    for (int y = 0; y < rows; y++) {
        const long in_row = (long)y * row_width, out_row = (long)y * width;
        int x = 0;
        for (; x + 16 <= width; x += 16) {
            __m256 u, v;
            TAPS3x3(u, in_row + x);
            TAPS3x3(v, in_row + x + 8);
            if (residual) {
                u = _mm256_add_ps(u, _mm256_loadu_ps(residual + out_row + x));
                v = _mm256_add_ps(v, _mm256_loadu_ps(residual + out_row + x + 8));
            }
            _mm256_storeu_ps(out + out_row + x, finish8(u, epilogue, lo, hi));
            _mm256_storeu_ps(out + out_row + x + 8, finish8(v, epilogue, lo, hi));
        }
        if (x < width) {
            // The row's last 1-15 outputs (the second vector only when more than 8 are left).
            __m256 u, v = _mm256_setzero_ps();
            TAPS3x3(u, in_row + x);
            if (width - x > 8) TAPS3x3(v, in_row + x + 8);
            store16(u, v, width - x, plane - out_row - x, out + out_row + x, residual ? residual + out_row + x : 0, epilogue, lo, hi);
        }
    }
#undef TAPS3x3
}

/// Any tap count: 16 outputs per step, even and odd taps in separate accumulators.
__attribute__((target("avx2,fma"), always_inline))
static inline void plane_taps(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width, int width,
                              float *out, const float *residual, int epilogue, float lo_value, float hi_value) {
    const __m256 start = _mm256_set1_ps(bias), lo = _mm256_set1_ps(lo_value), hi = _mm256_set1_ps(hi_value);
    const long plane = (long)rows * width;
    for (int y = 0; y < rows; y++) {
        const long in_row = (long)y * row_width, out_row = (long)y * width;
        for (int x = 0; x < width; x += 16) {
            const long j = in_row + x;
            __m256 a0 = start, a1 = start, b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
            int t = 0;
            for (; t + 1 < taps; t += 2) {
                const __m256 wa = _mm256_set1_ps(weights[t]), wb = _mm256_set1_ps(weights[t + 1]);
                const float *p = bases[t] + j, *q = bases[t + 1] + j;
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(p), wa, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), wa, a1);
                b0 = _mm256_fmadd_ps(_mm256_loadu_ps(q), wb, b0);
                b1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), wb, b1);
            }
            if (t < taps) {
                const __m256 wa = _mm256_set1_ps(weights[t]);
                const float *p = bases[t] + j;
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(p), wa, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), wa, a1);
            }
            __m256 u = _mm256_add_ps(a0, b0), v = _mm256_add_ps(a1, b1);
            if (x + 16 <= width) {
                if (residual) {
                    u = _mm256_add_ps(u, _mm256_loadu_ps(residual + out_row + x));
                    v = _mm256_add_ps(v, _mm256_loadu_ps(residual + out_row + x + 8));
                }
                _mm256_storeu_ps(out + out_row + x, finish8(u, epilogue, lo, hi));
                _mm256_storeu_ps(out + out_row + x + 8, finish8(v, epilogue, lo, hi));
            } else {
                store16(u, v, width - x, plane - out_row - x, out + out_row + x, residual ? residual + out_row + x : 0, epilogue, lo, hi);
            }
        }
    }
}

/// One body per (kernel, epilogue) pair, so the epilogue's branch is resolved at compile time; `target` is the ISA
/// attribute and `suffix` names the plane kernels of that ISA.
#define DW_BODY(name, target, suffix, epilogue_value) \
    target \
    static void name(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width, int width, \
                     float *out, const float *residual, float lo, float hi) { \
        if (taps == 9) plane3x3##suffix(bases, weights, bias, rows, row_width, width, out, residual, epilogue_value, lo, hi); \
        else plane_taps##suffix(bases, taps, weights, bias, rows, row_width, width, out, residual, epilogue_value, lo, hi); \
    }
#define OSPREY_AVX2_FMA __attribute__((target("avx2,fma")))
DW_BODY(plane_clamp, OSPREY_AVX2_FMA, , OSPREY_DW_CLAMP)
DW_BODY(plane_silu, OSPREY_AVX2_FMA, , OSPREY_DW_SILU)
DW_BODY(plane_sigmoid, OSPREY_AVX2_FMA, , OSPREY_DW_SIGMOID)
DW_BODY(plane_hard_swish, OSPREY_AVX2_FMA, , OSPREY_DW_HARDSWISH)

// The AVX-512F bodies: 32 outputs a step in two zmm vectors, and a row's last 1-31 outputs 16 at a time through
// masked loads and stores (on AVX-512 these are as fast as plain ones, so no stack buffer and no overlapping store).

/// Lanes of a row's next 16 outputs that exist (`left` of them).
OSPREY_AVX512 __attribute__((always_inline))
static inline __mmask16 lanes16(int left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }

/// Residual, epilogue and masked store of 16 outputs.
OSPREY_AVX512 __attribute__((always_inline))
static inline void emit16(__m512 v, __mmask16 m, float *out, const float *residual, int epilogue, __m512 lo, __m512 hi) {
    if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual));
    _mm512_mask_storeu_ps(out, m, finish16(v, epilogue, lo, hi));
}

/// plane3x3 on 16-lane vectors; tap loads are masked to the lanes stored.
OSPREY_AVX512 __attribute__((always_inline))
static inline void plane3x3_512(const float *const *bases, const float *weights, float bias, int rows, int row_width, int width,
                                float *out, const float *residual, int epilogue, float lo_value, float hi_value) {
    __m512 w[9];
    for (int t = 0; t < 9; t++) w[t] = _mm512_set1_ps(weights[t]);
    const float *p[9];
    for (int t = 0; t < 9; t++) p[t] = bases[t];
    const __m512 start = _mm512_set1_ps(bias), lo = _mm512_set1_ps(lo_value), hi = _mm512_set1_ps(hi_value);
#define TAPS3x3_512(acc, j, m) do { \
        __m512 a_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[0] + (j)), w[0], start); \
        __m512 b_ = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p[1] + (j)), w[1]); \
        a_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[2] + (j)), w[2], a_); \
        b_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[3] + (j)), w[3], b_); \
        a_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[4] + (j)), w[4], a_); \
        b_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[5] + (j)), w[5], b_); \
        a_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[6] + (j)), w[6], a_); \
        b_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[7] + (j)), w[7], b_); \
        a_ = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p[8] + (j)), w[8], a_); \
        acc = _mm512_add_ps(a_, b_); \
    } while (0)
    const __mmask16 all = 0xFFFF;
    for (int y = 0; y < rows; y++) {
        const long in_row = (long)y * row_width, out_row = (long)y * width;
        int x = 0;
        for (; x + 32 <= width; x += 32) {
            __m512 u, v;
            TAPS3x3_512(u, in_row + x, all);
            TAPS3x3_512(v, in_row + x + 16, all);
            emit16(u, all, out + out_row + x, residual ? residual + out_row + x : 0, epilogue, lo, hi);
            emit16(v, all, out + out_row + x + 16, residual ? residual + out_row + x + 16 : 0, epilogue, lo, hi);
        }
        for (; x < width; x += 16) {
            const __mmask16 m = lanes16(width - x);
            __m512 u;
            TAPS3x3_512(u, in_row + x, m);
            emit16(u, m, out + out_row + x, residual ? residual + out_row + x : 0, epilogue, lo, hi);
        }
    }
#undef TAPS3x3_512
}

/// plane_taps on 16-lane vectors: 16 outputs a step (any tap count), even and odd taps in separate accumulators.
OSPREY_AVX512 __attribute__((always_inline))
static inline void plane_taps_512(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width, int width,
                                  float *out, const float *residual, int epilogue, float lo_value, float hi_value) {
    const __m512 start = _mm512_set1_ps(bias), lo = _mm512_set1_ps(lo_value), hi = _mm512_set1_ps(hi_value);
    for (int y = 0; y < rows; y++) {
        const long in_row = (long)y * row_width, out_row = (long)y * width;
        for (int x = 0; x < width; x += 32) {
            const long j = in_row + x;
            const __mmask16 m0 = lanes16(width - x), m1 = width - x > 16 ? lanes16(width - x - 16) : 0;
            __m512 a0 = start, a1 = start, b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
            int t = 0;
            for (; t + 1 < taps; t += 2) {
                const __m512 wa = _mm512_set1_ps(weights[t]), wb = _mm512_set1_ps(weights[t + 1]);
                const float *pa = bases[t] + j, *pb = bases[t + 1] + j;
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, pa), wa, a0);
                a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, pa + 16), wa, a1);
                b0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, pb), wb, b0);
                b1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, pb + 16), wb, b1);
            }
            if (t < taps) {
                const __m512 wa = _mm512_set1_ps(weights[t]);
                const float *pa = bases[t] + j;
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, pa), wa, a0);
                a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, pa + 16), wa, a1);
            }
            emit16(_mm512_add_ps(a0, b0), m0, out + out_row + x, residual ? residual + out_row + x : 0, epilogue, lo, hi);
            if (m1) emit16(_mm512_add_ps(a1, b1), m1, out + out_row + x + 16, residual ? residual + out_row + x + 16 : 0, epilogue, lo, hi);
        }
    }
}

DW_BODY(plane_clamp_512, OSPREY_AVX512, _512, OSPREY_DW_CLAMP)
DW_BODY(plane_silu_512, OSPREY_AVX512, _512, OSPREY_DW_SILU)
DW_BODY(plane_sigmoid_512, OSPREY_AVX512, _512, OSPREY_DW_SIGMOID)
DW_BODY(plane_hard_swish_512, OSPREY_AVX512, _512, OSPREY_DW_HARDSWISH)

void osprey_depthwise_plane_f32(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width,
                                int width, float *out, const float *residual, int epilogue, float lo, float hi) {
    if (osprey_float_avx512()) {
        switch (epilogue) {
        case OSPREY_DW_SILU: plane_silu_512(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
        case OSPREY_DW_SIGMOID: plane_sigmoid_512(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
        case OSPREY_DW_HARDSWISH: plane_hard_swish_512(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
        default: plane_clamp_512(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
        }
        return;
    }
    switch (epilogue) {
    case OSPREY_DW_SILU: plane_silu(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
    case OSPREY_DW_SIGMOID: plane_sigmoid(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
    case OSPREY_DW_HARDSWISH: plane_hard_swish(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
    default: plane_clamp(bases, taps, weights, bias, rows, row_width, width, out, residual, lo, hi); break;
    }
}

#else

void osprey_depthwise_plane_f32(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width,
                                int width, float *out, const float *residual, int epilogue, float lo, float hi) {
    (void)bases; (void)taps; (void)weights; (void)bias; (void)rows; (void)row_width; (void)width; (void)out; (void)residual;
    (void)epilogue; (void)lo; (void)hi;
}

#endif
