#!/usr/bin/env python3
"""A/B of two `osprey serve` binaries at 32 clients, alternating (binary V2 MobileNetV2 requests from run.sh's fixtures):
req/s, p99 and server CPU ms per request (utime+stime from /proc), which stays comparable on a loaded box.

usage: serve_ab.py OSPREY_A OSPREY_B ROUNDS SECONDS   (after Benchmarks/serving/run.sh made Benchmarks/out/serving)
"""
import os
import sys

from loadgen import Server, wrk

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "out", "serving")


def main():
    binaries, rounds, seconds = sys.argv[1:3], int(sys.argv[3]), int(sys.argv[4])
    body, header = os.path.join(OUT, "request.bin"), open(os.path.join(OUT, "request.hdr")).read()
    for round_index in range(rounds):
        for binary in binaries:
            server = Server(binary, os.path.join(OUT, "repo"))
            try:
                url = f"http://127.0.0.1:{server.port}/v2/models/mobilenetv2/infer"
                wrk(url, 32, 3, body, "application/octet-stream", header)  # warm-up: pools and heaps grow first
                cpu0 = server.cpu_seconds()
                r = wrk(url, 32, seconds, body, "application/octet-stream", header)
                cpu1 = server.cpu_seconds()
                rps = r["requests"] / (r["duration_us"] / 1e6)
                print(f"round {round_index} {binary}: {rps:.1f} req/s, p99 {r['p99_us'] / 1000:.0f} ms, "
                      f"{(cpu1 - cpu0) / max(r['requests'], 1) * 1000:.2f} server CPU ms/req, "
                      f"errors {r['status_errors'] + r['socket_errors']}, load {os.getloadavg()[0]:.1f}", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
