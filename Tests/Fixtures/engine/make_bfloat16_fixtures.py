#!/usr/bin/env python3
"""Builds a tiny bfloat16 model (the float16 fixture's body with bfloat16 weights, input and outputs) and its
reference, and saves model.onnx + input_x.npy + output_<name>.npy in `bfloat16/`.

onnxruntime's CPU provider has no bfloat16 MatMul or Conv ("Could not find an implementation"), so the reference is
onnxruntime on the same graph in float32, with the bfloat16 weights and input widened exactly: what the model computes
before its outputs are rounded to bfloat16. The input is stored as its uint16 bit patterns (numpy has no bfloat16),
the outputs as float32. Run from anywhere:
    python3 Tests/Fixtures/engine/make_bfloat16_fixtures.py
Needs numpy, onnx, onnxruntime, ml_dtypes (tooling only)."""
import os

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1616)
BF16, F32 = TensorProto.BFLOAT16, TensorProto.FLOAT


def brain(*shape, scale=0.5, shift=0.0):
    """Random values representable in bfloat16, as float32."""
    return (rng.standard_normal(shape) * scale + shift).astype(ml_dtypes.bfloat16).astype(np.float32)


def tensor(name, values, dtype):
    """An initializer of `values` (float32, exactly bfloat16) stored as `dtype`."""
    if dtype == F32:
        return numpy_helper.from_array(values, name)
    bits = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    return helper.make_tensor(name, BF16, values.shape, bits.tobytes(), raw=True)


def graph(dtype, weights):
    """Conv+Relu, Reshape, MatMul+Add, LayerNormalization, a Constant, Softmax, all in `dtype`."""
    n = helper.make_node
    inits = [tensor(name, value, dtype) for name, value in weights.items()]
    inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "flat"))
    nodes = [
        n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c"], ["r"]),
        n("Reshape", ["r", "flat"], ["f"]),
        n("MatMul", ["f", "fc"], ["m"]),
        n("Add", ["m", "fc_b"], ["a"]),
        n("LayerNormalization", ["a", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        n("Constant", [], ["k"], value=tensor("k", np.array(1.5, np.float32), dtype)),
        n("Mul", ["ln", "k"], ["logits"]),
        n("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return helper.make_graph(nodes, "bfloat16", [helper.make_tensor_value_info("x", dtype, ["N", 3, 8, 8])],
                             [helper.make_tensor_value_info("probs", dtype, ["N", 10]),
                              helper.make_tensor_value_info("logits", dtype, ["N", 10])], inits)


def model(g):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="osprey-fixtures")
    m.ir_version = 8
    return m


def main():
    weights = {"w": brain(4, 3, 3, 3), "b": brain(4), "fc": brain(64, 10, scale=0.2), "fc_b": brain(10),
               "ln_s": brain(10, shift=1.0), "ln_b": brain(10)}
    x = brain(3, 3, 8, 8, scale=1.0)
    folder = os.path.join(HERE, "bfloat16")
    os.makedirs(folder, exist_ok=True)
    onnx.save(model(graph(BF16, weights)), os.path.join(folder, "model.onnx"))
    reference = model(graph(F32, weights))
    session = ort.InferenceSession(reference.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, {"x": x})
    np.save(os.path.join(folder, "input_x.npy"), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    for info, value in zip(session.get_outputs(), outputs):
        np.save(os.path.join(folder, f"output_{info.name}.npy"), value)
    print("bfloat16", x.shape, [o.shape for o in outputs])


if __name__ == "__main__":
    main()
