#!/usr/bin/env python3
"""gRPC vs HTTP binary serving benchmark: the same release server, the same MobileNetV2-shaped model, closed-loop
load at 1, 8 and 32 clients from tritonclient.grpc and tritonclient.http (binary tensors), the two protocols
alternating within one run so machine load hits both alike. Prints a Markdown table: req/s, p50, p99, errors.

usage: bench.py OSPREY_BINARY FIXTURES_DIR [SECONDS]   (FIXTURES_DIR from Benchmarks/serving/make_fixtures.py)
"""
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp

MODEL = "mobilenetv2"


def start(binary, repository):
    """The server and its (HTTP, gRPC) ports, read from the startup log; access lines are drained, not kept."""
    proc = subprocess.Popen([binary, "serve", "--port", "0", "--grpc-port", "0", "--model-repository", repository],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    http_port = grpc_port = None
    for line in proc.stdout:
        if m := re.search(r"listening on http://127\.0\.0\.1:(\d+)", line):
            http_port = int(m.group(1))
        if m := re.search(r"listening for gRPC on 127\.0\.0\.1:(\d+)", line):
            grpc_port = int(m.group(1))
        if "model repository loaded" in line:
            break
    if http_port is None or grpc_port is None:
        proc.kill()
        raise RuntimeError("server did not log its ports")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    return proc, http_port, grpc_port


def load(protocol, url, clients, seconds, image):
    latencies, errors, lock = [], [0], threading.Lock()
    stop_at = time.time() + seconds

    def worker():
        if protocol == "grpc":
            client = tgrpc.InferenceServerClient(url)
            tensor = tgrpc.InferInput("input", list(image.shape), "FP32")
            tensor.set_data_from_numpy(image)
            outputs = [tgrpc.InferRequestedOutput("logits")]
        else:
            client = thttp.InferenceServerClient(url, network_timeout=120)
            tensor = thttp.InferInput("input", list(image.shape), "FP32")
            tensor.set_data_from_numpy(image, binary_data=True)
            outputs = [thttp.InferRequestedOutput("logits", binary_data=True)]
        mine = []
        while time.time() < stop_at:
            started = time.perf_counter()
            try:
                client.infer(MODEL, [tensor], outputs=outputs).as_numpy("logits")
                mine.append(time.perf_counter() - started)
            except Exception:  # noqa: BLE001 - counted, the run goes on
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    began = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - began
    ms = np.array(latencies) * 1000
    return len(latencies) / elapsed, np.percentile(ms, 50), np.percentile(ms, 99), errors[0]


def main():
    binary, fixtures = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 10
    proc, http_port, grpc_port = start(binary, os.path.join(fixtures, "repo"))
    try:
        image = np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32)
        urls = {"grpc": f"127.0.0.1:{grpc_port}", "http": f"127.0.0.1:{http_port}"}
        for protocol in ("grpc", "http"):
            load(protocol, urls[protocol], 2, 3, image)  # warm-up
        print("| clients | protocol | req/s | p50 ms | p99 ms | errors |")
        print("|---|---|---|---|---|---|")
        ratios = []
        for clients in (1, 8, 32):
            row = {}
            for protocol in ("grpc", "http", "grpc", "http"):
                result = load(protocol, urls[protocol], clients, seconds / 2, image)
                row.setdefault(protocol, []).append(result)
            for protocol in ("grpc", "http"):
                rate = sum(r[0] for r in row[protocol]) / 2
                p50 = max(r[1] for r in row[protocol])
                p99 = max(r[2] for r in row[protocol])
                errors = sum(r[3] for r in row[protocol])
                row[protocol + "_summary"] = (rate, p50, p99, errors)
                print(f"| {clients} | {protocol} | {rate:.1f} | {p50:.1f} | {p99:.1f} | {errors} |", flush=True)
            g, h = row["grpc_summary"], row["http_summary"]
            ratios.append((clients, g[0] / h[0], g[2] / h[2]))
        print()
        for clients, throughput, p99 in ratios:
            print(f"clients {clients}: gRPC/HTTP throughput {throughput:.2f}, p99 {p99:.2f}")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
