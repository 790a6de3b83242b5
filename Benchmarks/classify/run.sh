#!/usr/bin/env bash
# Classification benchmark: images/s through /v2/models/{m}/classify (a 1920x1080 JPEG) at 1 and 8 clients on the
# digits model and a MobileNetV2-shaped model (resize 256, center crop 224, ImageNet mean/std), against the same
# models fed an already preprocessed tensor, plus decode+preprocess alone from the Imaging harness.
#
#   Benchmarks/classify/run.sh [SECONDS]     (default 10 s per run)
#
# Osprey is $OSPREY, else .build/release/osprey (build first: swift build -c release --product osprey).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN=${1:-10}
OUT=Benchmarks/out/classify
OSPREY=${OSPREY:-.build/release/osprey}
python3 Benchmarks/classify/make_fixtures.py "$OUT"
# The Imaging module built optimised outside SwiftPM, with the Imaging benchmark's harness (Benchmarks/imaging/main.swift).
H="$OUT/harness"
if [ ! -x "$H/imaging-bench" ] || [ -n "$(find Sources/Imaging Sources/Tensor Benchmarks/imaging/main.swift -newer "$H/imaging-bench" -print -quit)" ]; then
    mkdir -p "$H"
    FLAGS=(-Ounchecked -wmo -parse-as-library)
    swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Tensor Sources/Tensor/*.swift \
        -emit-module-path "$H/Tensor.swiftmodule" -o "$H/libTensor.a"
    swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name Imaging -I "$H" \
        -I Sources/CPNG -I Sources/CTurboJPEG Sources/Imaging/*.swift -emit-module-path "$H/Imaging.swiftmodule" -o "$H/libImaging.a"
    swiftc -O -I "$H" -I Sources/CPNG -I Sources/CTurboJPEG Benchmarks/imaging/main.swift \
        -L "$H" -lImaging -lTensor -lpng16 -lturbojpeg -o "$H/imaging-bench"
fi
echo "uptime: $(uptime)"
echo
exec python3 Benchmarks/classify/bench.py "$OSPREY" "$OUT" "$SECONDS_PER_RUN" "$H/imaging-bench"
