#!/usr/bin/env python3
"""gRPC interoperability suite: a live `osprey serve --grpc-port 0` driven by Triton's own gRPC client
(tritonclient.grpc) and grpcio-health-checking. Run by `.ci/interop`; prints one PASS/FAIL line per case and finally
`grpc interop: N passed, N failed` (exit status 1 when anything failed).

usage: grpc_interop.py OSPREY_BINARY MODELS_DIR
"""
import concurrent.futures
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import time

import grpc
import numpy as np
import onnx
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures  # noqa: E402
from interop import MODEL, Server, Suite, example_images, expect  # noqa: E402

INT_MODEL = "int64_add"
ECHO_MODEL = "echo"


def echo_model():
    """ONNX bytes: y = Identity(x) for FP32 x of any [rows, cols] (no batching), for multi-megabyte round trips."""
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "echo",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", "cols"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "cols"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def int64_add_model():
    """ONNX bytes: y = x + 7 for INT64 x [-1, 4], batchable."""
    seven = numpy_helper.from_array(np.array([7], dtype=np.int64), "seven")
    graph = helper.make_graph([helper.make_node("Add", ["x", "seven"], ["y"])], "int64_add",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["batch", 4])], [seven])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


class GRPCServer(Server):
    """The HTTP interop server with a free gRPC port, read back from the `listening for gRPC` log line."""

    def __init__(self, binary, repository, *extra):
        super().__init__(binary, repository, "--grpc-port", "0", *extra)
        marker = "listening for gRPC on 127.0.0.1:"
        # The log pump may lag behind the readiness probe: give it a moment to read the line.
        deadline = time.time() + 30
        lines = []
        while not lines and time.time() < deadline:
            lines = [line for line in list(self.log) if marker in line]
            if not lines:
                time.sleep(0.02)
        if not lines:
            self.stop()
            raise RuntimeError("server did not log its gRPC port:\n" + "\n".join(self.log[-20:]))
        self.grpc_port = int(lines[0].split(marker, 1)[1].split()[0].strip('"'))

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc_port}"


def grpc_client(server):
    return tgrpc.InferenceServerClient(url=server.grpc_url)


def expect_code(function, code, fragment=None):
    """Runs `function`, which must fail with gRPC status `code` (a grpc.StatusCode name) and mention `fragment`."""
    try:
        function()
    except InferenceServerException as error:
        status = error.status()
        expect(status == f"StatusCode.{code}", f"expected {code}, got {status}: {error.message()}")
        if fragment:
            expect(fragment in (error.message() or ""), f"message {error.message()!r} lacks {fragment!r}")
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def digits_input(images):
    tensor = tgrpc.InferInput("image", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images)
    return tensor


# MARK: - Cases


def health_and_metadata(server):
    client = grpc_client(server)
    expect(client.is_server_live(), "server live")
    expect(client.is_server_ready(), "server ready")
    expect(client.is_model_ready(MODEL), "digits ready")
    expect(client.is_model_ready(MODEL, "1"), "digits v1 ready")
    expect(not client.is_model_ready("no_such_model"), "unknown model not ready")
    metadata = client.get_server_metadata(as_json=True)
    expect(metadata["name"] == "osprey" and "statistics" in metadata["extensions"], f"server metadata {metadata}")
    model = client.get_model_metadata(MODEL, as_json=True)
    expect(model["name"] == MODEL and model["versions"] == ["1"] and model["platform"] == "onnx", f"model metadata {model}")
    expect(model["inputs"] == [{"name": "image", "datatype": "FP32", "shape": ["-1", "1", "8", "8"]}], f"inputs {model['inputs']}")
    expect(model["outputs"] == [{"name": "probabilities", "datatype": "FP32", "shape": ["-1", "10"]}], f"outputs {model['outputs']}")
    expect_code(lambda: client.get_model_metadata("no_such_model"), "NOT_FOUND", "no_such_model")


