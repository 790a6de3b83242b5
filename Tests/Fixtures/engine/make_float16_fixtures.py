#!/usr/bin/env python3
"""Builds two tiny float16 models as float16 converters write them, runs onnxruntime on seeded inputs, and saves
model.onnx + input_<name>.npy + output_<name>.npy per model (the layout make_fixtures.py uses):
  float16       float16 input and outputs, float16 weights (onnxconverter_common's keep_io_types=False shape);
  float16_io32  float32 input and output around the same float16 body (keep_io_types=True: Cast in, Cast out).
Run from anywhere:
    python3 Tests/Fixtures/engine/make_float16_fixtures.py
Needs numpy, onnx, onnxruntime (tooling only)."""
import os
import numpy as np
from onnx import helper, TensorProto, numpy_helper

from make_fixtures import save  # writes the model, its inputs and onnxruntime's outputs

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1616)
F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def half(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def body(x):
    """Conv+Relu, Reshape, MatMul+Add, LayerNormalization, a float16 Constant, Softmax; returns (nodes, inits, outputs)."""
    n = helper.make_node
    inits = [numpy_helper.from_array(a, name) for name, a in [
        ("w", half(4, 3, 3, 3)), ("b", half(4)), ("flat", np.array([0, -1], np.int64)),
        ("fc", half(64, 10, scale=0.2)), ("fc_b", half(10)), ("ln_s", half(10) + np.float16(1)), ("ln_b", half(10))]]
    nodes = [
        n("Conv", [x, "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c"], ["r"]),
        n("Reshape", ["r", "flat"], ["f"]),
        n("MatMul", ["f", "fc"], ["m"]),
        n("Add", ["m", "fc_b"], ["a"]),
        n("LayerNormalization", ["a", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        n("Constant", [], ["k"], value=numpy_helper.from_array(np.array(1.5, np.float16), "k")),
        n("Mul", ["ln", "k"], ["logits"]),
        n("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return nodes, inits


def float16_io():
    nodes, inits = body("x")
    graph = helper.make_graph(nodes, "float16", [helper.make_tensor_value_info("x", F16, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("probs", F16, ["N", 10]),
                               helper.make_tensor_value_info("logits", F16, ["N", 10])], inits)
    save("float16", graph, 17, {"x": rng.standard_normal((3, 3, 8, 8)).astype(np.float16)})


def float32_io():
    nodes, inits = body("x16")
    n = helper.make_node
    nodes = [n("Cast", ["x"], ["x16"], to=F16)] + nodes + [n("Cast", ["probs"], ["probs32"], to=F32),
                                                         n("Cast", ["logits"], ["logits32"], to=F32)]
    graph = helper.make_graph(nodes, "float16_io32", [helper.make_tensor_value_info("x", F32, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("probs32", F32, ["N", 10]),
                               helper.make_tensor_value_info("logits32", F32, ["N", 10])], inits)
    save("float16_io32", graph, 17, {"x": rng.standard_normal((3, 3, 8, 8)).astype(np.float32)})


if __name__ == "__main__":
    float16_io()
    float32_io()
