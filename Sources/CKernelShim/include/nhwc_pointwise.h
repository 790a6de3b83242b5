#ifndef OSPREY_NHWC_POINTWISE_H
#define OSPREY_NHWC_POINTWISE_H

/// 1 when this CPU runs `osprey_nhwc_pointwise_f32` (its AVX-512F body; `osprey_float_avx512()`); callers keep the
/// packed product's own path otherwise.
int osprey_nhwc_pointwise_fast(void);

/// out[r][j] = f(bias[j] + sum_p a[r * lda + p] * B[p][j] + residual[r * columns + j]) for first_row <= r < end_row,
/// j < columns, with B packed as PackedMatrixB does ([strip][depth][16], columns past `columns` zero); `out` and
/// `residual` (or null) are dense rows of `columns`, `bias` null for none. f is the depthwise plane kernel's epilogue
/// (OSPREY_DW_CLAMP with lo/hi, SILU, SIGMOID, HARDSWISH), applied in registers before the one store.
/// Only call when `osprey_nhwc_pointwise_fast()` is 1.
void osprey_nhwc_pointwise_f32(long first_row, long end_row, long depth, const float *a, long lda, const float *packed, long columns,
                               const float *bias, const float *residual, float *out, int epilogue, float lo, float hi);

/// `osprey_nhwc_pointwise_f32` on the columns of strips first_strip <= s < end_strip only (strip s is columns 16s..16s+15,
/// cut at `columns`): a thread's share when the rows alone are too few to split. Each output element is computed
/// exactly as the whole product computes it. Only call when `osprey_nhwc_pointwise_fast()` is 1.
void osprey_nhwc_pointwise_f32_strips(long first_row, long end_row, long first_strip, long end_strip, long depth, const float *a,
                                      long lda, const float *packed, long columns, const float *bias, const float *residual,
                                      float *out, int epilogue, float lo, float hi);

#endif
