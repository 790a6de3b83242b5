// Channels-last depthwise convolution: every tap is a contiguous vector of channels, so the kernel vectorises over
// channels with no padded plane copy (the NCHW kernel in depthwise_plane.c copies each plane into a zero-bordered
// scratch first); border pixels just skip the taps that fall outside the image. Engine's NHWC regions call it.
#include "include/nhwc_depthwise.h"
#include "include/depthwise_plane.h"
#include "include/float_activations.h"
#include <math.h>

typedef osprey_nhwc_depthwise_geometry geometry_t;

/// The epilogue on one value (the portable body and the vector bodies' scalar channel tails).
static inline float finish1(float v, int epilogue, float lo, float hi) {
    switch (epilogue) {
    case OSPREY_DW_SILU: return v / (1.0f + expf(-v));
    case OSPREY_DW_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case OSPREY_DW_HARDSWISH: {
        float gate = v / 6.0f + 0.5f;
        gate = gate < 0 ? 0 : (gate > 1 ? 1 : gate);
        return v * gate;
    }
    default: return v < lo ? lo : (v > hi ? hi : v);
    }
}

/// The taps of output pixel (y, x) that fall inside the image: rows [*i0, *i1), columns [*j0, *j1).
static inline void tap_range(const geometry_t *g, long y, long x, long *i0, long *i1, long *j0, long *j1, long *top, long *left) {
    *top = y * g->stride_height - g->pad_top;
    *left = x * g->stride_width - g->pad_left;
    *i0 = *top < 0 ? -*top : 0;
    *i1 = g->in_height - *top < g->kernel_height ? g->in_height - *top : g->kernel_height;
    *j0 = *left < 0 ? -*left : 0;
    *j1 = g->in_width - *left < g->kernel_width ? g->in_width - *left : g->kernel_width;
}

/// Channels [c0, c1) of one output pixel, one value at a time.
static inline void pixel_scalar(const geometry_t *g, const float *in, const float *weights, const float *bias, long y, long x,
                                long c0, long c1, float *out, const float *residual, int epilogue, float lo, float hi) {
    long i0, i1, j0, j1, top, left;
    tap_range(g, y, x, &i0, &i1, &j0, &j1, &top, &left);
    const long C = g->channels;
    for (long c = c0; c < c1; c++) {
        float acc = bias ? bias[c] : 0.0f;
        for (long i = i0; i < i1; i++)
            for (long j = j0; j < j1; j++)
                acc += in[((top + i) * g->in_width + left + j) * C + c] * weights[(i * g->kernel_width + j) * C + c];
        if (residual) acc += residual[c];
        out[c] = finish1(acc, epilogue, lo, hi);
    }
}

