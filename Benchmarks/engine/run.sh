#!/usr/bin/env bash
# Engine benchmark: onnxruntime vs Osprey on MobileNetV2-1.0 and ResNet-18 (224x224, batch 1 and 8, 1 and 2 threads).
#
#   Benchmarks/engine/run.sh [REPEAT] [ROUNDS]      (HARNESS=0 skips the kernel harness section)
#
# Rows: onnxruntime (intra_op threads T, inter_op 1, sequential) vs `osprey predict --repeat N --threads T`
# (fastest run of each, wall clock, same inputs), ratio Osprey/onnxruntime (lower is better) and Osprey's GFLOP/s.
# Each row alternates the two ROUNDS times (default 3) and keeps each side's fastest: this VM has minutes-long slow
# phases that move single runs of either side by up to 40%.
# The kernel harness section times every conv layer of the same models through PackedConvolution alone.
# Osprey is looked up at $OSPREY, else .build/release/osprey (build it first: swift build -c release --product osprey).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEAT=${1:-10}
ROUNDS=${2:-3}
OUT=Benchmarks/out/engine
mkdir -p "$OUT"
[ -f "$OUT/resnet18.onnx" ] || python3 Benchmarks/engine/make_models.py "$OUT"
OSPREY=${OSPREY:-.build/release/osprey}

# Kernel harness: the kernel sources compiled straight with swiftc (x86-64-v3 baseline, as recommended for Package.swift),
# with the Infrastructure module (the compute pool's locks) built beside it.
if [ "${HARNESS:-1}" != 0 ]; then
    mkdir -p "$OUT/harness-infra"
    (cd "$OUT/harness-infra" && swiftc -O -wmo -parse-as-library -module-name Infrastructure -emit-module -emit-library -static \
        "$OLDPWD"/Sources/Infrastructure/*.swift)
    swiftc -Ounchecked -wmo -target-cpu haswell -D OSPREY_FMA -module-name EngineKernels -I Sources/COpenBLAS -I Sources/CKernelShim/include \
        -I "$OUT/harness-infra" -L "$OUT/harness-infra" -lInfrastructure \
        Sources/Engine/Kernels/*.swift Benchmarks/engine/harness/main.swift -lopenblas -o "$OUT/harness"
fi

declare -A GMAC=([mobilenetv2]=0.300 [resnet18]=1.814)
echo "uptime: $(uptime)"
echo
echo "| model | threads | batch | onnxruntime ms | osprey ms | osprey/ort | ort thread CPU ms | osprey thread CPU ms | CPU osprey/ort | osprey GFLOP/s (wall) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in mobilenetv2 resnet18; do
    for threads in 1 2; do
        for batch in 1 8; do
            input="$OUT/input_b$batch.npy"
            [ -f "$input" ] || python3 -c "import numpy as np; np.save('$input', np.random.default_rng(0).random(($batch, 3, 224, 224), dtype=np.float32))"
            ort=1e9; ortcpu=1e9; osprey=1e9; cpu=1e9
            ratio="n/a"; gflops="n/a"; cpuratio="n/a"
            runs_osprey=0
            [ -x "$OSPREY" ] && "$OSPREY" predict --help >/dev/null 2>&1 && runs_osprey=1
            for _ in $(seq "$ROUNDS"); do
                read -r w c < <(python3 Benchmarks/engine/bench_ort.py "$OUT/$model.onnx" "$threads" "$batch" "$REPEAT")
                ort=$(python3 -c "print(min($ort, $w))"); ortcpu=$(python3 -c "print(min($ortcpu, $c))")
                if [ "$runs_osprey" = 1 ]; then
                    report=$("$OSPREY" predict "$OUT/$model.onnx" --input "$input" --output "$OUT/out.npy" --repeat "$REPEAT" --threads "$threads")
                    w=$(grep "ms per run over" <<<"$report" | sed -E 's/.*\(min ([0-9.]+) ms.*/\1/')
                    osprey=$(python3 -c "print(min($osprey, $w))")
                    # Thread CPU time is the load-robust figure, but only at one thread (both run in the calling thread).
                    if grep -q "thread CPU min" <<<"$report"; then
                        c=$(grep "thread CPU min" <<<"$report" | sed -E 's/.*min ([0-9.]+) ms.*/\1/')
                        cpu=$(python3 -c "print(min($cpu, $c))")
                    fi
                fi
            done
            if [ "$runs_osprey" = 1 ]; then
                ratio=$(python3 -c "print(f'{$osprey / $ort:.2f}')")
                gflops=$(python3 -c "print(f'{2 * ${GMAC[$model]} * $batch / ($osprey / 1000):.1f}')")
                if [ "$threads" = 1 ]; then cpuratio=$(python3 -c "print(f'{$cpu / $ortcpu:.2f}')"); else cpu="n/a"; fi
            else
                osprey="n/a"; cpu="n/a"
            fi
            [ "$threads" = 1 ] || ortcpu="n/a"
            echo "| $model | $threads | $batch | $ort | $osprey | $ratio | $ortcpu | $cpu | $cpuratio | $gflops |"
        done
    done
done
[ "${HARNESS:-1}" = 0 ] && exit 0
echo
echo "Kernel harness (conv layers only through PackedConvolution; one thread = thread CPU time, two = wall):"
for threads in 1 2; do
    for batch in 1 8; do
        "$OUT/harness" "$OUT/layers.json" "$threads" "$batch" "$REPEAT" | sed 's/^/    /'
        read -r ortwall ortcpu < <(python3 Benchmarks/engine/bench_ort.py "$OUT/mobilenetv2.onnx" "$threads" "$batch" "$REPEAT")
        echo "    onnxruntime mobilenetv2 whole model threads $threads batch $batch: wall $ortwall ms, thread CPU $ortcpu ms"
        read -r ortwall ortcpu < <(python3 Benchmarks/engine/bench_ort.py "$OUT/resnet18.onnx" "$threads" "$batch" "$REPEAT")
        echo "    onnxruntime resnet18 whole model threads $threads batch $batch: wall $ortwall ms, thread CPU $ortcpu ms"
    done
done
