#!/usr/bin/env python3
"""Times one ONNX model in a peer runtime on a .npy input: prints the fastest wall ms and the fastest thread-CPU ms
per run (thread CPU is meaningful at one thread only, where the peer computes in the calling thread).

    bench_peer.py ort|openvino MODEL INPUT THREADS REPEAT [OUTPUT.npy]

INPUT is one .npy file (a one-input model) or NAME=FILE.npy,NAME=FILE.npy,... binding each model input by name.

onnxruntime: intra_op THREADS, inter_op 1, sequential, all graph optimizations. OpenVINO: CPU plugin, latency hint,
f32 inference precision, THREADS inference threads. With OUTPUT.npy the first output of the last run is saved.
"""
import sys
import time

import numpy as np


def onnxruntime_runner(model, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda x: session.run(None, x if isinstance(x, dict) else {name: x})[0]


def openvino_runner(model, threads):
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return lambda x: request.infer(x if isinstance(x, dict) else [x])[0]


def load_inputs(spec):
    """One array, or a dict of arrays by input name for NAME=FILE,NAME=FILE."""
    if "=" not in spec:
        return np.load(spec)
    return {name: np.load(path) for name, path in (item.split("=", 1) for item in spec.split(","))}


def main():
    peer, model, path, threads, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    x = load_inputs(path)
    run = (onnxruntime_runner if peer == "ort" else openvino_runner)(model, threads)
    for _ in range(3):
        y = run(x)
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.thread_time()
        y = run(x)
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    if len(sys.argv) > 6:
        np.save(sys.argv[6], np.asarray(y))
    print(f"{min(wall):.3f} {min(cpu):.3f}")


if __name__ == "__main__":
    main()
