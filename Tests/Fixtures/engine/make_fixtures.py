#!/usr/bin/env python3
"""Builds small ONNX models with dynamic batch, runs onnxruntime on seeded inputs, and saves
model.onnx + input_<name>.npy + output_<name>.npy per model. Run from anywhere:
    python3 Tests/Fixtures/engine/make_fixtures.py
Needs numpy, onnx, onnxruntime (tooling only; the engine never needs Python)."""
import os
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1234)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def out(name, elem_type):
    """An output declared with element type only (rank unknown), as many exporters write."""
    info = onnx.ValueInfoProto()
    info.name = name
    info.type.tensor_type.elem_type = elem_type
    return info


def rand(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def save(name, graph, opset, feeds):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="osprey-fixtures")
    model.ir_version = 8
    # The checker insists on output shapes; onnxruntime validates the graph instead.
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    for key, value in feeds.items():
        np.save(os.path.join(folder, f"input_{key}.npy"), value)
    for info, value in zip(session.get_outputs(), outputs):
        np.save(os.path.join(folder, f"output_{info.name}.npy"), value)
    print(name, {k: v.shape for k, v in feeds.items()}, [o.shape for o in outputs])


def bn(prefix, channels):
    return [init(f"{prefix}_scale", rng.uniform(0.5, 1.5, channels).astype(np.float32)),
            init(f"{prefix}_bias", rand(channels)),
            init(f"{prefix}_mean", rand(channels)),
            init(f"{prefix}_var", rng.uniform(0.5, 2.0, channels).astype(np.float32))]


