#!/usr/bin/env python3
"""Writes MobileNetV2-1.0 and ResNet-18 shaped ONNX models (224x224, dynamic batch, seeded random weights)
plus layers.json, the conv geometries the Swift kernel harness times.

Real layer structure (Conv + BatchNormalization + ReLU6/Relu, depthwise 3x3 inverted residuals, basic blocks with
residual Add, GlobalAveragePool + Flatten + Gemm to 1000 classes); only the weights are random.

usage: make_models.py OUT_DIR
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Accumulates nodes, initializers and conv geometries for one model."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.layers = [], [], []
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, prefix, array):
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def conv_bn(self, x, shape, out_channels, kernel, stride, groups=1, act="relu6", residual=None):
        """Conv (no bias) + BatchNormalization + activation; shape is (C, H, W) of x. Returns (name, new shape)."""
        c, h, w = shape
        pad = kernel // 2
        fan_in = (c // groups) * kernel * kernel
        weight = self.rng.normal(0, np.sqrt(2.0 / fan_in), (out_channels, c // groups, kernel, kernel))
        y = self.fresh("conv")
        self.nodes.append(helper.make_node("Conv", [x, self.const("w", weight)], [y], kernel_shape=[kernel, kernel],
                                           strides=[stride, stride], pads=[pad] * 4, group=groups))
        bn = self.fresh("bn")
        self.nodes.append(helper.make_node("BatchNormalization", [
            y,
            self.const("gamma", self.rng.uniform(0.5, 1.5, out_channels)),
            self.const("beta", self.rng.normal(0, 0.1, out_channels)),
            self.const("mean", self.rng.normal(0, 0.1, out_channels)),
            self.const("var", self.rng.uniform(0.5, 1.5, out_channels)),
        ], [bn], epsilon=1e-5))
        y = bn
        if residual is not None:
            added = self.fresh("add")
            self.nodes.append(helper.make_node("Add", [y, residual], [added]))
            y = added
        if act == "relu6":
            out = self.fresh("relu6")
            self.nodes.append(helper.make_node("Clip", [y, self.const("lo", 0.0), self.const("hi", 6.0)], [out]))
            y = out
        elif act == "relu":
            out = self.fresh("relu")
            self.nodes.append(helper.make_node("Relu", [y], [out]))
            y = out
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        self.layers.append(dict(name=f"conv{len(self.layers)}", C=c, H=h, W=w, M=out_channels, k=kernel, stride=stride,
                                pad=pad, groups=groups, activation=act, residual=residual is not None))
        return y, (out_channels, oh, ow)

    def head(self, x, channels, classes=1000):
        pooled, flat, logits = self.fresh("gap"), self.fresh("flatten"), "logits"
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], [pooled]))
        self.nodes.append(helper.make_node("Flatten", [pooled], [flat], axis=1))
        weight = self.rng.normal(0, np.sqrt(1.0 / channels), (classes, channels))
        self.nodes.append(helper.make_node("Gemm", [flat, self.const("fc_w", weight), self.const("fc_b", np.zeros(classes))],
                                           [logits], transB=1))
        return logits

    def save(self, path):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="osprey-bench")
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, path)


def mobilenet_v2():
    b = Builder("mobilenetv2", seed=1)
    x, shape = b.conv_bn("input", (3, 224, 224), 32, 3, 2)
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            block_in, in_shape = x, shape
            if t != 1:
                x, shape = b.conv_bn(x, shape, in_shape[0] * t, 1, 1)
            x, shape = b.conv_bn(x, shape, shape[0], 3, stride, groups=shape[0])
            identity = block_in if stride == 1 and in_shape[0] == c else None
            x, shape = b.conv_bn(x, shape, c, 1, 1, act="none", residual=identity)
    x, shape = b.conv_bn(x, shape, 1280, 1, 1)
    b.head(x, 1280)
    return b


def resnet18():
    b = Builder("resnet18", seed=2)
    x, shape = b.conv_bn("input", (3, 224, 224), 64, 7, 2, act="relu")
    pooled = b.fresh("maxpool")
    b.nodes.append(helper.make_node("MaxPool", [x], [pooled], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, shape = pooled, (64, 56, 56)
    for stage, channels in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            identity, in_shape = x, shape
            if stride != 1 or in_shape[0] != channels:
                identity, _ = b.conv_bn(x, in_shape, channels, 1, stride, act="none")
            y, shape = b.conv_bn(x, in_shape, channels, 3, stride, act="relu")
            x, shape = b.conv_bn(y, shape, channels, 3, 1, act="relu", residual=identity)
    b.head(x, 512)
    return b


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "Benchmarks/out/engine"
    os.makedirs(out, exist_ok=True)
    layers = {}
    for builder in (mobilenet_v2(), resnet18()):
        builder.save(os.path.join(out, f"{builder.name}.onnx"))
        layers[builder.name] = builder.layers
    with open(os.path.join(out, "layers.json"), "w") as f:
        json.dump(layers, f, indent=1)
    for name, convs in layers.items():
        macs = sum(l["M"] * (l["C"] // l["groups"]) * l["k"] ** 2 * ((l["H"] + 2 * l["pad"] - l["k"]) // l["stride"] + 1) ** 2 for l in convs)
        print(f"{name}: {len(convs)} convs, {macs / 1e9:.3f} GMAC per image")


if __name__ == "__main__":
    main()
