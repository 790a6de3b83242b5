// The micro-kernel of the packed-B float product (PackedMatrixMultiply.swift) in AVX2 + FMA. Swift's SIMD16 loop
// recomputed the six row addresses every step and had no variant for a last band of fewer than six rows (it ran six
// rows over zero padding); here each row count gets its own loop, clang keeps the addressing in the operands, and
// the depth loop goes two steps at a time. B's rows may also be `ldb` apart in place (attention's per-head products:
// no packing). On AVX-512F CPUs the zmm bodies below run instead (one vector per 16-column row, twice the FMA width:
// MiniLM's and ConvNeXt-T's Linear layers about 1.7x faster).
#include "include/packed_sgemm.h"
#include "include/float_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_logistic.h"
#include "avx512_math.h"


// One depth step for row R into accumulator pair D: broadcast a[R][p] and fold it into both halves.
#define STEP(R, D, P)                                                              \
    if (ROWS > R) {                                                                \
        const __m256 x = _mm256_broadcast_ss((R < 3 ? a0 : a3) + (R % 3) * lda + (P)); \
        c[D][0] = _mm256_fmadd_ps(x, b0, c[D][0]);                                 \
        c[D][1] = _mm256_fmadd_ps(x, b1, c[D][1]);                                 \
    }

// Depth step P for every row; rows 0-2 go to accumulator pairs SHIFT..SHIFT + 2.
#define STEPS(P, SHIFT)                                                            \
    {                                                                              \
        const __m256 b0 = _mm256_loadu_ps(b + (P) * ldb), b1 = _mm256_loadu_ps(b + (P) * ldb + 8); \
        STEP(0, SHIFT, P) STEP(1, 1 + SHIFT, P) STEP(2, 2 + SHIFT, P) STEP(3, 3, P) STEP(4, 4, P) STEP(5, 5, P) \
    }

// ROWS is a literal at each wrapper's call, so the unused rows' code and registers vanish. Up to three rows have too
// few accumulators to hide the FMA latency (4 cycles, 2 a cycle): odd depth steps then go to the idle pairs 3-5,
// added in at the end.
__attribute__((target("avx2,fma"), always_inline))
static inline void strip_rows(const int ROWS, long depth, const float *a, long lda, const float *b, long ldb, const float *start,
                              float *tile, long ldt, int gelu) {
    const __m256 s0 = start ? _mm256_loadu_ps(start) : _mm256_setzero_ps();
    const __m256 s1 = start ? _mm256_loadu_ps(start + 8) : _mm256_setzero_ps();
    const int odd = ROWS <= 3 ? 3 : 0;
    __m256 c[6][2];
    for (int r = 0; r < 6; r++) {
        const int spare = odd && r >= 3;
        c[r][0] = spare ? _mm256_setzero_ps() : s0;
        c[r][1] = spare ? _mm256_setzero_ps() : s1;
    }
    // Two row pointers walk the depth; rows 1, 2 and 4, 5 are one and two strides past them (x86 addressing).
    const float *a0 = a, *a3 = a + 3 * lda;
    long p = 0;
    for (; p + 2 <= depth; p += 2) {
        STEPS(0, 0) STEPS(1, odd)
        a0 += 2; a3 += 2; b += 2 * ldb;
    }
    if (p < depth) STEPS(0, 0)
    if (odd) {
        for (int r = 0; r < 3; r++) { c[r][0] = _mm256_add_ps(c[r][0], c[r + 3][0]); c[r][1] = _mm256_add_ps(c[r][1], c[r + 3][1]); }
    }
    if (gelu) {
        for (int r = 0; r < ROWS; r++) {
            c[r][0] = gelu == 2 ? gelu_tanh8(c[r][0]) : gelu8(c[r][0]);
            c[r][1] = gelu == 2 ? gelu_tanh8(c[r][1]) : gelu8(c[r][1]);
        }
    }
    for (int r = 0; r < ROWS; r++) {
        _mm256_storeu_ps(tile + r * ldt, c[r][0]);
        _mm256_storeu_ps(tile + r * ldt + 8, c[r][1]);
    }
}

/// `NAME_1` ... `NAME_6`: `BODY` (an inlined strip of a constant ROWS) compiled for `TARGET` once per row count.
#define STRIP_KERNELS(TARGET, NAME, BODY)                                                                             \
    STRIP_KERNEL(TARGET, NAME, BODY, 1) STRIP_KERNEL(TARGET, NAME, BODY, 2) STRIP_KERNEL(TARGET, NAME, BODY, 3)     \
    STRIP_KERNEL(TARGET, NAME, BODY, 4) STRIP_KERNEL(TARGET, NAME, BODY, 5) STRIP_KERNEL(TARGET, NAME, BODY, 6)
