#!/usr/bin/env bash
# MobileNetV2's quantized conv layers on the integer kernels, one thread: Benchmarks/engine/qgemm/layers.sh [REPEAT] [LAYER]
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p Benchmarks/out/engine
gcc -O3 -I Sources/CKernelShim/include Benchmarks/engine/qgemm/mobilenet_layers.c Sources/CKernelShim/quantized_conv.c \
    Sources/CKernelShim/quantized_conv_tail.c Sources/CKernelShim/quantized_depthwise_channels.c Sources/CKernelShim/quantized_gemv.c -lm \
    -o Benchmarks/out/engine/qconv_layers
Benchmarks/out/engine/qconv_layers "${1:-50}" "${2:--1}"