def model_config(server):
    config = grpc_client(server).get_model_config(MODEL, as_json=True)["config"]
    expect(config["name"] == MODEL and config["max_batch_size"] == 32, f"config {config}")
    expect(config["input"] == [{"name": "image", "data_type": "TYPE_FP32", "dims": ["1", "8", "8"]}], f"input {config['input']}")
    expect(config["output"] == [{"name": "probabilities", "data_type": "TYPE_FP32", "dims": ["10"]}], f"output {config['output']}")
    expect(config["dynamic_batching"]["max_queue_delay_microseconds"] == "2000", f"dynamic batching {config['dynamic_batching']}")
    expect(config["instance_group"] == [{"count": 1, "kind": "KIND_CPU"}], f"instance_group {config.get('instance_group')}")


def infer_fp32(server, models):
    client = grpc_client(server)
    images = np.random.default_rng(3).random((3, 1, 8, 8), dtype=np.float32) * 16
    reference = fixtures.digits_reference(os.path.join(models, MODEL, "1", "model.onnx"), images)
    result = client.infer(MODEL, [digits_input(images)], request_id="req-7")
    got = result.as_numpy("probabilities")
    expect(got.shape == (3, 10) and got.dtype == np.float32, f"shape {got.shape} dtype {got.dtype}")
    tolerance = 1e-4 * np.abs(reference).max() + 1e-5
    expect(np.abs(got - reference).max() <= tolerance, f"max error {np.abs(got - reference).max()}")
    response = result.get_response()
    expect(response.id == "req-7" and response.model_name == MODEL and response.model_version == "1", f"response {response.id}")
    # The same tensors over HTTP binary give the same bytes: one engine behind both ports.
    http = thttp.InferenceServerClient(url=server.url)
    tensor = thttp.InferInput("image", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images, binary_data=True)
    expect(np.array_equal(http.infer(MODEL, [tensor]).as_numpy("probabilities"), got), "gRPC and HTTP answers agree")


def infer_int64_typed_and_raw(server):
    client = grpc_client(server)
    x = np.arange(8, dtype=np.int64).reshape(2, 4) - 3
    raw = tgrpc.InferInput("x", [2, 4], "INT64")
    raw.set_data_from_numpy(x)
    expect(np.array_equal(client.infer(INT_MODEL, [raw]).as_numpy("y"), x + 7), "INT64 raw_input_contents")
    # Typed `contents` (int64_contents), as other gRPC clients send it, through the raw protobuf message.
    request = tgrpc.service_pb2.ModelInferRequest(model_name=INT_MODEL)
    tensor = request.inputs.add(name="x", datatype="INT64", shape=[2, 4])
    tensor.contents.int64_contents.extend(x.flatten().tolist())
    response = client._client_stub.ModelInfer(request)
    expect(len(response.raw_output_contents) == 1, "outputs come back as raw_output_contents")
    got = np.frombuffer(response.raw_output_contents[0], dtype=np.int64).reshape(2, 4)
    expect(np.array_equal(got, x + 7), f"typed contents answer {got}")


def infer_bytes(server, models):
    client = grpc_client(server)
    images = example_images(models)
    tensor = tgrpc.InferInput("image", [len(images)], "BYTES")
    tensor.set_data_from_numpy(np.array(list(images.values()), dtype=np.object_))
    probabilities = client.infer(MODEL, [tensor]).as_numpy("probabilities")
    expect(list(np.argmax(probabilities, axis=1)) == list(images.keys()), f"BYTES images predicted {np.argmax(probabilities, axis=1)}")
    # A BYTES output: the classification extension's "score:index:label" strings.
    output = tgrpc.InferRequestedOutput("probabilities", class_count=3)
    single = tgrpc.InferInput("image", [1], "BYTES")
    single.set_data_from_numpy(np.array([images[4]], dtype=np.object_))
    top = client.infer(MODEL, [single], outputs=[output]).as_numpy("probabilities")
    expect(top.shape == (1, 3) and top[0][0].decode().split(":")[1] == "4", f"classification output {top}")


def large_tensors(server):
    """16 MiB in and 16 MiB out in one call, several at once: flow-control windows and DATA splitting both ways."""
    x = np.random.default_rng(11).random((1024, 4096), dtype=np.float32)

    def one(_):
        client = tgrpc.InferenceServerClient(url=server.grpc_url)
        tensor = tgrpc.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        return np.array_equal(client.infer(ECHO_MODEL, [tensor]).as_numpy("y"), x)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        expect(all(pool.map(one, range(3))), "16 MiB tensors come back unchanged")


