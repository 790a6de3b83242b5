#ifndef OSPREY_DIRECT_CONV_ROWS_H
#define OSPREY_DIRECT_CONV_ROWS_H

/// Splits `rows` input rows (image rows first_row, first_row + 1, ...) of each of `channels` NCHW planes
/// (`height` x `width`, planes `height * width` apart) into `stride` column phases, zero outside the image:
/// out[((c * rows + r) * stride + f) * phase_len + t] = in[c][first_row + r][t * stride + f - pad_left].
/// A strided convolution's taps then read whole runs of one phase. AVX-512F: only call when `osprey_float_avx512()` is 1.
void osprey_conv_phase_rows_f32(const float *in, int channels, int height, int width, int first_row, int rows, int stride,
                                int pad_left, long phase_len, float *out);

/// Output rows [0, out_rows) of a dense convolution with few input taps (K = in_channels * kernel_h * kernel_w <= 256,
/// dilation 1), from the phase rows of `osprey_conv_phase_rows_f32` (row y tap (c, i, j) reads phase j % stride_w of
/// row y * stride_h + i at column x + j / stride_w; the buffer readable 32 floats past its end). `weights` are
/// [ceil(M / 8)][K][8] (channels past M zero), `bias` [M] or NULL; out[m * out_channel_stride + y * out_w + x] is
/// bias + sum through the epilogue (an `OSPREY_DW_*` code; lo and hi bound OSPREY_DW_CLAMP). AVX-512F: only call when `osprey_float_avx512()` is 1.
void osprey_direct_conv_rows_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                 int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                 long out_channel_stride, int out_rows, int out_w, int epilogue, float lo, float hi);

/// `osprey_direct_conv_rows_f32` into NHWC rows: out[(y * out_w + x) * out_channels + m], weights [ceil(M / 32)][K][32]
/// (channels past M zero). AVX-512F: only call when `osprey_float_avx512()` is 1.
void osprey_direct_conv_rows_nhwc_f32(const float *phases, long phase_len, int rows_in, int in_channels, int kernel_h, int kernel_w,
                                      int stride_h, int stride_w, const float *weights, const float *bias, int out_channels, float *out,
                                      int out_rows, int out_w, int epilogue, float lo, float hi);

#endif
