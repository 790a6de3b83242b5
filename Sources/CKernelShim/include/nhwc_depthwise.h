#ifndef OSPREY_NHWC_DEPTHWISE_H
#define OSPREY_NHWC_DEPTHWISE_H

/// One image of a channels-last depthwise convolution (dilation 1, one filter per channel).
typedef struct {
    long in_height, in_width, channels;
    long kernel_height, kernel_width, stride_height, stride_width, pad_top, pad_left;
    long out_height, out_width;
} osprey_nhwc_depthwise_geometry;

/// out[y][x][c] = f(bias[c] + sum_{i,j} weights[(i * kernel_width + j) * channels + c] * in[y*sh - pt + i][x*sw - pl + j][c]
///                  + residual[y][x][c]) for first_row <= y < end_row, every x and c; taps outside the image are skipped
/// (no padded copy). `in` is [in_height][in_width][channels], `out` and `residual` (or null) [out_height][out_width][channels],
/// `bias` null for none. f is the depthwise plane kernel's epilogue (OSPREY_DW_CLAMP with lo/hi, SILU, SIGMOID, HARDSWISH).
/// AVX-512F body (16 channels a vector, masked tail) where `osprey_float_avx512()` is 1, AVX2 + FMA (8 a vector) where
/// `osprey_float_activations_fast()` is 1, a plain loop otherwise.
void osprey_nhwc_depthwise_f32(const osprey_nhwc_depthwise_geometry *geometry, const float *in, const float *weights, const float *bias,
                               long first_row, long end_row, float *out, const float *residual, int epilogue, float lo, float hi);

#endif
