#!/usr/bin/env python3
"""Serving against the engine alone, pair by pair: each round measures the engine's best sustained batch-8 rate (the
four schedules of bench.py: each operator split over 2 threads, one row range per thread, one row per part (the
server's schedule for MobileNetV2 since its weights fit in the cache), two 1-thread engines side by side) and right after it the server's rate at CLIENTS clients, so both halves of a pair see the same host
conditions; the ratio of each pair is printed, then their median. On a VM whose host speed drifts by 20-35% over
minutes, a ratio of rates measured minutes apart (bench.py's table) moves with the host; a ratio within a pair does
not.

Each round then measures the best schedule once more while `transfer.c` moves the server's request bodies over
loopback at the server's rate, with no HTTP and no server (the client and the bodies share the two cores with the
compute in the server's run, not in the engine's): server / that rate is what the server itself loses, beside what
moving the bytes costs.

usage: interleaved.py OSPREY OUT_DIR [ROUNDS [SECONDS [CLIENTS]]]   (defaults 5 rounds, 8 s, 32 clients)
Run Benchmarks/serving/run.sh once first (it writes the fixtures into OUT_DIR).
"""
import os
import shutil
import statistics
import subprocess
import sys

from bench import MODEL, WARM_UP_SECONDS, engine_pair, executions, predict
from loadgen import Server, wrk


SCHEDULES = {"each operator split": lambda binary, out: 8000 / predict(binary, out, 8, 10)[1],
             "one row range per thread": lambda binary, out: 8000 / predict(binary, out, 8, 10, row_parts=2)[1],
             "one row per part": lambda binary, out: 8000 / predict(binary, out, 8, 10, row_parts=8)[1],
             "two 1-thread engines": lambda binary, out: engine_pair(binary, out, 8)[0]}


def engine_best(binary, out):
    """(images/s, schedule, median ms of one row per part) of the highest sustained batch-8 rate: images per median
    run of 10 runs."""
    rates = {name: rate(binary, out) for name, rate in SCHEDULES.items()}
    best = max(rates, key=rates.get)
    return rates[best], best, 8000 / rates["one row per part"]


def transfer_tool(out):
    """`transfer.c` compiled into OUT (once per change of the source)."""
    source, tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transfer.c"), os.path.join(out, "transfer")
    if not os.path.exists(tool) or os.path.getmtime(tool) < os.path.getmtime(source):
        subprocess.run(["cc", "-O2", "-pthread", "-o", tool, source], check=True)
    return tool


def engine_with_transfer(binary, out, schedule, rate):
    """Images/s of `schedule` while the request bodies cross loopback at `rate` per second."""
    transfer = subprocess.Popen([transfer_tool(out), f"{rate:.1f}", "600"], stderr=subprocess.DEVNULL)
    try:
        return SCHEDULES[schedule](binary, out)
    finally:
        transfer.kill()
        transfer.wait()


def main():
    binary, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    clients = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    shutil.rmtree(os.path.join(out, "repo", MODEL, "2"), ignore_errors=True)  # bench.py's hot swap uploads a version 2
    # HTTP only: on a shared machine the default gRPC port may be taken by another server.
    server = Server(binary, os.path.join(out, "repo"), "--grpc-port", "off", log_path=os.path.join(out, "server.log"))
    ratios, own = [], []
    try:
        url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
        body, header = os.path.join(out, "request.bin"), open(os.path.join(out, "request.hdr")).read()
        wrk(url, clients, 3, body, "application/octet-stream", header)  # the pool and heaps grow to this load first
        print(f"server: `osprey serve`, {clients} clients, {seconds} s per round after a {WARM_UP_SECONDS} s warm-up; engine: "
              f"`osprey predict` batch 8, 10 runs per schedule, right before")
        print()
        print("| round | engine best images/s | schedule | engine alone, one row per part: median 8-row run ms | server req/s | p99 ms | errors | "
              "server's executions: mean rows, mean ms | server / engine | engine best, bodies moving | server / that |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for k in range(1, rounds + 1):
            engine_ips, schedule, one_row_ms = engine_best(binary, out)
            wrk(url, clients, WARM_UP_SECONDS, body, "application/octet-stream", header)
            before = executions(server)
            r = wrk(url, clients, seconds, body, "application/octet-stream", header)
            after = executions(server)
            runs, infer_ms = (after["compute_infer"][i] - before["compute_infer"][i] for i in (0, 1))
            rows = after["rows"] - before["rows"]
            rps = r["requests"] / (r["duration_us"] / 1e6)
            ratios.append(rps / engine_ips)
            moving_ips = engine_with_transfer(binary, out, schedule, rps)
            own.append(rps / moving_ips)
            print(f"| {k} | {engine_ips:.1f} | {schedule} | {one_row_ms:.1f} | {rps:.1f} | {r['p99_us'] / 1000:.1f} | "
                  f"{r['status_errors'] + r['socket_errors']} | {rows / max(runs, 1):.1f}, {infer_ms / max(runs, 1):.1f} | "
                  f"{ratios[-1]:.2f} | {moving_ips:.1f} | {own[-1]:.2f} |", flush=True)
        print()
        print(f"median server / engine best over {rounds} pairs: {statistics.median(ratios):.2f} "
              f"(range {min(ratios):.2f}-{max(ratios):.2f})")
        print(f"median server / engine best with the bodies moving: {statistics.median(own):.2f} "
              f"(range {min(own):.2f}-{max(own):.2f})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
