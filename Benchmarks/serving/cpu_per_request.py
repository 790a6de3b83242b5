#!/usr/bin/env python3
"""Server CPU per request around the engine: a fixed number of binary V2 infer requests, CPU read from /proc.

Wall-clock throughput on a shared machine is noise; the server's own user+system CPU over a fixed request count is not.
The model takes MobileNetV2's input and output (1x3x224x224 FP32 in, 1000 FP32 logits out, dynamic batch) but computes
nothing (Reshape to rows, Slice the first 1000 values of each), so what the server burns per request is the serving path:
HTTP, codec, validation, batching, thread hand-offs. `--model mobilenetv2` uses the serving benchmark's fixture instead
(run Benchmarks/serving/make_fixtures.py first).

usage: cpu_per_request.py OSPREY [--requests N] [--clients C] [--rounds R] [--model light|mobilenetv2] [--out DIR]
prints one line per round and the median: `server CPU ms/request`.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loadgen import Server  # noqa: E402


def light_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    constant = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["input", "rows"], ["flat"]),
         helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["logits"])],
        "light",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000])],
        [constant("rows", [0, -1]), constant("starts", [0]), constant("ends", [1000]), constant("axes", [1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def fixtures(out, model):
    """(repository, request body bytes, JSON length) for `model`."""
    if model == "mobilenetv2":
        root = os.path.join(HERE, "..", "out", "serving")
        body = open(os.path.join(root, "request.bin"), "rb").read()
        return os.path.join(root, "repo"), body, int(open(os.path.join(root, "request.hdr")).read())
    version = os.path.join(out, "repo", "light", "1")
    os.makedirs(version, exist_ok=True)
    if not os.path.exists(os.path.join(version, "model.onnx")):
        light_model(os.path.join(version, "model.onnx"))
    with open(os.path.join(out, "repo", "light", "config.json"), "w") as f:
        json.dump({"max_batch_size": 32, "dynamic_batching": {"max_queue_delay_microseconds": 2000}}, f)
    image = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    header = json.dumps({
        "inputs": [{"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32", "parameters": {"binary_data_size": image.nbytes}}],
        "outputs": [{"name": "logits", "parameters": {"binary_data": True}}],
    }).encode()
    return os.path.join(out, "repo"), header + image.tobytes(), len(header)


def load(port, path, body, json_length, requests, clients):
    """Sends `requests` POSTs over `clients` keep-alive connections; returns the count of non-200 answers."""
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(json_length)}
    counter = iter(range(requests))
    lock = threading.Lock()
    failures = []

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if next(counter, None) is None:
                    break
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                failures.append(response.status)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(failures)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("osprey")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=["light", "mobilenetv2"], default="light")
    parser.add_argument("--out", default=os.path.join(HERE, "..", "out", "serving-cpu"))
    args = parser.parse_args()
    repository, body, json_length = fixtures(args.out, args.model)
    name = "light" if args.model == "light" else "mobilenetv2"
    server = Server(args.osprey, repository)
    try:
        path = f"/v2/models/{name}/infer"
        load(server.port, path, body, json_length, 200, args.clients)  # warm-up
        results = []
        for round_ in range(args.rounds):
            before = server.cpu_seconds()
            failed = load(server.port, path, body, json_length, args.requests, args.clients)
            cpu = server.cpu_seconds() - before
            results.append(cpu * 1000 / args.requests)
            print(f"round {round_ + 1}: {args.requests} requests ({failed} failed), server CPU {cpu:.2f} s, "
                  f"{results[-1]:.3f} ms/request", flush=True)
        print(f"server CPU ms/request (median of {args.rounds}): {statistics.median(results):.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