#define STRIP_KERNEL(TARGET, NAME, BODY, ROWS)                                                                        \
    TARGET static void NAME##_##ROWS(long depth, const float *a, long lda, const float *b, long ldb, const float *start, \
                                     float *tile, long ldt, int gelu) {                                              \
        BODY(ROWS, depth, a, lda, b, ldb, start, tile, ldt, gelu);                                                    \
    }

STRIP_KERNELS(__attribute__((target("avx2,fma"))), strip, strip_rows)

// The AVX-512F body: one zmm accumulator per row covers the strip, which leaves 26 of the 32 registers for more: the
// depth is split into SETS interleaved chains (steps p, p + SETS, ... go to chain p % SETS), so 8-16 independent
// accumulators hide the FMA latency at every row count, and each A value is broadcast straight from memory into
// its FMA. The chains are added at the end (a different summation order from the AVX2 body, within rounding).
OSPREY_AVX512 __attribute__((always_inline))
static inline void strip16_rows(const int ROWS, long depth, const float *a, long lda, const float *b, long ldb, const float *start,
                                float *tile, long ldt, int gelu) {
    enum { MAX_SETS = 4 };
    const int SETS = ROWS <= 3 ? 4 : 2;
    __m512 c[MAX_SETS][6];
    const __m512 s = start ? _mm512_loadu_ps(start) : _mm512_setzero_ps();
    for (int q = 0; q < SETS; q++)
        for (int r = 0; r < ROWS; r++) c[q][r] = q == 0 ? s : _mm512_setzero_ps();
    const float *a0 = a, *a3 = a + 3 * lda;
    long p = 0;
    for (; p + SETS <= depth; p += SETS) {
        for (int q = 0; q < SETS; q++) {
            const __m512 bq = _mm512_loadu_ps(b + q * ldb);
            for (int r = 0; r < ROWS; r++) {
                const float *row = (r < 3 ? a0 : a3) + (r % 3) * lda;
                c[q][r] = _mm512_fmadd_ps(_mm512_set1_ps(row[q]), bq, c[q][r]);
            }
        }
        a0 += SETS; a3 += SETS; b += SETS * ldb;
    }
    // The last 1 to SETS - 1 steps, each into its own chain (a constant q keeps the chains in registers).
    for (int q = 0; q + 1 < SETS; q++) {
        if (p + q >= depth) break;
        const __m512 bq = _mm512_loadu_ps(b + q * ldb);
        for (int r = 0; r < ROWS; r++) {
            const float *row = (r < 3 ? a0 : a3) + (r % 3) * lda;
            c[q][r] = _mm512_fmadd_ps(_mm512_set1_ps(row[q]), bq, c[q][r]);
        }
    }
    for (int r = 0; r < ROWS; r++) {
        __m512 v = SETS == 4 ? _mm512_add_ps(_mm512_add_ps(c[0][r], c[1][r]), _mm512_add_ps(c[2][r], c[3][r]))
                             : _mm512_add_ps(c[0][r], c[1][r]);
        if (gelu) v = gelu == 2 ? gelu_tanh16(v) : gelu16(v);
        _mm512_storeu_ps(tile + r * ldt, v);
    }
}

