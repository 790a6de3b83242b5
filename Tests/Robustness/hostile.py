#!/usr/bin/env python3
"""Hostile clients against a live `osprey serve` (loopback only): every attack is bounded and the script stops by itself.

Usage: hostile.py OSPREY_BINARY MODELS_DIR [--rounds N] [--report FILE]

Starts its own server on port 0 over a temporary copy of MODELS_DIR (digits only), measures RSS and open file
descriptors after a warm-up, then runs each attack (slowloris, pipelined floods that never read and then reset,
garbage, oversize headers, mid-body disconnects, the issue-11 regressions) while checking that the liveness probe
keeps answering quickly; afterwards RSS and fds must return to the baseline. Exits non-zero on any failure.
--rounds repeats the attack set (the long form); the default single round takes well under two minutes.
"""
import json
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Support"))
import osprey_server  # noqa: E402

HOST = "127.0.0.1"
READ_TIMEOUT = 2  # the server's --read-timeout in this run: slowloris clients are cut after this
RSS_SLACK = 96 << 20  # RSS may stay this far above the warmed-up baseline (allocator caches)
FD_SLACK = 2


class Server(osprey_server.Server):
    """The server under attack: short read and idle timeouts so stalled clients are cut quickly."""

    def __init__(self, binary, repository, *extra):
        super().__init__(binary, repository, "--read-timeout", str(READ_TIMEOUT), "--idle-timeout", "5", *extra, log_lines=200)


