// e^x, the logistic function and HardSwish on 8 AVX2 + FMA lanes, shared by the float kernels of this target (not part of
// the module's public headers: Swift never sees these). Include after <immintrin.h>, on x86-64 only.
#ifndef OSPREY_AVX2_LOGISTIC_H
#define OSPREY_AVX2_LOGISTIC_H

/// e^x on 8 lanes: x clamped to the finite range, n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 in two
/// parts, Cephes' degree-6 polynomial, 2^n built in the exponent bits (the same steps as VectorMath's vectorExp).
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(x, _mm256_set1_ps(88.37626f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 shifted = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504f), magic);
    __m256 n = _mm256_sub_ps(shifted, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i bits = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x4B400000 - 127));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(bits, 23)));
}

/// sigmoid(v), or v * sigmoid(v) with `silu`: 1 / d with d = 1 + e^-v from rcpps and one Newton step. A NaN input
/// stays NaN (the clamps in exp8 would hide it): it is blended back at the end.
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 logistic8(__m256 v, int silu) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 d = _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v)));
    __m256 e = _mm256_rcp_ps(d);
    e = _mm256_fmadd_ps(e, _mm256_fnmadd_ps(d, e, one), e);
    // d = +inf cannot happen (exp8 clamps) but d near FLT_MAX makes rcpps 0: the result is then 0, as it should be.
    __m256 y = silu ? _mm256_mul_ps(v, e) : e;
    return _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/// x * min(max(x / 6 + 1/2, 0), 1) on 8 lanes (HardSwish; x / 6 as a multiply by 1/6, an ulp from the division).
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 hard_swish8(__m256 x) {
    __m256 gate = _mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
    gate = _mm256_min_ps(_mm256_max_ps(gate, _mm256_setzero_ps()), _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(x, gate);
}

#endif
