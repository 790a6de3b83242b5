#ifndef OSPREY_DEPTHWISE_PLANE_H
#define OSPREY_DEPTHWISE_PLANE_H

/// Epilogue of `osprey_depthwise_plane_f32`: min(max(x, lo), hi) (identity with infinite bounds, Relu, Clip),
/// SiLU, Sigmoid or HardSwish (x * min(max(x / 6 + 1/2, 0), 1)).
enum { OSPREY_DW_CLAMP = 0, OSPREY_DW_SILU = 1, OSPREY_DW_SIGMOID = 2, OSPREY_DW_HARDSWISH = 3 };

/// One output plane of a depthwise convolution laid out as a flat window (Engine's FlatWindowLayout):
/// out[y * width + x] = f(bias + sum_t weights[t] * bases[t][y * row_width + x] + residual[y * width + x])
/// for y < rows, x < width, written straight to the NCHW plane with the epilogue in registers (row ends through
/// whole-vector stores that run into the next row before it is written). Reads bases[t][j] for j < (rows - 1) * row_width + width rounded up to 16.
/// AVX-512F body (masked row tails, no over-read) where `osprey_float_avx512()` is 1, else AVX2 + FMA: only call
/// when `osprey_float_activations_fast()` is 1.
void osprey_depthwise_plane_f32(const float *const *bases, int taps, const float *weights, float bias, int rows, int row_width,
                                int width, float *out, const float *residual, int epilogue, float lo, float hi);


#endif
