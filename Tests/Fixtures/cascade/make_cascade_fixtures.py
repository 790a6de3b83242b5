#!/usr/bin/env python3
"""Builds the confidence-cascade fixtures: a model repository of three tiny classifiers over a 4x4 gray image and two
PNG images, each model's confidence set by chosen pixels so tests can craft inputs it is sure or unsure about:

- small: logits = 8 * (top pixel row), 4 classes, raw logits (config says so); cascades to `large` below 0.6;
- large: softmax(8 * second pixel row), 4 classes, already probabilities;
- narrow: softmax(8 * second pixel row, first 3 pixels), 3 classes: an incompatible cascade target.

A white pixel (1.0 after /255 scaling) at column c of a row makes that row's model sure of class c (p = 0.9989);
a faint one (0.1) leaves it unsure (p = 0.43). Run from anywhere:
    python3 Tests/Fixtures/cascade/make_cascade_fixtures.py
Needs numpy, onnx, onnxruntime (tooling only; the engine never needs Python)."""
import json
import os
import struct
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "repository")
IMAGE = {"width": 4, "height": 4, "resize_mode": "stretch", "interpolation": "nearest", "channel_order": "gray"}
LABELS = "north\neast\nsouth\nwest\n"


def classifier(row, classes, softmax):
    """8 * pixels [row, 0:classes] of x [N, 1, 4, 4] as [N, classes] scores (softmaxed when asked)."""
    select = np.zeros((16, classes), np.float32)
    for c in range(classes):
        select[row * 4 + c, c] = 8.0
    n = helper.make_node
    nodes = [n("Flatten", ["x"], ["flat"], axis=1), n("MatMul", ["flat", "select"], ["scores" if softmax else "logits"])]
    if softmax:
        nodes.append(n("Softmax", ["scores"], ["probs"], axis=1))
    name = "probs" if softmax else "logits"
    graph = helper.make_graph(nodes, "cascade_fixture",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 4])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", classes])],
                              [numpy_helper.from_array(select, "select")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="osprey-fixtures")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save(name, model, config, labels=LABELS):
    folder = os.path.join(REPO, name)
    os.makedirs(os.path.join(folder, "1"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "1", "model.onnx"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "labels.txt"), "w") as f:
        f.write(labels)
    return model


def png(path, pixels):
    """An 8-bit gray PNG of `pixels` (rows of 0-255), written with zlib alone."""
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", len(pixels[0]), len(pixels), 8, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    base = {"max_batch_size": 8, "image": IMAGE}
    small = save("small", classifier(0, 4, softmax=False),
                 dict(base, output={"probabilities": False}, cascade={"model": "large", "min_confidence": 0.6}))
    large = save("large", classifier(1, 4, softmax=True), dict(base, output={"probabilities": True}))
    save("narrow", classifier(1, 3, softmax=True), dict(base, output={"probabilities": True}), labels="north\neast\nsouth\n")
    # sure.png: small is sure of class 0 (top row), large of class 2; unsure.png: small is unsure (faint top pixel).
    sure = [[255, 0, 0, 0], [0, 0, 255, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    unsure = [[26, 0, 0, 0], [0, 0, 255, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    png(os.path.join(HERE, "sure.png"), sure)
    png(os.path.join(HERE, "unsure.png"), unsure)
    x = np.array([sure, unsure], np.float32).reshape(2, 1, 4, 4) / 255
    for name, model in [("small", small), ("large", large)]:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        print(name, np.round(session.run(None, {"x": x})[0], 4).tolist())


if __name__ == "__main__":
    main()
