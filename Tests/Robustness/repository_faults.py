#!/usr/bin/env python3
"""Fault injection for the model repository (issue 11): a live `osprey serve` on scratch repositories, each case a
regression test for one defect. Run by `.ci/repository-faults` (and `make test`); prints one PASS/FAIL/SKIP line per
case and finally `repository faults: N passed, N failed, N skipped` (exit status 1 when anything failed).

- a corrupt PUT on an existing version (409, the file untouched, a restart still ready)
- a corrupt upload of a new model (readiness unchanged, no debris)
- SIGKILL while an upload is staged, and an old interrupted write (cleaned at start by age, nothing else deleted)
- ENOSPC on a small tmpfs (a 507 JSON error, no debris) and a read-only repository (serves; uploads 403)
- a version directory deleted while serving, then `load` (no failed request during the swap)
- the memory budget (a load past --max-model-memory is refused with the figures; the old version serves)
- RSS after hot swaps of a 16 MiB model (back within 10% of its level before the swaps)

Mount-based cases (tmpfs) need root; without it they are skipped with the reason printed.

usage: repository_faults.py OSPREY_BINARY MODELS_DIR
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Interop"))
import fixtures  # noqa: E402
from interop import Server, expect  # noqa: E402

MODEL = "digits"


class Skip(Exception):
    """A case that cannot run on this machine; the message says why."""


class Suite:
    def __init__(self):
        self.passed, self.failed, self.skipped = 0, 0, 0

    def run(self, name, function, *args):
        started = time.time()
        try:
            function(*args)
            self.passed += 1
            print(f"PASS {name} ({time.time() - started:.2f}s)", flush=True)
        except Skip as reason:
            self.skipped += 1
            print(f"SKIP {name}: {reason}", flush=True)
        except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the suite
            self.failed += 1
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)


def scratch(workdir, models, name):
    """A fresh copy of models/digits (without examples) under workdir/name."""
    repository = os.path.join(workdir, name)
    os.makedirs(repository)
    shutil.copytree(os.path.join(models, MODEL), os.path.join(repository, MODEL), ignore=shutil.ignore_patterns("examples", "*.py"))
    return repository


def read(path):
    with open(path, "rb") as f:
        return f.read()


def error_of(body, repository):
    """The JSON error message of a response body; asserts the shape and that no server path shows."""
    message = json.loads(body)["error"]
    expect(repository not in message and os.path.realpath(repository) not in message, f"absolute repository path in error: {message}")
    expect("errno" not in message, f"bare errno in error: {message}")
    return message


def infer_status(server):
    body = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [0.0] * 64}]})
    status, _, data = server.request("POST", f"/v2/models/{MODEL}/infer", body=body)
    return status, (json.loads(data).get("model_version") if status == 200 else data[:200])


def staging_entries(repository):
    path = os.path.join(repository, ".staging")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def mlp_model(seed, width=1024, hidden=4096):
    """ONNX bytes of x[N,width] -> MatMul [width,hidden] -> Relu -> MatMul [hidden,10]: 16 MiB of weights."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array((rng.standard_normal((width, hidden)) / 32).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((hidden, 10)) / 64).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Mount:
    """A tmpfs of `size` at `path` (root only); `Skip` when mounting is not allowed here."""

    def __init__(self, path, size):
        self.path = path
        os.makedirs(path, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True, text=True)
        if result.returncode != 0:
            raise Skip(f"cannot mount a tmpfs here ({(result.stderr or result.stdout).strip() or 'mount failed'}); run as root to include it")

    def remount_read_only(self):
        result = subprocess.run(["mount", "-o", "remount,ro", self.path], capture_output=True, text=True)
        expect(result.returncode == 0, f"remount read-only: {result.stderr}")

    def close(self):
        subprocess.run(["umount", "-l", self.path], capture_output=True)


# MARK: - Cases


