// MaxPool rows in AVX-512F, straight from the NCHW planes: the window's input rows folded into blocks of 16 columns
// (masked loads, each input column read once per output row), then each tap's columns picked from the blocks by one
// permute. SqueezeNet's 3x3 stride-2 pools over 55-, 27- and 13-column planes cost 2-5x onnxruntime's NCHWc pools in
// the separable path (a line written and re-read per output row, scalar tail copies); a row of 13 outputs is now six
// loads, three permutes and one masked store. Engine's `separablePool` is the other CPUs' path and
// `maxPool2DReference` the twin.
#include "include/window_max.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include "avx512_math.h"

/// Lanes l of 16 whose column `column + l` lies in [0, width).
static inline __mmask16 column_mask(int column, int width) {
    int lo = column < 0 ? -column : 0, hi = width - column;
    if (hi > 16) hi = 16;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/// Most output chunks (16 outputs) per row the kernel takes: its column masks live on the stack.
#define MAX_CHUNKS 64

/// The maximum of `count` (>= 1) rows, `stride` floats apart from `p`, over 16 columns; lanes outside `m` are
/// -infinity (nothing is read there, so a mask of 0 reads nothing). Prefetches `ahead_rows` rows from row `ahead`.
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 column_block(const float *p, int count, long stride, __mmask16 m, int ahead, int ahead_rows) {
    const __m512 lowest = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < ahead_rows; r++) _mm_prefetch((const char *)(p + (ahead + r) * stride), _MM_HINT_T0);
    __m512 v = _mm512_mask_loadu_ps(lowest, m, p);
    for (int r = 1; r < count; r++) v = _mm512_max_ps(v, _mm512_mask_loadu_ps(lowest, m, p + r * stride));
    return v;
}

/// One output row from the window's `rows` input rows at `src` (column -pad_left of its first row); `masks[k]` clips
/// block k (the 16 columns from 16k - pad_left) to the row, `stores[c]` the outputs of chunk c.
OSPREY_AVX512 __attribute__((always_inline))
static inline void pool_row(const float *src, int rows, long in_w, float *dst, int chunks, const __mmask16 *masks,
                            const __mmask16 *stores, const int kw, const int sw, int ahead, int ahead_rows) {
    const __m512 lowest = _mm512_set1_ps(-INFINITY);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (rows <= 0) {
        // A window wholly in the padding: -infinity, as ONNX specifies.
        for (int c = 0; c < chunks; c++) _mm512_mask_storeu_ps(dst + 16 * c, stores[c], lowest);
        return;
    }
    __m512 b0 = column_block(src, rows, in_w, masks[0], ahead, ahead_rows);
    if (sw == 2) {
        // Lane l: tap j reads column 2l + j of blocks B0 B1 B2 from the chunk's first window: the even and odd lanes
        // of B0 B1 for j = 0, 1; those shifted down one lane with B2's first (j = 2) or second (j = 3) in lane 15.
        for (int c = 0; c < chunks; c++) {
            const __m512 b1 = column_block(src + 32 * c + 16, rows, in_w, masks[2 * c + 1], ahead, ahead_rows);
            // B2 feeds lane 15 (tap 2 or 3) and the next chunk: the last chunk of a row that ends before lane 15
            // skips it (SqueezeNet's 13- and 27-output rows).
            const int more = c + 1 < chunks || (kw > 2 && stores[c] == 0xFFFF);
            const __m512 b2 = more ? column_block(src + 32 * c + 32, rows, in_w, masks[2 * c + 2], ahead, ahead_rows) : lowest;
            const __m512 e = _mm512_permutex2var_ps(b0, even, b1);
            __m512 acc = e;
            if (kw > 1) {
                const __m512 o = _mm512_permutex2var_ps(b0, odd, b1);
                acc = _mm512_max_ps(acc, o);
                if (kw > 3) acc = _mm512_max_ps(acc, _mm512_permutex2var_ps(o, next1, b2));
            }
            if (kw > 2) acc = _mm512_max_ps(acc, _mm512_permutex2var_ps(e, next0, b2));
            _mm512_mask_storeu_ps(dst + 16 * c, stores[c], acc);
            b0 = b2;
        }
    } else {
        // Stride 1: tap j is the 16 columns from j of blocks B0 B1 (kw <= 16).
        for (int c = 0; c < chunks; c++) {
            const __m512 b1 = column_block(src + 16 * c + 16, rows, in_w, masks[c + 1], ahead, ahead_rows);
            __m512 acc = b0;
            for (int j = 1; j < kw; j++)
                acc = _mm512_max_ps(acc, _mm512_permutex2var_ps(b0, _mm512_add_epi32(lanes, _mm512_set1_epi32(j)), b1));
            _mm512_mask_storeu_ps(dst + 16 * c, stores[c], acc);
            b0 = b1;
        }
    }
}

