#!/usr/bin/env python3
"""Classification benchmark driver (see run.sh): wrk posts a 1920x1080 JPEG to /v2/models/{m}/classify at 1 and 8
clients, for the digits and the MobileNetV2-shaped model; the same models are also driven with an already
preprocessed binary tensor (/infer) so the decode+preprocess share can be read off; the Imaging harness (if built)
times decode+preprocess alone. Prints markdown.

usage: bench.py OSPREY OUT_DIR SECONDS [IMAGING_HARNESS]
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
from loadgen import Server, wrk  # noqa: E402

MODELS = ("digits", "mobilenetv2")


def stats(server, model):
    """(requests, total ns, compute_infer ns) summed over the model's versions."""
    _, body = server.get(f"/v2/models/{model}/stats")
    entries = json.loads(body)["model_stats"]
    s = [e["inference_stats"] for e in entries]
    return (sum(x["success"]["count"] for x in s), sum(x["success"]["ns"] for x in s),
            sum(x["compute_infer"]["ns"] for x in s), sum(x["queue"]["ns"] for x in s))


def main():
    binary, out, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    harness = sys.argv[4] if len(sys.argv) > 4 else None
    photo = os.path.join(out, "photo.jpg")
    server = Server(binary, os.path.join(out, "repo"), log_path=os.path.join(out, "server.log"))
    rows, commands = [], {}
    try:
        for model in MODELS:
            classify_url = f"http://127.0.0.1:{server.port}/v2/models/{model}/classify"
            infer_url = f"http://127.0.0.1:{server.port}/v2/models/{model}/infer"
            status, body = server.request("POST", f"/v2/models/{model}/classify?top_k=1", body=open(photo, "rb").read(),
                                          headers={"Content-Type": "image/jpeg"})
            assert status == 200, f"classify {model}: {status} {body[:200]}"
            tensor = os.path.join(out, f"tensor_{model}.bin")
            header = open(os.path.join(out, f"tensor_{model}.hdr")).read()
            wrk(classify_url, 2, 2, photo, "image/jpeg")  # warm-up
            for clients in (1, 8):
                s0, cpu0 = stats(server, model), server.cpu_seconds()
                r = wrk(classify_url, clients, seconds, photo, "image/jpeg")
                s1, cpu1 = stats(server, model), server.cpu_seconds()
                t = wrk(infer_url, clients, seconds, tensor, "application/octet-stream", header)
                cpu2 = server.cpu_seconds()
                classify_cpu = (cpu1 - cpu0) / max(r["requests"], 1) * 1000
                tensor_cpu = (cpu2 - cpu1) / max(t["requests"], 1) * 1000
                ips = r["requests"] / (r["duration_us"] / 1e6)
                tps = t["requests"] / (t["duration_us"] / 1e6)
                count = max(s1[0] - s0[0], 1)
                infer_ms = (s1[2] - s0[2]) / count / 1e6
                rows.append((model, clients, ips, r["p50_us"] / 1000, r["p99_us"] / 1000, r["status_errors"] + r["socket_errors"],
                             tps, t["p50_us"] / 1000, infer_ms, (s1[3] - s0[3]) / count / 1e6, classify_cpu, tensor_cpu))
                commands["classify"], commands["infer"] = r["command"], t["command"]
    finally:
        server.stop()
    print("| model | clients | classify images/s | p50 ms | p99 ms | errors | tensor /infer req/s | its p50 ms |"
          " server CPU ms/image classify | server CPU ms/req tensor | decode+preprocess share of CPU | compute_infer ms/req | queue ms/req |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model, clients, ips, p50, p99, errors, tps, tp50, infer_ms, queue_ms, classify_cpu, tensor_cpu in rows:
        share = max(0.0, (classify_cpu - tensor_cpu) / classify_cpu)
        print(f"| {model} | {clients} | {ips:.1f} | {p50:.1f} | {p99:.1f} | {errors} | {tps:.1f} | {tp50:.1f} | {classify_cpu:.1f} | "
              f"{tensor_cpu:.1f} | {share:.0%} | {infer_ms:.2f} | {queue_ms:.2f} |")
    print()
    print(f"  classify load: `{commands['classify']}` (CONTENT_TYPE=image/jpeg REQUEST_BODY={photo})")
    print(f"  tensor load:   `{commands['infer']}`")
    if harness and os.path.exists(harness):
        output = subprocess.run([harness, photo, "20"], capture_output=True, text=True, check=True).stdout
        print()
        print(f"decode+preprocess alone (Imaging harness `{harness} {photo} 20`, one thread, median):")
        for line in output.splitlines():
            if re.search(r"margin 2: decoded", line):
                print(f"  {line.strip()}")


if __name__ == "__main__":
    main()
