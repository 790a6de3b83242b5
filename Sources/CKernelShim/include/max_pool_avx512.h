#ifndef OSPREY_MAX_POOL_AVX512_H
#define OSPREY_MAX_POOL_AVX512_H

/// Floats (a multiple of 16) of `row` scratch `osprey_max_pool_3x3s2_avx512` needs for these row widths.
long osprey_max_pool_3x3s2_row_floats(long out_width, long in_width, long pad_left);

/// MaxPool 3x3, stride 2, dilation 1 over one plane [in_height][in_width] into [out_height][out_width]:
/// out[y][x] = max of in[2y - pad_top + i][2x - pad_left + j], i, j < 3, over the cells inside the plane (-inf when
/// none: ceil_mode windows past the edge). Each output row first folds its (up to) three input rows into `row`
/// (`osprey_max_pool_3x3s2_row_floats` floats, its borders -inf), then takes the three-column maxima at stride 2
/// from it. max(a, b) is (b > a ? b : a) as the Swift kernels' fold. pad_left must be 0...2. Only call when
/// `osprey_float_avx512()` is 1.
void osprey_max_pool_3x3s2_avx512(const float *in, long in_height, long in_width, float *out, long out_height, long out_width,
                                  long pad_top, long pad_left, float *row);

#endif