/// `column_block` for two windows of `kh` rows, the second `sh` rows below the first (sh < kh): the rows they share
/// are read once.
OSPREY_AVX512 __attribute__((always_inline))
static inline void column_block2(const float *p, const int kh, const int sh, long stride, __mmask16 m, int ahead, __m512 *a, __m512 *b) {
    const __m512 lowest = _mm512_set1_ps(-INFINITY);
    __m512 u = lowest, v = lowest;
    // The rows a pair `ahead` rows on adds, fetched now: batch-8 planes (25 MB at SqueezeNet's first pool) come from
    // memory, and without this the loads waited on it (2.7x the time; the hardware prefetcher missed the row blocks).
    for (int r = 0; r < 2 * sh; r++) _mm_prefetch((const char *)(p + (ahead + r) * stride), _MM_HINT_T0);
    for (int r = 0; r < kh + sh; r++) {
        const __m512 x = _mm512_mask_loadu_ps(lowest, m, p + r * stride);
        if (r < kh) u = _mm512_max_ps(u, x);
        if (r >= sh) v = _mm512_max_ps(v, x);
    }
    *a = u;
    *b = v;
}

/// Two output rows of one plane (`dst` and `dst + out_w`) at column stride 2, both windows wholly inside the input
/// rows (kh rows from `src`, then kh rows from `sh` rows below): `pool_row`'s stride-2 steps on both at once.
OSPREY_AVX512 __attribute__((always_inline))
static inline void pool_row_pair(const float *src, long in_w, float *dst, long out_w, int chunks, const __mmask16 *masks,
                                 const __mmask16 *stores, const int kh, const int kw, const int sh, int ahead) {
    const __m512 lowest = _mm512_set1_ps(-INFINITY);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
    __m512 a0, b0;
    column_block2(src, kh, sh, in_w, masks[0], ahead, &a0, &b0);
    for (int c = 0; c < chunks; c++) {
        __m512 a1, b1, a2 = lowest, b2 = lowest;
        column_block2(src + 32 * c + 16, kh, sh, in_w, masks[2 * c + 1], ahead, &a1, &b1);
        if (c + 1 < chunks || (kw > 2 && stores[c] == 0xFFFF)) column_block2(src + 32 * c + 32, kh, sh, in_w, masks[2 * c + 2], ahead, &a2, &b2);
        const __m512 ea = _mm512_permutex2var_ps(a0, even, a1), eb = _mm512_permutex2var_ps(b0, even, b1);
        __m512 acc_a = ea, acc_b = eb;
        if (kw > 1) {
            const __m512 oa = _mm512_permutex2var_ps(a0, odd, a1), ob = _mm512_permutex2var_ps(b0, odd, b1);
            acc_a = _mm512_max_ps(acc_a, oa);
            acc_b = _mm512_max_ps(acc_b, ob);
            if (kw > 3) {
                acc_a = _mm512_max_ps(acc_a, _mm512_permutex2var_ps(oa, next1, a2));
                acc_b = _mm512_max_ps(acc_b, _mm512_permutex2var_ps(ob, next1, b2));
            }
        }
        if (kw > 2) {
            acc_a = _mm512_max_ps(acc_a, _mm512_permutex2var_ps(ea, next0, a2));
            acc_b = _mm512_max_ps(acc_b, _mm512_permutex2var_ps(eb, next0, b2));
        }
        _mm512_mask_storeu_ps(dst + 16 * c, stores[c], acc_a);
        _mm512_mask_storeu_ps(dst + out_w + 16 * c, stores[c], acc_b);
        a0 = a2;
        b0 = b2;
    }
}

