"""Shared pieces of the serving and classification benchmarks: a server process, wrk runs, /metrics and /proc reads."""
import http.client
import json
import os
import re
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    """`osprey serve --port 0` on a repository; the port is parsed from the `listening on` log line."""

    def __init__(self, binary, repository, *extra, log_path=os.devnull):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", "--model-repository", repository, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.port = None
        for line in self.proc.stdout:
            self.log.write(line)
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                break
        if self.port is None:
            raise RuntimeError("server exited before listening")
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.time() + 300
        while self.get("/v2/health/ready")[0] != 200:
            if time.time() > deadline:
                raise RuntimeError("server not ready after 300 s")
            time.sleep(0.1)

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)

    def request(self, method, path, body=None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        except OSError:
            return None, b""
        finally:
            connection.close()

    def get(self, path):
        return self.request("GET", path)

    def histogram(self, name, model):
        """(sum, count) of histogram `name` over the series of `model` in /metrics."""
        _, body = self.get("/metrics")
        total, count = 0.0, 0.0
        for line in body.decode().splitlines():
            if f'model="{model}"' not in line:
                continue
            if line.startswith(name + "_sum"):
                total += float(line.rsplit(" ", 1)[1])
            elif line.startswith(name + "_count"):
                count += float(line.rsplit(" ", 1)[1])
        return total, count

    def status(self, field):
        """A /proc/PID/status field in MiB (VmRSS, VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def wrk(url, connections, seconds, body_path, content_type, header_length=None):
    """Closed-loop load with wrk (keep-alive, one request in flight per connection); returns the summary dict,
    plus `client_cpu_s` (wrk's own user+system CPU seconds)."""
    env = dict(os.environ, REQUEST_BODY=body_path, CONTENT_TYPE=content_type)
    if header_length is not None:
        env["REQUEST_HDR_LEN"] = str(header_length)
    threads = min(connections, 2)
    command = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--timeout", "60s",
               "-s", os.path.join(HERE, "post.lua"), url]
    before = os.times()
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    after = os.times()
    line = next(l for l in output.splitlines() if l.startswith("WRK_JSON "))
    result = json.loads(line[len("WRK_JSON "):])
    result["client_cpu_s"] = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    result["command"] = " ".join(command)
    return result
