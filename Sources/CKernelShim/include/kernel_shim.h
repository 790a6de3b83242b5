#ifndef OSPREY_KERNEL_SHIM_H
#define OSPREY_KERNEL_SHIM_H

/// Hints the cache to fetch the line holding `address` for reading (Swift has no prefetch of its own).
static inline void osprey_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// Returns the allocator's free heap pages to the system (glibc's malloc_trim); 0 where there is none.
#if defined(__has_include) && __has_include(<malloc.h>)
#include <malloc.h>  /* first: it defines __GLIBC__ (through features.h) on glibc */
#endif
/// Fixes the size from which blocks get a mapping of their own, returned to the system when freed (1 on success).
#ifdef __GLIBC__
static inline int osprey_release_free_heap(void) { return malloc_trim(0); }
static inline int osprey_fix_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
static inline int osprey_fix_trim_threshold(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }
#else
static inline int osprey_release_free_heap(void) { return 0; }
static inline int osprey_fix_mmap_threshold(int bytes) { (void)bytes; return 0; }
static inline int osprey_fix_trim_threshold(int bytes) { (void)bytes; return 0; }
#endif

/// The integer GEMM behind the quantized operators (a compiled C kernel, quantized_gemm.c).
#include "quantized_gemm.h"
/// The fused-epilogue integer kernels of QLinearConv / ConvInteger / QLinearMatMul and the quantized elementwise ops.
#include "quantized_conv.h"
/// QuantizeLinear / DequantizeLinear / requantization bodies and DynamicQuantizeLinear's range (quantize_linear.c).
#include "quantize_linear.h"
/// SHA-256 block compression with the x86 SHA extensions (the response cache's key, upload digests).
#include "sha256_blocks.h"
/// SiLU and Sigmoid epilogues of the float kernels in AVX2 + FMA and AVX-512F, and the AVX-512 switch (float_activations.c).
#include "float_activations.h"
/// The depthwise convolution's plane loop with its epilogue in AVX2 + FMA (depthwise_plane.c).
#include "depthwise_plane.h"
/// MaxPool rows straight from NCHW planes in AVX-512F (window_max.c).
#include "window_max.h"
/// The channels-last depthwise convolution with its epilogue in registers (nhwc_depthwise.c).
#include "nhwc_depthwise.h"
/// The channels-last pointwise convolution's product with its epilogue in registers, AVX-512F (nhwc_pointwise.c).
#include "nhwc_pointwise.h"
/// Batched 2-D transposes of 4-byte elements in 8 x 8 AVX tiles (transpose_tiles.c).
#include "transpose_tiles.h"
/// The packed-B float product's micro-kernel in AVX2 + FMA (packed_sgemm.c).
#include "packed_sgemm.h"
/// Softmax rows and the erf GELU in AVX2 + FMA (float_rows.c).
#include "float_rows.h"
/// The calling thread's processor, for the compute pool's waits (current_cpu.c).
#include "current_cpu.h"

/// MatMulNBits with 4-bit weights kept packed: decode gemv and dequantized-panel product (nbits_gemm.c).
#include "nbits_gemm.h"

/// MatMulNBits at accuracy level 4: A quantized to int8 per block, integer block dots (nbits_int8.c).
#include "nbits_int8.h"

/// The dense convolution's and Winograd's product tiles in AVX-512F, chosen at run time (conv_sgemm_avx512.c).
#include "conv_sgemm_avx512.h"

/// The stems' direct convolution over column phases of input rows, AVX-512F (direct_conv_rows.c).
#include "direct_conv_rows.h"

#endif
