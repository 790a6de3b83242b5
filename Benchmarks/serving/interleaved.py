#!/usr/bin/env python3
"""Serving against the engine alone, pair by pair: each round measures the engine's best sustained batch-8 rate (the
four schedules of bench.py: each operator split over 2 threads, one row range per thread, one row per part (the
server's schedule for MobileNetV2 since its weights fit in the cache), two 1-thread engines side by side) and right after it the server's rate at CLIENTS clients, so both halves of a pair see the same host
conditions; the ratio of each pair is printed, then their median. On a VM whose host speed drifts by 20-35% over
minutes, a ratio of rates measured minutes apart (bench.py's table) moves with the host; a ratio within a pair does
not.

usage: interleaved.py OSPREY OUT_DIR [ROUNDS [SECONDS [CLIENTS]]]   (defaults 5 rounds, 8 s, 32 clients)
Run Benchmarks/serving/run.sh once first (it writes the fixtures into OUT_DIR).
"""
import os
import shutil
import statistics
import sys

from bench import MODEL, WARM_UP_SECONDS, engine_pair, executions, predict
from loadgen import Server, wrk


def engine_best(binary, out):
    """(images/s, schedule, median ms of one row per part) of the highest sustained batch-8 rate: images per median
    run of 10 runs."""
    one_row_ms = predict(binary, out, 8, 10, row_parts=8)[1]
    rates = {"each operator split": 8000 / predict(binary, out, 8, 10)[1],
             "one row range per thread": 8000 / predict(binary, out, 8, 10, row_parts=2)[1],
             "one row per part": 8000 / one_row_ms, "two 1-thread engines": engine_pair(binary, out, 8)[0]}
    best = max(rates, key=rates.get)
    return rates[best], best, one_row_ms


def main():
    binary, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    clients = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    shutil.rmtree(os.path.join(out, "repo", MODEL, "2"), ignore_errors=True)  # bench.py's hot swap uploads a version 2
    # HTTP only: on a shared machine the default gRPC port may be taken by another server.
    server = Server(binary, os.path.join(out, "repo"), "--grpc-port", "off", log_path=os.path.join(out, "server.log"))
    ratios = []
    try:
        url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
        body, header = os.path.join(out, "request.bin"), open(os.path.join(out, "request.hdr")).read()
        wrk(url, clients, 3, body, "application/octet-stream", header)  # the pool and heaps grow to this load first
        print(f"server: `osprey serve`, {clients} clients, {seconds} s per round after a {WARM_UP_SECONDS} s warm-up; engine: "
              f"`osprey predict` batch 8, 10 runs per schedule, right before")
        print()
        print("| round | engine best images/s | schedule | engine alone, one row per part: median 8-row run ms | server req/s | p99 ms | errors | "
              "server's executions: mean rows, mean ms | server / engine |")
        print("|---|---|---|---|---|---|---|---|---|")
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
            print(f"| {k} | {engine_ips:.1f} | {schedule} | {one_row_ms:.1f} | {rps:.1f} | {r['p99_us'] / 1000:.1f} | "
                  f"{r['status_errors'] + r['socket_errors']} | {rows / max(runs, 1):.1f}, {infer_ms / max(runs, 1):.1f} | "
                  f"{ratios[-1]:.2f} |")
        print()
        print(f"median server / engine best over {rounds} pairs: {statistics.median(ratios):.2f} "
              f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
