#!/usr/bin/env python3
"""Writes the small ONNX fixtures used by Tests/ONNXTests (run from anywhere; outputs land beside this script).

Each model exercises decoder features: every attribute type, raw and typed initializers of many dtypes,
sparse initializers, symbolic dims, metadata, subgraphs, and external data (safe and unsafe locations).
`expected.json` records what onnx itself reads back, so the Swift tests compare against onnx, not against hand-typed values.
"""
import json
import os

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(model, name):
    onnx.save(model, os.path.join(HERE, name))


def tensor_summary(t):
    """dtype code, dims and values as onnx reads them: numbers as exact text, 16-bit floats as bit patterns, strings as bytes."""
    if t.data_type == TensorProto.STRING:
        values = [list(s) for s in t.string_data]
    else:
        array = numpy_helper.to_array(t)
        if t.data_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
            if t.data_type == TensorProto.FLOAT16:
                array = array.view(np.uint16)
            else:
                raw = t.raw_data if t.raw_data else np.array(t.int32_data, dtype=np.int32).astype(np.uint16).tobytes()
                array = np.frombuffer(raw, dtype=np.uint16)
        values = [v.item() if hasattr(v, "item") else v for v in array.flatten()]
        values = [str(int(v)) if isinstance(v, (bool, np.bool_, int)) else repr(float(v)) for v in values]
    return {"dtype": t.data_type, "dims": list(t.dims), "values": values}


def dense_of_sparse(sp):
    values = numpy_helper.to_array(sp.values)
    indices = numpy_helper.to_array(sp.indices)
    dense = np.zeros(list(sp.dims), dtype=values.dtype)
    flat = dense.reshape(-1)
    if indices.ndim == 1:
        flat[indices] = values
    else:
        flat[np.ravel_multi_index(indices.T, list(sp.dims))] = values
    values = [repr(float(v)) if dense.dtype.kind == "f" else str(int(v)) for v in dense.flatten()]
    return {"dtype": sp.values.data_type, "dims": list(sp.dims), "values": values}


def initializers_model():
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float32), "f32_raw"),
        helper.make_tensor("f32_typed", TensorProto.FLOAT, [3], [1.5, -2.25, 3e-5]),
        helper.make_tensor("f64_typed", TensorProto.DOUBLE, [2], [1e300, -0.5]),
        numpy_helper.from_array(np.array([[-128, 127], [0, -1]], dtype=np.int8), "i8_raw"),
        helper.make_tensor("i8_typed", TensorProto.INT8, [4], [-128, 127, 0, -1]),
        helper.make_tensor("u8_typed", TensorProto.UINT8, [3], [0, 200, 255]),
        numpy_helper.from_array(np.array([0, 255, 7], dtype=np.uint8), "u8_raw"),
        helper.make_tensor("i16_typed", TensorProto.INT16, [2], [-32768, 32767]),
        helper.make_tensor("u16_typed", TensorProto.UINT16, [2], [0, 65535]),
        helper.make_tensor("i32_typed", TensorProto.INT32, [3], [-(2**31), 2**31 - 1, 5]),
        helper.make_tensor("i64_typed", TensorProto.INT64, [3], [-(2**63), 2**63 - 1, -7]),
        numpy_helper.from_array(np.array([-(2**40), 3], dtype=np.int64), "i64_raw"),
        helper.make_tensor("u32_typed", TensorProto.UINT32, [2], [0, 2**32 - 1]),
        helper.make_tensor("u64_typed", TensorProto.UINT64, [2], [0, 2**64 - 1]),
        helper.make_tensor("bool_typed", TensorProto.BOOL, [4], [True, False, False, True]),
        numpy_helper.from_array(np.array([True, False, True]), "bool_raw"),
        helper.make_tensor("f16_typed", TensorProto.FLOAT16, [3], np.array([1.0, -2.5, 65504.0], dtype=np.float16)),
        numpy_helper.from_array(np.array([0.5, -0.0, 3.0], dtype=np.float16), "f16_raw"),
        helper.make_tensor("bf16_typed", TensorProto.BFLOAT16, [2], [1.0, -3.0]),
        helper.make_tensor("str_typed", TensorProto.STRING, [2], [b"hello", b"\xff\x00bytes"]),
        helper.make_tensor("scalar_f32", TensorProto.FLOAT, [], [42.0]),
        helper.make_tensor("empty_f32", TensorProto.FLOAT, [0, 3], []),
        helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4]),
    ]
    sparse_linear = helper.make_sparse_tensor(
        helper.make_tensor("sparse_linear", TensorProto.FLOAT, [3], [5.0, 6.0, 7.0]),
        helper.make_tensor("sparse_linear_idx", TensorProto.INT64, [3], [1, 4, 11]),
        [3, 4])
    sparse_coords = helper.make_sparse_tensor(
        helper.make_tensor("sparse_coords", TensorProto.INT32, [2], [-9, 8]),
        helper.make_tensor("sparse_coords_idx", TensorProto.INT64, [2, 2], [0, 1, 2, 0]),
        [3, 2])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    w_input = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])  # IR 3 style: initializer listed as input
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None])
    mid = helper.make_tensor_value_info("mid", TensorProto.FLOAT, ["batch", 4])
    nodes = [helper.make_node("Mul", ["x", "w"], ["mid"], name="scale"),
             helper.make_node("Relu", ["mid"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "inits", [x, w_input], [y], initializer=inits,
                              sparse_initializer=[sparse_linear, sparse_coords], value_info=[mid])
    model = helper.make_model(graph, producer_name="osprey-fixtures", producer_version="1.0",
                              opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 2)])
    model.ir_version = 7
    model.domain = "ai.osprey.test"
    model.model_version = 3
    model.doc_string = "decoder fixture"
    helper.set_model_props(model, {"author": "osprey", "license": "MIT"})
    save(model, "initializers.onnx")
    expected = {t.name: tensor_summary(t) for t in inits}
    expected["sparse_linear"] = dense_of_sparse(sparse_linear)
    expected["sparse_coords"] = dense_of_sparse(sparse_coords)
    return expected