def async_infer(server):
    client = grpc_client(server)
    answers = queue.Queue()
    images = np.random.default_rng(5).random((1, 1, 8, 8), dtype=np.float32)
    for i in range(16):
        client.async_infer(MODEL, [digits_input(images)], lambda result, error: answers.put((result, error)), request_id=str(i))
    ids = set()
    for _ in range(16):
        result, error = answers.get(timeout=60)
        expect(error is None, f"async error {error}")
        ids.add(result.get_response().id)
    expect(ids == {str(i) for i in range(16)}, f"ids {sorted(ids)}")


def shared_batch(server):
    """HTTP and gRPC requests arriving together meet in one batcher: fewer executions than rows, equal answers."""
    images = np.random.default_rng(9).random((1, 1, 8, 8), dtype=np.float32)
    before = grpc_client(server).get_inference_statistics(MODEL, as_json=True)["model_stats"][0]

    def over_grpc(_):
        return grpc_client(server).infer(MODEL, [digits_input(images)]).as_numpy("probabilities")

    def over_http(_):
        tensor = thttp.InferInput("image", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(images, binary_data=True)
        return thttp.InferenceServerClient(url=server.url).infer(MODEL, [tensor]).as_numpy("probabilities")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(over_grpc if i % 2 else over_http, i) for i in range(48)]
        results = [f.result() for f in futures]
    # Rows batched together may differ in the last bits from a row run alone (summation order), never more.
    expect(all(np.allclose(r, results[0], rtol=1e-5, atol=1e-6) for r in results), "every answer equal")
    after = grpc_client(server).get_inference_statistics(MODEL, as_json=True)["model_stats"][0]
    rows = int(after["inference_count"]) - int(before.get("inference_count", 0))
    executions = int(after["execution_count"]) - int(before.get("execution_count", 0))
    expect(rows == 48 and executions < 48, f"{rows} rows in {executions} executions")


def errors_and_codes(server):
    client = grpc_client(server)
    expect_code(lambda: client.infer("no_such_model", [digits_input(np.zeros((1, 1, 8, 8), np.float32))]), "NOT_FOUND", "no_such_model")
    expect_code(lambda: client.infer(MODEL, [digits_input(np.zeros((1, 1, 8, 8), np.float32))], model_version="9"), "NOT_FOUND")
    wrong = tgrpc.InferInput("image", [1, 64], "FP32")
    wrong.set_data_from_numpy(np.zeros((1, 64), np.float32))
    expect_code(lambda: client.infer(MODEL, [wrong]), "INVALID_ARGUMENT", "image")
    unknown = tgrpc.InferInput("nope", [1, 1, 8, 8], "FP32")
    unknown.set_data_from_numpy(np.zeros((1, 1, 8, 8), np.float32))
    expect_code(lambda: client.infer(MODEL, [unknown]), "INVALID_ARGUMENT", "nope")
    expect_code(lambda: client.infer(MODEL, [digits_input(np.zeros((1, 1, 8, 8), np.float32))],
                                     outputs=[tgrpc.InferRequestedOutput("missing")]), "INVALID_ARGUMENT", "missing")
    # Methods Osprey does not serve answer UNIMPLEMENTED.
    expect_code(lambda: client.get_system_shared_memory_status(), "UNIMPLEMENTED")
    # A request over --grpc-max-message-bytes (20 MiB on this server) is RESOURCE_EXHAUSTED.
    big = tgrpc.InferInput("image", [90000, 1, 8, 8], "FP32")
    big.set_data_from_numpy(np.zeros((90000, 1, 8, 8), np.float32))
    expect_code(lambda: client.infer(MODEL, [big]), "RESOURCE_EXHAUSTED", "--grpc-max-message-bytes")
    # Compressed requests are refused with UNIMPLEMENTED.
    expect_code(lambda: client.infer(MODEL, [digits_input(np.zeros((1, 1, 8, 8), np.float32))], compression_algorithm="gzip"),
                "UNIMPLEMENTED", "compress")
    # A deadline too short for the queue wait: DEADLINE_EXCEEDED (client or server side, both report it).
    expect_code(lambda: client.infer(MODEL, [digits_input(np.zeros((1, 1, 8, 8), np.float32))], client_timeout=0.000001), "DEADLINE_EXCEEDED")


