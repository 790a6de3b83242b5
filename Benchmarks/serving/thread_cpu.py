#!/usr/bin/env python3
"""Where the server's CPU goes under load, thread by thread: closed-loop wrk at CLIENTS clients on the binary V2
MobileNetV2 request, with each server thread's user+system CPU (from /proc/PID/task/*/stat) and wrk's own CPU over
the run, as ms per request and as a share of the two cores' wall time, beside the engine executions' count and mean.

On a shared machine, CPU per request of each thread group is comparable between binaries when wall-clock rates are not.
Last, the engine alone (one thread, batch 8, CPU per image) and the bound it sets: were the compute threads as fast
per row as the engine alone, everything else on the two cores (the I/O loop, the cooperative pool, wrk) would still
hold the server to engine / (engine + the rest) of the engine's rate.

usage: thread_cpu.py OSPREY OUT_DIR [SECONDS [CLIENTS [ROUNDS]]]   (OUT_DIR made by make_fixtures.py)
"""
import collections
import os
import re
import sys

import subprocess

from bench import MODEL, WARM_UP_SECONDS, executions, predict_command
from loadgen import CLOCK_TICKS, Server, wrk

COMPUTE_THREADS = ("osprey-run-", "osprey-compute-")


def engine_cpu_ms(binary, out, batch=8):
    """CPU ms per image of `osprey predict --threads 1` on `batch` images: 31 runs minus 1, so loading cancels out."""
    def cpu(repeat):
        before = os.times()
        subprocess.run(predict_command(binary, out, batch, repeat, threads=1), capture_output=True, check=True)
        after = os.times()
        return (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return (cpu(31) - cpu(1)) / (30 * batch) * 1000


def thread_cpu(pid):
    """Thread name (numbers folded) to CPU seconds, summed over the process's threads."""
    totals = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = re.sub(r"\d+", "N", text[text.index("(") + 1:text.rindex(")")])
        fields = text.rsplit(")", 1)[1].split()
        totals[name] += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return totals


def main():
    binary, out = sys.argv[1], sys.argv[2]
    seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    clients = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    server = Server(binary, os.path.join(out, "repo"), "--grpc-port", "off", log_path=os.path.join(out, "server.log"))
    try:
        url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
        body, header = os.path.join(out, "request.bin"), open(os.path.join(out, "request.hdr")).read()
        wrk(url, clients, 3, body, "application/octet-stream", header)
        for _ in range(rounds):
            wrk(url, clients, WARM_UP_SECONDS, body, "application/octet-stream", header)
            before, runs0 = thread_cpu(server.proc.pid), executions(server)
            r = wrk(url, clients, seconds, body, "application/octet-stream", header)
            after, runs1 = thread_cpu(server.proc.pid), executions(server)
            wall = r["duration_us"] / 1e6
            requests = r["requests"]
            runs = runs1["compute_infer"][0] - runs0["compute_infer"][0]
            infer_ms = runs1["compute_infer"][1] - runs0["compute_infer"][1]
            stack_ms = runs1["compute_input"][1] - runs0["compute_input"][1]
            executed = runs1["rows"] - runs0["rows"]
            print(f"{requests / wall:.1f} req/s, {runs} executions of {executed / max(runs, 1):.1f} rows on average, "
                  f"mean execution {infer_ms / max(runs, 1):.1f} ms after {stack_ms / max(runs, 1):.2f} ms of stacking")
            print("| thread | CPU ms/request | % of 2 cores |")
            print("|---|---|---|")
            rows = [(name, after[name] - before.get(name, 0)) for name in after]
            rows.append(("(wrk)", r["client_cpu_s"]))
            total = sum(cpu for _, cpu in rows)
            for name, cpu in sorted(rows, key=lambda row: -row[1]):
                if cpu > 0:
                    print(f"| {name} | {1000 * cpu / requests:.2f} | {100 * cpu / (2 * wall):.1f} |")
            print(f"| total | {1000 * total / requests:.2f} | {100 * total / (2 * wall):.1f} |")
            print()
            compute = sum(cpu for name, cpu in rows if name.startswith(COMPUTE_THREADS)) * 1000 / requests
            rest = total * 1000 / requests - compute
            engine = engine_cpu_ms(binary, out)
            print(f"engine alone, one thread, batch 8: {engine:.2f} ms CPU per image; the server's compute threads "
                  f"{compute:.2f} ms per request ({compute / engine:.3f} of it); everything else {rest:.2f} ms per request, "
                  f"which alone holds the server to {engine / (engine + rest):.3f} of the engine's rate")
            print()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
