#ifndef OSPREY_TRANSPOSE_TILES_H
#define OSPREY_TRANSPOSE_TILES_H

/// 1 when this CPU runs `osprey_transpose_u32` (AVX, cpuid checked once); callers keep their portable loop otherwise.
int osprey_transpose_tiles_fast(void);

/// dst[j * rows + i] = src[i * columns + j] for 4-byte elements, i < rows, first_column <= j < end_column (a share of
/// the columns, so threads can split one matrix). Only call when `osprey_transpose_tiles_fast()` is 1.
void osprey_transpose_u32(const void *source, void *destination, long rows, long columns, long first_column, long end_column);

/// destination[j * destination_stride + i] = source[i * source_stride + j] * scale for i < rows, j < columns (an
/// attention head's keys, read in their rows of the projection, into K^T, times the export's scalar). Only call when
/// `osprey_transpose_tiles_fast()` is 1.
void osprey_transpose_scaled_f32(const float *source, long source_stride, float *destination, long destination_stride, long rows,
                                 long columns, float scale);

#endif
