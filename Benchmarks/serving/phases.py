#!/usr/bin/env python3
"""One server through phases of different load, in order (binary V2 MobileNetV2 requests from run.sh's fixtures):
req/s, p99 and server CPU ms per request per phase. A schedule that depends on what ran before (a stream that a
previous phase left on one thread, a cost estimate measured at another batch size) shows here and not in a run that
starts each load on a fresh server.

usage: phases.py OSPREY OUT_DIR SECONDS CLIENTS...   (e.g. phases.py .build/release/osprey Benchmarks/out/serving 5 1 8 32 8 1 8)
"""
import os
import sys

from bench import MODEL
from loadgen import Server, wrk


def main():
    binary, out, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    phases = [int(c) for c in sys.argv[4:]] or [1, 8, 32, 8, 1, 8]
    body, header = os.path.join(out, "request.bin"), open(os.path.join(out, "request.hdr")).read()
    server = Server(binary, os.path.join(out, "repo"), "--grpc-port", "off")
    try:
        url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
        print("| phase | clients | req/s | p99 ms | errors | server CPU ms/req |")
        print("|---|---|---|---|---|---|")
        for index, clients in enumerate(phases, 1):
            cpu = server.cpu_seconds()
            r = wrk(url, clients, seconds, body, "application/octet-stream", header)
            used = server.cpu_seconds() - cpu
            rps = r["requests"] / (r["duration_us"] / 1e6)
            print(f"| {index} | {clients} | {rps:.1f} | {r['p99_us'] / 1000:.1f} | {r['status_errors'] + r['socket_errors']} | "
                  f"{used * 1000 / max(r['requests'], 1):.2f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