def corrupt_put_on_existing_version(binary, workdir, models):
    repository = scratch(workdir, models, "existing")
    model_file = os.path.join(repository, MODEL, "1", "model.onnx")
    original = read(model_file)
    server = Server(binary, repository)
    try:
        status, _, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/1", body=b"not onnx")
        expect(status == 409, f"PUT junk on version 1: expected 409, got {status} {body[:200]}")
        expect("replace=true" in error_of(body, repository), f"409 should say how to replace: {body[:200]}")
        status, _, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/1?replace=true", body=b"not onnx")
        expect(status == 400, f"PUT junk with replace=true: expected 400, got {status} {body[:200]}")
        error_of(body, repository)
        expect(read(model_file) == original, "the model file changed")
        expect(staging_entries(repository) == [], f"staging debris: {staging_entries(repository)}")
    finally:
        server.stop()
    restarted = Server(binary, repository)  # raises unless it becomes ready
    try:
        expect(infer_status(restarted) == (200, "1"), f"infer after restart: {infer_status(restarted)}")
    finally:
        restarted.stop()


def corrupt_new_model(binary, workdir, models):
    repository = scratch(workdir, models, "newmodel")
    server = Server(binary, repository)
    try:
        status, _, body = server.request("PUT", "/v2/repository/models/fresh/versions/1", body=b"\x08\x07not onnx at all")
        expect(status == 400, f"corrupt new model: expected 400, got {status} {body[:200]}")
        error_of(body, repository)
        expect(server.request("GET", "/v2/health/ready")[0] == 200, "readiness changed after a failed upload")
        expect(not os.path.exists(os.path.join(repository, "fresh")), "the failed upload left a model directory")
        expect(staging_entries(repository) == [], f"staging debris: {staging_entries(repository)}")
    finally:
        server.stop()
    Server(binary, repository).stop()  # a restart is ready too


def killed_upload_and_stale_debris(binary, workdir, models):
    repository = scratch(workdir, models, "killed")
    # What the old in-place write left after a SIGKILL: a version directory with only its temp file, two hours old.
    legacy = os.path.join(repository, "legacy", "1", ".model.onnx.4242.17.tmp")
    os.makedirs(os.path.dirname(legacy))
    with open(legacy, "wb") as f:
        f.write(b"half")
    keep = os.path.join(repository, MODEL, "1", "notes.txt")
    with open(keep, "w") as f:
        f.write("not the server's to delete")
    two_hours_ago = time.time() - 7200
    for path in (legacy, keep):
        os.utime(path, (two_hours_ago, two_hours_ago))

    server = Server(binary, repository)
    expect(not os.path.exists(legacy), "an interrupted write older than an hour survived the start")
    expect(os.path.exists(keep), "the server deleted a file it did not write")
    # SIGKILL while an upload is staged (the slow model's warm-up keeps it there for about a second).
    upload = threading.Thread(target=server.request, args=("PUT", "/v2/repository/models/slowup/versions/1"),
                              kwargs={"body": fixtures.slow_model(), "timeout": 60}, daemon=True)
    upload.start()
    deadline = time.time() + 60
    while time.time() < deadline and not staging_entries(repository):
        time.sleep(0.005)
    staged = staging_entries(repository)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    upload.join(5)
    expect(staged, "the upload was never seen in .staging")
    expect(not os.path.exists(os.path.join(repository, "slowup")), "a killed upload reached the repository")

    young = Server(binary, repository)  # ready: the debris is not a model
    try:
        expect(staging_entries(repository) == staged, "a staging entry younger than an hour was removed")
        status, _, body = young.request("POST", "/v2/repository/index")
        expect(status == 200 and "slowup" not in body.decode(), f"index shows the killed upload: {body[:300]}")
    finally:
        young.stop()
    aged = Server(binary, repository, "--stale-upload-age", "0")
    try:
        expect(staging_entries(repository) == [], f"staging debris older than the age survived: {staging_entries(repository)}")
        expect(os.path.exists(keep), "the server deleted a file it did not write")
        expect(any("interrupted upload" in line for line in aged.log), "no log line names the removed debris")
    finally:
        aged.stop()


