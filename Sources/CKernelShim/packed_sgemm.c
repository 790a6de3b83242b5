// The micro-kernel of the packed-B float product (PackedMatrixMultiply.swift) in AVX2 + FMA. Swift's SIMD16 loop
// recomputed the six row addresses every step and had no variant for a last band of fewer than six rows (it ran six
// rows over zero padding); here each row count gets its own loop, clang keeps the addressing in the operands, and
// the depth loop goes two steps at a time. B's rows may also be `ldb` apart in place (attention's per-head products:
// no packing).
#include "include/packed_sgemm.h"
#include "include/float_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_gelu.h"


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
        for (int r = 0; r < ROWS; r++) { c[r][0] = gelu8(c[r][0]); c[r][1] = gelu8(c[r][1]); }
    }
    for (int r = 0; r < ROWS; r++) {
        _mm256_storeu_ps(tile + r * ldt, c[r][0]);
        _mm256_storeu_ps(tile + r * ldt + 8, c[r][1]);
    }
}

#define STRIP_KERNEL(ROWS)                                                                                            \
    __attribute__((target("avx2,fma")))                                                                              \
    static void strip_##ROWS(long depth, const float *a, long lda, const float *b, long ldb, const float *start, float *tile, long ldt, int gelu) { \
        strip_rows(ROWS, depth, a, lda, b, ldb, start, tile, ldt, gelu);                                                              \
    }

STRIP_KERNEL(1)
STRIP_KERNEL(2)
STRIP_KERNEL(3)
STRIP_KERNEL(4)
STRIP_KERNEL(5)
STRIP_KERNEL(6)

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

void osprey_sgemm_strip(long rows, long depth, const float *a, long lda, const float *b, long ldb, const float *start, float *tile, long ldt, int gelu) {
#if defined(__x86_64__)
    if (osprey_float_activations_fast()) {
        switch (rows) {
        case 6: strip_6(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        case 5: strip_5(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        case 4: strip_4(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        case 3: strip_3(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        case 2: strip_2(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        case 1: strip_1(depth, a, lda, b, ldb, start, tile, ldt, gelu); return;
        default: break;
        }
    }
#endif
    strip_portable(rows, depth, a, lda, b, ldb, start, tile, ldt);
}
