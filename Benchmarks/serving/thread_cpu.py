#!/usr/bin/env python3
"""Where the server's CPU goes under load, thread by thread: closed-loop wrk at CLIENTS clients on the binary V2
MobileNetV2 request, with each server thread's user+system CPU (from /proc/PID/task/*/stat) and wrk's own CPU over
the run, as ms per request and as a share of the two cores' wall time, beside the engine executions' count and mean.

On a shared machine, CPU per request of each thread group is comparable between binaries when wall-clock rates are not.

usage: thread_cpu.py OSPREY OUT_DIR [SECONDS [CLIENTS [ROUNDS]]]   (OUT_DIR made by make_fixtures.py)
"""
import collections
import os
import re
import sys

from bench import MODEL, WARM_UP_SECONDS, executions
from loadgen import CLOCK_TICKS, Server, wrk


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
    finally:
        server.stop()


if __name__ == "__main__":
    main()
