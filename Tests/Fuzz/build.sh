#!/usr/bin/env bash
# Builds one libFuzzer executable per target into Tests/Fuzz/out/bin (no SwiftPM: module sources compiled with swiftc).
# Usage: Tests/Fuzz/build.sh [TARGET...]   targets: http v2 multipart classify grpc onnx engine imaging (default: all)
# Each module is built once as an instrumented static library (-sanitize=fuzzer,address adds coverage + ASan);
# the HTTP target compiles the harness into the HTTP module itself because RequestParser is internal.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=$ROOT/Tests/Fuzz/out/build
BIN=$ROOT/Tests/Fuzz/out/bin
mkdir -p "$OUT" "$BIN"
FLAGS=(-O -wmo -parse-as-library -sanitize=fuzzer,address -g -I "$OUT" -I "$ROOT"/Sources/CLibUV -I "$ROOT"/Sources/CHTTPParser -I "$ROOT"/Sources/CNGHTTP2
       -I "$ROOT"/Sources/COpenBLAS -I "$ROOT"/Sources/CKernelShim/include -I "$ROOT"/Sources/CPNG -I "$ROOT"/Sources/CTurboJPEG)
LINK=(-L "$OUT" -luv -lhttp_parser -lnghttp2 -lopenblas -lpng16 -lturbojpeg)
# Links in the build directory: swiftc drops debug module files into the working directory.
quiet() { (cd "$OUT" && "$@" 2>&1 | grep -v "ld.gold: warning" || true; test "${PIPESTATUS[0]}" -eq 0); }

# Rebuilds a module library when any of its sources is newer than it.
library() {
    local name=$1; shift
    local lib="$OUT/lib$name.a"
    if [ -f "$lib" ] && [ -z "$(find "$@" -newer "$lib" 2>/dev/null)" ]; then return; fi
    echo "building module $name"
    swiftc "${FLAGS[@]}" -emit-module -emit-library -static -module-name "$name" "$@" \
        -emit-module-path "$OUT/$name.swiftmodule" -o "$lib"
}
# API files that need only Tensor, Protobuf and HTTP (the handlers that import Serving/Engine/Imaging are left out).
api_files() { grep -L -E '^import (Serving|Engine|Imaging)' Sources/API/*.swift Sources/API/GRPC/*.swift; }

harness() {
    local target=$1
    case $target in
        http)
            echo "building fuzz-http"
            quiet swiftc "${FLAGS[@]}" -module-name HTTP $(find "$ROOT"/Sources/HTTP -name '*.swift') "$ROOT"/Tests/Fuzz/harness/http.swift "${LINK[@]}" -o "$BIN/fuzz-http" ;;
        v2|multipart|classify|grpc)
            library Tensor Sources/Tensor/*.swift
            library Protobuf Sources/Protobuf/*.swift
            library HTTP $(find Sources/HTTP -name '*.swift')
            library API $(api_files)
            echo "building fuzz-$target"
            quiet swiftc "${FLAGS[@]}" -module-name Fuzz$target "$ROOT"/Tests/Fuzz/harness/$target.swift -lAPI -lHTTP -lProtobuf -lTensor "${LINK[@]}" -o "$BIN/fuzz-$target" ;;
        onnx)
            library Tensor Sources/Tensor/*.swift
            library Protobuf Sources/Protobuf/*.swift
            library ONNX Sources/ONNX/*.swift
            echo "building fuzz-onnx"
            quiet swiftc "${FLAGS[@]}" -module-name FuzzONNX "$ROOT"/Tests/Fuzz/harness/onnx.swift -lONNX -lProtobuf -lTensor "${LINK[@]}" -o "$BIN/fuzz-onnx" ;;
        engine)
            library Tensor Sources/Tensor/*.swift
            library Protobuf Sources/Protobuf/*.swift
            library ONNX Sources/ONNX/*.swift
            library Engine $(find Sources/Engine -name '*.swift')
            echo "building fuzz-engine"
            quiet swiftc "${FLAGS[@]}" -module-name FuzzEngine "$ROOT"/Tests/Fuzz/harness/engine.swift -lEngine -lONNX -lProtobuf -lTensor "${LINK[@]}" -o "$BIN/fuzz-engine" ;;
        imaging)
            library Tensor Sources/Tensor/*.swift
            library Imaging Sources/Imaging/*.swift
            echo "building fuzz-imaging"
            quiet swiftc "${FLAGS[@]}" -module-name FuzzImaging "$ROOT"/Tests/Fuzz/harness/imaging.swift -lImaging -lTensor "${LINK[@]}" -o "$BIN/fuzz-imaging" ;;
        *) echo "unknown target $target" >&2; exit 2 ;;
    esac
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http v2 multipart classify grpc onnx engine imaging)
for t in "${targets[@]}"; do harness "$t"; done
