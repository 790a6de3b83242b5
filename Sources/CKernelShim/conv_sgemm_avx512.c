// The dense convolution's and Winograd's product tiles in AVX-512F, chosen at run time. The Swift SIMD16 kernels are
// compiled for AVX2 (two ymm per row, 12 accumulators for 6x16); on CPUs with full-width 512-bit FMA the same 12
// accumulators as zmm cover 6x32 (one weight panel over two adjacent packed strips), twice the work per step, and
// each weight panel is read from L2 half as often. The packed layouts are unchanged, so the Swift kernels stay the
// path for CPUs without AVX-512F; `convolutionReference` is the twin the tests compare both with.
#include "include/conv_sgemm_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>

// A in the conv's packed panels (a[k * 6 + r]) or in rows (a[r * lda + k]); PLANES: packed panels, B read in place
// from NCHW input planes (b[k * ldb + j], masked loads: the last plane's columns past `width` may not exist).
// FULL: every lane of the strip(s) exists, so B, the residual and the output use plain loads and stores; masked loads
// of data not in cache run far slower (AMD Zen 4), so masks are kept for partial strips only.
enum { PANEL = 0, ROWS = 1, PLANES = 2 };

// One depth step: load the strip(s) of B, broadcast each row's A and fold it in. Odd steps go to a second set of
// accumulators, added in at the end: six rows over one strip still keep 12 FMA chains in flight (4-cycle latency, 2
// a cycle), and every lane sums in the same order whether its strip runs alone or in a pair (a column's result does
// not depend on where the batch puts it).
#define LOAD(M, P) (FULL ? _mm512_loadu_ps(P) : _mm512_maskz_loadu_ps(M, P))
#define STEP(K, ODD)                                                                                        \
    {                                                                                                       \
        const __m512 b0 = LAYOUT == PLANES ? LOAD(m0, b + (K) * ldb) : _mm512_loadu_ps(b + (K) * 16);        \
        const __m512 b1 = !TWO ? b0 : LAYOUT == PLANES ? LOAD(m1, b + 16 + (K) * ldb)                       \
                                                       : _mm512_loadu_ps(b + strip_stride + (K) * 16);      \
        for (int r = 0; r < 6; r++) {                                                                       \
            const __m512 x = _mm512_set1_ps(LAYOUT != ROWS ? a[(K) * 6 + r] : rowp[r][K]);                  \
            c[r][2 * (ODD)] = _mm512_fmadd_ps(x, b0, c[r][2 * (ODD)]);                                      \
            if (TWO) c[r][2 * (ODD) + 1] = _mm512_fmadd_ps(x, b1, c[r][2 * (ODD) + 1]);                     \
        }                                                                                                   \
    }

