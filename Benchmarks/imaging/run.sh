#!/usr/bin/env bash
# Builds the Imaging module optimised (outside SwiftPM, no Package.swift change), makes a 12 MP JPEG and times
# decode + preprocess to 224x224 against Pillow on the same file in the same run.
# Usage: Benchmarks/imaging/run.sh [iterations]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=Benchmarks/out/imaging
mkdir -p "$OUT"
[ -f Benchmarks/out/photo12mp.jpg ] || python3 Benchmarks/imaging/make_image.py
FLAGS=(-Ounchecked -wmo -parse-as-library)
swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Tensor Sources/Tensor/*.swift \
    -emit-module-path "$OUT/Tensor.swiftmodule" -o "$OUT/libTensor.a"
swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Imaging -I "$OUT" \
    -I Sources/CPNG -I Sources/CTurboJPEG Sources/Imaging/*.swift \
    -emit-module-path "$OUT/Imaging.swiftmodule" -o "$OUT/libImaging.a"
swiftc -O -I "$OUT" -I Sources/CPNG -I Sources/CTurboJPEG Benchmarks/imaging/main.swift \
    -L "$OUT" -lImaging -lTensor -lpng16 -lturbojpeg -o "$OUT/imaging-bench"
echo "# $(date -u +%FT%TZ) $(nproc) cores; 1 thread each"
"$OUT/imaging-bench" Benchmarks/out/photo12mp.jpg "${1:-20}"
python3 Benchmarks/imaging/pillow_peer.py Benchmarks/out/photo12mp.jpg "${1:-20}"
