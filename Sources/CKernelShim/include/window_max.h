#ifndef OSPREY_WINDOW_MAX_H
#define OSPREY_WINDOW_MAX_H

/// MaxPool output rows [first, first + count) of an NCHW tensor, the rows of all planes counted in order (row r is
/// row r % out_h of plane r / out_h), out_w <= 1024: unit dilations, column stride 1 (kernel width <= 16) or 2
/// (kernel width <= 4), any row stride, kernel height and pads; cells outside the input count as -infinity, so a
/// window wholly in the padding gives -infinity, as ONNX specifies.
/// AVX-512F (masked loads clip the row ends, no over-read): only call when `osprey_float_avx512()` is 1.
void osprey_maxpool_rows_f32(const float *in, float *out, long first, long count, int in_h, int in_w, int out_h, int out_w,
                             int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left);

#endif
