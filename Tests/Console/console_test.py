#!/usr/bin/env python3
"""The web console in a real browser: headless Chromium driven through the DevTools protocol (a small client on the
standard library: one WebSocket, JSON commands and events).

    console_test.py OSPREY_BINARY MODELS_DIR ARTIFACT_DIR

Checks: the page loads with no console errors or uncaught exceptions, lists the default model (digits), classifies
an example image picked through the file input and shows its label, and the live figures fill in (the cache hit
rate after two identical /infer requests to digits, whose response cache the copied repository enables); with the
cascade fixtures beside digits, it shows small's cascade, that large answered an image small was unsure of, and the
cascade rate. Writes ARTIFACT_DIR/console.png (a screenshot after the first classification). Exit status 1 when a
check fails.
"""
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Support"))
from osprey_server import Server  # noqa: E402


class WebSocket:
    """A client WebSocket (RFC 6455) sufficient for DevTools: text frames, masked sends, fragmented receives."""

    def __init__(self, url):
        match = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((match.group(1), int(match.group(2))), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {match.group(3)} HTTP/1.1\r\nHost: {match.group(1)}:{match.group(2)}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("DevTools closed the WebSocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"DevTools refused the WebSocket: {head[:200]!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        payload = text.encode()
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("DevTools closed the WebSocket")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self):
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise RuntimeError("DevTools closed the WebSocket")
            if opcode == 0x9:  # ping: answer with a pong carrying the same payload
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
                continue
            message += payload
            if first & 0x80:
                return message.decode()


class DevTools:
    """Commands by id; events kept in order for the checks."""

    def __init__(self, url):
        self.ws = WebSocket(url)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def start_chromium(profile):
    """Headless Chromium on a free DevTools port; returns (process, page WebSocket URL)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None:
        raise RuntimeError("no chromium on PATH (Debian package 'chromium')")
    proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "--window-size=1280,900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 60
    while time.time() < deadline and port is None:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if match:
            port = int(match.group(1))
    if port is None:
        proc.kill()
        raise RuntimeError("chromium did not report its DevTools port")
    import http.client
    for _ in range(100):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/json/list")
        targets = json.loads(connection.getresponse().read())
        connection.close()
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            return proc, pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chromium has no page target")


def problems(events):
    """Console errors, uncaught exceptions and failed loads seen so far, as text."""
    found = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log: {entry.get('text')} {entry.get('url', '')}")
    return found


def enable_response_cache(config_path):
    with open(config_path) as f:
        config = json.load(f)
    config["response_cache"] = {"enable": True}
    with open(config_path, "w") as f:
        json.dump(config, f)


def check_cache_hit_rate(tools, url):
    """Sends the same /infer twice (a miss, then a hit) and waits for the figure to show a rate."""
    body = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [0.5] * 64}]}).encode()
    for _ in range(2):
        request = urllib.request.Request(f"http://{url}/v2/models/digits/infer", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    return tools.wait_for("(t => t.endsWith('%') && t)(document.getElementById('fig-cache').textContent)", 15, "the cache hit rate")


def main():
    binary, models, artifacts = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(artifacts, exist_ok=True)
    example = os.path.abspath(os.path.join(models, "digits", "examples", "digit_7.jpg"))
    failures = []
    with tempfile.TemporaryDirectory() as work:
        repository = os.path.join(work, "models")
        shutil.copytree(models, repository)
        # A confidence cascade (small hands what it is unsure of to large), shown per model and on the result line.
        cascade = os.path.join(os.path.dirname(HERE), "Fixtures", "cascade")
        for name in ("small", "large"):
            shutil.copytree(os.path.join(cascade, "repository", name), os.path.join(repository, name))
        enable_response_cache(os.path.join(repository, "digits", "config.json"))
        server = Server(binary, repository, "--cache-bytes", "1MiB")
        chromium, page_url = None, None
        try:
            chromium, page_url = start_chromium(os.path.join(work, "profile"))
            tools = DevTools(page_url)
            for domain in ("Runtime", "Log", "Page", "DOM"):
                tools.call(domain + ".enable")
            tools.call("Page.navigate", url=f"http://{server.url}/")
            tools.wait_for("document.readyState === 'complete'", 30, "the page to load")
            listed = tools.wait_for("[...document.querySelectorAll('#models td')].map(c => c.textContent).join('|').includes('digits')"
                                    " && document.querySelector('#classify-model').value", 30, "digits in the model table")
            print(f"models listed; classify model selected: {listed}")
            status = tools.evaluate("document.getElementById('server-status').textContent")
            if status != "ready":
                failures.append(f"server status on the page: expected 'ready', got {status!r}")

            document = tools.call("DOM.getDocument")
            node = tools.call("DOM.querySelector", nodeId=document["root"]["nodeId"], selector="#file")
            tools.call("DOM.setFileInputFiles", files=[example], nodeId=node["nodeId"])
            label = tools.wait_for("document.getElementById('top-label') && document.getElementById('top-label').textContent",
                                   30, "the classification result")
            bars = tools.evaluate("document.querySelectorAll('#result .bar').length")
            summary = tools.evaluate("document.querySelector('#result p').textContent")
            print(f"classified {os.path.basename(example)}: top label {label!r}, {bars} bars, '{summary}'")
            if label != "7":
                failures.append(f"top label of digit_7.jpg: expected '7', got {label!r}")
            if bars != 5:
                failures.append(f"bars: expected 5 (top_k 5), got {bars}")
            if "answered by digits/1" not in (summary or ""):
                failures.append(f"result line must say who answered (digits/1): {summary!r}")

            # The "set traffic" admin action (loopback: no token needed) shows the run-time split in the Routing column.
            tools.evaluate("(f => { f.value = '1:100'; })(document.querySelector('.traffic-input'))")
            tools.evaluate("document.querySelector('.set-traffic').click()")
            routing = tools.wait_for("(t => t.includes('(run-time)') && t)(document.querySelector('#models td.routing').textContent)",
                                     15, "the run-time traffic split in the Routing column")
            print(f"set traffic: routing shows {routing!r}")
            if "traffic v1: 100" not in routing:
                failures.append(f"routing after set traffic 1:100: expected 'traffic v1: 100 (run-time)', got {routing!r}")
            rps = tools.wait_for("(t => t !== '–' && t)(document.getElementById('fig-rps').textContent)", 15, "live figures")
            print(f"live figures: {rps} requests/s")
            hit_rate = check_cache_hit_rate(tools, server.url)
            print(f"cache hit rate: {hit_rate}")
            if not hit_rate.endswith("%"):
                failures.append(f"cache hit rate: expected a percentage, got {hit_rate!r}")
            time.sleep(0.5)
            shot = tools.call("Page.captureScreenshot", format="png")
            path = os.path.join(artifacts, "console.png")
            with open(path, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            print(f"screenshot: {path}")
            routing = tools.wait_for("[...document.querySelectorAll('#models td')].map(c => c.textContent).find(t => t.includes('cascade'))",
                                     30, "the cascade in the model table")
            if not routing.startswith("cascade → large below 0.6"):  # then the set-traffic controls
                failures.append(f"small's routing cell: expected 'cascade → large below 0.6', got {routing!r}")
            tools.evaluate("document.getElementById('classify-model').value = 'small'")
            tools.call("DOM.setFileInputFiles", files=[os.path.join(cascade, "unsure.png")], nodeId=node["nodeId"])
            cascaded = tools.wait_for("(t => t.includes('small') || t.includes('large/1') ? t : null)"
                                      "(document.querySelector('#result p').textContent)", 30, "the cascaded classification")
            print(f"classified unsure.png on small: '{cascaded}'")
            if "answered by large/1 (cascaded)" not in cascaded:
                failures.append(f"result line must say large/1 answered for small: {cascaded!r}")
            # The one row small saw since the last scrape escalated: the next refresh shows a 100% cascade rate.
            rate = tools.wait_for("(t => t !== '–' && t)(document.getElementById('fig-cascade').textContent)", 10, "the cascade rate")
            print(f"cascade rate: {rate}")
            if rate != "100.0%":
                failures.append(f"cascade rate after one escalated row: expected '100.0%', got {rate!r}")
            # Drain pending events before judging the console.
            tools.evaluate("1")
            failures += [f"page reported {p}" for p in problems(tools.events)]
        except Exception as error:  # a failed wait or protocol error is a test failure, with its message
            failures.append(f"{type(error).__name__}: {error}")
        finally:
            if chromium is not None:
                chromium.kill()
                chromium.wait()
            server.stop()
    for failure in failures:
        print("FAIL " + failure)
    print(f"console: {'failed' if failures else 'passed'} ({len(failures)} failure(s))")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
