#!/usr/bin/env python3
"""Soak: mixed traffic against a live `osprey serve` with a hot swap (model reload) every SWAP seconds, RSS and open
fds sampled; loopback only, stops by itself.

Usage: soak.py OSPREY_BINARY MODELS_DIR [--minutes M] [--swap SECONDS] [--clients N] [--report FILE]

Traffic per client thread, in a loop: JSON infer, binary-extension infer, classify (PNG and JPEG), multipart classify
of two images, /metrics, the health probes, a pipelined burst of 20 requests, and now and then a hostile request
(a million-element BYTES body, a truncated body, garbage). Passes when no request got an unexpected status (every
answer is 2xx or the 4xx its request asked for; a 503 is allowed only during a swap) and RSS and fds after the
warm-up stay flat (last sample within 10% + 16 MiB of the first sample after warm-up, fds within 4).
"""
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def infer_json():
    values = ",".join("0.5" for _ in range(64))
    return json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": []}]}).replace("[]", f"[{values}]").encode()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    minutes, swap, clients = arg("--minutes", 3.0), arg("--swap", 60.0), arg("--clients", 4)
    report = arg("--report", "")
    workdir = tempfile.mkdtemp(prefix="osprey-soak-")
    repository = os.path.join(workdir, "models")
    shutil.copytree(os.path.join(models, "digits"), os.path.join(repository, "digits"))
    server = hostile.Server(binary, repository)
    port = server.port
    status, _, body = hostile.request(port, "GET", "/v2/models/digits")
    name = json.loads(body)["inputs"][0]["name"]
    infer_body = infer_json().replace(b'"input"', json.dumps(name).encode())
    png = open(os.path.join(models, "digits", "examples", "digit_4.png"), "rb").read()
    jpg = open(os.path.join(models, "digits", "examples", "digit_7.jpg"), "rb").read()
    form = (b"--B\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n" + png
            + b"\r\n--B\r\nContent-Disposition: form-data; name=\"b\"; filename=\"b.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n" + jpg + b"\r\n--B--\r\n")
    header = json.dumps({"inputs": [{"name": name, "shape": [1, 1, 8, 8], "datatype": "FP32", "parameters": {"binary_data_size": 256}}]}).encode()
    binary_body = header + b"\x00\x00\x00\x3f" * 64
    million = b'{"inputs":[{"name":"x","shape":[1000000],"datatype":"BYTES","data":[' + b",".join([b'"a"'] * 1000000) + b"]}]}"

    stop = threading.Event()
    swapping = threading.Event()
    lock = threading.Lock()
    counts = {}
    unexpected = []

    def record(label, status, allowed):
        with lock:
            counts[status] = counts.get(status, 0) + 1
            if status not in allowed and not (status == 503 and swapping.is_set()):
                unexpected.append((round(time.time() - started, 1), label, status))

    def client(index):
        rng = random.Random(index)
        while not stop.is_set():
            record("infer", hostile.request(port, "POST", "/v2/models/digits/infer", infer_body)[0], {200})
            record("infer-binary", hostile.request(port, "POST", "/v2/models/digits/infer", binary_body,
                                                   {"Inference-Header-Content-Length": str(len(header))})[0], {200})
            record("classify-png", hostile.request(port, "POST", "/v2/models/digits/classify", png, {"Content-Type": "image/png"})[0], {200})
            record("classify-jpeg", hostile.request(port, "POST", "/v2/models/digits/classify", jpg, {"Content-Type": "image/jpeg"})[0], {200})
            record("classify-form", hostile.request(port, "POST", "/v2/models/digits/classify", form,
                                                    {"Content-Type": "multipart/form-data; boundary=B"})[0], {200})
            record("metrics", hostile.request(port, "GET", "/metrics")[0], {200})
            record("live", hostile.request(port, "GET", "/v2/health/live")[0], {200})
            record("ready", hostile.request(port, "GET", "/v2/health/ready")[0], {200})
            try:
                s = hostile.connect(port)
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n" * 19 + b"GET /v2 HTTP/1.1\r\nConnection: close\r\n\r\n")
                reader = hostile.ResponseReader(s)
                for _ in range(20):
                    record("pipelined", reader.read()[0], {200})
                s.close()
            except OSError:
                record("pipelined", None, {200})
            roll = rng.random()
            if roll < 0.05:
                record("million-bytes", hostile.request(port, "POST", "/v2/models/digits/infer", million, timeout=30)[0], {413})
            elif roll < 0.15:
                try:
                    s = hostile.connect(port)
                    s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nContent-Length: 50000\r\n\r\n" + infer_body)
                    hostile.reset(s)
                except OSError:
                    pass
            elif roll < 0.25:
                try:
                    s = hostile.connect(port)
                    s.sendall(bytes(rng.randrange(256) for _ in range(200)))
                    hostile.read_response(s)
                    s.close()
                except OSError:
                    pass

    samples = []
    started = time.time()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    next_swap = started + swap
    swaps = 0
    try:
        while time.time() - started < minutes * 60:
            time.sleep(5)
            samples.append((round(time.time() - started), server.rss() >> 20, server.fds()))
            print(f"t={samples[-1][0]}s RSS {samples[-1][1]} MiB fds {samples[-1][2]} answers {sum(counts.values())}", flush=True)
            if time.time() >= next_swap:
                swapping.set()
                status = hostile.request(port, "POST", "/v2/repository/models/digits/load", timeout=60)[0]
                swaps += 1
                record("swap", status, {200})
                time.sleep(1)
                swapping.clear()
                next_swap = time.time() + swap
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        code = server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    warm = next((s for s in samples if s[0] >= min(60, minutes * 20)), samples[0])
    last = samples[-1]
    rss_flat = last[1] <= warm[1] * 1.10 + 16
    fds_flat = last[2] <= warm[2] + 4
    summary = {"minutes": minutes, "clients": clients, "swaps": swaps, "answers": sum(counts.values()),
               "statuses": {str(k): v for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))},
               "unexpected": unexpected[:50], "rss_mib": {"after_warmup": warm[1], "last": last[1], "max": max(s[1] for s in samples)},
               "fds": {"after_warmup": warm[2], "last": last[2], "max": max(s[2] for s in samples)},
               "rss_flat": rss_flat, "fds_flat": fds_flat, "exit_status": code}
    print(json.dumps(summary, indent=2))
    if report:
        with open(report, "w") as out:
            json.dump(summary, out, indent=2)
    return 0 if not unexpected and rss_flat and fds_flat and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