// TWO, LAYOUT and FULL are literals at each wrapper's call, so every variant is specialised.
__attribute__((target("avx512f"), always_inline))
static inline void tile(const int TWO, const int LAYOUT, const int FULL, long rows, long width, long depth, const float *a, long lda, const float *b,
                        long strip_stride, long ldb, long ahead, const float *start, float *out, long ldo,
                        const float *residual, long ldr, float low, float high) {
    const __mmask16 m0 = width >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << width) - 1);
    const __mmask16 m1 = width <= 16 ? 0 : width >= 32 ? (__mmask16)0xFFFF : (__mmask16)((1u << (width - 16)) - 1);
    __m512 c[6][4];
    for (int r = 0; r < 6; r++) {
        c[r][0] = c[r][1] = _mm512_set1_ps(start ? start[r] : 0.0f);
        c[r][2] = c[r][3] = _mm512_setzero_ps();
    }
    const float *rowp[6];
    for (int r = 0; r < 6; r++) rowp[r] = a + (r < rows ? r : 0) * lda;
    long k = 0;
    if (LAYOUT == ROWS) {
        for (; k + 2 <= depth; k += 2) {
            STEP(0, 0) STEP(1, 1)
            for (int r = 0; r < 6; r++) rowp[r] += 2;
            b += 32;
        }
        if (k < depth) STEP(0, 0)
    } else if (LAYOUT == PLANES) {
        for (; k + 2 <= depth; k += 2) {
            // The next block's two lines of these planes: one stream per plane is more than the hardware prefetcher
            // follows once the input is in DRAM (batch 8).
            if (ahead) {
                __builtin_prefetch(b + ahead, 0, 3);
                __builtin_prefetch(b + ahead + 16, 0, 3);
                __builtin_prefetch(b + ldb + ahead, 0, 3);
                __builtin_prefetch(b + ldb + ahead + 16, 0, 3);
            }
            STEP(0, 0) STEP(1, 1)
            a += 12;
            b += 2 * ldb;
        }
        if (k < depth) STEP(0, 0)
    } else {
        for (; k + 2 <= depth; k += 2) {
            // Weights stream from memory once per run faster than the hardware prefetcher runs ahead (as the Swift
            // kernel: ~130 steps ahead).
            __builtin_prefetch(a + 768, 0, 3);
            STEP(0, 0) STEP(1, 1)
            a += 12;
            b += 32;
        }
        if (k < depth) STEP(0, 0)
    }
    for (int r = 0; r < 6; r++) {
        c[r][0] = _mm512_add_ps(c[r][0], c[r][2]);
        c[r][1] = _mm512_add_ps(c[r][1], c[r][3]);
    }
    const __m512 lo = _mm512_set1_ps(low), hi = _mm512_set1_ps(high);
    for (int r = 0; r < 6; r++) {
        if (r >= rows) break;
        __m512 v0 = c[r][0], v1 = c[r][1];
        if (residual) {
            v0 = _mm512_add_ps(v0, LOAD(m0, residual + r * ldr));
            if (TWO) v1 = _mm512_add_ps(v1, LOAD(m1, residual + r * ldr + 16));
        }
        // max/min return their second operand when either is NaN: a NaN result stays NaN.
        v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
        if (FULL) _mm512_storeu_ps(out + r * ldo, v0);
        else _mm512_mask_storeu_ps(out + r * ldo, m0, v0);
        if (TWO) {
            v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
            if (FULL) _mm512_storeu_ps(out + r * ldo + 16, v1);
            else _mm512_mask_storeu_ps(out + r * ldo + 16, m1, v1);
        }
    }
}

__attribute__((target("avx512f")))
static void panel_two(long rows, long width, long depth, const float *a, const float *b, long strip_stride, const float *start,
                      float *out, long ldo, const float *residual, long ldr, float low, float high) {
    if (width >= 32) tile(1, PANEL, 1, rows, width, depth, a, 0, b, strip_stride, 16, 0, start, out, ldo, residual, ldr, low, high);
    else tile(1, PANEL, 0, rows, width, depth, a, 0, b, strip_stride, 16, 0, start, out, ldo, residual, ldr, low, high);
}

__attribute__((target("avx512f")))
static void panel_one(long rows, long width, long depth, const float *a, const float *b, const float *start, float *out, long ldo,
                      const float *residual, long ldr, float low, float high) {
    if (width == 16) tile(0, PANEL, 1, rows, width, depth, a, 0, b, 0, 16, 0, start, out, ldo, residual, ldr, low, high);
    else tile(0, PANEL, 0, rows, width, depth, a, 0, b, 0, 16, 0, start, out, ldo, residual, ldr, low, high);
}

__attribute__((target("avx512f")))
static void rows_two(long rows, long width, long depth, const float *a, long lda, const float *b, long strip_stride, float *out,
                     long ldo) {
    tile(1, ROWS, 0, rows, width, depth, a, lda, b, strip_stride, 16, 0, 0, out, ldo, 0, 0, -__builtin_inff(), __builtin_inff());
}

__attribute__((target("avx512f")))
static void rows_one(long rows, long width, long depth, const float *a, long lda, const float *b, float *out, long ldo) {
    tile(0, ROWS, 0, rows, width, depth, a, lda, b, 0, 16, 0, 0, out, ldo, 0, 0, -__builtin_inff(), __builtin_inff());
}

void osprey_conv_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long strip_stride,
                             const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high) {
    if (width > 16) panel_two(rows, width, depth, a, b, strip_stride, start, out, ldo, residual, ldr, low, high);
    else panel_one(rows, width, depth, a, b, start, out, ldo, residual, ldr, low, high);
}