def attributes_model():
    then_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["then_out"], value=helper.make_tensor("c1", TensorProto.FLOAT, [1], [1.0]))],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [1])])
    else_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["else_out"], value_floats=[2.0])],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [1])])
    sparse = helper.make_sparse_tensor(helper.make_tensor("sv", TensorProto.FLOAT, [1], [9.0]),
                                       helper.make_tensor("si", TensorProto.INT64, [1], [2]), [4])
    every = helper.make_node("Everything", ["cond"], ["unused"], name="every", domain="com.example")
    for key, value in [("f", 0.25), ("i", -3), ("s", b"text"), ("t", helper.make_tensor("t", TensorProto.INT64, [2], [4, 5])),
                       ("g", then_graph), ("floats", [1.0, 2.5]), ("ints", [-1, 0, 2**40]), ("strings", [b"a", b"bc"]),
                       ("tensors", [helper.make_tensor("t0", TensorProto.FLOAT, [1], [0.5]),
                                    helper.make_tensor("t1", TensorProto.INT8, [1], [-2])]),
                       ("graphs", [then_graph, else_graph]), ("sp", sparse)]:
        every.attribute.append(helper.make_attribute(key, value))
    every.attribute.append(helper.make_attribute("empty_ints", [], attr_type=onnx.AttributeProto.INTS))
    legacy = helper.make_attribute("legacy_int", 11)
    legacy.ClearField("type")  # very old files omit `type`; the decoder must infer it
    every.attribute.append(legacy)
    if_node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph, else_branch=else_graph)
    graph = helper.make_graph([every, if_node], "attrs",
                              [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]),
                               helper.make_tensor_value_info("seq", TensorProto.FLOAT, None)])
    graph.output[1].type.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    save(model, "attributes.onnx")


def external_models():
    os.makedirs(os.path.join(HERE, "external"), exist_ok=True)
    weights = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
    bias = np.array([7, -8], dtype=np.int64)
    blob = b"\x00" * 16 + weights.tobytes() + bias.tobytes()
    with open(os.path.join(HERE, "external", "weights.bin"), "wb") as f:
        f.write(blob)

    def external(name, dtype, dims, location, offset=None, length=None):
        t = TensorProto(name=name, data_type=dtype, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for key, value in [("location", location), ("offset", offset), ("length", length)]:
            if value is not None:
                entry = t.external_data.add()
                entry.key, entry.value = key, str(value)
        return t

    def model_with(inits, file):
        graph = helper.make_graph([helper.make_node("Identity", ["W"], ["out"])], "ext", [],
                                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])], initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        save(model, os.path.join("external", file))

    model_with([external("W", TensorProto.FLOAT, [2, 3], "weights.bin", 16, 24),
                external("B", TensorProto.INT64, [2], "./sub/../weights.bin", 40)], "model.onnx")
    model_with([external("W", TensorProto.FLOAT, [2, 3], "../make_fixtures.py", 0, 24)], "escape.onnx")
    model_with([external("W", TensorProto.FLOAT, [2, 3], "/etc/hostname", 0, 24)], "absolute.onnx")
    model_with([external("W", TensorProto.FLOAT, [2, 3], "weights.bin", 40, 24)], "past_end.onnx")
    return {"W": [repr(float(v)) for v in weights.flatten()], "B": [str(int(v)) for v in bias]}


def functions_model():
    """Model-local functions: attribute references with and without defaults, and a function calling a function."""
    ref = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    leaky = helper.make_node("LeakyRelu", ["T"], ["Y"], name="leaky")
    leaky.attribute.append(ref)
    scaled = helper.make_function(
        "custom", "ScaledRelu", ["X", "S"], ["Y"],
        [helper.make_node("Mul", ["X", "S"], ["T"], name="mul"), leaky],
        [helper.make_opsetid("", 13)], attributes=[], attribute_protos=[helper.make_attribute("alpha", 0.125)])
    outer = helper.make_function(
        "custom", "Twice", ["A"], ["B"],
        [helper.make_node("ScaledRelu", ["A", "A"], ["M"], domain="custom", alpha=0.75),
         helper.make_node("ScaledRelu", ["M", "A"], ["B"], domain="custom")],
        [helper.make_opsetid("", 13), helper.make_opsetid("custom", 1)])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph(
        [helper.make_node("ScaledRelu", ["x", "x"], ["h"], domain="custom", name="first", alpha=0.5),
         helper.make_node("Twice", ["h"], ["y"], domain="custom", name="second")],
        "functions", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, functions=[scaled, outer],
                              opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("custom", 1)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    save(model, "functions.onnx")
    inlined = onnx.inliner.inline_local_functions(model)
    nodes = []
    for node in inlined.graph.node:
        alpha = [a.f for a in node.attribute if a.name == "alpha"]
        nodes.append({"op": node.op_type, "alpha": repr(alpha[0]) if alpha else None})
    # onnx.inliner drops attribute_proto defaults; the spec and onnxruntime apply them (alpha 0.125 here).
    assert nodes[-1] == {"op": "LeakyRelu", "alpha": None}
    nodes[-1]["alpha"] = "0.125"
    return nodes


if __name__ == "__main__":
    expected = {"initializers": initializers_model(), "external": external_models(), "functions": functions_model()}
    attributes_model()
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, sort_keys=True)
