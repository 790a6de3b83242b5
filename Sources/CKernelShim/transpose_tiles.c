// Batched 2-D transposes of 4-byte elements (NCHW <-> NHWC around ConvNeXt's LayerNorms, attention's head splits)
// in 8 x 8 AVX register tiles, chosen at run time. Swift's scalar tiled loop (BlockedTranspose.swift) is the portable
// path and the reference of the tests.
#include "include/transpose_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

int osprey_transpose_tiles_fast(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx") ? 1 : 0;
    }
    return cached;
}

// d[c * ds + r] = s[r * ss + c] for an 8 x 8 tile.
__attribute__((target("avx")))
static inline void tile8(const float *s, long ss, float *d, long ds) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss), r2 = _mm256_loadu_ps(s + 2 * ss), r3 = _mm256_loadu_ps(s + 3 * ss);
    __m256 r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss), r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5), t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE), u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

__attribute__((target("avx")))
void osprey_transpose_u32(const void *source, void *destination, long rows, long columns, long first_column, long end_column) {
    const float *src = (const float *)source;
    float *dst = (float *)destination;
    const long full_rows = rows & ~7L;
    long j = first_column;
    // Column blocks of 8 walk down every row: the source lines of a block serve the next block from L1, and the
    // 8 destination rows are written front to back.
    for (; j + 8 <= end_column; j += 8) {
        long i = 0;
        for (; i < full_rows; i += 8) tile8(src + i * columns + j, columns, dst + j * rows + i, rows);
        for (; i < rows; i++) {
            for (long c = j; c < j + 8; c++) dst[c * rows + i] = src[i * columns + c];
        }
    }
    for (; j < end_column; j++) {
        for (long i = 0; i < rows; i++) dst[j * rows + i] = src[i * columns + j];
    }
}

// tile8 with each value multiplied by `scale` (float only).
__attribute__((target("avx")))
static inline void tile8_scaled(const float *s, long ss, float *d, long ds, __m256 scale) {
    float t[64];
    for (int r = 0; r < 8; r++) _mm256_storeu_ps(t + 8 * r, _mm256_mul_ps(_mm256_loadu_ps(s + r * ss), scale));
    tile8(t, 8, d, ds);
}

__attribute__((target("avx")))
void osprey_transpose_scaled_f32(const float *source, long source_stride, float *destination, long destination_stride, long rows,
                                 long columns, float scale) {
    const __m256 factor = _mm256_set1_ps(scale);
    const long full_rows = rows & ~7L;
    long j = 0;
    for (; j + 8 <= columns; j += 8) {
        long i = 0;
        for (; i < full_rows; i += 8) {
            tile8_scaled(source + i * source_stride + j, source_stride, destination + j * destination_stride + i, destination_stride, factor);
        }
        for (; i < rows; i++) {
            for (long c = j; c < j + 8; c++) destination[c * destination_stride + i] = source[i * source_stride + c] * scale;
        }
    }
    for (; j < columns; j++) {
        for (long i = 0; i < rows; i++) destination[j * destination_stride + i] = source[i * source_stride + j] * scale;
    }
}

#else
int osprey_transpose_tiles_fast(void) { return 0; }
void osprey_transpose_scaled_f32(const float *source, long source_stride, float *destination, long destination_stride, long rows,
                                 long columns, float scale) {
    (void)source; (void)source_stride; (void)destination; (void)destination_stride; (void)rows; (void)columns; (void)scale;
}
void osprey_transpose_u32(const void *source, void *destination, long rows, long columns, long first_column, long end_column) {
    (void)source; (void)destination; (void)rows; (void)columns; (void)first_column; (void)end_column;
}
#endif