def enospc_on_small_tmpfs(binary, workdir, models):
    mount = Mount(os.path.join(workdir, "full"), "3m")
    server = None
    try:
        repository = os.path.join(mount.path, "repo")
        os.makedirs(repository)
        shutil.copytree(os.path.join(models, MODEL, "1"), os.path.join(repository, MODEL, "1"))
        shutil.copy(os.path.join(models, MODEL, "config.json"), os.path.join(repository, MODEL))
        server = Server(binary, repository)
        # Leave about 300 KiB free, less than the 1 MiB upload.
        stat = os.statvfs(mount.path)
        with open(os.path.join(mount.path, "filler"), "wb") as f:
            f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 300 * 1024))
        status, _, body = server.request("PUT", "/v2/repository/models/big/versions/1", body=fixtures.slow_model())
        expect(status == 507, f"upload into a full file system: expected 507, got {status} {body[:300]}")
        message = error_of(body, repository)
        expect("no space left" in message.lower(), f"507 should say the disk is full: {message}")
        expect(staging_entries(repository) == [], f"staging debris: {staging_entries(repository)}")
        expect(not os.path.exists(os.path.join(repository, "big")), "a partial version directory was left")
        expect(server.request("GET", "/v2/health/ready")[0] == 200, "not ready after ENOSPC")
        expect(infer_status(server) == (200, "1"), f"infer after ENOSPC: {infer_status(server)}")
    finally:
        if server is not None:
            server.stop()
        mount.close()


def read_only_repository(binary, workdir, models):
    mount = Mount(os.path.join(workdir, "ro"), "8m")
    server = None
    try:
        repository = os.path.join(mount.path, "repo")
        shutil.copytree(os.path.join(models, MODEL), os.path.join(repository, MODEL), ignore=shutil.ignore_patterns("examples", "*.py"))
        mount.remount_read_only()
        server = Server(binary, repository)
        expect(infer_status(server) == (200, "1"), f"infer from a read-only repository: {infer_status(server)}")
        status, _, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/2", body=read(os.path.join(models, MODEL, "1", "model.onnx")))
        expect(status == 403, f"upload into a read-only repository: expected 403, got {status} {body[:300]}")
        expect("not writable" in error_of(body, repository), f"403 should say the repository is not writable: {body[:300]}")
        config = json.dumps({"parameters": {"config": json.dumps({"max_batch_size": 8})}})
        status, _, body = server.request("POST", f"/v2/repository/models/{MODEL}/load", body=config)
        expect(status == 403, f"load with a config into a read-only repository: expected 403, got {status} {body[:300]}")
        expect(server.request("POST", f"/v2/repository/models/{MODEL}/load")[0] == 200, "a plain load of a read-only repository")
        expect(server.request("GET", "/v2/health/ready")[0] == 200, "not ready")
    finally:
        if server is not None:
            server.stop()
        mount.close()


def version_deleted_while_serving(binary, workdir, models):
    repository = scratch(workdir, models, "deleted")
    os.makedirs(os.path.join(repository, MODEL, "2"))
    with open(os.path.join(repository, MODEL, "2", "model.onnx"), "wb") as f:
        f.write(fixtures.digits_v2(os.path.join(models, MODEL, "1", "model.onnx")))
    server = Server(binary, repository)
    try:
        expect(infer_status(server) == (200, "2"), f"version 2 should serve: {infer_status(server)}")
        outcomes, stop, lock = [], threading.Event(), threading.Lock()

        def client():
            while not stop.is_set():
                outcome = infer_status(server)
                with lock:
                    outcomes.append(outcome)

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            for _ in range(6):
                pool.submit(client)
            time.sleep(0.3)
            shutil.rmtree(os.path.join(repository, MODEL, "2"))
            status, _, body = server.request("POST", f"/v2/repository/models/{MODEL}/load")
            time.sleep(0.3)
            stop.set()
        expect(status == 200, f"load after deleting version 2: {status} {body[:300]}")
        failed = [o for o in outcomes if o[0] != 200]
        expect(not failed, f"{len(failed)} of {len(outcomes)} requests failed during the swap, e.g. {failed[:3]}")
        expect({o[1] for o in outcomes} == {"1", "2"}, f"versions answered: {sorted({o[1] for o in outcomes})}")
        expect(infer_status(server) == (200, "1"), "version 1 should serve after the swap")
        # Every version directory gone: the load answers an error and what serves keeps serving.
        shutil.rmtree(os.path.join(repository, MODEL, "1"))
        status, _, body = server.request("POST", f"/v2/repository/models/{MODEL}/load")
        expect(status == 409, f"load with no version on disk: expected 409, got {status} {body[:300]}")
        error_of(body, repository)
        expect(server.request("GET", "/v2/health/ready")[0] == 200, "not ready after a load that found nothing")
        expect(infer_status(server) == (200, "1"), "the served version stopped serving")
        print(f"     swap: {len(outcomes)} requests, 0 failed", flush=True)
    finally:
        server.stop()


