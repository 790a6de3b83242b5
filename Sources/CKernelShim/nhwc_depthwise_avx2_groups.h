// The AVX2 body of the channels-last 7x7 depthwise convolution at stride 1 (ConvNeXt's; nhwc_depthwise.c's private
// part, include after avx2_logistic.h): interior pixels in groups of four, one accumulator each, the seven weights
// of a kernel row in registers, each input vector loaded once for every pixel of the group whose taps cover it
// (10 loads per kernel row instead of 56). The pixel-by-pixel body loaded a weight beside every input and ran
// ConvNeXt-T's depthwise convs 15% slower than the NCHW plane kernel.
#ifndef OSPREY_NHWC_DEPTHWISE_AVX2_GROUPS_H
#define OSPREY_NHWC_DEPTHWISE_AVX2_GROUPS_H

/// Pixels per AVX2 group: four accumulators, seven weights and the loaded vector fit the 16 registers.
enum { DW7_GROUP = 4 };

/// Channels [c, c + 8) of output pixels [x, x + 4) of row y, kernel rows [i0, i1) inside the image, every column the
/// group reads inside it.
__attribute__((target("avx2,fma"), always_inline))
static inline void dw7_group_avx2(const geometry_t *g, const float *in, const float *weights, const float *bias, long c, long y,
                                  long i0, long i1, long x, float *out, const float *residual, int epilogue, __m256 lov, __m256 hiv) {
    enum { K = 7 };
    const long C = g->channels, W = g->in_width;
    const long top = y - g->pad_top, left = x - g->pad_left;
    const __m256 start = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
    __m256 acc[DW7_GROUP];
    _Pragma("clang loop unroll(full)")
    for (int p = 0; p < DW7_GROUP; p++) acc[p] = start;
    for (long i = i0; i < i1; i++) {
        __m256 w[K];
        _Pragma("clang loop unroll(full)")
        for (int j = 0; j < K; j++) w[j] = _mm256_loadu_ps(weights + (i * K + j) * C + c);
        const float *row = in + ((top + i) * W + left) * C + c;
        _Pragma("clang loop unroll(full)")
        for (int col = 0; col < DW7_GROUP - 1 + K; col++) {
            const __m256 v = _mm256_loadu_ps(row + col * C);
            _Pragma("clang loop unroll(full)")
            for (int p = 0; p < DW7_GROUP; p++) {
                const int j = col - p;
                if (j >= 0 && j < K) acc[p] = _mm256_fmadd_ps(v, w[j], acc[p]);
            }
        }
    }
    _Pragma("clang loop unroll(full)")
    for (int p = 0; p < DW7_GROUP; p++) {
        const long at = (y * g->out_width + x + p) * C + c;
        __m256 a = acc[p];
        if (residual) a = _mm256_add_ps(a, _mm256_loadu_ps(residual + at));
        _mm256_storeu_ps(out + at, finish8(a, epilogue, lov, hiv));
    }
}

/// Whether the AVX2 groups take `g`: a 7x7 kernel at stride 1 and whole vectors of 8 channels.
static inline int dw7_groups_avx2_handles(const geometry_t *g) {
    return g->kernel_height == 7 && g->kernel_width == 7 && g->stride_height == 1 && g->stride_width == 1 && g->channels % 8 == 0;
}

/// Whether output pixels [x, x + 4) of a row are a group: every column they read lies inside the image.
static inline int dw7_group_fits(const geometry_t *g, long x) {
    const long left = x - g->pad_left;
    return x + DW7_GROUP <= g->out_width && left >= 0 && left + DW7_GROUP - 1 + 7 <= g->in_width;
}

#endif
