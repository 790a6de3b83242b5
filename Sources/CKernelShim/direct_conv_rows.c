// A direct convolution for stems (3 input channels, 3x3 or 7x7, stride 2): K = 27 taps made im2col packing cost as
// much as the product in the dense path. Each tap of an output row is a contiguous run of one column phase of an
// input row, so the product loads its columns straight from the phase rows: 8 output channels x 32 columns in 16
// zmm accumulators over all K taps. Engine's `convolutionReference` is the twin.
#include "include/direct_conv_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include "avx512_math.h"

/// Columns [lo, hi) of phases 0 and 1 of a stride-2 row (`s` at column -pad_left): 32 source columns split by two
/// permutes, the ends one by one.
OSPREY_AVX512
static void split_pair(const float *s, long lo, long hi, float *even, float *odd) {
    const __m512i pick_even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i pick_odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    long t = lo;
    for (; t + 16 <= hi; t += 16) {
        const __m512 a = _mm512_loadu_ps(s + 2 * t), b = _mm512_loadu_ps(s + 2 * t + 16);
        _mm512_storeu_ps(even + t, _mm512_permutex2var_ps(a, pick_even, b));
        _mm512_storeu_ps(odd + t, _mm512_permutex2var_ps(a, pick_odd, b));
    }
    for (; t < hi; t++) { even[t] = s[2 * t]; odd[t] = s[2 * t + 1]; }
}

OSPREY_AVX512
void osprey_conv_phase_rows_f32(const float *in, int channels, int height, int width, int first_row, int rows, int stride,
                                int pad_left, long phase_len, float *out) {
    for (int c = 0; c < channels; c++) {
        for (int r = 0; r < rows; r++) {
            const int iy = first_row + r;
            const float *src = in + ((long)c * height + iy) * width;
            float *row = out + ((long)c * rows + r) * stride * phase_len;
            if (iy < 0 || iy >= height) {
                for (long t = 0; t < stride * phase_len; t++) row[t] = 0;
                continue;
            }
            if (stride == 2) {
                // Both phases read whole: t in [lo, hi) when columns 2t - pad_left and 2t + 1 - pad_left are in the row.
                long lo = (pad_left + 1) / 2, hi = ((long)width + pad_left) / 2;
                if (hi > phase_len) hi = phase_len;
                if (lo > hi) lo = hi;
                float *even = row, *odd = row + phase_len;
                for (long t = 0; t < phase_len; t++) {
                    if (t == lo) t = hi;
                    if (t == phase_len) break;
                    const long x0 = 2 * t - pad_left, x1 = x0 + 1;
                    even[t] = x0 >= 0 && x0 < width ? src[x0] : 0;
                    odd[t] = x1 >= 0 && x1 < width ? src[x1] : 0;
                }
                split_pair(src - pad_left, lo, hi, even, odd);
                continue;
            }
            for (int f = 0; f < stride; f++) {
                float *dst = row + (long)f * phase_len;
                for (long t = 0; t < phase_len; t++) {
                    const long x = t * stride + f - pad_left;
                    dst[t] = x >= 0 && x < width ? src[x] : 0;
                }
            }
        }
    }
}

/// min(max(v, lo), hi) by compare and select, keeping a NaN as Swift's clamp does (the tiles' epilogue).
OSPREY_AVX512 __attribute__((always_inline))
static inline __m512 clamp16(__m512 v, __m512 lo, __m512 hi) {
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), v, hi);
}

/// SiLU, the logistic function or HardSwish (`finish16`) over `count` floats in place: a pass over a row the tiles
/// just stored, while it is in L1 (inside the tiles, the function's constants spilled the accumulators: 1.4x slower).
OSPREY_AVX512
static void finish_run(float *p, long count, int epilogue) {
    const __m512 none_lo = _mm512_set1_ps(-INFINITY), none_hi = _mm512_set1_ps(INFINITY);
    long i = 0;
    for (; i + 16 <= count; i += 16) _mm512_storeu_ps(p + i, finish16(_mm512_loadu_ps(p + i), epilogue, none_lo, none_hi));
    if (i < count) {
        const __mmask16 m = (__mmask16)((1u << (count - i)) - 1u);
        _mm512_mask_storeu_ps(p + i, m, finish16(_mm512_maskz_loadu_ps(m, p + i), epilogue, none_lo, none_hi));
    }
}

/// Taps the kernel takes (its offsets live on the stack).
#define MAX_TAPS 256

