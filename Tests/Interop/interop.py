#!/usr/bin/env python3
"""Interoperability suite: a live `osprey serve` driven by Triton's own Python client (tritonclient.http),
promtool and plain HTTP. Run by `.ci/interop`; prints one PASS/FAIL line per case and finally
`interop: N passed, N failed` (exit status 1 when anything failed).

usage: interop.py OSPREY_BINARY MODELS_DIR
"""
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Support"))
import fixtures  # noqa: E402
from osprey_server import Server  # noqa: E402,F401 (lifecycle and repository-faults import it from here too)

MODEL = "digits"


class Suite:
    """A tiny runner: each case is a function; an exception (assertion or otherwise) fails it."""

    def __init__(self):
        self.passed, self.failed = 0, 0

    def run(self, name, function, *args):
        started = time.time()
        try:
            function(*args)
            self.passed += 1
            print(f"PASS {name} ({time.time() - started:.2f}s)", flush=True)
        except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the suite
            self.failed += 1
            detail = "".join(traceback.format_exception_only(type(error), error)).strip()
            print(f"FAIL {name}: {detail}", flush=True)
            if not isinstance(error, AssertionError):
                traceback.print_exc(file=sys.stdout)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def client_for(server):
    return triton.InferenceServerClient(url=server.url, network_timeout=120)


def example_images(models):
    """{digit: encoded bytes} of models/digits/examples/digit_N.(png|jpg)."""
    folder = os.path.join(models, MODEL, "examples")
    images = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("digit_"):
            with open(os.path.join(folder, name), "rb") as f:
                images[int(name[6])] = f.read()
    return images


# MARK: - Cases


