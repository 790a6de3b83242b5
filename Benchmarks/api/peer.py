"""The peer: how Python V2 servers decode the same bodies (json/orjson + numpy, and np.frombuffer for binary)."""
import hashlib
import json
import sys
import time

import numpy as np

try:
    import orjson
except ImportError:
    orjson = None

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/osprey-api-bench"
body = open(f"{d}/request.json", "rb").read()
binary = open(f"{d}/request.bin", "rb").read()
head_len = int(open(f"{d}/request.bin.header").read())


def best(fn, iterations, rounds=5):
    result = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        result = min(result, (time.perf_counter() - start) / iterations)
    return result


def decode_json(loads):
    req = loads(body)
    inp = req["inputs"][0]
    return np.asarray(inp["data"], dtype=np.float32).reshape(inp["shape"])


def decode_binary():
    req = json.loads(binary[:head_len])
    inp = req["inputs"][0]
    size = inp["parameters"]["binary_data_size"]
    return np.frombuffer(binary[head_len:head_len + size], dtype=np.float32).reshape(inp["shape"])


for name, fn, n, size in [
    ("python json+numpy  ", lambda: decode_json(json.loads), 3, len(body)),
    ("python orjson+numpy", (lambda: decode_json(orjson.loads)) if orjson else None, 3, len(body)),
    ("python binary      ", decode_binary, 200, len(binary)),
    ("python sha256      ", lambda: hashlib.sha256(body).digest(), 5, len(body)),
]:
    if fn is None:
        continue
    s = best(fn, n)
    print(f"{name} {s * 1e3:8.3f} ms  {size / s / 1e6:.0f} MB/s")
