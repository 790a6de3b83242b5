#ifndef OSPREY_FLOAT_ACTIVATIONS_H
#define OSPREY_FLOAT_ACTIVATIONS_H

/// 1 when this CPU runs the AVX2 + FMA bodies below (cpuid, checked once); the callers keep their portable path otherwise.
int osprey_float_activations_fast(void);

/// 1 when the float kernels run their AVX-512F bodies: the CPU has AVX-512F (cpuid, checked once) and they are not
/// switched off; the AVX2 + FMA bodies run otherwise.
int osprey_float_avx512(void);

/// Switches the AVX-512F bodies off (0) or back on (1, where the CPU has them), so tests cover both bodies on one
/// machine; returns `osprey_float_avx512()`. Not for use while kernels run on other threads.
int osprey_float_avx512_enable(int on);

/// data[i] = f(data[i] + addend + (residual ? residual[i] : 0)) for i < count, with f the logistic sigmoid
/// (`silu` 0) or x * sigmoid(x) (`silu` 1): e^x as Cephes' expf with FMA, 1 / (1 + e^-x) through a reciprocal
/// estimate and one Newton step (relative error about 2e-7); AVX-512F body where `osprey_float_avx512()` is 1. Only call
/// when `osprey_float_activations_fast()` is 1.
void osprey_logistic_f32(float *data, long count, float addend, const float *residual, int silu);

#endif
