// Softmax rows and erf GELU in AVX2 + FMA, chosen at run time. Swift's SIMD16 spelling of e^x and erf (VectorMath.swift)
// compiles to an out-of-line call per 16 floats with separate multiplies and adds: attention's Softmax and the GELU
// epilogue of the transformer MLPs spent most of their time there. The Swift versions stay the portable path and the
// tests' reference.
#include "include/float_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include "avx2_logistic.h"
#include "avx512_math.h"
#include "include/float_activations.h"

/// The largest lane of v (`largest` 1) or the sum of its lanes (0): halves folded three times.
__attribute__((target("avx2,fma"), always_inline))
static inline float fold8(__m256 v, int largest) {
    __m128 low = _mm256_castps256_ps128(v), high = _mm256_extractf128_ps(v, 1);
    __m128 f = largest ? _mm_max_ps(low, high) : _mm_add_ps(low, high);
    __m128 g = _mm_movehl_ps(f, f);
    f = largest ? _mm_max_ps(f, g) : _mm_add_ps(f, g);
    g = _mm_shuffle_ps(f, f, 1);
    return _mm_cvtss_f32(largest ? _mm_max_ss(f, g) : _mm_add_ss(f, g));
}

/// The first n (< 8) lanes of p, the rest `pad`.
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 load_tail(const float *p, long n, float pad) {
    float lanes[8];
    for (int i = 0; i < 8; i++) lanes[i] = i < n ? p[i] : pad;
    return _mm256_loadu_ps(lanes);
}

/// A NaN or +inf input (`broken`, or an infinite max `best`), or every input -inf, makes the whole row NaN (as
/// e^(x - max) / sum does in the reference), or `fill_value` with `fill`: both bodies settle such rows here, as the
/// clamps of exp8 / exp16 would hide them, and skip the row when this returns 1.
static inline int settle_broken_row(int broken, float best, float *row, long columns, int fill, float fill_value) {
    if (!broken && !isinf(best)) return 0;
    const float value = fill ? fill_value : NAN;
    for (long i = 0; i < columns; i++) row[i] = value;
    return 1;
}

/// Softmax's second pass over the row's whole vectors two at a time, in both bodies: vector type V, intrinsic prefix
/// P (_mm256, _mm512), W lanes, lane function EXP. From j: row = EXP(in - shift), summed into s0 and s1.
#define EXP_SUM_PAIRS(V, P, W, EXP)                                          \
    for (; j + 2 * (W) <= whole; j += 2 * (W)) {                             \
        const V e0 = EXP(P##_sub_ps(P##_loadu_ps(in + j), shift));           \
        const V e1 = EXP(P##_sub_ps(P##_loadu_ps(in + j + (W)), shift));     \
        P##_storeu_ps(row + j, e0);                                          \
        P##_storeu_ps(row + j + (W), e1);                                    \
        s0 = P##_add_ps(s0, e0);                                             \
        s1 = P##_add_ps(s1, e1);                                             \
    }

/// The AVX-512F body of `osprey_softmax_rows_f32`: the same three passes on 16 lanes, the row's last 1-15 through
/// masked loads (-inf in the unread lanes, whose e^x is 0) and masked stores.
OSPREY_AVX512
static void softmax_rows_avx512(const float *source, float *data, long rows, long columns, int fill, float fill_value) {
    const long whole = columns & ~15L, rest = columns - whole;
    const __mmask16 tail = (__mmask16)((1u << rest) - 1);
    const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
    for (long r = 0; r < rows; r++) {
        const float *in = source + r * columns;
        float *row = data + r * columns;
        __m512 m0 = minus_inf, m1 = minus_inf;
        __mmask16 nan = 0;
        long j = 0;
        for (; j + 32 <= whole; j += 32) {
            const __m512 v0 = _mm512_loadu_ps(in + j), v1 = _mm512_loadu_ps(in + j + 16);
            m0 = _mm512_max_ps(v0, m0);
            m1 = _mm512_max_ps(v1, m1);
            nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
        }
        for (; j <= whole; j += 16) {
            const __mmask16 m = j < whole ? (__mmask16)0xFFFF : tail;
            if (!m) break;
            const __m512 v = _mm512_mask_loadu_ps(minus_inf, m, in + j);
            m0 = _mm512_max_ps(v, m0);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        // max_ps drops a NaN in its first operand, so NaNs are found by the compares above, as in the AVX2 body.
        const float best = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
        if (settle_broken_row(nan != 0, best, row, columns, fill, fill_value)) continue;
        const __m512 shift = _mm512_set1_ps(best);
        __m512 s0 = _mm512_setzero_ps(), s1 = s0;
        j = 0;
        EXP_SUM_PAIRS(__m512, _mm512, 16, exp16);
        for (; j <= whole; j += 16) {
            const __mmask16 m = j < whole ? (__mmask16)0xFFFF : tail;
            if (!m) break;
            const __m512 e = exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(minus_inf, m, in + j), shift));
            _mm512_mask_storeu_ps(row + j, m, e);
            s0 = _mm512_add_ps(s0, e);
        }
        const __m512 scale = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
        for (j = 0; j < whole; j += 16) _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), scale));
        if (rest) _mm512_mask_storeu_ps(row + whole, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, row + whole), scale));
    }
}

