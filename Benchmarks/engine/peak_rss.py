#!/usr/bin/env python3
"""Peak resident memory of one model run in Osprey and in onnxruntime (and OpenVINO when its venv exists): each
runtime in its own child process, its peak taken from that child's rusage (ru_maxrss, from wait4), so nothing the
parent holds counts.

    peak_rss.py [THREADS] [REPEAT]          (defaults 1 and 3; models as run_suite.sh's MODELS, same default list)

Osprey: `osprey predict MODEL --input X --output Y --repeat REPEAT --threads THREADS` ($OSPREY, else .build/release/osprey).
onnxruntime and OpenVINO: Benchmarks/engine/bench_peer.py on the same input. Their processes also hold a Python
interpreter with numpy and the runtime's library; the "baseline" column is that much alone (the same imports and the
input loaded, no session), so "ORT - baseline" is what the model itself costs in onnxruntime. Inputs are the suite's
(Benchmarks/out/engine/MODEL_in_bB.npy, written by run_suite.sh).
"""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "Benchmarks", "out", "engine")
DEFAULT_MODELS = ("mobilenetv2:1,8 resnet18:1,8 ppocr_rec:1,8 db_det:1 yolov8n:1 efficientnet_b0:1,8 mobilenet_v3_large:1,8 "
                  "shufflenet_v2_x1_0:1,8 squeezenet1_1:1,8 regnet_y_400mf:1,8 densenet121:1 convnext_tiny:1 minilm:1,8")


def peak_mib(command):
    """Runs `command` to completion and returns its peak RSS in MiB (its own, not its parent's)."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {child.stderr.read().decode()[-400:]}")
    return usage.ru_maxrss / 1024.0


def main():
    threads = sys.argv[1] if len(sys.argv) > 1 else "1"
    repeat = sys.argv[2] if len(sys.argv) > 2 else "3"
    osprey = os.environ.get("OSPREY", os.path.join(ROOT, ".build", "release", "osprey"))
    openvino = os.path.join(ROOT, "Benchmarks", "out", "venv-ov", "bin", "python")
    has_openvino = os.path.exists(openvino)
    peer = os.path.join(ROOT, "Benchmarks", "engine", "bench_peer.py")
    print(f"| model | batch | Osprey MiB | ORT MiB | ORT baseline MiB | ORT - baseline MiB | Osprey/ORT | Osprey/(ORT - baseline) |"
          + (" OpenVINO MiB |" if has_openvino else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if has_openvino else ""))
    ratios = []
    for spec in os.environ.get("MODELS", DEFAULT_MODELS).split():
        model, batches = spec.split(":")[:2]
        for batch in batches.split(","):
            path = os.path.join(OUT, f"{model}.onnx")
            x = os.path.join(OUT, f"{model}_in_b{batch}.npy")
            if not (os.path.exists(path) and os.path.exists(x)):
                print(f"| {model} | {batch} | missing {os.path.basename(path if not os.path.exists(path) else x)} (run run_suite.sh first) |")
                continue
            mine = peak_mib([osprey, "predict", path, "--input", x, "--output", os.path.join(OUT, "rss_out.npy"),
                             "--repeat", repeat, "--threads", threads])
            ort = peak_mib([sys.executable, peer, "ort", path, x, threads, repeat])
            base = peak_mib([sys.executable, "-c", f"import numpy as np, onnxruntime; np.load({x!r})"])
            ratios.append(mine / ort)
            row = (f"| {model} | {batch} | {mine:.1f} | {ort:.1f} | {base:.1f} | {ort - base:.1f} | {mine / ort:.2f} | "
                   f"{mine / max(ort - base, 1e-9):.2f} |")
            if has_openvino:
                row += f" {peak_mib([openvino, peer, 'openvino', path, x, threads, repeat]):.1f} |"
            print(row, flush=True)
    if ratios:
        product = 1.0
        for ratio in ratios:
            product *= ratio
        print(f"\ngeometric mean Osprey/ORT peak RSS over {len(ratios)} rows: {product ** (1 / len(ratios)):.2f}; "
              f"rows above 1: {sum(r > 1 for r in ratios)}")


if __name__ == "__main__":
    main()