/// The rows of `osprey_maxpool_rows_f32`; inlined into bodies whose kernel and column stride are constants, so a
/// window of whole rows unrolls (a generic body ran 5x slower than a 3x3 stride-2 one on 13-output rows: loop and
/// branch overhead, not loads).
OSPREY_AVX512 __attribute__((always_inline))
static inline void maxpool_rows(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, int out_w,
                                const int kh, const int kw, int sh, const int sw, int pad_top, int pad_left, const int pair_sh) {
    const int chunks = (out_w + 15) / 16;
    __mmask16 masks[2 * MAX_CHUNKS + 1], stores[MAX_CHUNKS];
    for (int k = 0; k <= sw * chunks; k++) masks[k] = column_mask(16 * k - pad_left, in_w);
    for (int c = 0; c < chunks; c++) {
        const int n = out_w - 16 * c < 16 ? out_w - 16 * c : 16;
        stores[c] = (__mmask16)((1u << n) - 1u);
    }
    const long in_plane = (long)in_h * in_w, out_plane = (long)out_h * out_w;
    // Prefetch distance in rows: about 6 KB on (memory latency; a few rows of a narrow plane were too close: 27-column
    // planes from memory ran 1.3x slower at 9 rows than at 40), the planes being contiguous, and at least two pairs.
    const int pair_ahead = 6144 / (4 * in_w) > kh + 3 * sh ? 6144 / (4 * in_w) : kh + 3 * sh;
    long plane = first / out_h;
    int y = (int)(first - plane * out_h);
    for (long r = 0; r < count; r++) {
        float *dst = out + plane * out_plane + (long)y * out_w;
        const int top = y * sh - pad_top;
        const int r0 = top < 0 ? 0 : top, r1 = top + kh < in_h ? top + kh : in_h;
        const float *src = in + plane * in_plane + (long)r0 * in_w - pad_left;
        if (pair_sh > 0 && r + 1 < count && y + 1 < out_h && top >= 0 && top + sh + kh <= in_h) {
            // Two rows of the plane at once, their shared input rows read once (SqueezeNet's 3x3 stride-2 pools).
            pool_row_pair(src, in_w, dst, out_w, chunks, masks, stores, kh, kw, pair_sh, pair_ahead);
            r++;
            y += 2;
        } else {
            // Prefetch rows a few output rows on (memory-resident batches; see column_block2).
            const int ahead = kh + 2 * sh, ahead_rows = sh < kh ? sh : kh;
            if (r1 - r0 == kh) pool_row(src, kh, in_w, dst, chunks, masks, stores, kw, sw, ahead, ahead_rows);
            else pool_row(src, r1 - r0, in_w, dst, chunks, masks, stores, kw, sw, ahead, ahead_rows);
            y++;
        }
        if (y == out_h) { y = 0; plane++; }
    }
}

/// A body for one kernel and column stride; PAIR (the row stride, 0 for none) pools two rows at a time.
#define ROWS_BODY(name, KH, KW, SW, PAIR) \
    OSPREY_AVX512 static void name(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, \
                                   int out_w, int kh, int kw, int sh, int sw, int pad_top, int pad_left) { \
        (void)kh; (void)kw; (void)sw; \
        maxpool_rows(in, out, first, count, in_h, in_w, out_h, out_w, KH, KW, sh, SW, pad_top, pad_left, PAIR); \
    }
ROWS_BODY(rows_3x3_s2, 3, 3, 2, 2)
ROWS_BODY(rows_3x3_s2_rows, 3, 3, 2, 0)
ROWS_BODY(rows_2x2_s2, 2, 2, 2, 0)
ROWS_BODY(rows_3x3_s1, 3, 3, 1, 0)
#undef ROWS_BODY

OSPREY_AVX512 static void rows_any(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, int out_w,
                                   int kh, int kw, int sh, int sw, int pad_top, int pad_left) {
    maxpool_rows(in, out, first, count, in_h, in_w, out_h, out_w, kh, kw, sh, sw, pad_top, pad_left, 0);
}

void osprey_maxpool_rows_f32(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, int out_w,
                             int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left) {
    void (*body)(const float *, float *, long, long, int, int, int, int, int, int, int, int, int, int) = rows_any;
    if (kernel_h == 3 && kernel_w == 3 && stride_w == 2) body = stride_h == 2 ? rows_3x3_s2 : rows_3x3_s2_rows;
    else if (kernel_h == 2 && kernel_w == 2 && stride_w == 2) body = rows_2x2_s2;
    else if (kernel_h == 3 && kernel_w == 3 && stride_w == 1) body = rows_3x3_s1;
    body(in, out, first, count, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left);
}

#else

void osprey_maxpool_rows_f32(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, int out_w,
                             int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left) {
    (void)in; (void)out; (void)first; (void)count; (void)in_h; (void)in_w; (void)out_h; (void)out_w; (void)kernel_h;
    (void)kernel_w; (void)stride_h; (void)stride_w; (void)pad_top; (void)pad_left;
}

#endif