// An elementwise map in place on 16 lanes, the last 1-15 masked: NAME's body on CPUs with AVX-512F.
#define FLOAT_MAP_AVX512(NAME, BODY16)                                                                        \
    OSPREY_AVX512 static void NAME(float *data, long count) {                                                 \
        long i = 0;                                                                                            \
        for (; i + 16 <= count; i += 16) _mm512_storeu_ps(data + i, BODY16(_mm512_loadu_ps(data + i)));        \
        if (i < count) {                                                                                       \
            const __mmask16 m = (__mmask16)((1u << (count - i)) - 1);                                          \
            _mm512_mask_storeu_ps(data + i, m, BODY16(_mm512_maskz_loadu_ps(m, data + i)));                   \
        }                                                                                                      \
    }

FLOAT_MAP_AVX512(gelu_avx512, gelu16)
FLOAT_MAP_AVX512(gelu_tanh_avx512, gelu_tanh16)

__attribute__((target("avx2,fma")))
void osprey_softmax_rows_f32(const float *source, float *data, long rows, long columns, int fill, float fill_value) {
    if (columns <= 0) return;
    if (osprey_float_avx512()) {
        softmax_rows_avx512(source, data, rows, columns, fill, fill_value);
        return;
    }
    const long whole = columns & ~7L, rest = columns - whole;
    for (long r = 0; r < rows; r++) {
        const float *in = source + r * columns;
        float *row = data + r * columns;
        __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, nan = _mm256_setzero_ps();
        long j = 0;
        for (; j + 16 <= whole; j += 16) {
            const __m256 v0 = _mm256_loadu_ps(in + j), v1 = _mm256_loadu_ps(in + j + 8);
            m0 = _mm256_max_ps(v0, m0);
            m1 = _mm256_max_ps(v1, m1);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        }
        for (; j < whole; j += 8) {
            const __m256 v = _mm256_loadu_ps(in + j);
            m0 = _mm256_max_ps(v, m0);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        float best = fold8(_mm256_max_ps(m0, m1), 1);
        int broken = _mm256_movemask_ps(nan) != 0;
        for (long i = whole; i < columns; i++) {
            if (isnan(in[i])) broken = 1;
            best = in[i] > best ? in[i] : best;
        }
        if (settle_broken_row(broken, best, row, columns, fill, fill_value)) continue;
        const __m256 shift = _mm256_set1_ps(best);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        j = 0;
        EXP_SUM_PAIRS(__m256, _mm256, 8, exp8);
        for (; j < whole; j += 8) {
            const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(in + j), shift));
            _mm256_storeu_ps(row + j, e);
            s0 = _mm256_add_ps(s0, e);
        }
        float sum = fold8(_mm256_add_ps(s0, s1), 0);
        if (rest) {
            // -inf pads: their exp is 0.
            float lanes[8];
            _mm256_storeu_ps(lanes, exp8(_mm256_sub_ps(load_tail(in + whole, rest, -INFINITY), shift)));
            for (long i = 0; i < rest; i++) { row[whole + i] = lanes[i]; sum += lanes[i]; }
        }
        const float inverse = 1.0f / sum;
        const __m256 scale = _mm256_set1_ps(inverse);
        for (j = 0; j < whole; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), scale));
        for (long i = whole; i < columns; i++) row[i] *= inverse;
    }
}

// An elementwise map in place: the AVX-512 body when the CPU has it, else eight lanes of BODY8 at a time and the
// tail through one partial load.
#define FLOAT_MAP(NAME, AVX512_BODY, BODY8)                                                                    \
    __attribute__((target("avx2,fma"))) void NAME(float *data, long count) {                                  \
        if (osprey_float_avx512()) {                                                                           \
            AVX512_BODY(data, count);                                                                          \
            return;                                                                                            \
        }                                                                                                      \
        long i = 0;                                                                                            \
        for (; i + 8 <= count; i += 8) _mm256_storeu_ps(data + i, BODY8(_mm256_loadu_ps(data + i)));           \
        if (i < count) {                                                                                       \
            float lanes[8];                                                                                    \
            _mm256_storeu_ps(lanes, BODY8(load_tail(data + i, count - i, 0.0f)));                              \
            for (long j = 0; i + j < count; j++) data[i + j] = lanes[j];                                       \
        }                                                                                                      \
    }

FLOAT_MAP(osprey_gelu_f32, gelu_avx512, gelu8)
FLOAT_MAP(osprey_gelu_tanh_f32, gelu_tanh_avx512, gelu_tanh8)

#else
void osprey_gelu_tanh_f32(float *data, long count) { (void)data; (void)count; }
void osprey_softmax_rows_f32(const float *source, float *data, long rows, long columns, int fill, float fill_value) {
    (void)source; (void)data; (void)rows; (void)columns; (void)fill; (void)fill_value;
}
void osprey_gelu_f32(float *data, long count) { (void)data; (void)count; }
#endif
