#!/usr/bin/env python3
"""4-bit MatMulNBits against onnxruntime: thread CPU per run at one thread and peak RSS, for one K = N = 4096 layer and
four Llama-1B-sized layers (Benchmarks/engine/make_nbits_models.py), at M = 1 and 4 rows (decode steps) and 128 (a
prompt).

    swift build -c release --product osprey
    Benchmarks/out/venv-torch/bin/python Benchmarks/engine/bench_nbits.py [OSPREY] [REPEAT] [ROUNDS] [ACCURACY_LEVEL] [ROWS]
    (defaults 15 3, the files' accuracy_level 0, rows 1,4,128)

ACCURACY_LEVEL sets every MatMulNBits' accuracy_level in a copy of each model (in /tmp): 4 is what onnxruntime-genai's
CPU builder writes, where onnxruntime quantizes A to int8 per block; ROWS is a comma-separated list of M.

Per row, the runtimes alternate ROUNDS times; each keeps its fastest per-run thread CPU (`osprey predict --threads 1`'s
"thread CPU min"; onnxruntime with one intra-op thread, which computes on the calling thread, timed with
time.thread_time). Peak RSS is each process's maximum resident set (onnxruntime's includes the Python interpreter and
onnxruntime's import, about 48 MiB). Models and inputs go to Benchmarks/out/engine (made on first use).
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "Benchmarks", "out", "engine")
MODELS = {"nbits_4096": 4096, "nbits_llama": 2048}


def with_accuracy_level(path, level):
    """A copy of the model at `path` with every MatMulNBits' accuracy_level set to `level` (its path in /tmp)."""
    import onnx
    model = onnx.load(path)
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            kept = [a for a in node.attribute if a.name != "accuracy_level"]
            del node.attribute[:]
            node.attribute.extend(kept + [onnx.helper.make_attribute("accuracy_level", level)])
    out = f"/tmp/bench_nbits_{os.path.basename(path)[:-5]}_acc{level}.onnx"
    onnx.save(model, out)
    return out

ORT_CHILD = r'''
import resource, sys, time
import numpy as np, onnxruntime as ort
path, inputs, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
feeds = {"x": np.load(inputs)}
session.run(None, feeds)
best = float("inf")
for _ in range(repeat):
    started = time.thread_time()
    session.run(None, feeds)
    best = min(best, time.thread_time() - started)
print(f"ORT {best * 1000:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
'''


def osprey(binary, model, inputs, repeat):
    """Fastest thread CPU ms per run of `osprey predict` at one thread."""
    text = subprocess.run([binary, "predict", model, "--input", f"x={inputs}", "--output", "/tmp/bench_nbits_out.npy",
                           "--repeat", str(repeat), "--threads", "1"], capture_output=True, text=True, check=True).stdout
    return float(re.search(r"thread CPU min ([0-9.]+) ms", text).group(1))


def peak_rss(command):
    """Peak RSS (MiB) of `command`, from GNU time."""
    text = subprocess.run(["/usr/bin/time", "-v"] + command, capture_output=True, text=True, check=True).stderr
    return float(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "release", "osprey")
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    level = int(sys.argv[4]) if len(sys.argv) > 4 else None
    row_counts = [int(r) for r in sys.argv[5].split(",")] if len(sys.argv) > 5 else [1, 4, 128]
    if not all(os.path.exists(os.path.join(OUT, m + ".onnx")) for m in MODELS):
        subprocess.run([sys.executable, os.path.join(HERE, "make_nbits_models.py"), OUT], check=True)
    print("| model | M | Osprey thread CPU ms | onnxruntime thread CPU ms | Osprey / onnxruntime | Osprey peak RSS MiB | onnxruntime peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for model, k in MODELS.items():
        path = os.path.join(OUT, model + ".onnx")
        if level is not None:
            path = with_accuracy_level(path, level)
        for m in row_counts:
            inputs = os.path.join(OUT, f"x{m}_{k}.npy")
            runs = max(3, repeat if m < 128 else repeat // 3)
            ours, theirs = [], []
            for _ in range(rounds):
                ours.append(osprey(binary, path, inputs, runs))
                line = subprocess.run([sys.executable, "-c", ORT_CHILD, path, inputs, str(runs)], capture_output=True, text=True, check=True).stdout
                theirs.append(float(line.split()[1]))
            our_rss = peak_rss([binary, "predict", path, "--input", f"x={inputs}", "--output", "/tmp/bench_nbits_out.npy", "--threads", "1"])
            their_rss = peak_rss([sys.executable, "-c", ORT_CHILD, path, inputs, "1"])
            print(f"| {model} | {m} | {min(ours):.2f} | {min(theirs):.2f} | {min(ours) / min(theirs):.2f} | {our_rss:.0f} | {their_rss:.0f} |", flush=True)


if __name__ == "__main__":
    main()