__attribute__((target("avx512f")))
static void planes_two(long rows, long width, long depth, const float *a, const float *b, long ldb, long ahead, const float *start, float *out,
                       long ldo, const float *residual, long ldr, float low, float high) {
    if (width >= 32) tile(1, PLANES, 1, rows, width, depth, a, 0, b, 16, ldb, ahead, start, out, ldo, residual, ldr, low, high);
    else tile(1, PLANES, 0, rows, width, depth, a, 0, b, 16, ldb, ahead, start, out, ldo, residual, ldr, low, high);
}

__attribute__((target("avx512f")))
static void planes_one(long rows, long width, long depth, const float *a, const float *b, long ldb, long ahead, const float *start, float *out,
                       long ldo, const float *residual, long ldr, float low, float high) {
    if (width == 16) tile(0, PLANES, 1, rows, width, depth, a, 0, b, 16, ldb, ahead, start, out, ldo, residual, ldr, low, high);
    else tile(0, PLANES, 0, rows, width, depth, a, 0, b, 16, ldb, ahead, start, out, ldo, residual, ldr, low, high);
}

void osprey_conv_planes_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long ldb, long ahead,
                                    const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high) {
    if (width > 16) planes_two(rows, width, depth, a, b, ldb, ahead, start, out, ldo, residual, ldr, low, high);
    else planes_one(rows, width, depth, a, b, ldb, ahead, start, out, ldo, residual, ldr, low, high);
}

void osprey_rows_tile_avx512(long rows, long width, long depth, const float *a, long lda, const float *b, long strip_stride,
                             float *out, long ldo) {
    if (width > 16) rows_two(rows, width, depth, a, lda, b, strip_stride, out, ldo);
    else rows_one(rows, width, depth, a, lda, b, out, ldo);
}


// Four output channels of one group at flat outputs j..j+31, GroupedConvolution.swift's filter: two 16-lane columns
// per tap feed 8 zmm accumulators (the Swift AVX2 kernel: 16 lanes in 8 ymm); c[h][r] is row r's lanes 16h..16h+15.
__attribute__((target("avx512f"), always_inline))
static inline void grouped_block32(const float *base, const long *offsets, long depth, const float *panel, const float *start,
                                   __m512 c[2][4]) {
    for (int r = 0; r < 4; r++) c[0][r] = c[1][r] = _mm512_set1_ps(start[r]);
    const float *a = panel;
    for (long k = 0; k < depth; k++) {
        const float *p = base + offsets[k];
        const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
        for (int r = 0; r < 4; r++) {
            const __m512 x = _mm512_set1_ps(a[r]);
            c[0][r] = _mm512_fmadd_ps(x, v0, c[0][r]);
            c[1][r] = _mm512_fmadd_ps(x, v1, c[1][r]);
        }
        a += 4;
    }
}

// The last 16 flat outputs: odd taps to a second accumulator per row, 8 chains in flight.
__attribute__((target("avx512f"), always_inline))
static inline void grouped_block16(const float *base, const long *offsets, long depth, const float *panel, const float *start,
                                   __m512 c[4]) {
    __m512 d[4];
    for (int r = 0; r < 4; r++) { c[r] = _mm512_set1_ps(start[r]); d[r] = _mm512_setzero_ps(); }
    const float *a = panel;
    long k = 0;
    for (; k + 2 <= depth; k += 2) {
        const __m512 v0 = _mm512_loadu_ps(base + offsets[k]), v1 = _mm512_loadu_ps(base + offsets[k + 1]);
        for (int r = 0; r < 4; r++) {
            c[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), v0, c[r]);
            d[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[4 + r]), v1, d[r]);
        }
        a += 8;
    }
    if (k < depth) {
        const __m512 v0 = _mm512_loadu_ps(base + offsets[k]);
        for (int r = 0; r < 4; r++) c[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), v0, c[r]);
    }
    for (int r = 0; r < 4; r++) c[r] = _mm512_add_ps(c[r], d[r]);
}

