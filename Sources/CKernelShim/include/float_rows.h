#ifndef OSPREY_FLOAT_ROWS_H
#define OSPREY_FLOAT_ROWS_H

/// Softmax over each of `rows` rows of `columns` floats of `source` into `data` (the same pointer for in place):
/// e^(x - max) / sum (Cephes' expf in AVX2 + FMA, or AVX-512F where `osprey_float_avx512()` is 1).
/// A row that comes out NaN (a NaN or +inf input, or every input -inf) is written as `fill_value` throughout with
/// `fill` 1, as NaN otherwise. Only call when
/// `osprey_float_activations_fast()` is 1 (VectorMath's softmaxRows is the portable path).
void osprey_softmax_rows_f32(const float *source, float *data, long rows, long columns, int fill, float fill_value);

/// data[i] = 0.5 x (1 + erf(x / sqrt 2)) in place for i < count: GELU with the same clamped rational erf as
/// VectorMath's vectorErf, in AVX2 + FMA (AVX-512F where `osprey_float_avx512()` is 1). Only call when `osprey_float_activations_fast()` is 1.
void osprey_gelu_f32(float *data, long count);

/// data[i] = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in place for i < count (GELU's tanh form), computed as
/// x * sigmoid(2u) with the logistic kernels' exp; AVX-512F where `osprey_float_avx512()` is 1. Only call when
/// `osprey_float_activations_fast()` is 1 (Activation.applyPortable is the portable path).
void osprey_gelu_tanh_f32(float *data, long count);

#endif