/// 8 channels x (16 * V) columns from x: V = 2 or 1 vectors per channel, `store` masking the last vector's columns.
#define DIRECT_TILE(V) \
    do { \
        __m512 acc[8][V]; \
        for (int r = 0; r < 8; r++) for (int v = 0; v < V; v++) acc[r][v] = _mm512_set1_ps(start[r]); \
        const float *row = base + x; \
        for (int k = 0; k < taps; k++) { \
            __m512 b[V]; \
            for (int v = 0; v < V; v++) b[v] = _mm512_loadu_ps(row + offsets[k] + 16 * v); \
            const float *w = wb + 8 * k; \
            for (int r = 0; r < 8; r++) { \
                const __m512 a = _mm512_set1_ps(w[r]); \
                for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]); \
            } \
        } \
        for (int r = 0; r < rows; r++) { \
            float *o = out + (long)(8 * mb + r) * out_channel_stride + (long)y * out_w + x; \
            for (int v = 0; v < V; v++) { \
                const __m512 c = clamp16(acc[r][v], low, high); \
                if (v == V - 1) _mm512_mask_storeu_ps(o + 16 * v, last, c); else _mm512_storeu_ps(o + 16 * v, c); \
            } \
        } \
    } while (0)

/// Fills `offsets` with each tap's start in the phase rows (tap k = (c, i, j) reads phase j % stride_w of row i of
/// channel c, from column j / stride_w) and `bounds` with the clamp the stores apply (none unless the epilogue is a
/// clamp: other activations run over the stored row); returns the taps, 0 when they are none or more than MAX_TAPS.
static int direct_setup(long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w, int stride_w, int epilogue,
                        float lo, float hi, long *offsets, float bounds[2]) {
    const int taps = in_channels * kernel_h * kernel_w;
    if (taps > MAX_TAPS || taps <= 0) return 0;
    for (int c = 0, k = 0; c < in_channels; c++)
        for (int i = 0; i < kernel_h; i++)
            for (int j = 0; j < kernel_w; j++, k++)
                offsets[k] = (((long)c * rows_in + i) * stride_w + j % stride_w) * phase_len + j / stride_w;
    const int clamps = epilogue == OSPREY_DW_CLAMP;
    bounds[0] = clamps ? lo : -INFINITY;
    bounds[1] = clamps ? hi : INFINITY;
    return taps;
}

OSPREY_AVX512
void osprey_direct_conv_rows_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                 int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                 long out_channel_stride, int out_rows, int out_w, int epilogue, float lo, float hi) {
    long offsets[MAX_TAPS];
    float bounds[2];
    const int taps = direct_setup(phase_len, rows_in, in_channels, kernel_h, kernel_w, stride_w, epilogue, lo, hi, offsets, bounds);
    if (taps == 0) return;
    const __m512 low = _mm512_set1_ps(bounds[0]), high = _mm512_set1_ps(bounds[1]);
    const int blocks = (out_channels + 7) / 8;
    // Row by row, every channel block over it: the row's taps (a few KB) and the weights stay in L1.
    for (int y = 0; y < out_rows; y++) {
        const float *base = phases + (long)y * stride_h * stride_w * phase_len;
        for (int mb = 0; mb < blocks; mb++) {
            const float *wb = weights + (long)mb * taps * 8;
            const int rows = out_channels - 8 * mb < 8 ? out_channels - 8 * mb : 8;
            float start[8];
            for (int r = 0; r < 8; r++) start[r] = bias && r < rows ? bias[8 * mb + r] : 0;
            for (int x = 0; x < out_w; x += 32) {
                const int n = out_w - x;
                if (n > 16) {
                    const __mmask16 last = n >= 32 ? (__mmask16)0xffff : (__mmask16)((1u << (n - 16)) - 1u);
                    DIRECT_TILE(2);
                } else {
                    const __mmask16 last = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
                    DIRECT_TILE(1);
                }
            }
        }
        if (epilogue != OSPREY_DW_CLAMP)
            for (int m = 0; m < out_channels; m++) finish_run(out + m * out_channel_stride + (long)y * out_w, out_w, epilogue);
    }
}

/// P pixels x 32 channels from pixel x of row y: 16 zmm accumulators over all taps (each tap's pixels broadcast from
/// its phase row, its weights two vectors), clamped and stored under the channel masks.
#define NHWC_TILE(P) \
    do { \
        __m512 acc[P][2]; \
        for (int p = 0; p < P; p++) { acc[p][0] = start0; acc[p][1] = start1; } \
        const float *row = base + x; \
        for (int k = 0; k < taps; k++) { \
            const __m512 w0 = _mm512_loadu_ps(wb + 32 * k), w1 = _mm512_loadu_ps(wb + 32 * k + 16); \
            const float *src = row + offsets[k]; \
            for (int p = 0; p < P; p++) { \
                const __m512 a = _mm512_set1_ps(src[p]); \
                acc[p][0] = _mm512_fmadd_ps(a, w0, acc[p][0]); \
                acc[p][1] = _mm512_fmadd_ps(a, w1, acc[p][1]); \
            } \
        } \
        for (int p = 0; p < P; p++) { \
            float *o = out + ((long)y * out_w + x + p) * out_channels + 32 * cb; \
            _mm512_mask_storeu_ps(o, m0, clamp16(acc[p][0], low, high)); \
            _mm512_mask_storeu_ps(o + 16, m1, clamp16(acc[p][1], low, high)); \
        } \
    } while (0)

