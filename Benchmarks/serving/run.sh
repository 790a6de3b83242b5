#!/usr/bin/env bash
# Serving benchmark: wrk closed-loop load (binary V2 infer, MobileNetV2-1.0 shape, 1x3x224x224 FP32) at 1, 8 and 32
# clients against `osprey serve` (release), compared with the engine alone (`osprey predict`, batch 8), plus RSS
# around a hot swap under load.
#
#   Benchmarks/serving/run.sh [SECONDS]      (default 10 s per concurrency)
#
# Osprey is $OSPREY, else .build/release/osprey (build first: swift build -c release --product osprey).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN=${1:-10}
OUT=Benchmarks/out/serving
OSPREY=${OSPREY:-.build/release/osprey}
rm -rf "$OUT/repo/mobilenetv2/2"   # version 2 is uploaded by the run itself
python3 Benchmarks/serving/make_fixtures.py "$OUT"
echo "uptime: $(uptime)"
echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
exec python3 Benchmarks/serving/bench.py "$OSPREY" "$OUT" "$SECONDS_PER_RUN"
