#!/usr/bin/env bash
# One command for every benchmark tool environment, from the pinned files in Benchmarks/requirements/:
#
#   Benchmarks/setup.sh [base] [torch] [tf] [openvino]      (no argument: all of them)
#
# base      the system python3: onnxruntime (the reference peer), onnx, numpy, Pillow, scikit-learn, tritonclient
# torch     Benchmarks/out/venv-torch: CPU torch, torchvision, exporters, MiniLM (engine suite, compatibility harness)
# tf        Benchmarks/out/venv-tf: TensorFlow CPU and tf2onnx (compatibility harness's Keras models)
# openvino  Benchmarks/out/venv-ov: OpenVINO (engine suite's second peer)
#
# torch and TensorFlow pin different numpy/protobuf ranges, so each has its own venv. The venvs see the system
# site-packages, so onnxruntime and onnx come from base in all of them. Installing again is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=Benchmarks/requirements
OUT=Benchmarks/out
# torch.txt names the CPU wheel's extra index; where that index is out of reach (a local wheel directory stands in),
# fail over fast instead of pip's five retries with back-off for every package.
export PIP_RETRIES=${PIP_RETRIES:-1} PIP_TIMEOUT=${PIP_TIMEOUT:-10}
mkdir -p "$OUT"

venv() {  # venv NAME -> path of its python, creating it when missing
    local dir="$OUT/venv-$1"
    [ -x "$dir/bin/python" ] || python3 -m venv --system-site-packages "$dir"
    echo "$dir/bin/python"
}

setup_one() {
    case "$1" in
        base)     python3 -m pip install -q -r "$REQ/base.txt" ;;
        torch)    py=$(venv torch)
                  "$py" -m pip install -q -r "$REQ/torch.txt"
                  "$py" -m pip install -q --no-deps -r "$REQ/torch-nodeps.txt" ;;
        tf)       "$(venv tf)" -m pip install -q -r "$REQ/tf.txt" ;;
        openvino) "$(venv ov)" -m pip install -q -r "$REQ/openvino.txt" ;;
        *) echo "unknown environment '$1' (expected base, torch, tf or openvino)" >&2; exit 2 ;;
    esac
    echo "ready: $1"
}

for env in "${@:-base torch tf openvino}"; do
    for one in $env; do setup_one "$one"; done
done
