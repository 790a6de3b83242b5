"""Shared pieces of the serving and classification benchmarks: a server process, wrk runs, /metrics and /proc reads."""
import http.client
import json
import os
import re
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    """`osprey serve --port 0` on a repository; the port is parsed from the `listening on` log line.

    The server writes its log (an access line per request) straight into `log_path` (a temporary file by default),
    not through a pipe read here: pumping it line by line cost this process about 0.02 ms of CPU per request (0.4% of
    a MobileNetV2 request's CPU) on the same two cores, which the engine-alone runs it is compared with do not pay."""

    def __init__(self, binary, repository, *extra, log_path=None):
        self.temporary_log = None
        if not log_path:
            descriptor, self.temporary_log = tempfile.mkstemp(prefix="loadgen-server-", suffix=".log")
            os.close(descriptor)
        self.log_path = log_path or self.temporary_log
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", "--model-repository", repository, *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 300
        while self.port is None:
            with open(self.log_path) as f:
                match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
            if match:
                self.port = int(match.group(1))
            elif self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("server exited before listening")
            else:
                time.sleep(0.05)
        while self.get("/v2/health/ready")[0] != 200:
            if time.time() > deadline:
                raise RuntimeError("server not ready after 300 s")
            time.sleep(0.1)

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
        if self.temporary_log:
            os.unlink(self.temporary_log)


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
