#!/usr/bin/env bash
# V2 request decode benchmark: Osprey's codecs vs Python's json/orjson + numpy on the same bodies.
# Usage: Benchmarks/api/run.sh   (from the repo root; builds with swiftc -O, no package changes)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${TMPDIR:-/tmp}/osprey-api-bench"
mkdir -p "$work/build"
python3 "$root/Benchmarks/api/make_requests.py" "$work"
# API files that need only Tensor and HTTP's message types (handlers that import Serving are left out).
api_files=$(grep -L -E '^import (Serving|Engine|Imaging)' "$root"/Sources/API/*.swift || true)
cd "$work/build"
swiftc -O -wmo -parse-as-library -emit-module -emit-object -module-name Tensor "$root"/Sources/Tensor/*.swift -o Tensor.o
swiftc -O -wmo -parse-as-library -emit-module -emit-object -module-name HTTP -I . "$root/Sources/HTTP/HTTPMessage.swift" -o HTTP.o
swiftc -O -wmo -parse-as-library -emit-module -emit-object -module-name API -I . $api_files -o API.o
swiftc -O -I . "$root/Benchmarks/api/main.swift" Tensor.o HTTP.o API.o -o api-bench
echo "# $(date -u +%FT%TZ) $(uname -m), input 1x3x224x224 FP32"
./api-bench "$work" | tee "$work/osprey.txt"
python3 "$root/Benchmarks/api/peer.py" "$work" | tee "$work/peer.txt"
python3 - "$work" <<'PY'
import re, sys
d = sys.argv[1]
def ms(path):
    out = {}
    for line in open(path):
        m = re.match(r"(.+?)\s+([\d.]+) ms", line)
        if m: out[m.group(1).strip()] = float(m.group(2))
    return out
o, p = ms(f"{d}/osprey.txt"), ms(f"{d}/peer.txt")
print(f"speed ratio json decode (osprey/peer):   {p['python json+numpy'] / o['osprey json_decode']:.1f}x vs json+numpy", end="")
if "python orjson+numpy" in p: print(f", {p['python orjson+numpy'] / o['osprey json_decode']:.1f}x vs orjson+numpy")
else: print()
print(f"speed ratio binary decode (osprey/peer): {p['python binary'] / o['osprey binary_decode']:.1f}x vs json header + np.frombuffer (zero-copy; osprey copies into the tensor)")
print(f"speed ratio sha256 (osprey/peer):        {p['python sha256'] / o['osprey sha256']:.2f}x vs hashlib (OpenSSL)")
PY