def health_and_metadata(server):
    client = client_for(server)
    expect(client.is_server_live(), "is_server_live: expected True")
    expect(client.is_server_ready(), "is_server_ready: expected True")
    metadata = client.get_server_metadata()
    expect(metadata["name"] == "osprey", f"server name: got {metadata.get('name')}")
    for extension in ["binary_tensor_data", "classification", "model_repository", "statistics"]:
        expect(extension in metadata["extensions"], f"extension {extension} missing from {metadata['extensions']}")
    model = client.get_model_metadata(MODEL)
    expect(model["name"] == MODEL and model["platform"] == "onnx", f"model metadata: {model}")
    expect(model["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 8, 8]}], f"inputs: {model['inputs']}")
    expect(model["outputs"] == [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}], f"outputs: {model['outputs']}")
    config = client.get_model_config(MODEL)
    expect(config["max_batch_size"] == 32, f"model config max_batch_size: {config}")
    expect(config["input"][0]["data_type"] == "TYPE_FP32" and config["input"][0]["dims"] == [1, 8, 8], f"model config input: {config['input']}")
    expect(client.get_model_config(MODEL, "1")["name"] == MODEL, "versioned model config")
    expect(client.is_model_ready(MODEL), "is_model_ready(digits): expected True")
    expect(client.is_model_ready(MODEL, "1"), "is_model_ready(digits, 1): expected True")
    expect(not client.is_model_ready("no-such-model"), "is_model_ready(no-such-model): expected False")
    try:
        client.get_model_metadata("no-such-model")
        raise AssertionError("metadata of an unknown model: expected an error")
    except InferenceServerException as error:
        expect(str(error.status()) == "404" or "not found" in str(error).lower(), f"unknown model error: {error}")


def infer_json_and_binary(server, models):
    client = client_for(server)
    images = np.random.default_rng(1).uniform(-1, 1, (5, 1, 8, 8)).astype(np.float32)
    reference = fixtures.digits_reference(os.path.join(models, MODEL, "1", "model.onnx"), images)
    for binary in (False, True):
        tensor = triton.InferInput("image", list(images.shape), "FP32")
        tensor.set_data_from_numpy(images, binary_data=binary)
        output = triton.InferRequestedOutput("probabilities", binary_data=binary)
        result = client.infer(MODEL, [tensor], outputs=[output], request_id=f"req-{binary}")
        got = result.as_numpy("probabilities")
        expect(got is not None and got.shape == (5, 10), f"binary={binary}: shape {None if got is None else got.shape}")
        expect(np.allclose(got, reference, atol=1e-5), f"binary={binary}: max error {np.abs(got - reference).max()}")
        response = result.get_response()
        expect(response["model_name"] == MODEL and response["model_version"] == "1", f"response header: {response}")
        expect(response.get("id") == f"req-{binary}", f"request id echoed: {response.get('id')}")
    # Binary input with a JSON output, and the reverse, in one client each.
    tensor = triton.InferInput("image", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images, binary_data=True)
    got = client.infer(MODEL, [tensor], outputs=[triton.InferRequestedOutput("probabilities", binary_data=False)]).as_numpy("probabilities")
    expect(np.allclose(got, reference, atol=1e-5), "binary in, JSON out: values differ")


def versions_async_and_errors(server):
    """Version-pinned infer, tritonclient's async_infer (greenlets, concurrent), and a refused shape."""
    client = triton.InferenceServerClient(url=server.url, concurrency=4)
    images = np.random.default_rng(4).uniform(-1, 1, (8, 1, 1, 8, 8)).astype(np.float32)
    inputs = []
    for image in images:
        tensor = triton.InferInput("image", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(image)
        inputs.append(tensor)
    pending = [client.async_infer(MODEL, [tensor], model_version="1") for tensor in inputs]
    results = [p.get_result() for p in pending]
    for image, result in zip(images, results):
        expect(result.get_response()["model_version"] == "1", "version-pinned async infer answered another version")
        expect(result.as_numpy("probabilities").shape == (1, 10), "async infer output shape")
    wrong = triton.InferInput("image", [1, 64], "FP32")
    wrong.set_data_from_numpy(np.zeros((1, 64), np.float32))
    try:
        client.infer(MODEL, [wrong])
        raise AssertionError("a [1, 64] input for a [-1, 1, 8, 8] model: expected an error")
    except InferenceServerException as error:
        expect("image" in str(error) and "64" in str(error), f"shape error should name the input and shapes: {error}")
    try:
        client.infer(MODEL, [inputs[0]], model_version="7")
        raise AssertionError("infer on a missing version: expected an error")
    except InferenceServerException as error:
        expect("7" in str(error), f"missing version error should name it: {error}")
    client.close()


def compression(server):
    """tritonclient's response compression works (the server answers uncompressed); compressed request bodies are
    refused with 415 naming Content-Encoding, as openapi.yaml documents, not misread as a broken binary body."""
    client = client_for(server)
    tensor = triton.InferInput("image", [1, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 1, 8, 8), np.float32))
    for algorithm in ("gzip", "deflate"):
        got = client.infer(MODEL, [tensor], response_compression_algorithm=algorithm).as_numpy("probabilities")
        expect(got.shape == (1, 10), f"response_compression_algorithm={algorithm}: shape {got.shape}")
        try:
            client.infer(MODEL, [tensor], request_compression_algorithm=algorithm)
            raise AssertionError(f"request_compression_algorithm={algorithm}: expected 415")
        except InferenceServerException as error:
            expect(str(error.status()) == "415" and "Content-Encoding" in str(error),
                   f"request_compression_algorithm={algorithm}: expected 415 naming Content-Encoding, got {error}")


def requested_outputs(server):
    client = client_for(server)
    images = np.zeros((2, 1, 8, 8), np.float32)
    tensor = triton.InferInput("image", [2, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(images)
    everything = client.infer(MODEL, [tensor])  # no outputs requested: all model outputs
    expect([o["name"] for o in everything.get_response()["outputs"]] == ["probabilities"], "all outputs by default")
    try:
        client.infer(MODEL, [tensor], outputs=[triton.InferRequestedOutput("no_such_output")])
        raise AssertionError("unknown requested output: expected an error")
    except InferenceServerException as error:
        expect("no_such_output" in str(error), f"error should name the output: {error}")


def classification_extension(server):
    client = client_for(server)
    images = np.random.default_rng(2).uniform(-1, 1, (3, 1, 8, 8)).astype(np.float32)
    tensor = triton.InferInput("image", [3, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(images)
    plain = client.infer(MODEL, [tensor]).as_numpy("probabilities")
    for binary in (True, False):
        result = client.infer(MODEL, [tensor], outputs=[triton.InferRequestedOutput("probabilities", binary_data=binary, class_count=3)])
        classes = result.as_numpy("probabilities")
        expect(classes.shape == (3, 3), f"binary={binary}: classification shape {classes.shape}, expected (3, 3)")
        for row, probabilities in zip(classes, plain):
            entries = [(e.decode() if isinstance(e, bytes) else e).split(":") for e in row]
            indices = [int(e[1]) for e in entries]
            expect(indices == list(np.argsort(-probabilities)[:3]), f"top-3 indices {indices} vs {np.argsort(-probabilities)[:3]}")
            expect(all(abs(float(e[0]) - probabilities[int(e[1])]) < 1e-5 for e in entries), f"scores {entries}")
            expect(all(len(e) == 3 and e[2] == e[1] for e in entries), f"labels (labels.txt maps i -> 'i'): {entries}")


def bytes_image_input(server, models):
    client = client_for(server)
    images = example_images(models)
    predictions = {}
    for digit, data in images.items():
        tensor = triton.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([data], dtype=np.object_), binary_data=True)
        result = client.infer(MODEL, [tensor])
        probabilities = result.as_numpy("probabilities")
        expect(probabilities.shape == (1, 10), f"digit {digit}: shape {probabilities.shape}")
        predictions[digit] = int(np.argmax(probabilities))
        # The same image through /classify must agree with the BYTES tensor path.
        status, _, body = server.request("POST", f"/v2/models/{MODEL}/classify?top_k=1", body=data)
        expect(status == 200, f"classify digit {digit}: status {status} {body[:200]}")
        expect(json.loads(body)["classifications"][0][0]["index"] == predictions[digit], f"classify vs BYTES infer for digit {digit}")
    correct = sum(p == d for d, p in predictions.items())
    expect(correct >= 8, f"example digits recognised: {correct}/10 ({predictions})")
    # A batch of all ten in one BYTES tensor gives the same answers.
    tensor = triton.InferInput("image", [len(images)], "BYTES")
    tensor.set_data_from_numpy(np.array(list(images.values()), dtype=np.object_), binary_data=True)
    batch = client.infer(MODEL, [tensor]).as_numpy("probabilities")
    expect(list(np.argmax(batch, axis=1)) == [predictions[d] for d in images], "batched BYTES images agree with single ones")


def inference_statistics(server):
    client = client_for(server)
    stats = client.get_inference_statistics(MODEL)
    entry = stats["model_stats"][0]
    expect(entry["name"] == MODEL and entry["version"] == "1", f"stats entry: {entry}")
    expect(entry["inference_count"] > 0 and entry["execution_count"] > 0, f"counts: {entry}")
    success = entry["inference_stats"]["success"]
    expect(success["count"] > 0 and success["ns"] > 0, f"success stats: {success}")
    expect(entry["inference_count"] >= entry["execution_count"], "inference_count counts rows, execution_count batches")


def repository_management(server):
    client = client_for(server)
    index = client.get_model_repository_index()
    expect(any({"name": MODEL, "state": "READY", "version": "1"}.items() <= entry.items() for entry in index), f"index: {index}")
    client.unload_model(MODEL)
    expect(not client.is_model_ready(MODEL), "after unload: expected not ready")
    tensor = triton.InferInput("image", [1, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 1, 8, 8), np.float32))
    try:
        client.infer(MODEL, [tensor])
        raise AssertionError("infer after unload: expected an error")
    except InferenceServerException:
        pass
    client.load_model(MODEL)
    expect(client.is_model_ready(MODEL), "after load: expected ready")
    expect(client.infer(MODEL, [tensor]).as_numpy("probabilities").shape == (1, 10), "infer after reload")
    # load with a config override (Triton's load_model(config=...)): max_batch_size 16, then back.
    config = client.get_model_config(MODEL)
    client.load_model(MODEL, config=json.dumps({"max_batch_size": 16}))
    expect(client.get_model_config(MODEL)["max_batch_size"] == 16, "load_model(config=...): max_batch_size 16 expected")
    client.load_model(MODEL, config=json.dumps({"max_batch_size": config["max_batch_size"],
                                                "dynamic_batching": config["dynamic_batching"],
                                                "output": {"probabilities": True}, "image": {k: v for k, v in config["image"].items() if k != "input"}}))
    expect(client.get_model_config(MODEL)["max_batch_size"] == config["max_batch_size"], "config restored")


def metrics_pass_promtool(server):
    status, headers, body = server.request("GET", "/metrics")
    expect(status == 200, f"/metrics status {status}")
    expect(headers.get("Content-Type", "").startswith("text/plain"), f"content type {headers.get('Content-Type')}")
    text = body.decode()
    for name in ["osprey_inference_batch_size", "osprey_http_requests_total"]:
        expect(name in text, f"{name} missing from /metrics")
    check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
    expect(check.returncode == 0, f"promtool check metrics: {check.returncode}\n{check.stdout.decode()}{check.stderr.decode()}")


def hot_swap_under_load(server, models):
    """8 client threads infer nonstop while version 2 is uploaded, version 1 pinned, then unpinned."""
    image = np.random.default_rng(3).uniform(-1, 1, (1, 1, 8, 8)).astype(np.float32)
    v1_class = int(np.argmax(fixtures.digits_reference(os.path.join(models, MODEL, "1", "model.onnx"), image)))
    expect(v1_class != fixtures.BOOSTED_CLASS, "test image must not already predict the boosted class")
    records, failures, stop = [], [], threading.Event()
    lock = threading.Lock()

    def worker():
        client = client_for(server)
        tensor = triton.InferInput("image", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(image, binary_data=True)
        while not stop.is_set():
            started = time.monotonic()
            try:
                result = client.infer(MODEL, [tensor])
                version = result.get_response()["model_version"]
                predicted = int(np.argmax(result.as_numpy("probabilities")))
                with lock:
                    records.append((started, time.monotonic(), version, predicted))
            except Exception as error:  # noqa: BLE001 - counted, reported below
                with lock:
                    failures.append(repr(error))
        client.close()

    def marks():
        return time.monotonic()

    def settle(since):
        """Waits until 50 requests started after `since` have completed (at most 20 s), so every phase is observed."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with lock:
                if sum(1 for r in records if r[0] >= since) >= 50:
                    return
            time.sleep(0.05)

    model_bytes = fixtures.digits_v2(os.path.join(models, MODEL, "1", "model.onnx"))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(8):
            pool.submit(worker)
        settle(marks())
        t_put = marks()
        status, _, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/2", body=model_bytes,
                                         headers={"Content-Type": "application/octet-stream"})
        t_v2 = marks()
        expect(status == 201, f"PUT version 2: {status} {body[:300]}")
        settle(t_v2)
        t_pin = marks()
        status, _, body = server.request("POST", f"/v2/repository/models/{MODEL}/default", body=json.dumps({"version": "1"}),
                                         headers={"Content-Type": "application/json"})
        t_v1 = marks()
        expect(status == 200 and json.loads(body)["default_version"] == "1", f"pin version 1: {status} {body[:300]}")
        settle(t_v1)
        t_unpin = marks()
        status, _, body = server.request("DELETE", f"/v2/repository/models/{MODEL}/default")
        t_back = marks()
        expect(status == 200 and json.loads(body)["default_version"] == "2", f"unpin: {status} {body[:300]}")
        settle(t_back)
        stop.set()
    expect(not failures, f"{len(failures)} failed requests during the swap, e.g. {failures[:3]}")
    expect(len(records) > 100, f"only {len(records)} requests completed under load")
    for started, _, version, predicted in records:
        expected_class = fixtures.BOOSTED_CLASS if version == "2" else v1_class
        expect(predicted == expected_class, f"version {version} answered class {predicted}, expected {expected_class}")

    def versions(lo, hi):
        return {r[2] for r in records if r[0] >= lo and r[1] <= hi}

    expect(versions(0, t_put) == {"1"}, f"before the upload: {versions(0, t_put)}")
    expect(versions(t_v2, t_pin) == {"2"}, f"after the upload: {versions(t_v2, t_pin)}")
    expect(versions(t_v1, t_unpin) == {"1"}, f"after pinning 1: {versions(t_v1, t_unpin)}")
    expect(versions(t_back, float("inf")) == {"2"}, f"after unpinning: {versions(t_back, float('inf'))}")
    print(f"     hot swap: {len(records)} requests, 0 failed, versions 1 -> 2 -> 1 -> 2", flush=True)


def startup_readiness(binary, workdir, shared):
    """Readiness is 503 until the repository's models are loaded (the slow model takes a while to compile)."""
    repository = os.path.join(workdir, "shutdown-repo")
    os.makedirs(os.path.join(repository, "slow", "1"))
    with open(os.path.join(repository, "slow", "1", "model.onnx"), "wb") as f:
        f.write(fixtures.slow_model())
    server = Server(binary, repository, "--shutdown-timeout", "60s")
    shared["server"] = server
    expect(server.probes[0] == 503, f"first readiness probe right after 'listening': expected 503 while loading, got {server.probes[0]}")
    expect(server.probes[-1] == 200, f"readiness after loading: {server.probes[-1]}")


def graceful_shutdown(shared):
    """SIGTERM with a slow request in flight: it completes, readiness is 503 meanwhile, exit status 0."""
    server = shared.get("server")
    expect(server is not None, "no server (startup failed)")
    try:
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, 512], "datatype": "FP32", "data": [0.01] * 512}],
                           "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
        started = time.time()
        status, _, _warm = server.request("POST", "/v2/models/slow/infer", body=body)  # warm-up, and timing
        duration = time.time() - started
        expect(status == 200, f"slow model warm-up: {status} {_warm[:300]}")
        result = {}

        def slow_request():
            result["response"] = server.request("POST", "/v2/models/slow/infer", body=body, timeout=120)
            result["finished"] = time.monotonic()

        thread = threading.Thread(target=slow_request)
        # A probe whose headers are half sent: the drain keeps a connection mid-request open, so it is answered.
        probe = socket.create_connection(("127.0.0.1", server.port))
        probe.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: osprey\r\n")
        thread.start()
        time.sleep(min(0.3, duration / 4))
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        probe.sendall(b"\r\n")
        probe.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = probe.recv(4096)
            if not chunk:
                break
            answer += chunk
        probe.close()
        status_line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
        thread.join(120)
        code = server.proc.wait(60)
        status, _, data = result.get("response", (None, {}, b""))
        expect(status == 200 and len(data) > 2048 * 512 * 4, f"in-flight request during shutdown: status {status}, {len(data)} bytes")
        expect(result.get("finished", 0) > signalled, "the slow request finished before SIGTERM: it was not in flight")
        expect(" 503 " in status_line + " ", f"readiness while draining: expected 503, got '{status_line}'")
        expect(code == 0, f"exit status after SIGTERM: {code}\n" + "\n".join(server.log[-10:]))
        refused = server.request("GET", "/v2/health/live")[0]
        expect(refused is None, f"after exit, connections must be refused; got {refused}")
    finally:
        server.stop()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    # A timeout's SIGTERM unwinds through the finally blocks, so no server outlives the suite.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    workdir = tempfile.mkdtemp(prefix="osprey-interop-")
    suite = Suite()
    server = None
    try:
        repository = os.path.join(workdir, "models")
        shutil.copytree(models, repository)
        server = Server(binary, repository)
        print(f"osprey on port {server.port}, repository {repository}", flush=True)
        suite.run("health, server and model metadata", health_and_metadata, server)
        suite.run("infer JSON and binary tensors (vs numpy reference)", infer_json_and_binary, server, models)
        suite.run("requested outputs", requested_outputs, server)
        suite.run("version-pinned async_infer, shape and version errors", versions_async_and_errors, server)
        suite.run("compression: response gzip/deflate served, compressed requests 415", compression, server)
        suite.run("classification extension (class_count=3)", classification_extension, server)
        suite.run("BYTES image input and /classify agree", bytes_image_input, server, models)
        suite.run("inference statistics", inference_statistics, server)
        suite.run("repository index, unload, load", repository_management, server)
        suite.run("promtool check metrics", metrics_pass_promtool, server)
        suite.run("hot swap under load (8 threads): upload v2, pin v1, unpin", hot_swap_under_load, server, models)
        server.stop()
        shared = {}
        suite.run("startup: readiness 503 until the repository is loaded", startup_readiness, binary, workdir, shared)
        suite.run("graceful shutdown: SIGTERM drains an in-flight request, exit 0", graceful_shutdown, shared)
        if "server" in shared:
            shared["server"].stop()
    except Exception as error:  # noqa: BLE001 - a setup failure is one more failure
        suite.failed += 1
        print(f"FAIL setup: {error}", flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"interop: {suite.passed} passed, {suite.failed} failed", flush=True)
    return 1 if suite.failed else 0


if __name__ == "__main__":
    sys.exit(main())
