#!/usr/bin/env bash
# Integer GEMM kernels (int16 pairs, u8 x s8) vs OpenBLAS sgemm, one thread, thread CPU time: Benchmarks/engine/qgemm/run.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p Benchmarks/out/engine
gcc -O3 -I Sources/CKernelShim/include Benchmarks/engine/qgemm/qgemm_bench.c Sources/CKernelShim/quantized_gemm.c \
    Sources/CKernelShim/quantized_conv.c -lopenblas -lm \
    -o Benchmarks/out/engine/qgemm_bench
OPENBLAS_NUM_THREADS=1 Benchmarks/out/engine/qgemm_bench "${1:-20}"
