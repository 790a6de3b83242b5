#!/usr/bin/env python3
"""Serving benchmark driver (see run.sh): closed-loop wrk load of binary V2 infer requests on a MobileNetV2-shaped model
at several concurrencies, the engine-alone peers (`osprey predict`, batch 8: a 2-thread engine splitting each operator,
a 2-thread engine running one row range per thread, one running one row per part as the server does for this model,
and two single-threaded ones side by side), and
server RSS around a hot swap.
Prints markdown.

"Engine best" is the highest *sustained* rate of those schedules: images per median run of 10 back-to-back runs (the
two side-by-side engines: their median runs added). The server's rate is sustained over many executions too, so it
is compared with the engine's typical run, not with its luckiest; the fastest single run is printed beside it.

usage: bench.py OSPREY OUT_DIR SECONDS
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

from loadgen import Server, wrk

MODEL = "mobilenetv2"
# `osprey serve` flags: one 2-thread execution at a time. Two single-threaded instances (`--threads 1` and the config's
# `instance_group` count 2) cost more CPU per request on this CPU (two working sets in the caches); see BENCHMARKS.md.
SERVE_FLAGS = []
# Seconds of load at each concurrency before it is measured.
WARM_UP_SECONDS = 2


def predict_command(binary, out, batch, repeat, threads=None, output="predict_out.npy", row_parts=1):
    """The `osprey predict` command line on a batch fixture."""
    command = [binary, "predict", os.path.join(out, "repo", MODEL, "1", "model.onnx"), "--input", os.path.join(out, f"input_b{batch}.npy"),
               "--output", os.path.join(out, output), "--repeat", str(repeat)]
    return command + (["--threads", str(threads)] if threads else []) + (["--row-parts", str(row_parts)] if row_parts > 1 else [])


def predict(binary, out, batch, repeat, row_parts=1):
    """(fastest ms per run, median ms per run, CPU seconds of the whole process) of `osprey predict` on a batch."""
    command = predict_command(binary, out, batch, repeat, row_parts=row_parts)
    before = os.times()
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    fastest = re.search(r"\(min ([0-9.]+) ms", output)
    median = re.search(r"median ([0-9.]+) ms", output)
    return (float(fastest.group(1)) if fastest else None), (float(median.group(1)) if median else None), cpu, " ".join(command)


def engine_peer(binary, out, batch, row_parts=1):
    """Engine alone on `batch` images: the fastest and the median of 10 runs (ms) and CPU ms per image (30 runs minus
    1 run, so loading and compiling cancel out; robust to other load on the box)."""
    best_ms, median_ms, _, command = predict(binary, out, batch, 10, row_parts)
    _, _, cpu_once, _ = predict(binary, out, batch, 1, row_parts)
    _, _, cpu_many, _ = predict(binary, out, batch, 31, row_parts)
    return dict(fastest_ms=best_ms, median_ms=median_ms, cpu_ms=(cpu_many - cpu_once) / (30 * batch) * 1000, command=command)


def executions(server, rows=None):
    """(count, ms) of the server's executions per phase (compute_input = batch concatenation, compute_infer = the
    engine's run), of `rows` rows or (None) of every size, plus "rows": rows executed; from the statistics endpoint.
    A streaming execution counts each batch it took as one execution, timed from its taking to its last row."""
    _, body = server.get(f"/v2/models/{MODEL}/stats")
    totals = {phase: (0, 0.0) for phase in ("compute_input", "compute_infer", "compute_output")}
    executed_rows = 0
    for entry in json.loads(body)["model_stats"][0]["batch_stats"]:
        if rows is None or entry["batch_size"] == rows:
            for phase in totals:
                count, ms = totals[phase]
                totals[phase] = (count + entry[phase]["count"], ms + entry[phase]["ns"] / 1e6)
            executed_rows += entry["batch_size"] * entry["compute_infer"]["count"]
    return dict(totals, rows=executed_rows)


def engine_pair(binary, out, batch):
    """Two single-threaded engines side by side (what two compute instances do): images/s of both together, from each
    one's median run of 10 while the other runs too."""
    commands = [predict_command(binary, out, batch, 10, threads=1, output=f"predict_out_{i}.npy") for i in range(2)]
    processes = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
    medians = [float(re.search(r"median ([0-9.]+) ms", p.communicate()[0]).group(1)) for p in processes]
    return sum(batch * 1000 / m for m in medians), " & ".join(" ".join(c) for c in commands)


