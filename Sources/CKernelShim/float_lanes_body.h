// e^x, the logistic function, HardSwish, GELU and the float conv epilogue written once for any lane count, so the
// 8-lane AVX2 and 16-lane AVX-512 versions run the same steps and constants (and stay bit-identical to what each
// replaced). Included once per width, with no include guard, by avx2_logistic.h (LANES_N 8, LANES_BITS 256) and
// avx512_math.h (16, 512), after <immintrin.h> and include/depthwise_plane.h; it defines exp, logistic, hard_swish,
// gelu, gelu_tanh and finish with the lane count appended (exp8, exp16, ...) and undefines its macros. Not part of the module's
// public headers.

#define LANES_CAT_(a, b) a##b
#define LANES_CAT(a, b) LANES_CAT_(a, b)
#define LANES_CAT3_(a, b, c) a##b##c
#define LANES_CAT3(a, b, c) LANES_CAT3_(a, b, c)
// The function `name` at this width, the float and int32 vector types, and the intrinsic `op` at this width.
#define LANES_FN(name) LANES_CAT(name, LANES_N)
#define LANES_V LANES_CAT(__m, LANES_BITS)
#define LANES_VI LANES_CAT3(__m, LANES_BITS, i)
#define LANES(op) LANES_CAT3(_mm, LANES_BITS, _##op)
// Float <-> int32 bit casts.
#define LANES_INTS(x) LANES_CAT(LANES(castps_si), LANES_BITS)(x)
#define LANES_FLOATS(x) LANES_CAT3(LANES(castsi), LANES_BITS, _ps)(x)
// Where the widths differ: the target, the approximate reciprocal, and `a` with `b` in the lanes where `x pred y`
// (blendv on a compare's all-ones lanes; a move under a compare's mask register).
#if LANES_N == 8
#define LANES_ATTR __attribute__((target("avx2,fma"), always_inline))
#define LANES_RCP(x) _mm256_rcp_ps(x)
#define LANES_WHERE(a, x, pred, y, b) _mm256_blendv_ps(a, b, _mm256_cmp_ps(x, y, pred))
#else
#define LANES_ATTR OSPREY_AVX512 __attribute__((always_inline))
#define LANES_RCP(x) _mm512_rcp14_ps(x)
#define LANES_WHERE(a, x, pred, y, b) _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(x, y, pred), b)
#endif

/// e^x: x clamped to the finite range, n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 in two parts,
/// Cephes' degree-6 polynomial, 2^n built in the exponent bits (the same steps as VectorMath's vectorExp).
LANES_ATTR
static inline LANES_V LANES_FN(exp)(LANES_V x) {
    x = LANES(min_ps)(x, LANES(set1_ps)(88.37626f));
    x = LANES(max_ps)(x, LANES(set1_ps)(-87.33654f));
    const LANES_V magic = LANES(set1_ps)(12582912.0f);
    LANES_V shifted = LANES(fmadd_ps)(x, LANES(set1_ps)(1.44269504f), magic);
    LANES_V n = LANES(sub_ps)(shifted, magic);
    LANES_V r = LANES(fnmadd_ps)(n, LANES(set1_ps)(0.693359375f), x);
    r = LANES(fnmadd_ps)(n, LANES(set1_ps)(-2.12194440e-4f), r);
    LANES_V p = LANES(set1_ps)(1.9875691500e-4f);
    p = LANES(fmadd_ps)(p, r, LANES(set1_ps)(1.3981999507e-3f));
    p = LANES(fmadd_ps)(p, r, LANES(set1_ps)(8.3334519073e-3f));
    p = LANES(fmadd_ps)(p, r, LANES(set1_ps)(4.1665795894e-2f));
    p = LANES(fmadd_ps)(p, r, LANES(set1_ps)(1.6666665459e-1f));
    p = LANES(fmadd_ps)(p, r, LANES(set1_ps)(5.0000001201e-1f));
    p = LANES(fmadd_ps)(p, LANES(mul_ps)(r, r), LANES(add_ps)(r, LANES(set1_ps)(1.0f)));
    LANES_VI bits = LANES(sub_epi32)(LANES_INTS(shifted), LANES(set1_epi32)(0x4B400000 - 127));
    return LANES(mul_ps)(p, LANES_FLOATS(LANES(slli_epi32)(bits, 23)));
}

/// sigmoid(v), or v * sigmoid(v) with `silu`: 1 / d with d = 1 + e^-v from the approximate reciprocal and one Newton
/// step. A NaN input stays NaN (the clamps in exp would hide it): it is put back at the end.
LANES_ATTR
static inline LANES_V LANES_FN(logistic)(LANES_V v, int silu) {
    const LANES_V one = LANES(set1_ps)(1.0f);
    LANES_V d = LANES(add_ps)(one, LANES_FN(exp)(LANES(sub_ps)(LANES(setzero_ps)(), v)));
    LANES_V e = LANES_RCP(d);
    e = LANES(fmadd_ps)(e, LANES(fnmadd_ps)(d, e, one), e);
    // d = +inf cannot happen (exp clamps) but d near FLT_MAX makes the reciprocal 0: the result is then 0, as it should be.
    LANES_V y = silu ? LANES(mul_ps)(v, e) : e;
    return LANES_WHERE(y, v, _CMP_UNORD_Q, v, v);
}