def cnn():
    """conv+bn+relu, depthwise separable block with relu6, residual add, pooling, resize, concat, gemm+softmax."""
    n = helper.make_node
    inits = [init("w1", rand(8, 3, 3, 3)), init("b1", rand(8)), *bn("bn1", 8),
             init("wdw", rand(8, 1, 3, 3)), *bn("bn2", 8),
             init("wpw", rand(8, 8, 1, 1)), init("bpw", rand(8)),
             init("lo", np.array(0, np.float32)), init("hi", np.array(6, np.float32)),
             init("scales", np.array([1, 1, 2, 2], np.float32)),
             init("wfc", rand(10, 16)), init("bfc", rand(10))]
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("BatchNormalization", ["c1", "bn1_scale", "bn1_bias", "bn1_mean", "bn1_var"], ["bn1"], epsilon=1e-3),
        n("Relu", ["bn1"], ["r1"]),
        n("Conv", ["r1", "wdw"], ["dw"], group=8, auto_pad="SAME_UPPER"),
        n("BatchNormalization", ["dw", "bn2_scale", "bn2_bias", "bn2_mean", "bn2_var"], ["bn2"]),
        n("Clip", ["bn2", "lo", "hi"], ["r6"]),
        n("Conv", ["r6", "wpw", "bpw"], ["pw"]),
        n("Add", ["pw", "r1"], ["res"]),
        n("MaxPool", ["res"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        n("AveragePool", ["mp"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
        n("Resize", ["ap", "", "scales"], ["up"], mode="nearest"),
        n("MaxPool", ["up"], ["down"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Concat", ["down", "ap"], ["cat"], axis=1),
        n("GlobalAveragePool", ["cat"], ["gap"]),
        n("Flatten", ["gap"], ["flat"]),
        n("Gemm", ["flat", "wfc", "bfc"], ["logits"], transB=1),
        n("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 17, 17])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10]),
                               helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    save("cnn", graph, 13, {"x": rand(3, 3, 17, 17, scale=1.0)})


def mlp():
    """matmul/add/gelu(erf)/layernorm/softmax/reduce with a shape subgraph reshape."""
    n = helper.make_node
    inits = [init("w1", rand(12, 16)), init("b1", rand(16)), init("w2", rand(16, 8)), init("b2", rand(8)),
             init("ln_s", rng.uniform(0.5, 1.5, 8).astype(np.float32)), init("ln_b", rand(8)),
             init("half", np.array(0.5, np.float32)), init("one", np.array(1.0, np.float32)),
             init("rsqrt2", np.array(1 / np.sqrt(2), np.float32)), init("zero", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64)), init("two", np.array([2], np.int64)),
             init("ax1", np.array([1], np.int64))]
    nodes = [
        n("MatMul", ["x", "w1"], ["h1"]), n("Add", ["h1", "b1"], ["h1b"]),
        n("Mul", ["h1b", "rsqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["h1b", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["gelu"]),
        n("MatMul", ["gelu", "w2"], ["h2"]), n("Add", ["h2", "b2"], ["h2b"]),
        n("LayerNormalization", ["h2b", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        n("Shape", ["ln"], ["shape"]), n("Gather", ["shape", "zero"], ["batch"], axis=0),
        n("Concat", ["batch", "minus1", "two"], ["target"], axis=0),
        n("Reshape", ["ln", "target"], ["r"]),
        n("Softmax", ["r"], ["sm"], axis=-1),
        n("ReduceSum", ["sm", "ax1"], ["rs"], keepdims=0),
        n("ReduceMean", ["ln"], ["mean"], axes=[2], keepdims=1),
        n("Sigmoid", ["mean"], ["sig"]), n("Tanh", ["sig"], ["th"]),
        n("ArgMax", ["ln"], ["am"], axis=-1, keepdims=0),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 12])],
                              [out("rs", TensorProto.FLOAT),
                               out("th", TensorProto.FLOAT),
                               out("am", TensorProto.INT64)], inits)
    save("mlp", graph, 17, {"x": rand(4, 5, 12, scale=1.0)})


def shapes():
    """slice (negative steps), pad (reflect/edge), transpose, conv transpose, linear resize, split, where, expand, tile, topk."""
    n = helper.make_node
    inits = [init("starts", np.array([-1, 1], np.int64)), init("ends", np.array([-100, 5], np.int64)),
             init("axes", np.array([2, 3], np.int64)), init("steps", np.array([-2, 1], np.int64)),
             init("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
             init("wt", rand(4, 3, 3, 3)), init("bt", rand(3)),
             init("roi", np.zeros(0, np.float32)), init("noscale", np.zeros(0, np.float32)),
             init("split", np.array([1, 2], np.int64)), init("thr", np.array(0.0, np.float32)),
             init("eshape", np.array([1, 3, 1, 1], np.int64)), init("reps", np.array([1, 1, 2, 1], np.int64)),
             init("k", np.array([3], np.int64)), init("zero_i", np.array([0], np.int64)),
             init("eight", np.array([8], np.int64))]
    nodes = [
        n("Slice", ["x", "starts", "ends", "axes", "steps"], ["sl"]),
        n("Pad", ["sl", "pads"], ["pd"], mode="reflect"),
        n("Transpose", ["pd"], ["tr"], perm=[0, 1, 3, 2]),
        n("ConvTranspose", ["tr", "wt", "bt"], ["ct"], strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0]),
        n("Shape", ["ct"], ["ctshape"]), n("Slice", ["ctshape", "zero_i", "eight", "zero_i"], ["ctshape2"]),
        n("Resize", ["ct", "roi", "noscale", "sizes_full"], ["rz"], mode="linear", coordinate_transformation_mode="half_pixel"),
        n("Split", ["rz", "split"], ["s1", "s2"], axis=1),
        n("Greater", ["s1", "thr"], ["mask"]),
        n("Expand", ["s1", "eshape"], ["ex"]),
        n("Where", ["mask", "ex", "thr"], ["wh"]),
        n("Tile", ["wh", "reps"], ["tl"]),
        n("TopK", ["tl", "k"], ["tv", "ti"], axis=-1),
        n("Pad", ["s2", "pads"], ["pe"], mode="edge"),
        n("ReduceMax", ["pe"], ["rm"], axes=[1, 3], keepdims=0),
    ]
    # Resize sizes with a dynamic batch: batch and channels come from the shape subgraph.
    nodes.insert(6, n("Slice", ["ctshape2", "zero_i", "two_i"], ["nc"]))
    nodes.insert(7, n("Concat", ["nc", "hw"], ["sizes_full"], axis=0))
    inits += [init("two_i", np.array([2], np.int64)), init("hw", np.array([9, 7], np.int64))]
    graph = helper.make_graph(nodes, "shapes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 7, 6])],
                              [out("tv", TensorProto.FLOAT),
                               out("ti", TensorProto.INT64),
                               out("rm", TensorProto.FLOAT)], inits)
    save("shapes", graph, 13, {"x": rand(2, 4, 7, 6, scale=1.0)})


def legacy():
    """opset 11 attribute forms: Softmax flattening, Squeeze/Unsqueeze/ReduceSum/Split axes as attributes, Clip inputs, Upsample-free Resize."""
    n = helper.make_node
    inits = [init("w", rand(6, 4, 1, 3)), init("lo", np.array(-0.5, np.float32)), init("hi", np.array(0.7, np.float32)),
             init("roi", np.zeros(0, np.float32)), init("scales", np.array([1, 1, 1, 2], np.float32))]
    nodes = [
        n("Conv", ["x", "w"], ["c"], pads=[0, 1, 0, 1], dilations=[1, 2]),
        n("LeakyRelu", ["c"], ["lr"], alpha=0.2),
        n("Softmax", ["lr"], ["sm"], axis=2),
        n("Clip", ["sm", "lo", "hi"], ["cl"]),
        n("ReduceSum", ["cl"], ["rs"], axes=[2], keepdims=1),
        n("Squeeze", ["rs"], ["sq"], axes=[2]),
        n("Unsqueeze", ["sq"], ["us"], axes=[1]),
        n("Split", ["c"], ["p1", "p2"], axis=1, split=[2, 4]),
        n("Resize", ["p1", "roi", "scales"], ["rz"], mode="linear", coordinate_transformation_mode="align_corners"),
        n("HardSigmoid", ["rz"], ["hs"]),
        n("ReduceMean", ["p2"], ["rm"], axes=[1], keepdims=1),
    ]
    graph = helper.make_graph(nodes, "legacy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 3, 5])],
                              [out("us", TensorProto.FLOAT), out("hs", TensorProto.FLOAT), out("rm", TensorProto.FLOAT)], inits)
    save("legacy", graph, 11, {"x": rand(3, 4, 3, 5, scale=1.0)})


def attention():
    """masked attention as PyTorch exports it: Where(mask, 0, -inf) added to the scores, Softmax, then
    Where(IsNaN(p), 0, p) guarding a fully masked row (row 2 of the constant mask) before the value MatMul."""
    n = helper.make_node
    row_mask = np.zeros((6, 6), np.float32)
    row_mask[2, :] = -np.inf
    inits = [init("wq", rand(8, 8)), init("wk", rand(8, 8)), init("wv", rand(8, 8)), init("row_mask", row_mask),
             init("limit", np.array(-0.3, np.float32)), init("zero_f", np.array(0.0, np.float32)),
             init("minus_inf", np.array(-np.inf, np.float32)), init("nan_fill", np.array(0.0, np.float32))]
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]), n("MatMul", ["x", "wv"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), n("MatMul", ["q", "kt"], ["scores"]),
        n("Greater", ["scores", "limit"], ["keep"]), n("Where", ["keep", "zero_f", "minus_inf"], ["mask"]),
        n("Add", ["scores", "mask"], ["masked"]), n("Add", ["masked", "row_mask"], ["masked2"]),
        n("Softmax", ["masked2"], ["p"], axis=-1), n("IsNaN", ["p"], ["is_nan"]),
        n("Where", ["is_nan", "nan_fill", "p"], ["p_safe"]), n("MatMul", ["p_safe", "v"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 8])],
                              [out("y", TensorProto.FLOAT), out("mask", TensorProto.FLOAT)], inits)
    save("attention", graph, 17, {"x": rand(2, 6, 8, scale=1.0)})


def gridsample_3d():
    """GridSample on [N, C, D, H, W] (opset 22): trilinear and nearest, each padding mode, align_corners 0 and 1,
    on a grid reaching past [-1, 1]."""
    local = np.random.default_rng(3)
    x = local.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    grid = (local.random((2, 3, 4, 5, 3)) * 2.6 - 1.3).astype(np.float32)
    nodes, outputs = [], []
    for mode in ("linear", "nearest"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                name = f"{mode}_{padding}_{align}"
                nodes.append(helper.make_node("GridSample", ["x", "grid"], [name], mode=mode, padding_mode=padding, align_corners=align))
                outputs.append(out(name, TensorProto.FLOAT))
    graph = helper.make_graph(nodes, "gridsample_3d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 5, 6]),
                                                       helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["N", 3, 4, 5, 3])], outputs)
    save("gridsample_3d", graph, 22, {"x": x, "grid": grid})


if __name__ == "__main__":
    cnn()
    mlp()
    shapes()
    legacy()
    attention()
    gridsample_3d()
