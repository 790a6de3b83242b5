// e^x, the logistic function, HardSwish, GELU and the float conv epilogue on 8 AVX2 + FMA lanes (exp8, logistic8,
// hard_swish8, gelu8, finish8), shared by the float kernels of this target (not part of the module's public headers:
// Swift never sees these). Include after <immintrin.h>, on x86-64 only.
#ifndef OSPREY_AVX2_LOGISTIC_H
#define OSPREY_AVX2_LOGISTIC_H

#include "include/depthwise_plane.h"

#define LANES_N 8
#define LANES_BITS 256
#include "float_lanes_body.h"

#endif
