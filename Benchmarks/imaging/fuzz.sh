#!/usr/bin/env bash
# Builds the Imaging module with AddressSanitizer and runs the mutation fuzzer over the fixtures.
# Usage: Benchmarks/imaging/fuzz.sh [seed] [iterations]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=Benchmarks/out/imaging-fuzz
mkdir -p "$OUT"
FLAGS=(-O -wmo -parse-as-library -sanitize=address)
swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Tensor Sources/Tensor/*.swift \
    -emit-module-path "$OUT/Tensor.swiftmodule" -o "$OUT/libTensor.a"
swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Imaging -I "$OUT" \
    -I Sources/CPNG -I Sources/CTurboJPEG Sources/Imaging/*.swift \
    -emit-module-path "$OUT/Imaging.swiftmodule" -o "$OUT/libImaging.a"
swiftc -O -sanitize=address -I "$OUT" -I Sources/CPNG -I Sources/CTurboJPEG Benchmarks/imaging/fuzz_main.swift \
    -L "$OUT" -lImaging -lTensor -lpng16 -lturbojpeg -o "$OUT/imaging-fuzz" 2>&1 | grep -v "ld.gold: warning" || true
ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no "$OUT/imaging-fuzz" "${1:-1}" "${2:-100000}"