def statistics(server):
    client = grpc_client(server)
    client.infer(MODEL, [digits_input(np.zeros((2, 1, 8, 8), np.float32))])
    stats = client.get_inference_statistics(MODEL, as_json=True)["model_stats"]
    expect(len(stats) == 1 and stats[0]["name"] == MODEL and stats[0]["version"] == "1", f"stats {stats}")
    s = stats[0]
    expect(int(s["inference_count"]) >= 2 and int(s["inference_stats"]["success"]["count"]) >= 1, f"counts {s}")
    expect(any(int(b["batch_size"]) >= 1 for b in s["batch_stats"]), f"batch stats {s['batch_stats']}")
    everything = client.get_inference_statistics(as_json=True)["model_stats"]
    expect({e["name"] for e in everything} >= {MODEL, INT_MODEL}, f"all models {[e['name'] for e in everything]}")
    metrics = server.request("GET", "/metrics")[2].decode()
    expect('protocol="grpc"' in metrics and 'protocol="http"' in metrics, "metrics carry the protocol label")


def repository_load_unload(server):
    client = grpc_client(server)
    index = client.get_model_repository_index(as_json=True)["models"]
    expect({(m["name"], m.get("version"), m["state"]) for m in index} >= {(MODEL, "1", "READY"), (INT_MODEL, "1", "READY")}, f"index {index}")
    client.unload_model(INT_MODEL)
    expect(not client.is_model_ready(INT_MODEL), "unloaded model not ready")
    x = tgrpc.InferInput("x", [1, 4], "INT64")
    x.set_data_from_numpy(np.zeros((1, 4), np.int64))
    expect_code(lambda: client.infer(INT_MODEL, [x]), "UNAVAILABLE")
    client.load_model(INT_MODEL)
    expect(client.is_model_ready(INT_MODEL), "reloaded model ready")
    expect_code(lambda: client.load_model("no_such_model"), "NOT_FOUND")


def admin_token(binary, repository):
    """With --admin-token, repository calls need `authorization: Bearer <token>` metadata."""
    server = GRPCServer(binary, repository, "--admin-token", "s3cret")
    try:
        client = grpc_client(server)
        expect_code(lambda: client.get_model_repository_index(), "UNAUTHENTICATED", "Authorization")
        expect_code(lambda: client.unload_model(MODEL, headers={"authorization": "Bearer wrong"}), "UNAUTHENTICATED")
        index = client.get_model_repository_index(headers={"authorization": "Bearer s3cret"}, as_json=True)
        expect(any(m["name"] == MODEL for m in index["models"]), f"index with token {index}")
    finally:
        server.stop()


def health_service(server):
    channel = grpc.insecure_channel(server.grpc_url)
    stub = health_pb2_grpc.HealthStub(channel)
    serving = health_pb2.HealthCheckResponse.SERVING
    expect(stub.Check(health_pb2.HealthCheckRequest(service="")).status == serving, "server SERVING")
    expect(stub.Check(health_pb2.HealthCheckRequest(service=MODEL)).status == serving, "model SERVING")
    try:
        stub.Check(health_pb2.HealthCheckRequest(service="no_such_model"))
        raise AssertionError("unknown service answered")
    except grpc.RpcError as error:
        expect(error.code() == grpc.StatusCode.NOT_FOUND, f"unknown service {error.code()}")
    watch = stub.Watch(health_pb2.HealthCheckRequest(service=INT_MODEL))
    first = next(watch)
    expect(first.status == serving, f"Watch {first}")
    # Unloading the model is reported on the open Watch stream.
    grpc_client(server).unload_model(INT_MODEL)
    try:
        second = next(watch)
        expect(second.status == health_pb2.HealthCheckResponse.NOT_SERVING, f"Watch after unload {second}")
    finally:
        grpc_client(server).load_model(INT_MODEL)
    expect(next(watch).status == serving, "Watch after reload")
    watch.cancel()
    unknown = next(stub.Watch(health_pb2.HealthCheckRequest(service="no_such_model")))
    expect(unknown.status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN, f"Watch of an unknown service {unknown}")
    channel.close()


