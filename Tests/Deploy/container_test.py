#!/usr/bin/env python3
"""The runtime image (Deploy/container/build-image.sh) run with podman: live and ready through the container's port,
classify an example image, the HEALTHCHECK command (`osprey probe`) inside it, a numeric non-root user, and SIGTERM
draining to exit status 0. Where this sandbox cannot run containers, it says why and reports the case skipped.

usage: container_test.py IMAGE MODELS_DIR     (prints PASS/FAIL/SKIP lines and 'container: N passed, N failed, N skipped')
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import time

# Ways to start a container, tried in order: podman's defaults, then runc with cgroupfs and limits within this
# process's hard limits (some sandboxes refuse crun's cgroup set-up or raising RLIMIT_NOFILE).
def podman_variants():
    import resource
    # Lowering a limit is always allowed; raising it (podman's default nofile of 1048576) may not be.
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], 4096)
    limits = [f"--ulimit=nofile={nofile}:{nofile}", f"--ulimit=nproc={nproc}:{nproc}"]
    return [(["podman"], []), (["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"], limits)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None):
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    except OSError:
        return None, b""


def main():
    image, models = sys.argv[1], sys.argv[2]
    counts = {"passed": 0, "failed": 0, "skipped": 0}

    def report(kind, name, detail=""):
        counts[kind] += 1
        print(f"{ {'passed': 'PASS', 'failed': 'FAIL', 'skipped': 'SKIP'}[kind] } {name}" + (f": {detail}" if detail else ""), flush=True)

    chosen, errors = None, []
    for base, extra in podman_variants():
        run = subprocess.run(base + ["run", "--rm", "--network", "host", *extra, "--entrypoint", "/usr/local/bin/osprey",
                                     image, "--help"], capture_output=True, text=True, timeout=120)
        if run.returncode == 0:
            chosen = (base, extra)
            break
        errors.append(" ".join(base) + ": " + (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1])
    name = "container: image serves, probes, classifies and drains on SIGTERM"
    if chosen is None:
        report("skipped", name, "this sandbox cannot run containers (" + "; ".join(errors) + ")")
    else:
        base, extra = chosen
        port = free_port()
        container = f"osprey-test-{os.getpid()}"
        problems = []
        subprocess.run(base + ["rm", "-f", container], capture_output=True)
        started = subprocess.run(base + ["run", "-d", "--name", container, "--network", "host", "--log-driver", "k8s-file", *extra,
                                         "-e", f"OSPREY_PORT={port}", image, "--drain-delay", "1s"],
                                 capture_output=True, text=True)
        try:
            if started.returncode != 0:
                problems.append("podman run: " + started.stderr.strip())
            else:
                deadline = time.time() + 60
                while time.time() < deadline and request(port, "GET", "/v2/health/ready")[0] != 200:
                    time.sleep(0.2)
                live, ready = request(port, "GET", "/v2/health/live")[0], request(port, "GET", "/v2/health/ready")[0]
                if (live, ready) != (200, 200):
                    problems.append(f"live/ready through the container's port: expected 200/200, got {live}/{ready}")
                picture = open(os.path.join(models, "digits", "examples", "digit_0.png"), "rb").read()
                status, body = request(port, "POST", "/v2/models/digits/classify", picture, {"Content-Type": "image/png"})
                label = json.loads(body)["classifications"][0][0]["label"] if status == 200 else None
                if label != "0":
                    problems.append(f"classify digit_0.png: expected label '0', got status {status}, label {label}")
                probe = subprocess.run(base + ["exec", container, "/usr/local/bin/osprey", "probe", "--port", str(port)],
                                       capture_output=True, text=True)
                if probe.returncode != 0:
                    problems.append(f"HEALTHCHECK command `osprey probe` inside: exit {probe.returncode} {probe.stderr.strip()}")
                user = subprocess.run(base + ["exec", container, "/usr/bin/id", "-u"], capture_output=True, text=True).stdout.strip()
                if user != "10001":
                    problems.append(f"container user: expected uid 10001, got '{user}'")
                subprocess.run(base + ["kill", "--signal", "TERM", container], capture_output=True)
                waited = subprocess.run(base + ["wait", container], capture_output=True, text=True, timeout=60)
                code = waited.stdout.strip().splitlines()[-1] if waited.stdout.strip() else "?"
                # The server logs to stderr, which `podman logs` replays on its own stderr.
                logs = subprocess.run(base + ["logs", container], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
                if code != "0":
                    problems.append(f"exit status after SIGTERM: expected 0, got {code}")
                if "drain delay over" not in logs or "stopped" not in logs:
                    problems.append("the log should show the drain delay and the stop: " + logs[-300:])
        finally:
            subprocess.run(base + ["rm", "-f", container], capture_output=True)
        how = " ".join(base[1:]) or "podman defaults"
        report("failed" if problems else "passed", f"{name} ({how})", "; ".join(problems))
    print(f"container: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
