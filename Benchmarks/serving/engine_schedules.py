#!/usr/bin/env python3
"""CPU per image of `osprey predict` schedules on MobileNetV2 batch 8, alternating: process CPU of REPEAT+1 runs minus
one run (loading cancels out), per image, and the median run.

usage: engine_schedules.py REPEAT NAME="OSPREY FLAGS..." ...
  e.g. engine_schedules.py 10 "split=.build/release/osprey --threads 2" "rows=.build/release/osprey --threads 2 --row-parts 4"
"""
import os
import re
import subprocess
import sys

ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "out", "engine")
MODEL, INPUT = os.path.join(ENGINE, "mobilenetv2.onnx"), os.path.join(ENGINE, "mobilenetv2_in_b8.npy")


def measure(binary, flags, repeat):
    """(process CPU seconds, median ms) of one `osprey predict` process."""
    before = os.times()
    output = subprocess.run([binary, "predict", MODEL, "--input", INPUT, "--output", "/tmp/engine_schedules_out.npy",
                             "--repeat", str(repeat)] + flags, capture_output=True, text=True, check=True).stdout
    after = os.times()
    median = re.search(r"median ([0-9.]+) ms", output)
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), float(median.group(1)) if median else 0.0


def main():
    repeat = int(sys.argv[1])
    configs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    for round_index in range(3):
        for name, spec in configs.items():
            binary, *flags = spec.split()
            once, _ = measure(binary, flags, 1)
            many, median = measure(binary, flags, repeat + 1)
            print(f"round {round_index} {name}: {(many - once) / (repeat * 8) * 1000:.2f} CPU ms per image, median run {median:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