// Two strips at once (32 columns, the second `second` floats past the first): two zmm accumulators per row, so each
// broadcast A value feeds two FMAs and a depth step loads 2 B vectors and 6 A values for 12 FMAs (the single strip:
// 1 and 6 for 6). Rows up to three split the depth into two chains for enough independent accumulators.
OSPREY_AVX512 __attribute__((always_inline))
static inline void pair16_rows(const int ROWS, long depth, const float *a, long lda, const float *b, long ldb, long second,
                               const float *start, float *tile, long ldt, int gelu) {
    const int SETS = ROWS <= 3 ? 2 : 1;
    __m512 c[2][6][2];
    const __m512 s0 = start ? _mm512_loadu_ps(start) : _mm512_setzero_ps();
    const __m512 s1 = start ? _mm512_loadu_ps(start + 16) : _mm512_setzero_ps();
    for (int q = 0; q < SETS; q++)
        for (int r = 0; r < ROWS; r++) {
            c[q][r][0] = q == 0 ? s0 : _mm512_setzero_ps();
            c[q][r][1] = q == 0 ? s1 : _mm512_setzero_ps();
        }
    const float *a0 = a, *a3 = a + 3 * lda, *b2 = b + second;
    long p = 0;
    for (; p + SETS <= depth; p += SETS) {
        for (int q = 0; q < SETS; q++) {
            const __m512 x0 = _mm512_loadu_ps(b + q * ldb), x1 = _mm512_loadu_ps(b2 + q * ldb);
            for (int r = 0; r < ROWS; r++) {
                const __m512 v = _mm512_set1_ps(((r < 3 ? a0 : a3) + (r % 3) * lda)[q]);
                c[q][r][0] = _mm512_fmadd_ps(v, x0, c[q][r][0]);
                c[q][r][1] = _mm512_fmadd_ps(v, x1, c[q][r][1]);
            }
        }
        a0 += SETS; a3 += SETS; b += SETS * ldb; b2 += SETS * ldb;
    }
    if (SETS == 2 && p < depth) {
        const __m512 x0 = _mm512_loadu_ps(b), x1 = _mm512_loadu_ps(b2);
        for (int r = 0; r < ROWS; r++) {
            const __m512 v = _mm512_set1_ps(((r < 3 ? a0 : a3) + (r % 3) * lda)[0]);
            c[0][r][0] = _mm512_fmadd_ps(v, x0, c[0][r][0]);
            c[0][r][1] = _mm512_fmadd_ps(v, x1, c[0][r][1]);
        }
    }
    for (int r = 0; r < ROWS; r++) {
        for (int h = 0; h < 2; h++) {
            __m512 v = SETS == 2 ? _mm512_add_ps(c[0][r][h], c[1][r][h]) : c[0][r][h];
            if (gelu) v = gelu == 2 ? gelu_tanh16(v) : gelu16(v);
            _mm512_storeu_ps(tile + r * ldt + 16 * h, v);
        }
    }
}

#define PAIR16_KERNEL(ROWS)                                                                                           \
    OSPREY_AVX512                                                                                                    \
    static void pair16_##ROWS(long depth, const float *a, long lda, const float *b, long ldb, long second, const float *start, float *tile, \
                              long ldt, int gelu) {                                                                  \
        pair16_rows(ROWS, depth, a, lda, b, ldb, second, start, tile, ldt, gelu);                                    \
    }

PAIR16_KERNEL(1)
PAIR16_KERNEL(2)
PAIR16_KERNEL(3)
PAIR16_KERNEL(4)
PAIR16_KERNEL(5)
PAIR16_KERNEL(6)

STRIP_KERNELS(OSPREY_AVX512, strip16, strip16_rows)

#endif

static void strip_portable(long rows, long depth, const float *a, long lda, const float *b, long ldb, const float *start, float *tile, long ldt) {
    for (long r = 0; r < rows; r++) {
        for (int j = 0; j < 16; j++) tile[r * ldt + j] = start ? start[j] : 0.0f;
        for (long p = 0; p < depth; p++) {
            const float x = a[r * lda + p];
            for (int j = 0; j < 16; j++) tile[r * ldt + j] += x * b[p * ldb + j];
        }
    }
}

/// One strip body per row count (1-6), indexed by rows: a constant count keeps the accumulators in registers.
typedef void (*strip_body)(long, const float *, long, const float *, long, const float *, float *, long, int);

void osprey_sgemm_strip(long rows, long depth, const float *a, long lda, const float *b, long ldb, const float *start, float *tile, long ldt, int gelu) {
#if defined(__x86_64__)
    static const strip_body zmm[7] = {0, strip16_1, strip16_2, strip16_3, strip16_4, strip16_5, strip16_6};
    static const strip_body ymm[7] = {0, strip_1, strip_2, strip_3, strip_4, strip_5, strip_6};
    if (rows >= 1 && rows <= 6) {
        if (osprey_float_avx512()) { zmm[rows](depth, a, lda, b, ldb, start, tile, ldt, gelu); return; }
        if (osprey_float_activations_fast()) { ymm[rows](depth, a, lda, b, ldb, start, tile, ldt, gelu); return; }
    }
#endif
    strip_portable(rows, depth, a, lda, b, ldb, start, tile, ldt);
}

void osprey_sgemm_strip_pair(long rows, long depth, const float *a, long lda, const float *b, long ldb, long second, const float *start,
                             float *tile, long ldt, int gelu) {
#if defined(__x86_64__)
    static void (*const zmm[7])(long, const float *, long, const float *, long, long, const float *, float *, long, int) = {
        0, pair16_1, pair16_2, pair16_3, pair16_4, pair16_5, pair16_6};
    if (rows >= 1 && rows <= 6 && osprey_float_avx512()) { zmm[rows](depth, a, lda, b, ldb, second, start, tile, ldt, gelu); return; }
#endif
    osprey_sgemm_strip(rows, depth, a, lda, b, ldb, start, tile, ldt, gelu);
    osprey_sgemm_strip(rows, depth, a, lda, b + second, ldb, start ? start + 16 : 0, tile + 16, ldt, gelu);
}
