// e^x, the logistic function, HardSwish, GELU and the float conv epilogue on 16 AVX-512F lanes (exp16, logistic16,
// hard_swish16, gelu16, finish16): float_lanes_body.h's steps and constants, as avx2_logistic.h's 8-lane versions,
// for the AVX-512 bodies of this target (not part of the module's public headers). Include after <immintrin.h>, on
// x86-64 only.
#ifndef OSPREY_AVX512_MATH_H
#define OSPREY_AVX512_MATH_H

#include "include/depthwise_plane.h"

#define OSPREY_AVX512 __attribute__((target("avx512f,fma")))

#define LANES_N 16
#define LANES_BITS 512
#include "float_lanes_body.h"

#endif
