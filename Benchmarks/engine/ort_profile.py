#!/usr/bin/env python3
"""Time per operator type in onnxruntime (its own profiler, one run after warm-up), to set beside
`osprey predict MODEL --profile`: a model's gap by operator.

    ort_profile.py MODEL INPUT [THREADS] [RUNS]       (INPUT: FILE.npy, or NAME=FILE.npy,NAME=FILE.npy,...)
"""
import collections
import json
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    model, path = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    if "=" in path:
        feeds = {name: np.load(file) for name, file in (item.split("=", 1) for item in path.split(","))}
    else:
        feeds = {session.get_inputs()[0].name: np.load(path)}
    for _ in range(3):
        session.run(None, feeds)
    for _ in range(runs):
        session.run(None, feeds)
    trace = session.end_profiling()
    events = json.load(open(trace))
    os.remove(trace)
    per_op = collections.defaultdict(float)
    nodes = collections.defaultdict(set)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"]["op_name"]
            per_op[op] += e["dur"] / 1000
            nodes[op].add(e["name"])
    # Warm-up runs are in the trace too: divide by all runs.
    total = sum(per_op.values())
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1]):
        print(f"  {op}: {ms / (runs + 3):.2f} ms per run, {len(nodes[op])} nodes, {100 * ms / total:.0f}%")


if __name__ == "__main__":
    main()