def port_in_use(binary, repository):
    """A gRPC port that cannot be bound stops the start with an error naming it."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        import subprocess
        proc = subprocess.run([binary, "serve", "--port", "0", "--grpc-port", str(port), "--model-repository", repository],
                              capture_output=True, text=True, timeout=60)
        output = proc.stdout + proc.stderr
        expect(proc.returncode != 0 and f":{port}" in output, f"exit {proc.returncode}: {output[-300:]}")
    finally:
        holder.close()


def graceful_drain(binary, repository):
    """SIGTERM while gRPC calls are in flight: they finish with OK (GOAWAY first), then the server exits 0;
    an open health Watch stream does not hold the drain up."""
    server = GRPCServer(binary, repository, "--shutdown-timeout", "30")
    try:
        channel = grpc.insecure_channel(server.grpc_url)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
        next(watch)
        client = grpc_client(server)
        images = np.zeros((1, 1, 8, 8), np.float32)
        client.infer(MODEL, [digits_input(images)])
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(lambda: client.infer(MODEL, [digits_input(images)]).as_numpy("probabilities")) for _ in range(8)]
            server.proc.send_signal(signal.SIGTERM)
            failures = [f.exception() for f in futures if f.exception() is not None]
        # Calls that reached the server before GOAWAY finish; later ones may be refused as UNAVAILABLE, never cut.
        for failure in failures:
            expect(isinstance(failure, InferenceServerException) and failure.status() == "StatusCode.UNAVAILABLE", f"in-flight call failed: {failure}")
        started = time.time()
        expect(server.proc.wait(timeout=60) == 0, f"exit status {server.proc.returncode}")
        expect(time.time() - started < 10, f"drain took {time.time() - started:.1f}s with a Watch open")
        channel.close()
    finally:
        server.stop()


def h2_frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def h2_headers(stream, path="/inference.GRPCInferenceService/ServerLive", end_stream=False):
    block = b""
    for name, value in [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x"),
                        ("content-type", "application/grpc"), ("te", "trailers")]:
        block += b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
    return h2_frame(1, 0x04 | (0x01 if end_stream else 0), stream, block)


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)


def raw_exchange(server, data, wait=1.0):
    """Sends `data` on a fresh connection and returns what arrived until the server closed or `wait` passed."""
    with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=wait) as conn:
        try:
            conn.sendall(data)
        except OSError:
            pass
        received = b""
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return received, True
                received += chunk
        except socket.timeout:
            return received, False
        except OSError:
            return received, True


def hostile_clients(binary, repository):
    """Garbage prefaces, oversized frames, stream floods and resets mid-request never crash the server or leak
    connections; idle HTTP/2 connections are closed after --idle-timeout."""
    server = GRPCServer(binary, repository, "--idle-timeout", "1", "--read-timeout", "1")
    try:
        _, closed = raw_exchange(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        expect(closed, "an HTTP/1.1 request on the gRPC port is closed")
        _, closed = raw_exchange(server, PREFACE + h2_frame(0, 0, 1, b"\x00" * 16) + b"\x01\x00\x00\x00" * 4096)
        expect(closed, "garbage after the preface closes the connection")
        huge = PREFACE + h2_headers(1) + (1 << 20).to_bytes(3, "big") + bytes([0, 0]) + (1).to_bytes(4, "big") + b"\x00" * 65536
        received, closed = raw_exchange(server, huge)
        expect(closed and b"\x07" in received, "a frame over SETTINGS_MAX_FRAME_SIZE gets GOAWAY and a close")
        flood = PREFACE + b"".join(h2_headers(2 * i + 1) for i in range(1000))
        received, _ = raw_exchange(server, flood, wait=2.0)
        expect(len(received) > 0, "the stream flood is answered (refused streams), not ignored")
        reset = PREFACE + h2_headers(1, "/inference.GRPCInferenceService/ModelInfer") + h2_frame(0, 0, 1, b"\x00\x00\x00\x01\x00")
        reset += h2_frame(3, 0, 1, (8).to_bytes(4, "big"))
        raw_exchange(server, reset, wait=0.5)
        # An idle connection (preface only) is closed by the sweep after --idle-timeout.
        started = time.time()
        _, closed = raw_exchange(server, PREFACE, wait=5.0)
        expect(closed and time.time() - started < 4.5, f"idle connection closed after {time.time() - started:.1f}s")
        # Still serving, and every hostile connection is gone.
        expect(grpc_client(server).is_server_live(), "server still live")
        deadline = time.time() + 10
        while time.time() < deadline:
            metrics = server.request("GET", "/metrics")[2].decode()
            line = [l for l in metrics.splitlines() if l.startswith("osprey_http_open_connections ")]
            if line and float(line[0].split()[1]) <= 1:
                break
            time.sleep(0.1)
        expect(line and float(line[0].split()[1]) <= 1, f"open connections after the hostile clients: {line}")
        expect(server.proc.poll() is None, "server process alive")
    finally:
        server.stop()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    workdir = tempfile.mkdtemp(prefix="osprey-grpc-interop-")
    suite = Suite()
    server = None
    try:
        repository = os.path.join(workdir, "models")
        shutil.copytree(models, repository)
        os.makedirs(os.path.join(repository, INT_MODEL, "1"))
        with open(os.path.join(repository, INT_MODEL, "1", "model.onnx"), "wb") as f:
            f.write(int64_add_model())
        with open(os.path.join(repository, INT_MODEL, "config.json"), "w") as f:
            f.write('{"max_batch_size": 8}')
        os.makedirs(os.path.join(repository, ECHO_MODEL, "1"))
        with open(os.path.join(repository, ECHO_MODEL, "1", "model.onnx"), "wb") as f:
            f.write(echo_model())
        with open(os.path.join(repository, ECHO_MODEL, "config.json"), "w") as f:
            f.write('{"max_batch_size": 0}')
        server = GRPCServer(binary, repository, "--grpc-max-message-bytes", "20MiB")
        print(f"osprey on ports {server.port} (HTTP) and {server.grpc_port} (gRPC)", flush=True)
        suite.run("gRPC health, server and model metadata", health_and_metadata, server)
        suite.run("gRPC model config (Triton's ModelConfig)", model_config, server)
        suite.run("gRPC infer FP32 (vs numpy reference and HTTP)", infer_fp32, server, models)
        suite.run("gRPC infer INT64, raw and typed contents", infer_int64_typed_and_raw, server)
        suite.run("gRPC infer BYTES input and classification output", infer_bytes, server, models)
        suite.run("gRPC 16 MiB tensors both ways, 3 at once", large_tensors, server)
        suite.run("gRPC async_infer (16 in flight, ids echoed)", async_infer, server)
        suite.run("HTTP and gRPC requests share the batcher", shared_batch, server)
        suite.run("gRPC errors and their status codes", errors_and_codes, server)
        suite.run("gRPC inference statistics and protocol metrics", statistics, server)
        suite.run("gRPC repository index, unload, load", repository_load_unload, server)
        suite.run("grpc.health.v1 Check and Watch", health_service, server)
        server.stop()
        suite.run("gRPC admin token in authorization metadata", admin_token, binary, repository)
        suite.run("gRPC port in use stops the start", port_in_use, binary, repository)
        suite.run("gRPC graceful drain on SIGTERM", graceful_drain, binary, repository)
        suite.run("hostile HTTP/2 clients: garbage, huge frames, stream flood, RST_STREAM, idle", hostile_clients, binary, repository)
    except Exception as error:  # noqa: BLE001 - a setup failure is one more failure
        suite.failed += 1
        print(f"FAIL setup: {error}", flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"grpc interop: {suite.passed} passed, {suite.failed} failed", flush=True)
    return 1 if suite.failed else 0


if __name__ == "__main__":
    sys.exit(main())
