#!/usr/bin/env python3
"""Times one ONNX model in onnxruntime: prints the fastest wall ms and the fastest thread-CPU ms per run of a batch.

The minimum is the stable statistic on a shared box; the thread CPU time (meaningful with one thread, which runs in
the calling thread) also ignores other processes' load, as the Swift kernel harness does at one thread.

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
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.thread_time()
        session.run(None, feeds)
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    print(f"{min(wall):.3f} {min(cpu):.3f}")


if __name__ == "__main__":
    main()
