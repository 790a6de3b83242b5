#!/usr/bin/env python3
"""STFT speed against onnxruntime: one second of 16 kHz audio, hop 160, Hann window, onesided, as audio front ends
export it (n_fft 512, a power of two, and 400, Whisper's, which is not). One thread on both sides; alternates
onnxruntime and `osprey predict` for ROUNDS rounds and prints each side's thread-CPU minimum per round and the ratio.

usage: bench_stft.py [OSPREY_BINARY] [ROUNDS] [REPEAT]   (writes models to Benchmarks/out/stft)
"""
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Benchmarks", "out", "stft")


def make(n_fft):
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("STFT", ["signal", "hop", "window"], ["spectrum"], onesided=1)], "stft",
                              [helper.make_tensor_value_info("signal", TensorProto.FLOAT, [1, 16000, 1])],
                              [helper.make_tensor_value_info("spectrum", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(160, np.int64), "hop"), numpy_helper.from_array(window, "window")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(OUT, f"stft_{n_fft}.onnx")
    onnx.save(model, path)
    return path


def ort_cpu_min(path, signal, repeat):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, {"signal": signal})
    best = float("inf")
    for _ in range(repeat):
        c0 = time.thread_time()
        session.run(None, {"signal": signal})
        best = min(best, (time.thread_time() - c0) * 1000)
    return best


def osprey_cpu_min(binary, path, signal_path, repeat):
    out = subprocess.run([binary, "predict", path, "--input", f"signal={signal_path}", "--output", os.path.join(OUT, "y.npy"),
                          "--repeat", str(repeat), "--threads", "1"], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"thread CPU min ([0-9.]+) ms", out).group(1))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "release", "osprey")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    os.makedirs(OUT, exist_ok=True)
    t = np.arange(16000) / 16000
    signal = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * np.random.default_rng(0).standard_normal(16000)).astype(np.float32)
    signal = signal.reshape(1, 16000, 1)
    signal_path = os.path.join(OUT, "signal.npy")
    np.save(signal_path, signal)
    for n_fft in (512, 400):
        path = make(n_fft)
        for r in range(rounds):
            o = ort_cpu_min(path, signal, repeat)
            s = osprey_cpu_min(binary, path, signal_path, repeat)
            print(f"n_fft {n_fft} round {r + 1}: onnxruntime {o:.3f} ms, osprey {s:.3f} ms, osprey/ort {s / o:.2f}", flush=True)


if __name__ == "__main__":
    main()
