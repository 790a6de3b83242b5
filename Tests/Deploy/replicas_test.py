#!/usr/bin/env python3
"""Many replicas behind a real load balancer, on loopback: three `osprey serve` processes sharing one model
repository (--poll-interval), behind HAProxy (Debian package) health-checking /v2/health/ready, under steady
classify load. Bounded (about half a minute) and self-stopping.

  (a) a new version is staged in the repository and renamed into place: every replica moves to it, 0 failed;
  (b) rolling restart, one replica at a time, SIGTERM with --drain-delay: 0 failed;
  (c) one replica SIGKILLed: failures counted, at most the requests in flight, and the balancer routes around it.

usage: replicas_test.py OSPREY_BINARY MODELS_DIR      (prints PASS/FAIL per case and 'replicas: N passed, N failed')
"""
import http.client
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Interop"))
from interop import Suite, expect  # noqa: E402

CLIENTS = 4
DRAIN = 1.5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def get(port, path, timeout=2):
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response.status, body
    except OSError:
        return None, b""


class Replica:
    """One `osprey serve` on a fixed port (a restart binds the same port, as a pod keeps its Service port)."""

    def __init__(self, binary, repository, port):
        self.binary, self.repository, self.port = binary, repository, port
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([self.binary, "serve", "--port", str(self.port), "--model-repository", self.repository,
                                      "--poll-interval", "250ms", "--drain-delay", f"{DRAIN}s", "--shutdown-timeout", "10s",
                                      "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: get(self.port, "/v2/health/ready")[0] == 200, 60, f"replica on port {self.port} ready")

    def served_version(self):
        status, body = get(self.port, "/v2/models/digits")
        return json.loads(body).get("versions") if status == 200 else None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


class Balancer:
    """HAProxy in front of the replicas: active readiness checks every 100 ms, down after one failure."""

    def __init__(self, replicas, workdir):
        self.port = free_port()
        servers = "\n".join(f"    server r{i} 127.0.0.1:{r.port} check" for i, r in enumerate(replicas))
        config = os.path.join(workdir, "haproxy.cfg")
        open(config, "w").write(f"""global
    maxconn 512
defaults
    mode http
    timeout connect 1s
    timeout client 15s
    timeout server 15s
    retries 2
    option redispatch
    retry-on conn-failure empty-response
frontend front
    bind 127.0.0.1:{self.port}
    default_backend osprey
backend osprey
    balance roundrobin
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server inter 100ms fall 1 rise 2
{servers}
""")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: get(self.port, "/v2/health/live")[0] == 200, 10, "haproxy to answer")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Load:
    """CLIENTS keep-alive clients posting an image to classify through the balancer; every answer is recorded."""

    def __init__(self, port, image):
        self.port, self.image = port, image
        self.results = []  # (time, status or None, version)
        self.lock = threading.Lock()
        self.running = True
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(CLIENTS)]
        for thread in self.threads:
            thread.start()

    def client(self):
        connection = None
        while self.running:
            status, version = None, None
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                connection.request("POST", "/v2/models/digits/classify", body=self.image, headers={"Content-Type": "image/png"})
                response = connection.getresponse()
                body = response.read()
                status = response.status
                if status == 200:
                    version = json.loads(body)["model_version"]
            except (OSError, http.client.HTTPException):
                connection = None
            with self.lock:
                self.results.append((time.time(), status, version))

    def since(self, moment):
        with self.lock:
            return [r for r in self.results if r[0] >= moment]

    def stop(self):
        self.running = False
        for thread in self.threads:
            thread.join(timeout=15)


def failures(results):
    return [r for r in results if r[1] != 200]


def run(binary, models):
    suite = Suite()
    with tempfile.TemporaryDirectory() as tmp:
        repository = os.path.join(tmp, "models")
        shutil.copytree(models, repository)
        image = open(os.path.join(models, "digits", "examples", "digit_0.png"), "rb").read()
        replicas = [Replica(binary, repository, free_port()) for _ in range(3)]
        balancer = Balancer(replicas, tmp)
        load = Load(balancer.port, image)
        try:
            time.sleep(1.0)

            def new_version():
                started = time.time()
                staged = os.path.join(repository, ".staging", "incoming")
                os.makedirs(staged)
                shutil.copy(os.path.join(repository, "digits", "1", "model.onnx"), os.path.join(staged, "model.onnx"))
                os.rename(staged, os.path.join(repository, "digits", "2"))
                wait_until(lambda: all(r.served_version() == ["2"] for r in replicas), 20, "every replica to serve version 2")
                time.sleep(0.5)
                results = load.since(started)
                late = [r for r in results if r[0] > time.time() - 0.4]
                print(f"    new version: {len(results)} requests, {len(failures(results))} failed, "
                      f"last answers by version {sorted(set(r[2] for r in late))}", flush=True)
                expect(not failures(results), f"{len(failures(results))} requests failed while the new version rolled in")
                expect(late and all(r[2] == "2" for r in late), "answers after the move should all come from version 2")

            def rolling_restart():
                started = time.time()
                for replica in replicas:
                    code = replica.stop(signal.SIGTERM)
                    expect(code == 0, f"replica on port {replica.port} exited {code} after SIGTERM")
                    replica.start()
                    time.sleep(0.4)  # two passing checks before HAProxy sends to it again
                results = load.since(started)
                print(f"    rolling restart: {len(results)} requests, {len(failures(results))} failed", flush=True)
                expect(len(results) > 50, f"too little traffic during the restart to judge: {len(results)} requests")
                expect(not failures(results), f"{len(failures(results))} requests failed during the rolling restart")

            def sigkill_one():
                started = time.time()
                replicas[0].stop(signal.SIGKILL)
                time.sleep(2.0)
                results = load.since(started)
                failed = failures(results)
                tail = load.since(time.time() - 1.0)
                print(f"    SIGKILL: {len(results)} requests, {len(failed)} failed (bound: {CLIENTS} in flight), "
                      f"{len(tail)} in the last second, {len(failures(tail))} of them failed", flush=True)
                expect(len(failed) <= CLIENTS, f"{len(failed)} failed, more than the {CLIENTS} requests in flight")
                expect(tail and not failures(tail), "the balancer should route around the killed replica")
                replicas[0].start()

            suite.run("replicas: a staged-then-renamed version reaches every replica, 0 failed", new_version)
            suite.run("replicas: rolling restart with SIGTERM and the drain delay, 0 failed", rolling_restart)
            suite.run("replicas: one SIGKILLed, failures bounded by the in-flight ones, routed around", sigkill_one)
        finally:
            load.stop()
            balancer.stop()
            for replica in replicas:
                replica.stop(signal.SIGKILL)
    print(f"replicas: {suite.passed} passed, {suite.failed} failed")
    return 1 if suite.failed else 0


if __name__ == "__main__":
    if shutil.which("haproxy") is None:
        print("replicas: haproxy not installed (.ci/deploy-check installs it)")
        sys.exit(1)
    sys.exit(run(sys.argv[1], sys.argv[2]))