def hot_swap_rss(server, out, seconds):
    """Peak and settled RSS (MiB) while 8 clients load the model and version 2 is uploaded mid-run."""
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(server.status("VmRSS"))
            time.sleep(0.05)

    before = server.status("VmRSS")
    sampler = threading.Thread(target=sample)
    sampler.start()
    url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
    load = {}
    runner = threading.Thread(target=lambda: load.update(wrk(url, 8, seconds, os.path.join(out, "request.bin"),
                                                             "application/octet-stream", open(os.path.join(out, "request.hdr")).read())))
    runner.start()
    time.sleep(seconds / 4)
    with open(os.path.join(out, "model_v2.onnx"), "rb") as f:
        started = time.time()
        status, body = server.request("PUT", f"/v2/repository/models/{MODEL}/versions/2", body=f.read(),
                                      headers={"Content-Type": "application/octet-stream"})
        upload_s = time.time() - started
    runner.join()
    stop.set()
    sampler.join()
    time.sleep(5)
    return dict(before=before, peak=max(samples), hwm=server.status("VmHWM"), settled=server.status("VmRSS"),
                upload_status=status, upload_s=upload_s, load=load)


def main():
    binary, out, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Each operator split across the threads, one row range of 4 per thread, and one row per part (the server's schedule
    # for 8 rows of a model whose weights fit in the cache).
    per_op, ranges, rows = engine_peer(binary, out, 8), engine_peer(binary, out, 8, row_parts=2), engine_peer(binary, out, 8, row_parts=8)
    one = engine_peer(binary, out, 1)
    pair_ips, pair_command = engine_pair(binary, out, 8)
    sustained = {"each operator split": 8000 / per_op["median_ms"], "one row range per thread": 8000 / ranges["median_ms"],
                 "one row per part": 8000 / rows["median_ms"], "two 1-thread engines": pair_ips}
    best_name = max(sustained, key=sustained.get)
    best_ips = sustained[best_name]
    fastest_ips = 8000 / min(per_op["fastest_ms"], ranges["fastest_ms"], rows["fastest_ms"])
    peer_median_ms, peer_ms, peer_cpu = rows["median_ms"], rows["fastest_ms"], rows["cpu_ms"]
    server = Server(binary, os.path.join(out, "repo"), *SERVE_FLAGS, log_path=os.path.join(out, "server.log"))
    try:
        url = f"http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer"
        body, header = os.path.join(out, "request.bin"), open(os.path.join(out, "request.hdr")).read()
        wrk(url, 2, 3, body, "application/octet-stream", header)  # warm-up
        for name, peer in (("each operator split across 2 threads", per_op), ("one row range of 4 per thread", ranges),
                           ("one row per part", rows)):
            print(f"engine alone (`osprey predict`, batch 8, {name}): median of 10 runs {peer['median_ms']:.1f} ms = "
                  f"{8000 / peer['median_ms']:.1f} images/s, fastest {peer['fastest_ms']:.1f} ms = {8000 / peer['fastest_ms']:.1f} images/s, "
                  f"{peer['cpu_ms']:.1f} CPU ms per image")
            print(f"  command: `{peer['command']}`")
        print(f"engine alone, batch 1: median {one['median_ms']:.1f} ms, {one['cpu_ms']:.1f} CPU ms per image")
        print(f"two single-threaded engines side by side, batch 8 each: {pair_ips:.1f} images/s together (median runs)")
        print(f"  command: `{pair_command}`")
        print(f"engine best (sustained): {best_ips:.1f} images/s ({best_name}); fastest single run: {fastest_ips:.1f} images/s")
        print(f"server: `osprey serve {' '.join(SERVE_FLAGS)}`, config `{json.dumps(json.load(open(os.path.join(out, 'repo', MODEL, 'config.json'))))}`")
        print()
        print("| clients | req/s | p50 ms | p99 ms | mean batch | errors | vs engine best | vs fastest engine run | server CPU ms/req | vs engine CPU ms/img | wrk CPU % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        command = None
        for clients in (1, 8, 32):
            # Steady state, as the engine's fastest run is: the buffer pool and the heaps grow to this load's batches first.
            wrk(url, clients, WARM_UP_SECONDS, body, "application/octet-stream", header)
            sum0, count0 = server.histogram("osprey_inference_batch_size", MODEL)
            executions0 = executions(server)
            cpu0 = server.cpu_seconds()
            r = wrk(url, clients, seconds, body, "application/octet-stream", header)
            cpu1 = server.cpu_seconds()
            executions1 = executions(server)
            sum1, count1 = server.histogram("osprey_inference_batch_size", MODEL)
            rps = r["requests"] / (r["duration_us"] / 1e6)
            batch = (sum1 - sum0) / max(count1 - count0, 1)
            errors = r["status_errors"] + r["socket_errors"]
            print(f"| {clients} | {rps:.1f} | {r['p50_us'] / 1000:.1f} | {r['p99_us'] / 1000:.1f} | {batch:.2f} | {errors} | "
                  f"{rps / best_ips:.2f} | {rps / fastest_ips:.2f} | {(cpu1 - cpu0) / max(r['requests'], 1) * 1000:.1f} | "
                  f"{(cpu1 - cpu0) / max(r['requests'], 1) * 1000 / peer_cpu:.2f} | "
                  f"{100 * r['client_cpu_s'] / (r['duration_us'] / 1e6):.0f} |")
            command = r["command"]
        print()
        print(f"  load command (CLIENTS = 1, 8, 32; wrk threads = min(CLIENTS, 2)), each after a {WARM_UP_SECONDS} s warm-up at "
              f"that concurrency: `{command}`")
        # Where a 32-client second goes: the engine's own run of each batch against the engine alone's 8-row run and
        # the concatenation before it.
        phases = {k: (executions1[k][0] - executions0[k][0], executions1[k][1] - executions0[k][1])
                  for k in ("compute_input", "compute_infer", "compute_output")}
        rows = executions1["rows"] - executions0["rows"]
        runs, infer_ms = phases["compute_infer"]
        if runs:
            print(f"  at 32 clients: {runs} executions of {rows / runs:.1f} rows on average, engine run {infer_ms / runs:.1f} ms each "
                  f"(streamed batches overlap; engine alone, 8 rows: "
                  f"median {peer_median_ms:.1f}, fastest {peer_ms:.1f}), concatenation {phases['compute_input'][1] / runs:.2f} ms, "
                  f"outputs {phases['compute_output'][1] / runs:.2f} ms")
        print()
        swap = hot_swap_rss(server, out, max(seconds, 12))
        r = swap["load"]
        print(f"hot swap (8 clients, PUT version 2 = same bytes, {swap['upload_s']:.2f} s to compile and publish, status {swap['upload_status']}): "
              f"RSS before {swap['before']:.0f} MiB, peak during swap {swap['peak']:.0f} MiB (VmHWM {swap['hwm']:.0f} MiB), "
              f"settled 5 s after {swap['settled']:.0f} MiB; load during swap {r['requests'] / (r['duration_us'] / 1e6):.1f} req/s, "
              f"p99 {r['p99_us'] / 1000:.1f} ms, errors {r['status_errors'] + r['socket_errors']}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