// Four output channels of one group over flat outputs j < count (a multiple of 16), into the flat buffer.
__attribute__((target("avx512f")))
void osprey_grouped_block_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                 long count, float *output) {
    long j = 0;
    for (; j + 32 <= count; j += 32) {
        __m512 c[2][4];
        grouped_block32(scratch + j, offsets, depth, panel, start, c);
        for (int r = 0; r < 4; r++) {
            _mm512_storeu_ps(output + r * count + j, c[0][r]);
            _mm512_storeu_ps(output + r * count + j + 16, c[1][r]);
        }
    }
    if (j < count) {
        __m512 c[4];
        grouped_block16(scratch + j, offsets, depth, panel, start, c);
        for (int r = 0; r < 4; r++) _mm512_storeu_ps(output + r * count + j, c[r]);
    }
}

// Rows r < rows of one 16-lane chunk of flat outputs into their output planes: the lanes of `mask` (columns inside
// the output width) packed together in order (vcompressps in registers) are exactly the `popcount` outputs that
// follow out[dest], since the plane's rows are contiguous; residual (same layout) added, then clamped (NaN stays NaN,
// as in the other tiles: max(lo, NaN) is NaN).
__attribute__((target("avx512f"), always_inline))
static inline void store_flat_chunk(const __m512 *v, long rows, unsigned mask, long dest, float *out, long plane,
                                    const float *residual, __m512 lo, __m512 hi) {
    if (!mask) return;
    if (mask == 0xFFFF) {
        // A whole row's inside: plain loads and stores (masked ones of data not in cache run slower on Zen 4).
        for (long r = 0; r < rows; r++) {
            __m512 x = v[r];
            if (residual) x = _mm512_add_ps(x, _mm512_loadu_ps(residual + r * plane + dest));
            _mm512_storeu_ps(out + r * plane + dest, _mm512_min_ps(hi, _mm512_max_ps(lo, x)));
        }
        return;
    }
    const __mmask16 keep = (__mmask16)mask, packed = (__mmask16)((1u << __builtin_popcount(mask)) - 1);
    for (long r = 0; r < rows; r++) {
        __m512 x = _mm512_maskz_compress_ps(keep, v[r]);
        if (residual) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(packed, residual + r * plane + dest));
        _mm512_mask_storeu_ps(out + r * plane + dest, packed, _mm512_min_ps(hi, _mm512_max_ps(lo, x)));
    }
}

// The same four output channels as `osprey_grouped_block_avx512` (the same sums), stored straight into their output
// planes: no flat buffer, no second pass over it to drop the columns past the output width and apply the epilogue.
__attribute__((target("avx512f")))
void osprey_grouped_block_direct_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                        long count, const unsigned short *masks, const long *dest, long rows, float *out,
                                        long plane, const float *residual, float low, float high) {
    const __m512 lo = _mm512_set1_ps(low), hi = _mm512_set1_ps(high);
    long j = 0;
    for (; j + 32 <= count; j += 32) {
        __m512 c[2][4];
        grouped_block32(scratch + j, offsets, depth, panel, start, c);
        const long chunk = j / 16;
        store_flat_chunk(c[0], rows, masks[chunk], dest[chunk], out, plane, residual, lo, hi);
        store_flat_chunk(c[1], rows, masks[chunk + 1], dest[chunk + 1], out, plane, residual, lo, hi);
    }
    if (j < count) {
        __m512 c[4];
        grouped_block16(scratch + j, offsets, depth, panel, start, c);
        store_flat_chunk(c, rows, masks[j / 16], dest[j / 16], out, plane, residual, lo, hi);
    }
}

// A^T m over 6 vectors: the Swift `Winograd.output1D` in 16 lanes.
__attribute__((target("avx512f"), always_inline))
static inline void output_1d(const __m512 m[6], __m512 out[4]) {
    const __m512 p = _mm512_add_ps(m[1], m[2]), q = _mm512_sub_ps(m[1], m[2]);
    const __m512 r = _mm512_add_ps(m[3], m[4]), s = _mm512_sub_ps(m[3], m[4]);
    out[0] = _mm512_add_ps(_mm512_add_ps(m[0], p), r);
    out[1] = _mm512_add_ps(q, _mm512_mul_ps(_mm512_set1_ps(2.0f), s));
    out[2] = _mm512_add_ps(p, _mm512_mul_ps(_mm512_set1_ps(4.0f), r));
    out[3] = _mm512_add_ps(_mm512_add_ps(q, _mm512_mul_ps(_mm512_set1_ps(8.0f), s)), m[5]);
}

