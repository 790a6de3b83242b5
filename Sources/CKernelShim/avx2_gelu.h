// GELU (erf form) on 8 AVX2 + FMA lanes, shared by float_rows.c and the packed product's epilogue (packed_sgemm.c); not
// part of the module's public headers. Include after <immintrin.h>, on x86-64 only.
#ifndef OSPREY_AVX2_GELU_H
#define OSPREY_AVX2_GELU_H

/// 0.5 x (1 + erf(x / sqrt 2)) on 8 lanes: erf as p(v^2) v / q(v^2) with v clamped to [-4, 4] (vectorErf's
/// coefficients).
__attribute__((target("avx2,fma"), always_inline))
static inline __m256 gelu8(__m256 x) {
    __m256 v = _mm256_mul_ps(x, _mm256_set1_ps(0.7071067811865475f));
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-4.0f)), _mm256_set1_ps(4.0f));
    const __m256 x2 = _mm256_mul_ps(v, v);
    __m256 p = _mm256_set1_ps(-2.72614225801306e-10f);
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-1.60960333262415e-02f));
    __m256 q = _mm256_set1_ps(-1.45660718464996e-05f);
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.42647390514189e-02f));
    const __m256 erf = _mm256_div_ps(_mm256_mul_ps(p, v), q);
    const __m256 half = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
    return _mm256_fmadd_ps(half, erf, half);
}

#endif
