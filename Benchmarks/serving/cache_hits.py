#!/usr/bin/env python3
"""Response cache hits against misses in the same run: server CPU and client latency per binary V2 request.

A model file (e.g. MobileNetV2 from Benchmarks/engine/make_models.py) is served with `"response_cache": {"enable":
true}` and `--cache-bytes 256MiB`. Each round sends N requests that all repeat one input (hits, after the first) and N
requests whose inputs all differ (misses), alternating which goes first; server CPU comes from /proc (load-robust),
latency is the client's wall time per request, one connection, one request at a time.

usage: cache_hits.py OSPREY MODEL.onnx [--requests N] [--rounds R] [--out DIR]
prints one line per phase and the medians with the miss/hit ratios.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loadgen import Server  # noqa: E402


def repository(out, model_path):
    """A repository holding `model_path` as model `cached` version 1; returns (path, input name, input shape)."""
    version = os.path.join(out, "repo", "cached", "1")
    os.makedirs(version, exist_ok=True)
    shutil.copyfile(model_path, os.path.join(version, "model.onnx"))
    with open(os.path.join(out, "repo", "cached", "config.json"), "w") as f:
        json.dump({"max_batch_size": 8, "response_cache": {"enable": True}}, f)
    graph = onnx.load(model_path, load_external_data=False).graph
    first = graph.input[0]
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in first.type.tensor_type.shape.dim]
    return os.path.join(out, "repo"), first.name, shape


def send(port, bodies, json_length):
    """POSTs each body in turn on one keep-alive connection; returns (latencies in s, X-Cache values)."""
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(json_length)}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    latencies, outcomes = [], []
    for body in bodies:
        started = time.perf_counter()
        connection.request("POST", "/v2/models/cached/infer", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            raise RuntimeError(f"status {response.status}")
        outcomes.append(response.getheader("X-Cache"))
    connection.close()
    return latencies, outcomes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("osprey")
    parser.add_argument("model")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "..", "out", "serving-cache"))
    args = parser.parse_args()
    repo, name, shape = repository(args.out, args.model)
    tensor = np.random.default_rng(0).random(shape, dtype=np.float32)
    header = json.dumps({"inputs": [{"name": name, "shape": shape, "datatype": "FP32",
                                     "parameters": {"binary_data_size": tensor.nbytes}}],
                         "binary_data_output": True}).encode()
    distinct = iter(range(1, 1 << 30))

    def body(marker):
        image = tensor.copy()
        image.flat[0] = marker  # one float differs: another key
        return header + image.tobytes()

    server = Server(args.osprey, repo, "--cache-bytes", "256MiB", "--grpc-port", "off")
    try:
        same = body(0)
        send(server.port, [same] + [body(next(distinct)) for _ in range(10)], len(header))  # warm-up; `same` is stored
        cpu = {"hit": [], "miss": []}
        latency = {"hit": [], "miss": []}
        for round_ in range(args.rounds):
            for phase in (("hit", "miss") if round_ % 2 == 0 else ("miss", "hit")):
                bodies = [same] * args.requests if phase == "hit" else [body(next(distinct)) for _ in range(args.requests)]
                before = server.cpu_seconds()
                latencies, outcomes = send(server.port, bodies, len(header))
                spent = server.cpu_seconds() - before
                if set(outcomes) != {phase}:
                    raise RuntimeError(f"{phase} phase answered X-Cache {sorted(set(map(str, outcomes)))}")
                cpu[phase].append(spent * 1000 / args.requests)
                latency[phase].append(statistics.median(latencies) * 1000)
                print(f"round {round_ + 1} {phase}: server CPU {cpu[phase][-1]:.3f} ms/request, "
                      f"median latency {latency[phase][-1]:.3f} ms", flush=True)
        hit_cpu, miss_cpu = statistics.median(cpu["hit"]), statistics.median(cpu["miss"])
        hit_latency, miss_latency = statistics.median(latency["hit"]), statistics.median(latency["miss"])
        print(f"server CPU ms/request: hit {hit_cpu:.3f}, miss {miss_cpu:.3f} (miss/hit {miss_cpu / hit_cpu:.1f}x)")
        print(f"median latency ms: hit {hit_latency:.3f}, miss {miss_latency:.3f} (miss/hit {miss_latency / hit_latency:.1f}x)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
