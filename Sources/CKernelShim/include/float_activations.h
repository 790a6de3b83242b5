#ifndef OSPREY_FLOAT_ACTIVATIONS_H
#define OSPREY_FLOAT_ACTIVATIONS_H

/// 1 when this CPU runs the AVX2 + FMA bodies below (cpuid, checked once); the callers keep their portable path otherwise.
int osprey_float_activations_fast(void);

/// data[i] = f(data[i] + addend + (residual ? residual[i] : 0)) for i < count, with f the logistic sigmoid
/// (`silu` 0) or x * sigmoid(x) (`silu` 1): e^x as Cephes' expf with FMA, 1 / (1 + e^-x) through a reciprocal
/// estimate and one Newton step (relative error about 2e-7). Only call when `osprey_float_activations_fast()` is 1.
void osprey_logistic_f32(float *data, long count, float addend, const float *residual, int silu);

#endif