def memory_budget(binary, workdir, models):
    repository = scratch(workdir, models, "budget")
    probe = Server(binary, repository)
    try:
        index = json.loads(probe.request("POST", "/v2/repository/index")[2])
    finally:
        probe.stop()
    needed = index[0]["memory_bytes"]
    expect(needed > 0, f"memory_bytes in the index: {index}")
    budget = needed * 3 // 2
    server = Server(binary, repository, "--max-model-memory", str(budget))
    try:
        v2 = fixtures.digits_v2(os.path.join(models, MODEL, "1", "model.onnx"))
        status, _, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/2", body=v2)
        expect(status == 507, f"upload past the budget: expected 507, got {status} {body[:300]}")
        message = error_of(body, repository)
        expect(f"{budget} bytes" in message and f"{needed} bytes" in message, f"507 should name the figures: {message}")
        expect(infer_status(server) == (200, "1"), "version 1 should keep serving")
        expect(not os.path.exists(os.path.join(repository, MODEL, "2")), "the refused version reached the repository")
    finally:
        server.stop()


def rss_after_hot_swaps(binary, workdir, models):
    repository = os.path.join(workdir, "rss")
    os.makedirs(os.path.join(repository, "mlp", "1"))
    with open(os.path.join(repository, "mlp", "1", "model.onnx"), "wb") as f:
        f.write(mlp_model(1))
    server = Server(binary, repository)
    body = json.dumps({"inputs": [{"name": "x", "shape": [8, 1024], "datatype": "FP32", "data": [0.01] * 8192}]})

    def traffic():
        for _ in range(10):
            status, _, data = server.request("POST", "/v2/models/mlp/infer", body=body)
            expect(status == 200, f"infer: {status} {data[:200]}")

    try:
        traffic()
        time.sleep(0.3)
        before = rss_kib(server.proc.pid)
        samples = []
        for version in (2, 3, 4):
            os.makedirs(os.path.join(repository, "mlp", str(version)))
            with open(os.path.join(repository, "mlp", str(version), "model.onnx"), "wb") as f:
                f.write(mlp_model(version))
            status, _, data = server.request("POST", "/v2/repository/models/mlp/load")
            expect(status == 200, f"load version {version}: {status} {data[:200]}")
            traffic()
            time.sleep(0.5)  # the old version drains and is released
            samples.append(rss_kib(server.proc.pid))
        worst = max(samples)
        print(f"     RSS before the swaps {before} KiB, after each of 3 swaps {samples} KiB", flush=True)
        expect(worst <= before * 1.10, f"RSS after hot swaps {samples} KiB exceeds 110% of {before} KiB")
    finally:
        server.stop()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    workdir = tempfile.mkdtemp(prefix="osprey-faults-")
    suite = Suite()
    try:
        suite.run("corrupt PUT on an existing version: 409, file untouched, restart ready", corrupt_put_on_existing_version, binary, workdir, models)
        suite.run("corrupt upload of a new model: readiness unchanged, no debris", corrupt_new_model, binary, workdir, models)
        suite.run("SIGKILL during an upload and stale temp files: cleaned at start by age", killed_upload_and_stale_debris, binary, workdir, models)
        suite.run("ENOSPC on a small tmpfs: 507 JSON, no debris, still serving", enospc_on_small_tmpfs, binary, workdir, models)
        suite.run("read-only repository: serves, uploads 403", read_only_repository, binary, workdir, models)
        suite.run("version directory deleted while serving, then load: no failed request", version_deleted_while_serving, binary, workdir, models)
        suite.run("memory budget: a load past --max-model-memory is refused with the figures", memory_budget, binary, workdir, models)
        suite.run("RSS after three hot swaps of a 16 MiB model: within 10%", rss_after_hot_swaps, binary, workdir, models)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"repository faults: {suite.passed} passed, {suite.failed} failed, {suite.skipped} skipped", flush=True)
    return 1 if suite.failed else 0


if __name__ == "__main__":
    sys.exit(main())