/// x * min(max(x / 6 + 1/2, 0), 1) (HardSwish; x / 6 as a multiply by 1/6, an ulp from the division).
LANES_ATTR
static inline LANES_V LANES_FN(hard_swish)(LANES_V x) {
    LANES_V gate = LANES(fmadd_ps)(x, LANES(set1_ps)(1.0f / 6.0f), LANES(set1_ps)(0.5f));
    gate = LANES(min_ps)(LANES(max_ps)(gate, LANES(setzero_ps)()), LANES(set1_ps)(1.0f));
    return LANES(mul_ps)(x, gate);
}

/// 0.5 x (1 + erf(x / sqrt 2)): erf as p(v^2) v / q(v^2) with v clamped to [-4, 4] (vectorErf's coefficients).
LANES_ATTR
static inline LANES_V LANES_FN(gelu)(LANES_V x) {
    LANES_V v = LANES(mul_ps)(x, LANES(set1_ps)(0.7071067811865475f));
    v = LANES(min_ps)(LANES(max_ps)(v, LANES(set1_ps)(-4.0f)), LANES(set1_ps)(4.0f));
    const LANES_V x2 = LANES(mul_ps)(v, v);
    LANES_V p = LANES(set1_ps)(-2.72614225801306e-10f);
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(2.77068142495902e-08f));
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(-2.10102402082508e-06f));
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(-5.69250639462346e-05f));
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(-7.34990630326855e-04f));
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(-2.95459980854025e-03f));
    p = LANES(fmadd_ps)(p, x2, LANES(set1_ps)(-1.60960333262415e-02f));
    LANES_V q = LANES(set1_ps)(-1.45660718464996e-05f);
    q = LANES(fmadd_ps)(q, x2, LANES(set1_ps)(-2.13374055278905e-04f));
    q = LANES(fmadd_ps)(q, x2, LANES(set1_ps)(-1.68282697438203e-03f));
    q = LANES(fmadd_ps)(q, x2, LANES(set1_ps)(-7.37332916720468e-03f));
    q = LANES(fmadd_ps)(q, x2, LANES(set1_ps)(-1.42647390514189e-02f));
    const LANES_V erf = LANES(div_ps)(LANES(mul_ps)(p, v), q);
    const LANES_V half = LANES(mul_ps)(x, LANES(set1_ps)(0.5f));
    return LANES(fmadd_ps)(half, erf, half);
}

/// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3) (GELU's tanh form, GPT-2's), as x * sigmoid(2u): the
/// same value, and the logistic above already handles the ends and NaN.
LANES_ATTR
static inline LANES_V LANES_FN(gelu_tanh)(LANES_V x) {
    const LANES_V x3 = LANES(mul_ps)(LANES(mul_ps)(x, x), x);
    const LANES_V u2 = LANES(mul_ps)(LANES(fmadd_ps)(x3, LANES(set1_ps)(0.044715f), x), LANES(set1_ps)(1.5957691216057308f));
    return LANES(mul_ps)(x, LANES_FN(logistic)(u2, 0));
}

/// The float conv epilogues (OSPREY_DW_CLAMP with lo/hi, SILU, SIGMOID, HARDSWISH), shared by the depthwise plane and
/// the channels-last kernels. max/min return their second operand when one is NaN: compare + select for the clamp
/// keeps a NaN, as Swift's clamp does.
LANES_ATTR
static inline LANES_V LANES_FN(finish)(LANES_V v, int epilogue, LANES_V lo, LANES_V hi) {
    if (epilogue == OSPREY_DW_CLAMP) {
        v = LANES_WHERE(v, v, _CMP_LT_OQ, lo, lo);
        return LANES_WHERE(v, v, _CMP_GT_OQ, hi, hi);
    }
    if (epilogue == OSPREY_DW_HARDSWISH) return LANES_FN(hard_swish)(v);
    return LANES_FN(logistic)(v, epilogue == OSPREY_DW_SILU);
}

#undef LANES_CAT_
#undef LANES_CAT
#undef LANES_CAT3_
#undef LANES_CAT3
#undef LANES_FN
#undef LANES_V
#undef LANES_VI
#undef LANES
#undef LANES_INTS
#undef LANES_FLOATS
#undef LANES_ATTR
#undef LANES_RCP
#undef LANES_WHERE
#undef LANES_N
#undef LANES_BITS