// The Swift transform builds each channel's 4 outputs lane by lane (8 inserts per store: most of its time); here the
// 4 x 16 results of a row are transposed by unpacks and shuffles into 16 runs of 4, one 128-bit store each.
__attribute__((target("avx512f")))
void osprey_winograd_output_avx512(const float *m, long position_stride, const float *bias, float *out, long plane,
                                   long row_stride, float low, float high) {
    __m512 rows[6][4];
    for (int i = 0; i < 6; i++) {
        __m512 v[6];
        for (int j = 0; j < 6; j++) v[j] = _mm512_loadu_ps(m + (i * 6 + j) * position_stride);
        output_1d(v, rows[i]);
    }
    const __m512 b = _mm512_loadu_ps(bias), lo = _mm512_set1_ps(low), hi = _mm512_set1_ps(high);
    __m512 o[4][4];
    for (int c = 0; c < 4; c++) {
        __m512 v[6], t[4];
        for (int i = 0; i < 6; i++) v[i] = rows[i][c];
        output_1d(v, t);
        for (int r = 0; r < 4; r++) o[r][c] = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(t[r], b)));
    }
    for (int r = 0; r < 4; r++) {
        const __m512 t0 = _mm512_unpacklo_ps(o[r][0], o[r][1]), t1 = _mm512_unpackhi_ps(o[r][0], o[r][1]);
        const __m512 t2 = _mm512_unpacklo_ps(o[r][2], o[r][3]), t3 = _mm512_unpackhi_ps(o[r][2], o[r][3]);
        // Channel 4l + i of 128-bit lane l: u[i].
        const __m512 u[4] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xEE), _mm512_shuffle_ps(t1, t3, 0x44),
                             _mm512_shuffle_ps(t1, t3, 0xEE)};
        float *row = out + r * row_stride;
        for (int i = 0; i < 4; i++) {
            _mm_storeu_ps(row + (0 + i) * plane, _mm512_extractf32x4_ps(u[i], 0));
            _mm_storeu_ps(row + (4 + i) * plane, _mm512_extractf32x4_ps(u[i], 1));
            _mm_storeu_ps(row + (8 + i) * plane, _mm512_extractf32x4_ps(u[i], 2));
            _mm_storeu_ps(row + (12 + i) * plane, _mm512_extractf32x4_ps(u[i], 3));
        }
    }
}

#else

void osprey_winograd_output_avx512(const float *m, long position_stride, const float *bias, float *out, long plane,
                                   long row_stride, float low, float high) {
    (void)m; (void)position_stride; (void)bias; (void)out; (void)plane; (void)row_stride; (void)low; (void)high;
}

void osprey_conv_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long strip_stride,
                             const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high) {
    (void)rows; (void)width; (void)depth; (void)a; (void)b; (void)strip_stride; (void)start; (void)out; (void)ldo;
    (void)residual; (void)ldr; (void)low; (void)high;
}

void osprey_conv_planes_tile_avx512(long rows, long width, long depth, const float *a, const float *b, long ldb, long ahead,
                                    const float *start, float *out, long ldo, const float *residual, long ldr, float low, float high) {
    (void)rows; (void)width; (void)depth; (void)a; (void)b; (void)ldb; (void)ahead; (void)start; (void)out; (void)ldo; (void)residual;
    (void)ldr; (void)low; (void)high;
}

void osprey_rows_tile_avx512(long rows, long width, long depth, const float *a, long lda, const float *b, long strip_stride,
                             float *out, long ldo) {
    (void)rows; (void)width; (void)depth; (void)a; (void)lda; (void)b; (void)strip_stride; (void)out; (void)ldo;
}

void osprey_grouped_block_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                 long count, float *output) {
    (void)scratch; (void)offsets; (void)depth; (void)panel; (void)start; (void)count; (void)output;
}

void osprey_grouped_block_direct_avx512(const float *scratch, const long *offsets, long depth, const float *panel, const float *start,
                                        long count, const unsigned short *masks, const long *dest, long rows, float *out,
                                        long plane, const float *residual, float low, float high) {
    (void)scratch; (void)offsets; (void)depth; (void)panel; (void)start; (void)count; (void)masks; (void)dest; (void)rows;
    (void)out; (void)plane; (void)residual; (void)low; (void)high;
}

#endif
