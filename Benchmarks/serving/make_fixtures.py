#!/usr/bin/env python3
"""Serving benchmark fixtures in OUT_DIR (default Benchmarks/out/serving), all generated, none committed:

- repo/mobilenetv2/1/model.onnx + config.json: MobileNetV2-1.0 shaped (Benchmarks/engine/make_models.py), dynamic batch
- model_v2.onnx: the same bytes, uploaded as version 2 during the hot-swap RSS measurement
- request.bin + request.hdr: one binary-extension V2 infer body (1x3x224x224 FP32, binary `logits` output) and its JSON length
- input_b1.npy, input_b8.npy: batches for `osprey predict` (the engine-alone peer)

usage: make_fixtures.py [OUT_DIR]
"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "engine"))
import make_models  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "out", "serving")
    version_dir = os.path.join(out, "repo", "mobilenetv2", "1")
    os.makedirs(version_dir, exist_ok=True)
    model_path = os.path.join(version_dir, "model.onnx")
    if not os.path.exists(model_path):
        make_models.mobilenet_v2().save(model_path)
    shutil.copyfile(model_path, os.path.join(out, "model_v2.onnx"))
    # Batches of 8, where this CPU spends least per MobileNetV2 image (more queued waits for the next execution).
    config = {"max_batch_size": 32, "dynamic_batching": {"max_queue_delay_microseconds": 2000, "preferred_batch_size": [8]}}
    with open(os.path.join(out, "repo", "mobilenetv2", "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rng = np.random.default_rng(0)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    header = json.dumps({
        "inputs": [{"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32", "parameters": {"binary_data_size": image.nbytes}}],
        "outputs": [{"name": "logits", "parameters": {"binary_data": True}}],
    }).encode()
    with open(os.path.join(out, "request.bin"), "wb") as f:
        f.write(header + image.tobytes())
    with open(os.path.join(out, "request.hdr"), "w") as f:
        f.write(str(len(header)))
    for batch in (1, 8):
        np.save(os.path.join(out, f"input_b{batch}.npy"), rng.random((batch, 3, 224, 224), dtype=np.float32))


if __name__ == "__main__":
    main()
