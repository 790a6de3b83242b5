#!/usr/bin/env python3
"""Times one ONNX model in onnxruntime: fastest ms per run of a batch (the stable statistic on a shared box).

usage: bench_ort.py MODEL THREADS BATCH REPEAT
"""
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    model, threads, batch, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
    feeds = {session.get_inputs()[0].name: x}
    for _ in range(3):
        session.run(None, feeds)
    # One thread runs in this thread: its CPU time ignores other processes' load (the Swift harness does the same).
    clock = time.thread_time if threads == 1 else time.perf_counter
    times = []
    for _ in range(repeat):
        start = clock()
        session.run(None, feeds)
        times.append((clock() - start) * 1000)
    print(f"{min(times):.3f}")


if __name__ == "__main__":
    main()
