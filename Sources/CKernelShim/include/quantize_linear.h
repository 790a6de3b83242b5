#ifndef OSPREY_QUANTIZE_LINEAR_H
#define OSPREY_QUANTIZE_LINEAR_H

#include <stdint.h>

/// out[i] = saturate(round_half_even(x[i] / scale) + zero) as uint8 (`is_signed` 0) or int8 bytes; NaN gives 0.
/// `zero` is an integer in the output type's range.
void osprey_quantize_f32(const float *x, long count, float scale, float zero, int is_signed, uint8_t *out);

/// out[i] = saturate(round_half_even(float(sums[i]) * multiplier) + zero) as uint8 / int8 bytes (NaN gives 0).
void osprey_requantize_i32(const int32_t *sums, long count, float multiplier, float zero, int is_signed, uint8_t *out);

/// out[i] = (float(q[i]) - zero) * scale for uint8 (`is_signed` 0) or int8 values.
void osprey_dequantize_u8(const uint8_t *q, long count, float scale, float zero, int is_signed, float *out);

/// The smallest and largest non-NaN values of x together with 0 (DynamicQuantizeLinear's range).
void osprey_range_with_zero_f32(const float *x, long count, float *low, float *high);

#endif