static void depthwise_portable(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                               long end_row, float *out, const float *residual, int epilogue, float lo, float hi) {
    const long C = g->channels;
    for (long y = first_row; y < end_row; y++)
        for (long x = 0; x < g->out_width; x++) {
            const long at = (y * g->out_width + x) * C;
            pixel_scalar(g, in, weights, bias, y, x, 0, C, out + at, residual ? residual + at : 0, epilogue, lo, hi);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>
#include "avx2_logistic.h"
#include "avx512_math.h"

/// 16 channels from p: a plain load when `full` (a constant at each use) and masked by m otherwise. A masked load
/// whose line is not in cache is slow (AMD Zen 5): on a batch of 8 images at 112x112x32, whose tensors live in
/// L3 or memory, the all-ones-mask loads made the 3x3 kernel 2.5 times slower than plain ones.
#define LOAD16(full, m, p) ((full) ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps((m), (p)))

#include "nhwc_depthwise_groups.h"

/// `n` (1...4) vectors of 16 channels from channel c of one pixel, all taps; with `masked` the last vector is masked by
/// `mask` (plain loads otherwise, see LOAD16). Independent accumulators hide the FMA latency along the taps.
#define DW512_BLOCK_(n, masked) do { \
        __m512 acc[4]; \
        for (int k = 0; k < (n); k++) { \
            __mmask16 m_ = k == (n) - 1 ? mask : 0xffff; \
            acc[k] = bias ? LOAD16(!(masked) || k < (n) - 1, m_, bias + c + 16 * k) : _mm512_setzero_ps(); \
        } \
        for (long i = i0; i < i1; i++) \
            for (long j = j0; j < j1; j++) { \
                const float *src = in + ((top + i) * g->in_width + left + j) * C + c; \
                const float *w = weights + (i * g->kernel_width + j) * C + c; \
                for (int k = 0; k < (n); k++) { \
                    __mmask16 m_ = k == (n) - 1 ? mask : 0xffff; \
                    acc[k] = _mm512_fmadd_ps(LOAD16(!(masked) || k < (n) - 1, m_, src + 16 * k), LOAD16(!(masked) || k < (n) - 1, m_, w + 16 * k), acc[k]); \
                } \
            } \
        for (int k = 0; k < (n); k++) { \
            __mmask16 m_ = k == (n) - 1 ? mask : 0xffff; \
            __m512 v = acc[k]; \
            if (res) v = _mm512_add_ps(v, LOAD16(!(masked) || k < (n) - 1, m_, res + c + 16 * k)); \
            _mm512_mask_storeu_ps(o + c + 16 * k, m_, finish16(v, epilogue, lov, hiv)); \
        } \
    } while (0)

/// Whole vectors (`DW_PIXEL_WALK`'s blocks).
#define DW512_BLOCK(n) DW512_BLOCK_(n, 0)

/// The interior columns [*x0, *x1) of an output row: every tap of those pixels lies inside the image's columns.
static inline void interior_columns(const geometry_t *g, long *x0, long *x1) {
    *x0 = (g->pad_left + g->stride_width - 1) / g->stride_width;
    const long reach = g->in_width - g->kernel_width + g->pad_left;
    *x1 = reach < 0 ? 0 : reach / g->stride_width + 1;
    if (*x1 > g->out_width) *x1 = g->out_width;
    if (*x0 > *x1) *x0 = *x1;
}

/// Channels [c, c + 16) (mask m; plain loads when `full`) of pixels [x0, x1) of output row y, all K x K taps inside
/// the image: the block keeps its K * K weight vectors in registers while it walks the row (one load per multiply-add
/// instead of two).
OSPREY_AVX512 __attribute__((always_inline))
static inline void interior_block(const int K, const int full, const geometry_t *g, const float *in, const float *weights,
                                  const float *bias, long y, long x0, long x1, long c, __mmask16 m, float *out, const float *residual,
                                  int epilogue, __m512 lov, __m512 hiv) {
    const long C = g->channels, W = g->in_width, sw = g->stride_width;
    const long top = y * g->stride_height - g->pad_top;
    __m512 w[9];
    for (int t = 0; t < K * K; t++) w[t] = LOAD16(full, m, weights + t * C + c);
    const __m512 start = bias ? LOAD16(full, m, bias + c) : _mm512_setzero_ps();
    for (long x = x0; x < x1; x++) {
        const float *src = in + (top * W + x * sw - g->pad_left) * C + c;
        __m512 a = start, b = _mm512_setzero_ps();
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                const __m512 v = LOAD16(full, m, src + (i * W + j) * C);
                if ((i * K + j) & 1) b = _mm512_fmadd_ps(v, w[i * K + j], b);
                else a = _mm512_fmadd_ps(v, w[i * K + j], a);
            }
        a = _mm512_add_ps(a, b);
        const long at = (y * g->out_width + x) * C + c;
        if (residual) a = _mm512_add_ps(a, LOAD16(full, m, residual + at));
        _mm512_mask_storeu_ps(out + at, m, finish16(a, epilogue, lov, hiv));
    }
}

/// Pixels [x0, x1) of output row y, all K x K taps inside the image, for K = 3 (5x5 kernels go to `dw_groups`):
/// `interior_block` over the channel blocks.
OSPREY_AVX512 __attribute__((always_inline))
static inline void interior_row(const int K, const geometry_t *g, const float *in, const float *weights, const float *bias, long y,
                                long x0, long x1, float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    const long C = g->channels;
    for (long c = 0; c < C; c += 16) {
        if (C - c >= 16) interior_block(K, 1, g, in, weights, bias, y, x0, x1, c, 0xffff, out, residual, epilogue, lov, hiv);
        else interior_block(K, 0, g, in, weights, bias, y, x0, x1, c, (__mmask16)((1u << (C - c)) - 1), out, residual, epilogue, lov, hiv);
    }
}

