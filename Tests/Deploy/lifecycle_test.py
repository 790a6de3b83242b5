#!/usr/bin/env python3
"""What orchestration relies on, against a live `osprey serve`: `osprey probe` exit codes (the image's HEALTHCHECK)
and the drain delay (a rolling update loses no request). Run by `.ci/deploy-check`; prints PASS/FAIL per case and
`lifecycle: N passed, N failed`.

usage: lifecycle_test.py OSPREY_BINARY MODELS_DIR
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Interop"))
from interop import Server, Suite, expect  # noqa: E402


def probe(binary, *args):
    run = subprocess.run([binary, "probe", *args], capture_output=True, text=True, timeout=10)
    return run.returncode, run.stderr.strip()


def probe_exit_codes(binary, repository):
    server = Server(binary, repository)
    try:
        port = str(server.port)
        code, err = probe(binary, "--port", port)
        expect(code == 0, f"probe of a live server: expected exit 0, got {code} ({err})")
        code, err = probe(binary, "--port", port, "--path", "/v2/health/ready")
        expect(code == 0, f"readiness probe of a loaded server: expected exit 0, got {code} ({err})")
        code, err = probe(binary, "--port", port, "--path", "/v2/models/nope/ready")
        expect(code == 1 and "404" in err, f"probe of a missing model: expected exit 1 naming 404, got {code} ({err})")
        env_code = subprocess.run([binary, "probe"], env={**os.environ, "OSPREY_HOST": "0.0.0.0", "OSPREY_PORT": port},
                                  capture_output=True, timeout=10).returncode
        expect(env_code == 0, f"probe reading OSPREY_HOST=0.0.0.0 / OSPREY_PORT: expected exit 0, got {env_code}")
    finally:
        server.stop()
    code, err = probe(binary, "--port", port, "--timeout", "1s")
    expect(code == 1 and "refused" in err, f"probe of a stopped server: expected exit 1, connection refused; got {code} ({err})")


def drain_delay_loses_nothing(binary, repository):
    """SIGTERM with --drain-delay: readiness 503 at once, new connections still served during the delay, exit 0 after."""
    delay = 1.5
    server = Server(binary, repository, "--drain-delay", f"{delay}s")
    failures, served_after_term = [], [0]
    terminated = threading.Event()
    stop = threading.Event()

    def client():
        # A load balancer's view: a new connection per request, sending until readiness says stop.
        while not stop.is_set():
            status, _, _ = server.request("GET", "/v2/models/digits/ready", timeout=5)
            if status != 200:
                failures.append(status)
            elif terminated.is_set():
                served_after_term[0] += 1
            time.sleep(0.005)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    started = time.time()
    server.proc.send_signal(signal.SIGTERM)
    terminated.set()
    time.sleep(0.2)
    ready = server.request("GET", "/v2/health/ready")[0]
    live = server.request("GET", "/v2/health/live")[0]
    time.sleep(delay - 0.6)
    stop.set()
    for thread in threads:
        thread.join()
    try:
        code = server.proc.wait(timeout=15)
    finally:
        server.stop()
    elapsed = time.time() - started
    expect(ready == 503, f"readiness right after SIGTERM: expected 503, got {ready}")
    expect(live == 200, f"liveness during the drain delay: expected 200, got {live}")
    expect(not failures, f"requests failed during the drain delay: {failures[:5]} ({len(failures)} in all)")
    expect(served_after_term[0] > 10, f"expected requests served during the delay, got {served_after_term[0]}")
    expect(code == 0, f"exit status after the drain: expected 0, got {code}")
    expect(elapsed >= delay, f"the listener closed after {elapsed:.2f}s, before the {delay}s drain delay")


def single_model_layout(binary, models):
    """KServe's /mnt/models: the folder holds model.onnx (any name if it is the only .onnx), config.json, labels.txt."""
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(os.path.join(models, "digits", "1", "model.onnx"), os.path.join(folder, "classifier.onnx"))
        for name in ("config.json", "labels.txt"):
            shutil.copy(os.path.join(models, "digits", name), folder)
        server = Server(binary, folder, "--model-name", "mnist", "--require-models", "mnist")
        try:
            picture = open(os.path.join(models, "digits", "examples", "digit_0.png"), "rb").read()
            status, _, body = server.request("POST", "/v2/models/mnist/classify", picture, {"Content-Type": "image/png"})
            expect(status == 200 and b'"model_version":"1"' in body and b'"label":"0"' in body,
                   f"classify on the single-model layout: expected version 1 label 0, got {status} {body[:200]}")
            status, _, body = server.request("PUT", "/v2/repository/models/mnist/versions/2", picture)
            expect(status == 403 and b"--model-name" in body, f"upload into the single-model layout: expected 403, got {status} {body[:200]}")
            expect(sorted(os.listdir(folder)) == ["classifier.onnx", "config.json", "labels.txt"],
                   f"the folder must be left as it was: {sorted(os.listdir(folder))}")
        finally:
            server.stop()


def required_model_missing(binary, repository):
    """--require-models naming a model that is not there: live, never ready (a pod must not go Ready serving nothing)."""
    with tempfile.TemporaryDirectory() as empty:
        server = Server(binary, empty, "--require-models", "digits", wait_ready=False)
        try:
            time.sleep(0.5)
            statuses = [server.request("GET", path, timeout=5)[0] for path in ("/v2/health/live", "/v2/health/ready")]
            expect(statuses == [200, 503], f"empty repository requiring digits: expected live 200, ready 503; got {statuses}")
        finally:
            server.kill()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    suite = Suite()
    with tempfile.TemporaryDirectory() as tmp:
        repository = os.path.join(tmp, "models")
        shutil.copytree(models, repository)
        suite.run("osprey probe: exit 0 on 200, 1 otherwise (HEALTHCHECK)", probe_exit_codes, binary, repository)
        suite.run("drain delay: not ready at once, still serving, then a clean exit", drain_delay_loses_nothing, binary, repository)
        suite.run("--model-name: KServe's single-model folder served as version 1, uploads refused", single_model_layout, binary, models)
        suite.run("--require-models: an empty repository is live but not ready", required_model_missing, binary, repository)
    print(f"lifecycle: {suite.passed} passed, {suite.failed} failed")
    return 1 if suite.failed else 0


if __name__ == "__main__":
    sys.exit(main())