def connect(port, timeout=5):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset(s):
    """Close with RST (SO_LINGER 0): the client vanishes without reading."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    except OSError:
        pass


class ResponseReader:
    """Reads successive responses from one socket, keeping bytes that arrived past the current one."""

    def __init__(self, s):
        self.s, self.buffer = s, b""

    def read(self):
        """(status, headers, body) of the next response, or (None, {}, b"") on EOF/timeout/reset."""
        try:
            while b"\r\n\r\n" not in self.buffer:
                chunk = self.s.recv(65536)
                if not chunk:
                    return None, {}, b""
                self.buffer += chunk
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers.get("content-length", "0"))
            while len(rest) < length:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            self.buffer = rest[length:]
            return status, headers, rest[:length]
        except (OSError, ValueError, IndexError):
            return None, {}, b""


def read_response(s):
    """(status, headers, body) of one response on `s` (bytes after it are dropped)."""
    return ResponseReader(s).read()


def request(port, method, path, body=b"", headers=None, timeout=10):
    """One request on a fresh connection: (status, headers, body)."""
    try:
        s = connect(port, timeout)
    except OSError:
        return None, {}, b""
    try:
        lines = [f"{method} {path} HTTP/1.1", "Host: x", "Connection: close"]
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return read_response(s)
    except OSError:
        return None, {}, b""
    finally:
        s.close()


class Checks:
    def __init__(self):
        self.failures = []
        self.notes = []

    def expect(self, condition, what):
        if not condition:
            self.failures.append(what)
            print(f"  FAIL {what}", flush=True)

    def note(self, text):
        self.notes.append(text)
        print(f"  {text}", flush=True)


def probe_latency(port):
    start = time.time()
    status = request(port, "GET", "/v2/health/live", timeout=5)[0]
    return status, time.time() - start


class LivenessWatch:
    """Probes /v2/health/live every 100 ms during an attack; records the worst latency and any failure."""

    def __init__(self, port):
        self.port, self.worst, self.failures, self.stop_flag = port, 0.0, 0, False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag:
            status, latency = probe_latency(self.port)
            self.worst = max(self.worst, latency)
            if status != 200:
                self.failures += 1
            time.sleep(0.1)

    def finish(self):
        self.stop_flag = True
        self.thread.join()
        return self.worst, self.failures


def attack_slowloris(port, checks, connections=150, seconds=4):
    """Connections that dribble a request header one byte at a time: each is cut after the read timeout (408)."""
    sockets = []
    for _ in range(connections):
        try:
            sockets.append(connect(port))
        except OSError:
            break
    header = b"GET /v2/health/live HTTP/1.1\r\nX-Slow: " + b"a" * 200
    deadline = time.time() + seconds
    i = 0
    while time.time() < deadline:
        for s in sockets:
            try:
                s.send(header[i % len(header):i % len(header) + 1])
            except OSError:
                pass
        i += 1
        time.sleep(0.25)
    cut = 0
    for s in sockets:
        s.settimeout(2)
        status = read_response(s)[0]
        if status in (408, None):
            cut += 1
        s.close()
    checks.expect(cut == len(sockets), f"slowloris: {cut} of {len(sockets)} connections cut off after the read timeout")


def attack_unread_flood(port, checks, server, connections=100):
    """Each socket sends one 64 KiB burst of pipelined GET /metrics, never reads, then resets (issue 11, defect 5)."""
    one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    burst = one * (64 * 1024 // len(one))
    before = server.rss()
    sockets = []
    for _ in range(connections):
        s = connect(port)
        s.setblocking(False)
        try:
            s.send(burst)
        except OSError:
            pass
        sockets.append(s)
    peak = before
    start = time.time()
    while time.time() - start < 2:
        peak = max(peak, server.rss())
        time.sleep(0.05)
    status, latency = probe_latency(port)
    start = time.time()
    metrics_status = request(port, "GET", "/metrics", timeout=10)[0]
    metrics_latency = time.time() - start
    for s in sockets:
        reset(s)
    # Bounds for a debug build on a shared two-core machine; main before issue 11 stalled /metrics for over a minute.
    checks.expect(metrics_status == 200 and metrics_latency < 8, f"unread flood: /metrics {metrics_status} after {metrics_latency:.2f}s during the flood")
    checks.note(f"unread flood: {connections} x {len(burst) // len(one)} pipelined GET /metrics, peak RSS +{(peak - before) >> 20} MiB, "
                f"liveness {latency * 1000:.0f} ms and /metrics {metrics_latency * 1000:.0f} ms during")
    checks.expect(peak - before < 150 << 20, f"unread flood: RSS grew by {(peak - before) >> 20} MiB (limit 150)")
    checks.expect(status == 200 and latency < 1.0, f"unread flood: liveness {status} after {latency:.2f}s")
    start = time.time()
    status = request(port, "GET", "/metrics", timeout=5)[0]
    elapsed = time.time() - start
    checks.note(f"unread flood: /metrics {elapsed * 1000:.0f} ms after the resets")
    checks.expect(status == 200 and elapsed < 4, f"unread flood: /metrics {status} after {elapsed:.2f}s once the clients reset")


def attack_garbage(port, checks, connections=60):
    """Random bytes, binary protocol greetings and broken request lines: each gets a 4xx or a close, never a crash."""
    rng = random.Random(11)
    samples = [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"GET / HTTP/1.1\r\nHost\r\n\r\n",
               b"GET /\x00 HTTP/1.1\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
               b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]
    statuses = []
    for i in range(connections):
        payload = samples[i % len(samples)] if i < len(samples) * 2 else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
        try:
            s = connect(port, timeout=READ_TIMEOUT + 2)
            s.sendall(payload)
            statuses.append(read_response(s)[0])
            s.close()
        except OSError:
            statuses.append(None)
    bad = [st for st in statuses if st is not None and not 400 <= st < 600]
    checks.expect(not bad, f"garbage: non-error answers {bad}")
    checks.expect(500 not in statuses, "garbage: a 500 answer")


def attack_oversize_headers(port, checks, connections=20):
    statuses = []
    for _ in range(connections):
        try:
            s = connect(port)
            s.sendall(b"GET /v2 HTTP/1.1\r\nX-Big: " + b"b" * (100 * 1024) + b"\r\n\r\n")
            statuses.append(read_response(s)[0])
            s.close()
        except OSError:
            statuses.append(None)
    checks.expect(all(st in (431, None) for st in statuses) and 431 in statuses, f"oversize headers: {set(statuses)}")


def attack_mid_body_disconnects(port, checks, connections=40):
    """Bodies announced and abandoned half-way (closed or reset), for infer, classify and a chunked body."""
    for i in range(connections):
        s = connect(port)
        kind = i % 3
        if kind == 0:
            s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n" + b'{"inputs":[' + b" " * 30000)
        elif kind == 1:
            s.sendall(b"POST /v2/models/digits/classify HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                      b"Content-Length: 500000\r\n\r\n--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + b"x" * 20000)
        else:
            s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4000\r\n" + b"y" * 5000)
        if i % 2:
            reset(s)
        else:
            s.close()
    checks.expect(request(port, "GET", "/v2/health/ready")[0] == 200, "mid-body disconnects: not ready afterwards")


def png_header_only(width, height, depth, colour):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def attack_issue_regressions(port, admin_port, checks):
    """The issue-11 request defects, each as the client that found it sent it."""
    strings = b'{"inputs":[{"name":"x","shape":[1000000],"datatype":"BYTES","data":[' + b",".join([b'"a"'] * 1000000) + b"]}]}"
    start = time.time()
    status, _, body = request(port, "POST", "/v2/models/digits/infer", strings, timeout=30)
    checks.expect(status == 413 and b"--max-bytes-elements" in body, f"million BYTES elements: {status} {body[:120]!r}")
    checks.note(f"million one-byte strings (6 MB JSON): {status} in {time.time() - start:.2f}s")
    bomb = png_header_only(7000, 7000, 16, 6)
    status, _, body = request(port, "POST", "/v2/models/digits/classify", bomb, {"Content-Type": "image/png"})
    checks.expect(status == 413 and b"--max-image-bytes" in body, f"16-bit RGBA 7000x7000 PNG: {status} {body[:160]!r}")
    status, headers, _ = request(port, "QUERY", "/v2/health/live")
    checks.expect(status == 405 and "GET" in headers.get("allow", ""), f"QUERY: {status} {headers.get('allow')}")
    s = connect(port)
    s.sendall(b"GET /v2 HTTP/9.9\r\nHost: x\r\n\r\n")
    checks.expect(read_response(s)[0] == 505, "HTTP/9.9 not answered 505")
    s.close()
    s = connect(port)
    s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n")
    checks.expect(read_response(s)[0] == 400, "chunk framing 5\\r\\nhelloXX0 not refused")
    s.close()
    gif = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
    form = (b"--B\r\nContent-Disposition: form-data; name=\"g\"; filename=\"a.gif\"\r\nContent-Type: image/gif\r\n\r\n" + gif + b"\r\n--B--\r\n")
    status = request(port, "POST", "/v2/models/digits/classify", form, {"Content-Type": "multipart/form-data; boundary=B"})[0]
    checks.expect(status == 415, f"multipart GIF part: {status}")
    s = connect(admin_port)
    s.sendall(b"PUT /v2/repository/models/digits/versions/7 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
    checks.expect(read_response(s)[0] == 401, "unauthenticated oversize PUT not answered 401 first")
    s.close()


def attack_budget_full(binary, repository, checks):
    """A server with --max-connections 8 held full by idle clients still answers liveness probes."""
    # A long idle timeout: on a loaded machine the held connections must not time out (and free the budget)
    # before the probes below run.
    server = Server(binary, repository, "--max-connections", "8", "--idle-timeout", "120")
    try:
        # The readiness probes' connections count until the server has read their FIN: a held connection that
        # arrives before that is over budget (503); it is replaced until all 8 are within the budget.
        held = []
        deadline = time.time() + 10
        while len(held) < 8 and time.time() < deadline:
            s = connect(server.port)
            s.sendall(b"GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n")
            if read_response(s)[0] == 200:
                held.append(s)
            else:
                s.close()
                time.sleep(0.05)
        checks.expect(len(held) == 8, f"only {len(held)} connections held within the budget")
        status = request(server.port, "GET", "/v2/health/live")[0]
        checks.expect(status == 200, f"liveness with the connection budget full: {status}")
        status = request(server.port, "GET", "/v2")[0]
        checks.expect(status == 503, f"other routes with the connection budget full: {status}")
        for s in held:
            s.close()
    finally:
        server.stop()


def settle(server, baseline_rss, baseline_fds, checks, label):
    """Waits up to 15 s for fds and RSS to come back to the baseline."""
    deadline = time.time() + 15
    rss, fds = server.rss(), server.fds()
    while time.time() < deadline:
        rss, fds = server.rss(), server.fds()
        if fds <= baseline_fds + FD_SLACK and rss <= baseline_rss + RSS_SLACK:
            break
        time.sleep(0.25)
    checks.note(f"{label}: RSS {rss >> 20} MiB (baseline {baseline_rss >> 20}), fds {fds} (baseline {baseline_fds})")
    checks.expect(fds <= baseline_fds + FD_SLACK, f"{label}: {fds} fds open, baseline {baseline_fds}")
    checks.expect(rss <= baseline_rss + RSS_SLACK, f"{label}: RSS {rss >> 20} MiB, baseline {baseline_rss >> 20} MiB")


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    binary, models = args[0], args[1]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 1
    report = args[args.index("--report") + 1] if "--report" in args else None
    workdir = tempfile.mkdtemp(prefix="osprey-hostile-")
    repository = os.path.join(workdir, "models")
    shutil.copytree(os.path.join(models, "digits"), os.path.join(repository, "digits"))
    checks = Checks()
    started = time.time()
    server = Server(binary, repository)
    admin = Server(binary, repository, "--admin-token", "secret")
    try:
        example = open(os.path.join(models, "digits", "examples", "digit_4.png"), "rb").read()
        for _ in range(30):
            request(server.port, "POST", "/v2/models/digits/classify", example, {"Content-Type": "image/png"})
            request(server.port, "GET", "/metrics")
        baseline_rss, baseline_fds = server.rss(), server.fds()
        checks.note(f"baseline after warm-up: RSS {baseline_rss >> 20} MiB, {baseline_fds} fds")
        attacks = [("slowloris", lambda: attack_slowloris(server.port, checks)),
                   ("unread pipelined flood", lambda: attack_unread_flood(server.port, checks, server)),
                   ("garbage", lambda: attack_garbage(server.port, checks)),
                   ("oversize headers", lambda: attack_oversize_headers(server.port, checks)),
                   ("mid-body disconnects", lambda: attack_mid_body_disconnects(server.port, checks)),
                   ("issue 11 regressions", lambda: attack_issue_regressions(server.port, admin.port, checks))]
        for round_index in range(rounds):
            for name, attack in attacks:
                print(f"[round {round_index + 1}] {name}", flush=True)
                watch = LivenessWatch(server.port)
                attack()
                worst, failures = watch.finish()
                checks.expect(failures == 0, f"{name}: {failures} liveness probes failed during the attack")
                checks.expect(worst < 2.0, f"{name}: liveness took {worst:.2f}s during the attack")
                settle(server, baseline_rss, baseline_fds, checks, f"after {name}")
            classify = request(server.port, "POST", "/v2/models/digits/classify", example, {"Content-Type": "image/png"})
            checks.expect(classify[0] == 200 and b'"label":"4"' in classify[2], f"classify after the attacks: {classify[0]}")
        print("[budget] liveness with the connection budget full", flush=True)
        attack_budget_full(binary, repository, checks)
        code = server.stop()
        checks.expect(code == 0, f"server exit status after SIGTERM: {code}")
        checks.expect(admin.stop() == 0, "admin server exit status after SIGTERM")
    finally:
        server.stop()
        admin.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.time() - started
    summary = {"rounds": rounds, "seconds": round(elapsed, 1), "failures": checks.failures, "notes": checks.notes}
    if report:
        with open(report, "w") as out:
            json.dump(summary, out, indent=2)
    print(f"hostile clients: {rounds} round(s) in {elapsed:.1f}s, {len(checks.failures)} failure(s)", flush=True)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
