#!/usr/bin/env bash
# Engine suite: onnxruntime, OpenVINO (when it is installed) and Osprey on classifier, OCR and detector shaped models.
#
#   Benchmarks/engine/run_suite.sh [REPEAT] [ROUNDS] [THREADS...]     (defaults 10 3 "1 2")
#   MODELS="mobilenetv2:1,8:3,224,224 ..." Benchmarks/engine/run_suite.sh ...       (a subset: model:batches:dims)
#
# Models (Benchmarks/out/engine, made on first use): mobilenetv2 and resnet18 (make_models.py, 224x224, batch 1 and
# 8), ppocr_rec (48x320, batch 1 and 8), db_det and yolov8n (320x320, batch 1) from make_real_models.py, which runs in
# Benchmarks/out/venv-torch (Benchmarks/setup.sh torch); torchvision classifiers (EfficientNet-B0, MobileNetV3-Large,
# ShuffleNetV2, SqueezeNet 1.1, RegNetY-400MF at batch 1 and 8; DenseNet-121, ConvNeXt-T at batch 1) and
# all-MiniLM-L6-v2 (128 tokens, batch 1 and 8), ViT-B/16 (batch 1), BERT-base and GPT-2 small (128 tokens, batch 1,
# input_ids + attention_mask) from make_zoo_models.py in the same venv. A model with several inputs has one file per
# input, NAME_in_bB.INPUT.npy, each bound by its input name. OpenVINO runs from
# Benchmarks/out/venv-ov when it exists (Benchmarks/setup.sh openvino).
#
# Each row alternates the runtimes ROUNDS times and keeps each one's fastest run (wall ms; at one thread also thread
# CPU ms, which other processes' load does not inflate). Osprey's output is checked against onnxruntime's at the
# engine tolerance. The last lines are the geometric means of the Osprey/onnxruntime wall ratios and, over the
# one-thread rows, of the thread CPU ratios (the load-robust comparison on a shared box).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEAT=${1:-10}
ROUNDS=${2:-3}
shift $(( $# >= 2 ? 2 : $# )) || true
THREADS=${*:-1 2}
OUT=Benchmarks/out/engine
mkdir -p "$OUT"
OSPREY=${OSPREY:-.build/release/osprey}
[ -f "$OUT/resnet18.onnx" ] || python3 Benchmarks/engine/make_models.py "$OUT"
if [ ! -f "$OUT/yolov8n.onnx" ]; then
    VENV=Benchmarks/out/venv-torch
    [ -x "$VENV/bin/python" ] || Benchmarks/setup.sh torch
    "$VENV/bin/python" Benchmarks/engine/make_real_models.py "$OUT" 2>&1 | grep '^wrote'
fi
ZOO="efficientnet_b0 mobilenet_v3_large shufflenet_v2_x1_0 squeezenet1_1 regnet_y_400mf densenet121 convnext_tiny minilm
vit_b_16 bert_base gpt2"
missing=$(for m in $ZOO; do [ -f "$OUT/$m.onnx" ] || echo "$m"; done)
[ -z "$missing" ] || Benchmarks/out/venv-torch/bin/python Benchmarks/engine/make_zoo_models.py "$OUT" $missing 2>&1 | grep '^wrote'
OV=""
[ -x Benchmarks/out/venv-ov/bin/python ] && Benchmarks/out/venv-ov/bin/python -c "import openvino" 2>/dev/null && OV=Benchmarks/out/venv-ov/bin/python

# model:batches:input shape after the batch dimension
MODELS=${MODELS:-"mobilenetv2:1,8:3,224,224 resnet18:1,8:3,224,224 ppocr_rec:1,8:3,48,320 db_det:1:3,320,320 yolov8n:1:3,320,320
efficientnet_b0:1,8:3,224,224 mobilenet_v3_large:1,8:3,224,224 shufflenet_v2_x1_0:1,8:3,224,224 squeezenet1_1:1,8:3,224,224
regnet_y_400mf:1,8:3,224,224 densenet121:1:3,224,224 convnext_tiny:1:3,224,224 minilm:1,8:128
vit_b_16:1:3,224,224 bert_base:1:128 gpt2:1:128"}
min() { python3 -c "print(min($1, $2))"; }
# Reference and Osprey outputs go to this run's own files, so suites run side by side do not mix them.
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
echo "uptime: $(uptime)"
echo "osprey: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' +changes'); rounds $ROUNDS, repeat $REPEAT"
echo
echo "| model | threads | batch | onnxruntime ms | OpenVINO ms | Osprey ms | Osprey/ORT | Osprey/OV | ORT CPU ms | Osprey CPU ms | CPU Osprey/ORT | output vs ORT |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
ratios=(); cpuratios=()
for spec in $MODELS; do
    IFS=: read -r model batches dims <<<"$spec"
    for batch in ${batches//,/ }; do
        input="$OUT/${model}_in_b$batch.npy"
        named=("$OUT/${model}_in_b$batch".*.npy)
        if [ -f "${named[0]}" ]; then
            # One file per model input: NAME=FILE for each (comma-joined for the peers, --input each for Osprey).
            binds=(); for f in "${named[@]}"; do n=${f%.npy}; binds+=("${n##*.}=$f"); done
            input=$(IFS=,; echo "${binds[*]}")
            ospin=(); for b in "${binds[@]}"; do ospin+=(--input "$b"); done
        else
            [ -f "$input" ] || python3 -c "import numpy as np; np.save('$input', np.random.default_rng(0).random(($batch, $dims), dtype=np.float32))"
            ospin=(--input "$input")
        fi
        for threads in $THREADS; do
            ort=1e9; ortcpu=1e9; ov=1e9; osp=1e9; ospcpu=1e9; check=""
            for round in $(seq "$ROUNDS"); do
                save=""; [ "$round" = 1 ] && save="$SCRATCH/ref.npy"
                read -r w c < <(python3 Benchmarks/engine/bench_peer.py ort "$OUT/$model.onnx" "$input" "$threads" "$REPEAT" $save)
                ort=$(min "$ort" "$w"); ortcpu=$(min "$ortcpu" "$c")
                if [ -n "$OV" ]; then
                    read -r w c < <("$OV" Benchmarks/engine/bench_peer.py openvino "$OUT/$model.onnx" "$input" "$threads" "$REPEAT")
                    ov=$(min "$ov" "$w")
                fi
                report=$("$OSPREY" predict "$OUT/$model.onnx" "${ospin[@]}" --output "$SCRATCH/out.npy" --repeat "$REPEAT" --threads "$threads")
                w=$(grep "ms per run over" <<<"$report" | sed -E 's/.*\(min ([0-9.]+) ms.*/\1/')
                osp=$(min "$osp" "$w")
                if grep -q "thread CPU min" <<<"$report"; then
                    c=$(grep "thread CPU min" <<<"$report" | sed -E 's/.*min ([0-9.]+) ms.*/\1/')
                    ospcpu=$(min "$ospcpu" "$c")
                fi
                [ "$round" = 1 ] && check=$(python3 Benchmarks/engine/compare_outputs.py "$SCRATCH/ref.npy" "$SCRATCH/out.npy")
            done
            ratio=$(python3 -c "print(f'{$osp / $ort:.2f}')")
            ratios+=("$ratio")
            if [ -n "$OV" ]; then ovratio=$(python3 -c "print(f'{$osp / $ov:.2f}')"); else ov="n/a"; ovratio="n/a"; fi
            if [ "$threads" = 1 ]; then cpuratio=$(python3 -c "print(f'{$ospcpu / $ortcpu:.2f}')"); cpuratios+=("$cpuratio"); else ortcpu="n/a"; ospcpu="n/a"; cpuratio="n/a"; fi
            echo "| $model | $threads | $batch | $ort | $ov | $osp | $ratio | $ovratio | $ortcpu | $ospcpu | $cpuratio | $check |"
        done
    done
done
echo
geomean() { python3 -c "import math, sys; r = [float(x) for x in sys.argv[2:]]; print(f'geometric mean {sys.argv[1]} over {len(r)} rows: {math.exp(sum(map(math.log, r)) / len(r)):.2f}')" "$@"; }
geomean "Osprey/onnxruntime (wall)" "${ratios[@]}"
[ ${#cpuratios[@]} = 0 ] || geomean "Osprey/onnxruntime (one-thread thread CPU)" "${cpuratios[@]}"