/// `NHWC_TILE` for a block of at most 16 channels: P pixels x 16 channels in P accumulators (a 16-channel stem,
/// PP-OCR's, would leave half of `NHWC_TILE`'s lanes masked).
#define NHWC_TILE_HALF(P) \
    do { \
        __m512 acc[P]; \
        for (int p = 0; p < P; p++) acc[p] = start0; \
        const float *row = base + x; \
        for (int k = 0; k < taps; k++) { \
            const __m512 w0 = _mm512_loadu_ps(wb + 32 * k); \
            const float *src = row + offsets[k]; \
            for (int p = 0; p < P; p++) acc[p] = _mm512_fmadd_ps(_mm512_set1_ps(src[p]), w0, acc[p]); \
        } \
        for (int p = 0; p < P; p++) \
            _mm512_mask_storeu_ps(out + ((long)y * out_w + x + p) * out_channels + 32 * cb, m0, clamp16(acc[p], low, high)); \
    } while (0)

OSPREY_AVX512
void osprey_direct_conv_rows_nhwc_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                      int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                      int out_rows, int out_w, int epilogue, float lo, float hi) {
    long offsets[MAX_TAPS];
    float bounds[2];
    const int taps = direct_setup(phase_len, rows_in, in_channels, kernel_h, kernel_w, stride_w, epilogue, lo, hi, offsets, bounds);
    if (taps == 0) return;
    const __m512 low = _mm512_set1_ps(bounds[0]), high = _mm512_set1_ps(bounds[1]);
    const int blocks = (out_channels + 31) / 32;
    for (int y = 0; y < out_rows; y++) {
        const float *base = phases + (long)y * stride_h * stride_w * phase_len;
        for (int cb = 0; cb < blocks; cb++) {
            const float *wb = weights + (long)cb * taps * 32;
            const int left = out_channels - 32 * cb;
            const __mmask16 m0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            const __mmask16 m1 = left >= 32 ? (__mmask16)0xffff : left <= 16 ? (__mmask16)0 : (__mmask16)((1u << (left - 16)) - 1u);
            const __m512 start0 = bias ? _mm512_maskz_loadu_ps(m0, bias + 32 * cb) : _mm512_setzero_ps();
            const __m512 start1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 32 * cb + 16) : _mm512_setzero_ps();
            int x = 0;
            if (left <= 16) {
                for (; x + 16 <= out_w; x += 16) NHWC_TILE_HALF(16);
                for (; x < out_w; x++) NHWC_TILE_HALF(1);
                continue;
            }
            for (; x + 8 <= out_w; x += 8) NHWC_TILE(8);
            for (; x < out_w; x++) NHWC_TILE(1);
        }
        if (epilogue != OSPREY_DW_CLAMP) finish_run(out + (long)y * out_w * out_channels, (long)out_w * out_channels, epilogue);
    }
}

#else

void osprey_direct_conv_rows_nhwc_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                      int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                      int out_rows, int out_w, int epilogue, float lo, float hi) {
    (void)phases; (void)phase_len; (void)rows_in; (void)in_channels; (void)kernel_h; (void)kernel_w; (void)stride_h;
    (void)stride_w; (void)weights; (void)bias; (void)out_channels; (void)out; (void)out_rows; (void)out_w; (void)epilogue; (void)lo; (void)hi;
}

void osprey_conv_phase_rows_f32(const float *in, int channels, int height, int width, int first_row, int rows, int stride,
                                int pad_left, long phase_len, float *out) {
    (void)in; (void)channels; (void)height; (void)width; (void)first_row; (void)rows; (void)stride; (void)pad_left;
    (void)phase_len; (void)out;
}

void osprey_direct_conv_rows_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                 int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                 long out_channel_stride, int out_rows, int out_w, int epilogue, float lo, float hi) {
    (void)phases; (void)phase_len; (void)rows_in; (void)in_channels; (void)kernel_h; (void)kernel_w; (void)stride_h;
    (void)stride_w; (void)weights; (void)bias; (void)out_channels; (void)out; (void)out_channel_stride; (void)out_rows;
    (void)out_w; (void)epilogue; (void)lo; (void)hi;
}

#endif