/// Channels [c, c + 16) (as `interior_block`) of interior pixels [x0, x0 + whole) of a 3x3 conv's output row y at
/// stride 1, six at a time: each input vector loaded serves every one of the six pixels whose taps cover it (8 loads
/// per kernel row instead of 18), the weights in registers as in `interior_block`.
OSPREY_AVX512 __attribute__((always_inline))
static inline void sixes_block(const int full, const geometry_t *g, const float *in, const float *weights, const float *bias, long y,
                               long x0, long whole, long c, __mmask16 m, float *out, const float *residual, int epilogue, __m512 lov,
                               __m512 hiv) {
    enum { K = 3, N = 6 };
    const long C = g->channels, W = g->in_width;
    const long top = y * g->stride_height - g->pad_top;
    __m512 w[K * K];
    for (int t = 0; t < K * K; t++) w[t] = LOAD16(full, m, weights + t * C + c);
    const __m512 start = bias ? LOAD16(full, m, bias + c) : _mm512_setzero_ps();
    for (long x = x0; x < x0 + whole; x += N) {
        const float *src = in + (top * W + x - g->pad_left) * C + c;
        __m512 acc[N];
        for (int p = 0; p < N; p++) acc[p] = start;
        for (int i = 0; i < K; i++)
            for (int col = 0; col < K + N - 1; col++) {
                const __m512 v = LOAD16(full, m, src + (i * W + col) * C);
                for (int p = 0; p < N; p++) {
                    const int j = col - p;
                    if (j >= 0 && j < K) acc[p] = _mm512_fmadd_ps(v, w[i * K + j], acc[p]);
                }
            }
        for (int p = 0; p < N; p++) {
            const long at = (y * g->out_width + x + p) * C + c;
            __m512 a = acc[p];
            if (residual) a = _mm512_add_ps(a, LOAD16(full, m, residual + at));
            _mm512_mask_storeu_ps(out + at, m, finish16(a, epilogue, lov, hiv));
        }
    }
}

/// Interior pixels [x0, x1) of a 3x3 conv's output row y at stride 1 in `sixes_block`s; leftover pixels go through
/// `interior_row`. About a fifth faster than `interior_row` on EfficientNet-B0's and MobileNetV2's 3x3 layers.
OSPREY_AVX512 static void interior_row3_sixes(const geometry_t *g, const float *in, const float *weights, const float *bias, long y,
                                              long x0, long x1, float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    const long C = g->channels, whole = (x1 - x0) / 6 * 6;
    for (long c = 0; c < C; c += 16) {
        if (C - c >= 16) sixes_block(1, g, in, weights, bias, y, x0, whole, c, 0xffff, out, residual, epilogue, lov, hiv);
        else sixes_block(0, g, in, weights, bias, y, x0, whole, c, (__mmask16)((1u << (C - c)) - 1), out, residual, epilogue, lov, hiv);
    }
    if (whole < x1 - x0) interior_row(3, g, in, weights, bias, y, x0 + whole, x1, out, residual, epilogue, lov, hiv);
}

OSPREY_AVX512 static void interior_row3(const geometry_t *g, const float *in, const float *weights, const float *bias, long y, long x0,
                                        long x1, float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    if (g->stride_width == 1) interior_row3_sixes(g, in, weights, bias, y, x0, x1, out, residual, epilogue, lov, hiv);
    else interior_row(3, g, in, weights, bias, y, x0, x1, out, residual, epilogue, lov, hiv);
}

/// The channel walk of output pixel (y, x) shared by the vector bodies: its clipped taps, then groups of four
/// `LANES`-wide vectors, the one to three left, and `TAIL` for the channels past the last whole vector.
#define DW_PIXEL_WALK(BLOCK, LANES, TAIL) do { \
        long i0, i1, j0, j1, top, left; \
        tap_range(g, y, x, &i0, &i1, &j0, &j1, &top, &left); \
        const long at = (y * g->out_width + x) * C; \
        float *o = out + at; \
        const float *res = residual ? residual + at : 0; \
        long c = 0; \
        for (; c + 4 * (LANES) <= whole; c += 4 * (LANES)) BLOCK(4); \
        const long rest = (whole - c) / (LANES); \
        if (rest == 3) BLOCK(3); \
        else if (rest == 2) BLOCK(2); \
        else if (rest == 1) BLOCK(1); \
        c = whole; \
        TAIL; \
    } while (0)

/// Every channel of output pixel (y, x), taps clipped to the image (borders and kernels other than 3x3 and 5x5).
OSPREY_AVX512
static void pixel_avx512(const geometry_t *g, const float *in, const float *weights, const float *bias, long y, long x, float *out,
                         const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    const long C = g->channels;
    const long whole = C / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (C - whole)) - 1);
    __mmask16 mask = 0xffff;
    DW_PIXEL_WALK(DW512_BLOCK, 16, if (tail) { mask = tail; DW512_BLOCK_(1, 1); });
}

