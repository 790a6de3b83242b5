#!/usr/bin/env bash
# gRPC vs HTTP binary: tritonclient.grpc and tritonclient.http closed-loop load at 1, 8 and 32 clients on one release
# server (MobileNetV2-1.0 shape, 1x3x224x224 FP32), protocols alternating in the same run.
#
#   Benchmarks/grpc/run.sh [SECONDS]      (default 10 s per concurrency and protocol)
#
# Osprey is $OSPREY, else .build/release/osprey (build first: swift build -c release --product osprey).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=Benchmarks/out/serving
OSPREY=${OSPREY:-.build/release/osprey}
python3 -c "import tritonclient.grpc, tritonclient.http" 2>/dev/null || pip install -q 'tritonclient[grpc,http]'
python3 Benchmarks/serving/make_fixtures.py "$OUT"
echo "uptime: $(uptime)"
exec python3 Benchmarks/grpc/bench.py "$OSPREY" "$OUT" "${1:-10}"
