"""The one way the Python suites start `osprey serve`: interop, robustness, repository faults, deploy and console.

    sys.path.insert(0, os.path.join(<Tests>, "Support")); from osprey_server import Server

`Server(binary, repository, *extra)` starts `osprey serve --port 0` on the repository, reads the bound port from the
startup log line and waits until `/v2/health/ready` answers 200 (`wait_ready=False` returns once the port is known).
`stop()` ends it with SIGTERM (graceful drain, then SIGKILL after `grace` seconds) and returns the exit status;
`kill()` ends it at once.
"""
import http.client
import os
import signal
import subprocess
import threading
import time

PORT_MARKER = "listening on http://127.0.0.1:"


class Server:
    """A live `osprey serve` on a free port, with its log kept in memory."""

    def __init__(self, binary, repository, *extra, wait_ready=True, log_lines=2000, ready_timeout=120):
        self.log = []  # the last `log_lines` lines, oldest first
        if "--grpc-port" not in extra:
            extra = ("--grpc-port", "0", *extra)  # the default 8081 may be taken by another server or test
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", "--model-repository", repository, "--log-level", "info", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.port = None
        found = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.log.append(line.rstrip("\n"))
                if len(self.log) > log_lines:
                    del self.log[: len(self.log) - log_lines]
                if self.port is None and PORT_MARKER in line:
                    self.port = int(line.split(PORT_MARKER, 1)[1].split('"')[0].split()[0])
                    found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(60) or self.port is None:
            self.kill()
            raise RuntimeError("server did not log its port:\n" + "\n".join(self.log[-20:]))
        self.probes = []  # readiness statuses seen while waiting, in order
        if not wait_ready:
            return
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            self.probes.append(self.request("GET", "/v2/health/ready")[0])
            if self.probes[-1] == 200:
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("server never became ready:\n" + "\n".join(self.log[-20:]))

    @property
    def url(self):
        """host:port, as tritonclient wants it."""
        return f"127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes) of one request on a fresh connection; (None, {}, b"") if it fails."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        except OSError:
            return None, {}, b""
        finally:
            connection.close()

    def rss(self):
        """Resident set size in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def fds(self):
        """Open file descriptors."""
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self, grace=20):
        """SIGTERM, wait up to `grace` seconds for the drain, then SIGKILL; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait()
        return self.proc.returncode

    def kill(self):
        """SIGKILL at once."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return self.proc.returncode
