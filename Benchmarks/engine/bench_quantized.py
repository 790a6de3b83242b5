#!/usr/bin/env python3
"""onnxruntime on a model with any number of .npy inputs: prints the fastest wall ms and thread-CPU ms of REPEAT
runs (after 3 warm-up runs) and saves every output into OUT_DIR/<name>.npy, for run_quantized.sh.

    bench_quantized.py MODEL THREADS REPEAT OUT_DIR NAME=FILE.npy ...

Session as bench_peer.py: intra_op THREADS, inter_op 1, sequential, all graph optimizations.
"""
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    model, threads, repeat, out_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    feeds = {spec.split("=", 1)[0]: np.load(spec.split("=", 1)[1]) for spec in sys.argv[5:]}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for _ in range(3):
        outputs = session.run(None, feeds)
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.thread_time()
        outputs = session.run(None, feeds)
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    os.makedirs(out_dir, exist_ok=True)
    for name, value in zip(names, outputs):
        np.save(os.path.join(out_dir, name.replace("/", "_") + ".npy"), np.asarray(value))
    print(f"{min(wall):.3f} {min(cpu):.3f}")


if __name__ == "__main__":
    main()
