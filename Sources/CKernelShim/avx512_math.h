// e^x, the logistic function, HardSwish and GELU on 16 AVX-512F lanes: the same steps and constants as the 8-lane
// AVX2 versions (avx2_logistic.h, avx2_gelu.h), for the AVX-512 bodies of this target (not part of the module's
// public headers). Include after <immintrin.h>, on x86-64 only.
#ifndef OSPREY_AVX512_MATH_H
#define OSPREY_AVX512_MATH_H

#include "include/depthwise_plane.h"

#define OSPREY_AVX512 __attribute__((target("avx512f,fma")))

/// e^x on 16 lanes: exp8's clamps, rounding trick, split ln 2 and Cephes polynomial.
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(x, _mm512_set1_ps(88.37626f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    __m512 shifted = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), magic);
    __m512 n = _mm512_sub_ps(shifted, magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i bits = _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x4B400000 - 127));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(bits, 23)));
}

/// sigmoid(v), or v * sigmoid(v) with `silu`: 1 / (1 + e^-v) from rcp14 and one Newton step; a NaN stays NaN.
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 logistic16(__m512 v, int silu) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 d = _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    __m512 e = _mm512_rcp14_ps(d);
    e = _mm512_fmadd_ps(e, _mm512_fnmadd_ps(d, e, one), e);
    __m512 y = silu ? _mm512_mul_ps(v, e) : e;
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}

/// x * min(max(x / 6 + 1/2, 0), 1) on 16 lanes (HardSwish, as hard_swish8).
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 hard_swish16(__m512 x) {
    __m512 gate = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
    gate = _mm512_min_ps(_mm512_max_ps(gate, _mm512_setzero_ps()), _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(x, gate);
}

/// 0.5 x (1 + erf(x / sqrt 2)) on 16 lanes with gelu8's clamped rational erf.
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 gelu16(__m512 x) {
    __m512 v = _mm512_mul_ps(x, _mm512_set1_ps(0.7071067811865475f));
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
    const __m512 x2 = _mm512_mul_ps(v, v);
    __m512 p = _mm512_set1_ps(-2.72614225801306e-10f);
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.77068142495902e-08f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.10102402082508e-06f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-5.69250639462346e-05f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-7.34990630326855e-04f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.95459980854025e-03f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-1.60960333262415e-02f));
    __m512 q = _mm512_set1_ps(-1.45660718464996e-05f);
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-2.13374055278905e-04f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.68282697438203e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-7.37332916720468e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.42647390514189e-02f));
    const __m512 erf = _mm512_div_ps(_mm512_mul_ps(p, v), q);
    const __m512 half = _mm512_mul_ps(x, _mm512_set1_ps(0.5f));
    return _mm512_fmadd_ps(half, erf, half);
}

/// The float conv epilogues on 16 lanes (OSPREY_DW_CLAMP with lo/hi, SILU, SIGMOID, HARDSWISH), shared by the
/// depthwise plane and the channels-last kernels; compare + blend for the clamp keeps a NaN, as Swift's clamp does.
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 finish16(__m512 v, int epilogue, __m512 lo, __m512 hi) {
    if (epilogue == OSPREY_DW_CLAMP) {
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
        return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
    }
    if (epilogue == OSPREY_DW_HARDSWISH) return hard_swish16(v);
    return logistic16(v, epilogue == OSPREY_DW_SILU);
}

#endif
