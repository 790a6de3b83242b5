// The AVX-512 body of the channels-last 3x3, 5x5 and 7x7 depthwise convolutions at stride 1 or 2 (nhwc_depthwise.c's
// private part; include after avx512_math.h). One 16-channel block at a time walks every output row of the call, so
// the block's slice of the input stays in L1; each row goes in groups of up to eight pixels with one accumulator per
// pixel, and each input vector loaded serves every pixel of the group whose taps cover it. Taps outside the image are
// skipped per kernel row and per column of the group, so border pixels take the same body as interior ones: on small
// planes (7x7 and 14x14 with a 5x5 kernel, where most pixels touch a border) the per-pixel border path was twice
// onnxruntime's time. The loops over taps and pixels carry clang's full-unroll pragma: left to itself clang kept the
// column loop rolled and the weights in a stack array indexed at run time, which made the body twice as slow.
#ifndef OSPREY_NHWC_DEPTHWISE_GROUPS_H
#define OSPREY_NHWC_DEPTHWISE_GROUPS_H

/// The most pixels one group holds (eight accumulators, up to seven weights and the loaded vector stay in registers).
enum { DW_GROUP_MAX = 8 };

/// Channels [c, c + 16) (mask `m`; plain loads when `full`, see LOAD16) of output pixels [x, x + N) of row y, whose
/// kernel rows [i0, i1) lie inside the image; `checked` is 0 when every column the group reads lies inside it.
OSPREY_AVX512 __attribute__((always_inline))
static inline void dw_group(const int K, const int S, const int N, const int checked, const int full, const geometry_t *g, const float *in,
                            const float *weights, __m512 start, long c, __mmask16 m, long y, long i0, long i1, long x,
                            float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    const long C = g->channels, W = g->in_width;
    const long top = y * g->stride_height - g->pad_top, left = x * S - g->pad_left;
    __m512 acc[DW_GROUP_MAX];
    _Pragma("clang loop unroll(full)")
    for (int p = 0; p < N; p++) acc[p] = start;
    for (long i = i0; i < i1; i++) {
        __m512 w[7];
        _Pragma("clang loop unroll(full)")
        for (int j = 0; j < K; j++) w[j] = LOAD16(full, m, weights + (i * K + j) * C + c);
        const float *row = in + ((top + i) * W + left) * C + c;
        _Pragma("clang loop unroll(full)")
        for (int col = 0; col < (N - 1) * S + K; col++) {
            if (checked && (left + col < 0 || left + col >= W)) continue;
            const __m512 v = LOAD16(full, m, row + col * C);
            _Pragma("clang loop unroll(full)")
            for (int p = 0; p < N; p++) {
                const int j = col - S * p;
                if (j >= 0 && j < K) acc[p] = _mm512_fmadd_ps(v, w[j], acc[p]);
            }
        }
    }
    _Pragma("clang loop unroll(full)")
    for (int p = 0; p < N; p++) {
        const long at = (y * g->out_width + x + p) * C + c;
        __m512 a = acc[p];
        if (residual) a = _mm512_add_ps(a, LOAD16(full, m, residual + at));
        _mm512_mask_storeu_ps(out + at, m, finish16(a, epilogue, lov, hiv));
    }
}

/// One group of n (1...8) pixels: `dw_group` with the pixel count, kernel size, stride and flags as constants.
#define DW_GROUP_SWITCH(K, S, checked, full) do { \
        switch (n) { \
        case 1: dw_group(K, S, 1, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 2: dw_group(K, S, 2, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 3: dw_group(K, S, 3, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 4: dw_group(K, S, 4, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 5: dw_group(K, S, 5, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 6: dw_group(K, S, 6, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        case 7: dw_group(K, S, 7, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        default: dw_group(K, S, 8, checked, full, g, in, weights, start, c, m, y, i0, i1, x, out, residual, epilogue, lov, hiv); break; \
        } \
    } while (0)

/// Output rows [first_row, end_row) for a K x K kernel at column stride S: channel blocks outermost, each row cut
/// into groups of nearly equal size (7 + 7 for 14 columns rather than 8 + 6, so no group runs short of accumulators).
#define DW_GROUPS_BODY(K, S) do { \
        const long C = g->channels, OW = g->out_width; \
        const long groups = (OW + DW_GROUP_MAX - 1) / DW_GROUP_MAX; \
        for (long c = 0; c < C; c += 16) { \
            const __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1); \
            const __m512 start = bias ? LOAD16(C - c >= 16, m, bias + c) : _mm512_setzero_ps(); \
            for (long y = first_row; y < end_row; y++) { \
                const long top = y * g->stride_height - g->pad_top; \
                const long i0 = top < 0 ? -top : 0, i1 = g->in_height - top < K ? g->in_height - top : K; \
                for (long q = 0; q < groups; q++) { \
                    const long x = OW * q / groups, n = OW * (q + 1) / groups - x; \
                    const long left = x * (S) - g->pad_left; \
                    if (C - c < 16) DW_GROUP_SWITCH(K, S, 1, 0); \
                    else if (left >= 0 && left + (n - 1) * (S) + (K) <= g->in_width) DW_GROUP_SWITCH(K, S, 0, 1); \
                    else DW_GROUP_SWITCH(K, S, 1, 1); \
                } \
            } \
        } \
    } while (0)

/// The four kernel-size and stride variants, each a function so its groups are compiled with constants.
#define DW_GROUPS_FUNCTION(name, K, S) \
    OSPREY_AVX512 static void name(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row, \
                                   long end_row, float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) { \
        DW_GROUPS_BODY(K, S); \
    }
DW_GROUPS_FUNCTION(dw_groups_k3s1, 3, 1)
DW_GROUPS_FUNCTION(dw_groups_k3s2, 3, 2)
DW_GROUPS_FUNCTION(dw_groups_k5s1, 5, 1)
DW_GROUPS_FUNCTION(dw_groups_k5s2, 5, 2)
DW_GROUPS_FUNCTION(dw_groups_k7s1, 7, 1)

/// Whether `dw_groups` handles `g`: a square 3x3 or 5x5 kernel at column stride 1 or 2, or a 7x7 one (ConvNeXt's)
/// at column stride 1 (any row stride).
static inline int dw_groups_handles(const geometry_t *g) {
    const long k = g->kernel_height;
    if (k != g->kernel_width) return 0;
    if (k == 7) return g->stride_width == 1;
    return (k == 3 || k == 5) && (g->stride_width == 1 || g->stride_width == 2);
}

/// Output rows [first_row, end_row) of a geometry `dw_groups_handles` accepts.
OSPREY_AVX512 static void dw_groups(const geometry_t *g, const float *in, const float *weights, const float *bias, long first_row,
                                    long end_row, float *out, const float *residual, int epilogue, __m512 lov, __m512 hiv) {
    const int five = g->kernel_height == 5, two = g->stride_width == 2;
    if (g->kernel_height == 7) dw_groups_k7s1(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lov, hiv);
    else if (five) (two ? dw_groups_k5s2 : dw_groups_k5s1)(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lov, hiv);
    else (two ? dw_groups_k3s2 : dw_groups_k3s1)(g, in, weights, bias, first_row, end_row, out, residual, epilogue, lov, hiv);
}

#endif
