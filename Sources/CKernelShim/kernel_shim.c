// Static inline helpers live in the header (Swift inlines them); quantized_gemm.c holds the compiled kernels.
#include "kernel_shim.h"