OSPREY_AVX512
static void depthwise_avx512(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                             long end_row, float *out, const float *residual, int epilogue, float lo, float hi) {
    const __m512 lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
    const long k = g->kernel_height;
    // 5x5 and 7x7 kernels and 3x3 ones on rows of one group (where border pixels are most of the row) in pixel
    // groups; wider 3x3 rows keep `interior_row3_sixes`, as fast as the groups there and faster at 112 columns.
    if (dw_groups_handles(g) && (k >= 5 || g->out_width <= DW_GROUP_MAX)) {
        dw_groups(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lov, hiv);
        return;
    }
    const int square = k == g->kernel_width && k == 3;
    long x0 = 0, x1 = 0;
    if (square) interior_columns(g, &x0, &x1);
    for (long y = first_row; y < end_row; y++) {
        const long top = y * g->stride_height - g->pad_top;
        if (!square || top < 0 || top + k > g->in_height || x0 >= x1) {
            for (long x = 0; x < g->out_width; x++) pixel_avx512(g, in, weights, bias, y, x, out, residual, epilogue, lov, hiv);
            continue;
        }
        for (long x = 0; x < x0; x++) pixel_avx512(g, in, weights, bias, y, x, out, residual, epilogue, lov, hiv);
        interior_row3(g, in, weights, bias, y, x0, x1, out, residual, epilogue, lov, hiv);
        for (long x = x1; x < g->out_width; x++) pixel_avx512(g, in, weights, bias, y, x, out, residual, epilogue, lov, hiv);
    }
}

/// `n` (1...4) whole vectors of 8 channels from channel c of one pixel, all taps.
#define DW256_BLOCK(n) do { \
        __m256 acc[4]; \
        for (int k = 0; k < (n); k++) acc[k] = bias ? _mm256_loadu_ps(bias + c + 8 * k) : _mm256_setzero_ps(); \
        for (long i = i0; i < i1; i++) \
            for (long j = j0; j < j1; j++) { \
                const float *src = in + ((top + i) * g->in_width + left + j) * C + c; \
                const float *w = weights + (i * g->kernel_width + j) * C + c; \
                for (int k = 0; k < (n); k++) \
                    acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(src + 8 * k), _mm256_loadu_ps(w + 8 * k), acc[k]); \
            } \
        for (int k = 0; k < (n); k++) { \
            __m256 v = acc[k]; \
            if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + c + 8 * k)); \
            _mm256_storeu_ps(o + c + 8 * k, finish8(v, epilogue, lov, hiv)); \
        } \
    } while (0)

#include "nhwc_depthwise_avx2_groups.h"

__attribute__((target("avx2,fma")))
static void depthwise_avx2(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                           long end_row, float *out, const float *residual, int epilogue, float lo, float hi) {
    const long C = g->channels;
    const __m256 lov = _mm256_set1_ps(lo), hiv = _mm256_set1_ps(hi);
    const long whole = C / 8 * 8;
    const int groups = dw7_groups_avx2_handles(g);
    for (long y = first_row; y < end_row; y++)
        for (long x = 0; x < g->out_width; x++) {
            if (groups && dw7_group_fits(g, x)) {
                const long top = y - g->pad_top;
                const long i0 = top < 0 ? -top : 0, i1 = g->in_height - top < 7 ? g->in_height - top : 7;
                for (long c = 0; c < C; c += 8) dw7_group_avx2(g, in, weights, bias, c, y, i0, i1, x, out, residual, epilogue, lov, hiv);
                x += DW7_GROUP - 1;
                continue;
            }
            // Channels past the last whole vector one at a time (masked AVX2 stores are slow on AMD Zen).
            DW_PIXEL_WALK(DW256_BLOCK, 8, if (whole < C) pixel_scalar(g, in, weights, bias, y, x, whole, C, o, res, epilogue, lo, hi));
        }
}

void osprey_nhwc_depthwise_f32(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                               long end_row, float *out, const float *residual, int epilogue, float lo, float hi) {
    if (osprey_float_avx512()) depthwise_avx512(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lo, hi);
    else if (osprey_float_activations_fast()) depthwise_avx2(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lo, hi);
    else depthwise_portable(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lo, hi);
}

#else

void osprey_nhwc_depthwise_f32(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                               long end_row, float *out, const float *residual, int epilogue, float lo, float hi) {
    depthwise_portable(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lo, hi);
}

#endif
