#!/usr/bin/env python3
"""Writes Tests/Fixtures/contrib: models using onnxruntime's com.microsoft operators, and the quantized or fused models
its own tools produce, each with inputs and onnxruntime's outputs (run from anywhere; needs onnx and onnxruntime).

    python3 Tests/Fixtures/contrib/make_contrib_fixtures.py

Each case is a directory with model.onnx, input_<name>.npy, output_<name>.npy and, for quantized outputs,
tolerance.json: {"<output>": {"step": s}} where s is one quantization step of that output (its scale for float
outputs computed from quantized tensors, 1 for integer outputs), or onnxruntime's own spread between its
optimisation levels when that is larger (recorded as onnxruntime_level_spread). References are onnxruntime's (CPU, graph
optimizations off so the operators in the file are the ones that run); operators onnxruntime's CPU provider lacks
(BiasAdd, NhwcConv) get numpy references, named in reference.txt.
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tiny_bert import tiny_bert  # noqa: E402

MS = "com.microsoft"
rng = np.random.default_rng(0)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model_of(nodes, inputs, outputs, inits=(), opset=17, ms=True):
    graph = helper.make_graph(nodes, "contrib", inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    m = helper.make_model(graph, opset_imports=imports, producer_name="osprey-fixtures")
    m.ir_version = 8
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def run_ort(model, feeds, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    # Two threads on any machine: onnxruntime's DynamicQuantizeLSTM quantizes the hidden state per chunk of
    # ceil(batch / threads) rows, which at batch 2 is per sequence, as Osprey does.
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def save_case(name, model, feeds, outputs=None, tolerance=None, reference="onnxruntime"):
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    onnx.save(model, os.path.join(path, "model.onnx"))
    if outputs is None:
        outputs = run_ort(model, feeds)
    for k, v in feeds.items():
        np.save(os.path.join(path, f"input_{k}.npy"), v)
    for k, v in outputs.items():
        np.save(os.path.join(path, f"output_{k}.npy"), v)
    if tolerance:
        json.dump(tolerance, open(os.path.join(path, "tolerance.json"), "w"), indent=1, sort_keys=True)
    if reference != "onnxruntime":
        open(os.path.join(path, "reference.txt"), "w").write(reference + "\n")
    ops = sorted({(n.domain or "ai.onnx") + ":" + n.op_type for n in model.graph.node})
    print(f"{name}: {', '.join(ops)}")


# ---- float contrib operators, one small graph each -------------------------------------------------------------

def fused_ops():
    x = f32(2, 3, 7, 7)
    w, b = f32(4, 3, 3, 3, scale=0.3), f32(4)
    z = f32(2, 4, 7, 7)
    nodes = [helper.make_node("FusedConv", ["x", "w", "b", "z"], ["relu_z"], domain=MS, activation="Relu", pads=[1, 1, 1, 1]),
             helper.make_node("FusedConv", ["x", "w", "b"], ["leaky"], domain=MS, activation="LeakyRelu", activation_params=[0.2],
                              strides=[2, 2]),
             helper.make_node("FusedConv", ["x", "w_input"], ["clip"], domain=MS, activation="Clip", activation_params=[-0.5, 0.5]),
             helper.make_node("FusedConv", ["x", "w_input", "", "z_small"], ["sigmoid_z"], domain=MS, activation="Sigmoid")]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 7, 7]), vi("z", TensorProto.FLOAT, [2, 4, 7, 7]),
                         vi("w_input", TensorProto.FLOAT, [4, 3, 3, 3]), vi("z_small", TensorProto.FLOAT, [2, 4, 5, 5])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("relu_z", "leaky", "clip", "sigmoid_z")], inits)
    save_case("fused_conv", m, {"x": x, "z": z, "w_input": w, "z_small": f32(2, 4, 5, 5)})

    a, bm, c = f32(5, 6), f32(4, 6), f32(4)
    nodes = [helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=MS, transB=1, alpha=0.7, beta=0.5, activation="LeakyRelu",
                              activation_alpha=0.1),
             helper.make_node("FusedGemm", ["a", "b"], ["y_tanh"], domain=MS, transB=1, activation="Tanh")]
    m = model_of(nodes, [vi("a", TensorProto.FLOAT, [5, 6])], [vi("y", TensorProto.FLOAT, None), vi("y_tanh", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(bm, "b"), numpy_helper.from_array(c, "c")])
    save_case("fused_gemm", m, {"a": a})

    nodes = [helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transB=1, alpha=0.5),
             helper.make_node("FusedMatMul", ["at", "b2"], ["y_ta"], domain=MS, transA=1, alpha=2.0)]
    m = model_of(nodes, [vi("a", TensorProto.FLOAT, [2, 3, 4, 5]), vi("b", TensorProto.FLOAT, [2, 3, 6, 5]),
                         vi("at", TensorProto.FLOAT, [3, 5, 4]), vi("b2", TensorProto.FLOAT, [5, 2])],
                 [vi("y", TensorProto.FLOAT, None), vi("y_ta", TensorProto.FLOAT, None)])
    save_case("fused_matmul", m, {"a": f32(2, 3, 4, 5), "b": f32(2, 3, 6, 5), "at": f32(3, 5, 4), "b2": f32(5, 2)})

    x, bias = f32(2, 3, 8, scale=2), f32(8)
    nodes = [helper.make_node("Gelu", ["x"], ["gelu"], domain=MS),
             helper.make_node("FastGelu", ["x"], ["fast"], domain=MS),
             helper.make_node("FastGelu", ["x", "bias"], ["fast_bias"], domain=MS),
             helper.make_node("BiasGelu", ["x", "bias"], ["bias_gelu"], domain=MS),
             helper.make_node("QuickGelu", ["x"], ["quick"], domain=MS, alpha=1.5)]
    outs = ["gelu", "fast", "fast_bias", "bias_gelu", "quick"]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 8])], [vi(n, TensorProto.FLOAT, None) for n in outs],
                 [numpy_helper.from_array(bias, "bias")])
    save_case("gelu_family", m, {"x": x})

    # BiasAdd and NhwcConv have no CPU kernel in onnxruntime: numpy references.
    x, bias, skip = f32(2, 5, 6), f32(6), f32(2, 5, 6)
    m = model_of([helper.make_node("BiasAdd", ["x", "bias", "skip"], ["y"], domain=MS)],
                 [vi("x", TensorProto.FLOAT, [2, 5, 6]), vi("skip", TensorProto.FLOAT, [2, 5, 6])], [vi("y", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(bias, "bias")])
    save_case("bias_add", m, {"x": x, "skip": skip}, {"y": x + bias + skip}, reference="numpy: x + bias + skip")

    x, w, b = f32(2, 6, 7, 3), f32(4, 3, 3, 3, scale=0.3), f32(4)
    conv = model_of([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1])],
                    [vi("x", TensorProto.FLOAT, [2, 3, 6, 7])], [vi("y", TensorProto.FLOAT, None)],
                    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], ms=False)
    reference = run_ort(conv, {"x": x.transpose(0, 3, 1, 2).copy()})["y"].transpose(0, 2, 3, 1).copy()
    m = model_of([helper.make_node("NhwcConv", ["x", "w", "b"], ["y"], domain=MS, pads=[1, 1, 1, 1], strides=[2, 1])],
                 [vi("x", TensorProto.FLOAT, [2, 6, 7, 3])], [vi("y", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    save_case("nhwc_conv", m, {"x": x}, {"y": reference}, reference="onnxruntime's Conv on the input transposed to NCHW, transposed back")


def normalization_ops():
    x, skip, gamma, beta, bias = f32(2, 4, 8), f32(2, 4, 8), f32(8), f32(8), f32(8)
    outs = ["y", "mean", "inv_std", "sum"]
    m = model_of([helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], outs, domain=MS, epsilon=1e-5),
                  helper.make_node("SkipLayerNormalization", ["x", "skip_2d", "gamma"], ["y_2d_skip"], domain=MS)],
                 [vi("x", TensorProto.FLOAT, [2, 4, 8]), vi("skip", TensorProto.FLOAT, [2, 4, 8]), vi("skip_2d", TensorProto.FLOAT, [4, 8])],
                 [vi(n, TensorProto.FLOAT, None) for n in outs + ["y_2d_skip"]],
                 [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta"), numpy_helper.from_array(bias, "bias")])
    save_case("skip_layer_norm", m, {"x": x, "skip": skip, "skip_2d": f32(4, 8)})

    outs = ["y", "mean", "inv_std", "sum"]
    m = model_of([helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], outs, domain=MS, epsilon=1e-6)],
                 [vi("x", TensorProto.FLOAT, [2, 4, 8]), vi("skip", TensorProto.FLOAT, [2, 4, 8])],
                 [vi("y", TensorProto.FLOAT, None), vi("mean", TensorProto.FLOAT, None), vi("inv_std", TensorProto.FLOAT, None),
                  vi("sum", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(bias, "bias")])
    save_case("skip_simplified_layer_norm", m, {"x": x, "skip": skip})

    # SimplifiedLayerNormalization lives in the default domain in onnxruntime.
    m = model_of([helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y", "inv_std"], axis=-1, epsilon=1e-6)],
                 [vi("x", TensorProto.FLOAT, [2, 4, 8])], [vi("y", TensorProto.FLOAT, None), vi("inv_std", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(gamma, "gamma")], ms=False)
    save_case("simplified_layer_norm", m, {"x": x})

    batch, seq, hidden = 2, 5, 8
    ids = rng.integers(0, 20, (batch, seq)).astype(np.int32)
    segments = rng.integers(0, 2, (batch, seq)).astype(np.int32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    inits = [numpy_helper.from_array(f32(20, hidden), "word"), numpy_helper.from_array(f32(16, hidden), "position"),
             numpy_helper.from_array(f32(2, hidden), "segment"), numpy_helper.from_array(f32(hidden), "gamma"),
             numpy_helper.from_array(f32(hidden), "beta")]
    m = model_of([helper.make_node("EmbedLayerNormalization", ["ids", "segments", "word", "position", "segment", "gamma", "beta", "mask"],
                                   ["y", "mask_index", "embedding_sum"], domain=MS, epsilon=1e-12),
                  helper.make_node("EmbedLayerNormalization", ["ids", "", "word", "position", "", "gamma", "beta"],
                                   ["y_plain", "mask_index_plain"], domain=MS)],
                 [vi("ids", TensorProto.INT32, [batch, seq]), vi("segments", TensorProto.INT32, [batch, seq]), vi("mask", TensorProto.INT32, [batch, seq])],
                 [vi("y", TensorProto.FLOAT, None), vi("mask_index", TensorProto.INT32, None), vi("embedding_sum", TensorProto.FLOAT, None),
                  vi("y_plain", TensorProto.FLOAT, None), vi("mask_index_plain", TensorProto.INT32, None)], inits)
    save_case("embed_layer_norm", m, {"ids": ids, "segments": segments, "mask": mask})


def attention_ops():
    batch, seq, d_in, heads = 2, 5, 12, 3
    x = f32(batch, seq, d_in)
    w, b = f32(d_in, 3 * 12, scale=0.3), f32(3 * 12)
    raw = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    lengths = np.array([3, 5], dtype=np.int32)
    w2 = f32(d_in, 6 + 6 + 9, scale=0.3)
    nodes = [helper.make_node("Attention", ["x", "w", "b", "raw_mask"], ["y_raw"], domain=MS, num_heads=heads),
             helper.make_node("Attention", ["x", "w", "b", "lengths"], ["y_lengths"], domain=MS, num_heads=heads),
             helper.make_node("Attention", ["x", "w", "b"], ["y_causal", "present"], domain=MS, num_heads=heads, unidirectional=1),
             helper.make_node("Attention", ["x", "w2", ""], ["y_sizes"], domain=MS, num_heads=heads, qkv_hidden_sizes=[6, 6, 9])]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [batch, seq, d_in]), vi("raw_mask", TensorProto.INT32, [batch, seq]),
                         vi("lengths", TensorProto.INT32, [batch])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("y_raw", "y_lengths", "y_causal", "present", "y_sizes")],
                 [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(w2, "w2")])
    save_case("attention", m, {"x": x, "raw_mask": raw, "lengths": lengths})

    q, k, v = f32(batch, seq, 12), f32(batch, 7, 12), f32(batch, 7, 6)
    bias = f32(12 + 12 + 6)
    padding = np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]], dtype=np.int32)
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "padding"], ["y_cross"], domain=MS, num_heads=heads),
             helper.make_node("MultiHeadAttention", ["q", "q", "q"], ["y_self"], domain=MS, num_heads=heads, scale=0.3)]
    m = model_of(nodes, [vi("q", TensorProto.FLOAT, [batch, seq, 12]), vi("k", TensorProto.FLOAT, [batch, 7, 12]),
                         vi("v", TensorProto.FLOAT, [batch, 7, 6]), vi("padding", TensorProto.INT32, [batch, 7])],
                 [vi("y_cross", TensorProto.FLOAT, None), vi("y_self", TensorProto.FLOAT, None)], [numpy_helper.from_array(bias, "bias")])
    save_case("multi_head_attention", m, {"q": q, "k": k, "v": v, "padding": padding})


# ---- quantized contrib operators ----------------------------------------------------------------------------------

def q_params(name, scale, zero, dtype=np.uint8):
    return [numpy_helper.from_array(np.array(scale, dtype=np.float32), name + "_scale"),
            numpy_helper.from_array(np.array(zero, dtype=dtype), name + "_zero")]


def qlinear_rounding():
    """QLinearAdd / QLinearMul bit for bit: scales that make exact rounding ties (powers of two) and odd output zero
    points, where rounding before or after adding the zero point, or the order of the float operations, changes the
    result; onnxruntime's x86 kernels decide each tie, so no step of tolerance."""
    local = np.random.default_rng(12)
    nodes, inits, outs, feeds, inputs = [], [], [], {}, []
    cases = ((np.uint8, "QLinearAdd", (0.03125, 106, 0.0625, 126, 0.0625, 61), False),
             (np.uint8, "QLinearAdd", (0.21875, 34, 0.109375, 172, 0.4375, 37), True),
             (np.uint8, "QLinearMul", (0.125, 148, 0.0625, 195, 0.25, 239), False),
             (np.uint8, "QLinearAdd", (0.0371, 90, 0.0813, 131, 0.0977, 17), False),
             (np.int8, "QLinearAdd", (0.03125, -22, 0.046875, 12, 0.0625, -43), False),
             (np.int8, "QLinearMul", (0.0234375, -59, 0.09375, 39, 0.09375, -41), True))
    for i, (dtype, op, (sa, za, sb, zb, sc, zc), broadcast) in enumerate(cases):
        lo, hi = (0, 256) if dtype == np.uint8 else (-128, 128)
        kind = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
        shape_b = [64, 1] if broadcast else [64, 64]
        feeds[f"a{i}"] = local.integers(lo, hi, (64, 64)).astype(dtype)
        feeds[f"b{i}"] = local.integers(lo, hi, shape_b).astype(dtype)
        inputs += [vi(f"a{i}", kind, [64, 64]), vi(f"b{i}", kind, shape_b)]
        inits += q_params(f"a{i}", sa, za, dtype) + q_params(f"b{i}", sb, zb, dtype) + q_params(f"c{i}", sc, zc, dtype)
        nodes.append(helper.make_node(op, [f"a{i}", f"a{i}_scale", f"a{i}_zero", f"b{i}", f"b{i}_scale", f"b{i}_zero", f"c{i}_scale", f"c{i}_zero"],
                                      [f"c{i}"], domain=MS))
        outs.append(vi(f"c{i}", kind, None))
    save_case("qlinear_rounding", model_of(nodes, inputs, outs, inits), feeds)


def matmul_nbits():
    """com.microsoft MatMulNBits as onnxruntime's MatMulNBitsQuantizer writes it (4 bits with and without zero points,
    8 bits, K not a multiple of the block), and hand-packed: float zero points, act-order g_idx and a bias."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    local = np.random.default_rng(21)
    w1, w2 = (local.standard_normal((40, 48)) * 0.3).astype(np.float32), (local.standard_normal((48, 24)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    mlp = model_of(nodes, [vi("x", TensorProto.FLOAT, ["N", 40])], [vi("y", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")], opset=17, ms=False)
    feeds = {"x": local.standard_normal((3, 40)).astype(np.float32)}
    for name, bits, symmetric in (("matmul_nbits_4bit", 4, False), ("matmul_nbits_4bit_symmetric", 4, True), ("matmul_nbits_8bit", 8, False)):
        config = DefaultWeightOnlyQuantConfig(block_size=16, is_symmetric=symmetric, bits=bits)
        quantizer = MatMulNBitsQuantizer(onnx.ModelProto.FromString(mlp.SerializeToString()), bits=bits, block_size=16,
                                         is_symmetric=symmetric, algo_config=config)
        quantizer.process()
        save_case(name, quantizer.model.model, feeds)

    # Hand-packed: K = 64 in blocks of 32, float zero points, g_idx spreading the ks over both blocks, a bias.
    k, n, block = 64, 8, 32
    q = local.integers(0, 16, (n, k)).astype(np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, k // block, block // 2)
    scales = local.uniform(0.01, 0.1, n * (k // block)).astype(np.float32)
    zeros = local.uniform(6, 9, n * (k // block)).astype(np.float32)
    g_idx = local.integers(0, k // block, k).astype(np.int32)
    bias = local.standard_normal(n).astype(np.float32)
    inits = [numpy_helper.from_array(packed, "b"), numpy_helper.from_array(scales, "scales"), numpy_helper.from_array(zeros, "zeros"),
             numpy_helper.from_array(g_idx, "g_idx"), numpy_helper.from_array(bias, "bias")]
    node = helper.make_node("MatMulNBits", ["x", "b", "scales", "zeros", "g_idx", "bias"], ["y"], domain=MS, K=k, N=n, bits=4, block_size=block)
    m = model_of([node], [vi("x", TensorProto.FLOAT, [2, 3, k])], [vi("y", TensorProto.FLOAT, None)], inits)
    save_case("matmul_nbits_float_zeros_g_idx", m, {"x": local.standard_normal((2, 3, k)).astype(np.float32)})


def nbits_weights(local, k, n, block, zeros, bias, dtype=np.float32):
    """Hand-packed 4-bit MatMulNBits weights, drawn from `local` in this order: B [n, blocks, block / 2] (zero past K, as
    the quantizer pads), scales, zero points (`zeros`: "uint8" packed two per byte, "float" in `dtype`, or None) and,
    when `bias`, a bias. Returns the initializers and the node's inputs after A."""
    blocks = (k + block - 1) // block
    q = local.integers(0, 16, (n, blocks * block)).astype(np.uint8)
    q[:, k:] = 0
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, blocks, block // 2)
    inits = [numpy_helper.from_array(packed, "b"), numpy_helper.from_array(local.uniform(0.01, 0.1, n * blocks).astype(dtype), "scales")]
    inputs = ["b", "scales"]
    if zeros == "uint8":
        z = local.integers(0, 16, (n, blocks)).astype(np.uint8)
        z = np.concatenate([z, np.zeros((n, blocks % 2), np.uint8)], axis=1)
        inits.append(numpy_helper.from_array((z[:, 0::2] | (z[:, 1::2] << 4)).reshape(-1), "zeros"))
        inputs.append("zeros")
    elif zeros == "float":
        inits.append(numpy_helper.from_array(local.uniform(6, 9, n * blocks).astype(dtype), "zeros"))
        inputs.append("zeros")
    if bias:
        inits.append(numpy_helper.from_array(local.standard_normal(n).astype(dtype), "bias"))
        inputs += [""] * (4 - len(inputs)) + ["bias"]  # B, scales, zero_points, g_idx, then bias
    return inits, inputs


def matmul_nbits_shapes():
    """4-bit MatMulNBits hand-packed at the shapes the packed kernels branch on: block sizes 16, 32 and 128, K not a
    multiple of the block, N not a multiple of any vector width, packed uint8 or float zero points or none, with and
    without a bias; one decode row (M = 1) and a 37-row prompt through the same weights."""
    local = np.random.default_rng(22)
    for name, k, n, block, zeros, with_bias in (("matmul_nbits_4bit_b16_odd_k", 200, 45, 16, "uint8", True),
                                                 ("matmul_nbits_4bit_b32_no_zeros", 96, 37, 32, None, False),
                                                 ("matmul_nbits_4bit_b32_float_zeros_bias", 130, 33, 32, "float", True),
                                                 ("matmul_nbits_4bit_b128_odd_k", 300, 70, 128, "uint8", False)):
        inits, inputs = nbits_weights(local, k, n, block, zeros, with_bias)
        nodes = [helper.make_node("MatMulNBits", [x] + inputs, [y], domain=MS, K=k, N=n, bits=4, block_size=block)
                 for x, y in (("x_decode", "y_decode"), ("x_prompt", "y_prompt"))]
        m = model_of(nodes, [vi("x_decode", TensorProto.FLOAT, [1, k]), vi("x_prompt", TensorProto.FLOAT, [37, k])],
                     [vi("y_decode", TensorProto.FLOAT, None), vi("y_prompt", TensorProto.FLOAT, None)], inits)
        save_case(name, m, {"x_decode": local.standard_normal((1, k)).astype(np.float32),
                            "x_prompt": local.standard_normal((37, k)).astype(np.float32)})


def matmul_nbits_float16():
    """float16 MatMulNBits as onnxruntime-genai's builder and Olive write fp16 int4 models: A, scales, zero points (packed
    uint8 or float16) and bias in float16 and a float16 Y; one decode row (M = 1) and a 5-row prompt through the same
    weights; the last case at accuracy_level 4 (onnxruntime quantizes the widened A to int8 per block). The reference is onnxruntime's CPU provider running the float16 graph; tolerance.json allows one float16
    step of max|Y| (both round a float32-computed sum once; onnxruntime's and Osprey's float32 sums can straddle a
    rounding boundary)."""
    local = np.random.default_rng(23)
    for name, k, n, block, zeros, level in (("matmul_nbits_float16_uint8_zeros", 96, 40, 32, "uint8", 0),
                                            ("matmul_nbits_float16_float_zeros", 80, 24, 16, "float", 0),
                                            ("matmul_nbits_float16_acc4_uint8_zeros", 160, 24, 32, "uint8", 4)):
        inits, inputs = nbits_weights(local, k, n, block, zeros, True, dtype=np.float16)
        nodes = [helper.make_node("MatMulNBits", [x] + inputs, [y], domain=MS, K=k, N=n, bits=4, block_size=block, accuracy_level=level)
                 for x, y in (("x_decode", "y_decode"), ("x_prompt", "y_prompt"))]
        m = model_of(nodes, [vi("x_decode", TensorProto.FLOAT16, [1, k]), vi("x_prompt", TensorProto.FLOAT16, [5, k])],
                     [vi("y_decode", TensorProto.FLOAT16, None), vi("y_prompt", TensorProto.FLOAT16, None)], inits)
        feeds = {"x_decode": local.standard_normal((1, k)).astype(np.float16), "x_prompt": local.standard_normal((5, k)).astype(np.float16)}
        outputs = run_ort(m, feeds)
        # One float16 step (2^-10 of the binade) at max|Y|.
        steps = {o: {"step": float(2.0 ** (np.floor(np.log2(np.abs(v.astype(np.float32)).max())) - 10))} for o, v in outputs.items()}
        save_case(name, m, feeds, outputs, tolerance=steps)


def matmul_nbits_accuracy4():
    """4-bit MatMulNBits at accuracy_level 4 (onnxruntime-genai's CPU int4 models): onnxruntime quantizes A to int8 per
    block and multiplies in integers. Blocks of 32 (uint8 zero points, bias), 64 (none, K not a multiple of the block:
    a short last span) and 128 (float zero points, with which onnxruntime keeps the float product); one decode row and
    a 37-row prompt. tolerance.json records onnxruntime's own distance from its float product (accuracy_level 0), for
    reference only: the usual float tolerance applies."""
    local = np.random.default_rng(24)
    for name, k, n, block, zeros in (("matmul_nbits_acc4_b32_uint8_zeros_bias", 256, 40, 32, "uint8"),
                                     ("matmul_nbits_acc4_b64_no_zeros_odd_k", 200, 37, 64, None),
                                     ("matmul_nbits_acc4_b128_float_zeros", 384, 33, 128, "float")):
        inits, inputs = nbits_weights(local, k, n, block, zeros, zeros == "uint8")

        def graph(level):
            nodes = [helper.make_node("MatMulNBits", [x] + inputs, [y], domain=MS, K=k, N=n, bits=4, block_size=block, accuracy_level=level)
                     for x, y in (("x_decode", "y_decode"), ("x_prompt", "y_prompt"))]
            return model_of(nodes, [vi("x_decode", TensorProto.FLOAT, [1, k]), vi("x_prompt", TensorProto.FLOAT, [37, k])],
                            [vi("y_decode", TensorProto.FLOAT, None), vi("y_prompt", TensorProto.FLOAT, None)], inits)
        feeds = {"x_decode": local.standard_normal((1, k)).astype(np.float32), "x_prompt": local.standard_normal((37, k)).astype(np.float32)}
        outputs, exact = run_ort(graph(4), feeds), run_ort(graph(0), feeds)
        spread = {o: {"onnxruntime_float_distance": float(np.abs(v - exact[o]).max())} for o, v in outputs.items()}
        save_case(name, graph(4), feeds, outputs, tolerance=spread)


def decoder_ops():
    """com.microsoft GroupQueryAttention and RotaryEmbedding as onnxruntime-genai's builder writes decoder LLMs: a
    right-padded first prompt with rotary, a ragged decode step over a past cache, packed QKV, a local window with
    softcap, smooth softmax; RotaryEmbedding with position ids and with one offset."""
    local = np.random.default_rng(31)
    heads, kv, head = 4, 2, 16
    angles = np.arange(64)[:, None] * (1.0 / (10000 ** (np.arange(0, head, 2) / head)))[None, :]
    caches = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"), numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]

    def gqa(name, batch, sequence, past, seqlens, total, packed=False, extra=None, **attributes):
        width = heads * head + (2 * kv * head if packed else 0)
        feeds = {"q": local.standard_normal((batch, sequence, width)).astype(np.float32)}
        if not packed:
            feeds["k"] = local.standard_normal((batch, sequence, kv * head)).astype(np.float32)
            feeds["v"] = local.standard_normal((batch, sequence, kv * head)).astype(np.float32)
        feeds["past_k"] = local.standard_normal((batch, kv, past, head)).astype(np.float32)
        feeds["past_v"] = local.standard_normal((batch, kv, past, head)).astype(np.float32)
        feeds["seqlens"] = np.array(seqlens, np.int32)
        feeds["total"] = np.array([total], np.int32)
        names = ["q", "" if packed else "k", "" if packed else "v", "past_k", "past_v", "seqlens", "total", "cos", "sin"]
        # Inputs 9-11 (position_ids, attention_bias, head_sink), "" where absent.
        for input_name in ("position_ids", "attention_bias", "head_sink"):
            value = (extra or {}).get(input_name)
            names.append(input_name if value is not None else "")
            if value is not None:
                feeds[input_name] = value
        while names[-1] == "":
            names.pop()
        node = helper.make_node("GroupQueryAttention", names, ["out", "present_k", "present_v"], domain=MS, num_heads=heads, kv_num_heads=kv, **attributes)
        types = {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64}
        inputs = [vi(k, types.get(v.dtype, TensorProto.FLOAT), list(v.shape)) for k, v in feeds.items()]
        m = model_of([node], inputs, [vi(n, TensorProto.FLOAT, None) for n in ("out", "present_k", "present_v")], caches)
        save_case(name, m, feeds)

    gqa("gqa_prompt_padded_rotary", 2, 5, 0, [4, 2], 5, do_rotary=1)
    gqa("gqa_decode_ragged_rotary", 2, 1, 5, [5, 3], 6, do_rotary=1, rotary_interleaved=1)
    gqa("gqa_packed_chunk", 1, 3, 4, [6], 7, packed=True, do_rotary=1)
    gqa("gqa_window_softcap_smooth", 2, 6, 0, [5, 5], 6, local_window_size=3, softcap=2.0, smooth_softmax=1)
    x = local.standard_normal((2, 5, heads * head)).astype(np.float32)
    for name, ids in (("rotary_contrib_positions", local.integers(0, 60, (2, 5)).astype(np.int64)), ("rotary_contrib_offset", np.array([7], np.int64))):
        node = helper.make_node("RotaryEmbedding", ["x", "ids", "cos", "sin"], ["y"], domain=MS, num_heads=heads)
        m = model_of([node], [vi("x", TensorProto.FLOAT, [2, 5, heads * head]), vi("ids", TensorProto.INT64, list(ids.shape))],
                     [vi("y", TensorProto.FLOAT, None)], caches)
        save_case(name, m, {"x": x, "ids": ids})

    # onnxruntime reads position_ids for the rotary only past the first prompt (a prompt counts from 0); the bias is
    # added after softcap; a head sink is one more logit per head in the softmax's denominator.
    gqa("gqa_chunk_position_ids", 1, 3, 4, [6], 7, do_rotary=1, extra={"position_ids": np.array([[9, 11, 12]], np.int64)})
    gqa("gqa_decode_position_ids", 2, 1, 5, [5, 3], 6, do_rotary=1, extra={"position_ids": np.array([[9], [2]], np.int64)})
    gqa("gqa_prompt_position_ids_ignored", 2, 5, 0, [4, 2], 5, do_rotary=1,
        extra={"position_ids": np.array([[0, 2, 4, 6, 8], [3, 4, 5, 6, 7]], np.int64)})
    gqa("gqa_bias_softcap_sink", 2, 5, 0, [4, 2], 5, softcap=2.0,
        extra={"attention_bias": (3 * local.standard_normal((2, 1, 5, 5))).astype(np.float32),
               "head_sink": local.standard_normal(heads).astype(np.float32)})
    gqa("gqa_decode_head_bias_sink_smooth", 2, 1, 6, [6, 4], 7, smooth_softmax=1,
        extra={"attention_bias": local.standard_normal((2, heads, 1, 7)).astype(np.float32),
               "head_sink": local.standard_normal(heads).astype(np.float32)})


def quantized_ops():
    a = rng.integers(0, 256, (2, 3, 4, 4)).astype(np.uint8)
    b = rng.integers(0, 256, (1, 3, 1, 4)).astype(np.uint8)
    inits = q_params("a", 0.05, 120) + q_params("b", 0.03, 128) + q_params("c", 0.07, 100) + q_params("s", 0.004, 0)
    nodes = [helper.make_node("QLinearAdd", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "c_scale", "c_zero"], ["add"], domain=MS),
             helper.make_node("QLinearMul", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "c_scale", "c_zero"], ["mul"], domain=MS),
             helper.make_node("QLinearSigmoid", ["a", "a_scale", "a_zero", "s_scale", "s_zero"], ["sigmoid"], domain=MS),
             helper.make_node("QLinearLeakyRelu", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["leaky"], domain=MS, alpha=0.1),
             helper.make_node("QLinearConcat", ["c_scale", "c_zero", "a", "a_scale", "a_zero", "b2", "b_scale", "b_zero", "a", "c_scale", "c_zero"],
                              ["concat"], domain=MS, axis=1),
             helper.make_node("QLinearGlobalAveragePool", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["gap"], domain=MS),
             helper.make_node("QLinearAveragePool", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["avg"], domain=MS, kernel_shape=[2, 2],
                              strides=[1, 2], pads=[1, 0, 0, 1], count_include_pad=0),
             helper.make_node("QLinearAveragePool", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["avg_pad"], domain=MS, kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], count_include_pad=1),
             helper.make_node("QuantizeLinear", ["x", "c_scale", "c_zero"], ["quantized"], domain=MS),
             helper.make_node("DequantizeLinear", ["a", "a_scale", "a_zero"], ["dequantized"], domain=MS)]
    outs = ["add", "mul", "sigmoid", "leaky", "concat", "gap", "avg", "avg_pad", "quantized"]
    m = model_of(nodes, [vi("a", TensorProto.UINT8, [2, 3, 4, 4]), vi("b", TensorProto.UINT8, [1, 3, 1, 4]),
                         vi("b2", TensorProto.UINT8, [2, 2, 4, 4]), vi("x", TensorProto.FLOAT, [2, 5])],
                 [vi(n, TensorProto.UINT8, None) for n in outs] + [vi("dequantized", TensorProto.FLOAT, None)], inits)
    feeds = {"a": a, "b": b, "b2": rng.integers(0, 256, (2, 2, 4, 4)).astype(np.uint8), "x": f32(2, 5, scale=5)}
    tolerance = {n: {"step": 1} for n in outs}
    tolerance["dequantized"] = {"step": 0.05}
    save_case("qlinear_ops", m, feeds, tolerance=tolerance)

    # The int8 variants (onnxruntime's QDQ-to-QOperator conversion picks int8 activations with symmetric weights).
    a8 = rng.integers(-128, 128, (2, 3, 4, 4)).astype(np.int8)
    inits = q_params("a", 0.05, -3, np.int8) + q_params("c", 0.07, 5, np.int8)
    nodes = [helper.make_node("QLinearAdd", ["a", "a_scale", "a_zero", "a", "c_scale", "c_zero", "c_scale", "c_zero"], ["add"], domain=MS),
             helper.make_node("QLinearSigmoid", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["sigmoid"], domain=MS),
             helper.make_node("QLinearGlobalAveragePool", ["a", "a_scale", "a_zero", "c_scale", "c_zero"], ["gap"], domain=MS)]
    m = model_of(nodes, [vi("a", TensorProto.INT8, [2, 3, 4, 4])], [vi(n, TensorProto.INT8, None) for n in ("add", "sigmoid", "gap")], inits)
    save_case("qlinear_ops_int8", m, {"a": a8}, tolerance={n: {"step": 1} for n in ("add", "sigmoid", "gap")})

    k, n = 24, 10
    # 7-bit weights, as quantize_dynamic(reduce_range=True) writes them: onnxruntime's AVX2 u8 x s8 kernels (vpmaddubsw)
    # saturate int16 pair sums of full-range weights, so only this range compares the exact int32 arithmetic.
    bq = rng.integers(-64, 64, (k, n)).astype(np.int8)
    b_scale = (rng.random(n) * 0.02 + 0.005).astype(np.float32)
    inits = [numpy_helper.from_array(bq, "b"), numpy_helper.from_array(b_scale, "b_scale"),
             numpy_helper.from_array(np.zeros(n, dtype=np.int8), "b_zero"), numpy_helper.from_array(f32(n), "bias"),
             numpy_helper.from_array(np.array(0.02, dtype=np.float32), "a_scale"), numpy_helper.from_array(np.array(130, dtype=np.uint8), "a_zero"),
             numpy_helper.from_array(np.array(0.01, dtype=np.float32), "b_scale_scalar")]
    nodes = [helper.make_node("DynamicQuantizeMatMul", ["x", "b", "b_scale", "b_zero", "bias"], ["dynamic"], domain=MS),
             helper.make_node("DynamicQuantizeMatMul", ["x", "b", "b_scale_scalar"], ["dynamic_plain"], domain=MS),
             helper.make_node("MatMulIntegerToFloat", ["xq", "b", "a_scale", "b_scale", "a_zero", "b_zero", "bias"], ["to_float"], domain=MS)]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, k]), vi("xq", TensorProto.UINT8, [2, 3, k])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("dynamic", "dynamic_plain", "to_float")], inits)
    save_case("quantized_matmul", m, {"x": f32(2, 3, k), "xq": rng.integers(0, 256, (2, 3, k)).astype(np.uint8)})

    # QGemm (quantize_static's QOperator form of Gemm): float output, and requantized with y_scale / y_zero_point.
    inits_gemm = [numpy_helper.from_array(rng.integers(-64, 64, (n, k)).astype(np.int8), "bt"), numpy_helper.from_array(b_scale, "b_scale"),
                  numpy_helper.from_array(np.zeros(n, dtype=np.int8), "b_zero"), numpy_helper.from_array(np.array(0.02, dtype=np.float32), "a_scale"),
                  numpy_helper.from_array(np.array(130, dtype=np.uint8), "a_zero"),
                  numpy_helper.from_array(rng.integers(-500, 500, n).astype(np.int32), "c"),
                  numpy_helper.from_array(np.array(0.05, dtype=np.float32), "y_scale"), numpy_helper.from_array(np.array(120, dtype=np.uint8), "y_zero")]
    nodes_gemm = [helper.make_node("QGemm", ["xq", "a_scale", "a_zero", "bt", "b_scale", "b_zero", "c"], ["y_float"], domain=MS, transB=1, alpha=0.5),
                  helper.make_node("QGemm", ["xq", "a_scale", "a_zero", "bt", "b_scale", "b_zero", "c", "y_scale", "y_zero"], ["y_quantized"],
                                   domain=MS, transB=1)]
    m = model_of(nodes_gemm, [vi("xq", TensorProto.UINT8, [6, k])], [vi("y_float", TensorProto.FLOAT, None), vi("y_quantized", TensorProto.UINT8, None)],
                 inits_gemm)
    save_case("qgemm", m, {"xq": rng.integers(0, 256, (6, k)).astype(np.uint8)}, tolerance={"y_quantized": {"step": 1}})

    # Full-range int8 weights: the exact int32 result (numpy), which onnxruntime's AVX2 kernels do not reach.
    bq = rng.integers(-128, 128, (k, n)).astype(np.int8)
    xq = rng.integers(0, 256, (2, 3, k)).astype(np.uint8)
    inits[0] = numpy_helper.from_array(bq, "b")
    m = model_of([nodes[2]], [vi("xq", TensorProto.UINT8, [2, 3, k])], [vi("to_float", TensorProto.FLOAT, None)], inits)
    exact = ((xq.astype(np.int64) - 130) @ bq.astype(np.int64)).astype(np.float64) * np.float64(0.02) * b_scale.astype(np.float64)
    exact = (exact + numpy_helper.to_array(inits[3])).astype(np.float32)
    saturated = run_ort(m, {"xq": xq})["to_float"]
    save_case("quantized_matmul_full_range", m, {"xq": xq}, {"to_float": exact},
              reference=f"numpy, exact int32 accumulation; onnxruntime on this CPU differs by up to {np.abs(saturated - exact).max():.3g} "
                        f"(max |y| {np.abs(exact).max():.3g}) where its u8 x s8 pair sums saturate")


# ---- models made by onnxruntime's own tools -----------------------------------------------------------------------

def optimized_bert():
    from onnxruntime.transformers.optimizer import optimize_model
    model = tiny_bert()
    path = os.path.join(HERE, ".tiny_bert.onnx")
    onnx.save(model, path)
    optimized = optimize_model(path, model_type="bert", num_heads=2, hidden_size=16, opt_level=0).model
    os.remove(path)
    ids = rng.integers(0, 40, (2, 7)).astype(np.int64)
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2], dtype=np.int64)
    types = np.array([[0] * 4 + [1] * 3, [0] * 7], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    save_case("tiny_bert", model, feeds)
    save_case("tiny_bert_optimized", optimized, feeds)


class Reader:
    """Calibration data for quantize_static."""

    def __init__(self, name, batches):
        self.data = iter([{name: b} for b in batches])

    def get_next(self):
        return next(self.data, None)

    def rewind(self):
        pass


def small_cnn():
    """Conv/Relu, a residual Add, LeakyRelu, Sigmoid gate (Mul), Concat, AveragePool, GlobalAveragePool, MatMul head."""
    inits = [numpy_helper.from_array(f32(8, 3, 3, 3, scale=0.3), "w1"), numpy_helper.from_array(f32(8, scale=0.1), "b1"),
             numpy_helper.from_array(f32(8, 8, 3, 3, scale=0.2), "w2"), numpy_helper.from_array(f32(8, scale=0.1), "b2"),
             numpy_helper.from_array(f32(8, 16, 1, 1, scale=0.3), "w3"), numpy_helper.from_array(f32(8, scale=0.1), "b3"),
             numpy_helper.from_array(f32(8, 5, scale=0.5), "head"), numpy_helper.from_array(f32(5, scale=0.1), "head_bias"),
             numpy_helper.from_array(np.array([-1, 8], dtype=np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c2", "r1"], ["res"]),
             helper.make_node("LeakyRelu", ["res"], ["l1"], alpha=0.1), helper.make_node("Sigmoid", ["l1"], ["gate"]),
             helper.make_node("Mul", ["l1", "gate"], ["gated"]), helper.make_node("Concat", ["gated", "r1"], ["cat"], axis=1),
             helper.make_node("AveragePool", ["cat"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["pooled", "w3", "b3"], ["c3"]), helper.make_node("GlobalAveragePool", ["c3"], ["gap"]),
             helper.make_node("Reshape", ["gap", "flat"], ["features"]), helper.make_node("MatMul", ["features", "head"], ["mm"]),
             helper.make_node("Add", ["mm", "head_bias"], ["logits"])]
    return model_of(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 12, 12])], [vi("logits", TensorProto.FLOAT, ["N", 5])], inits, opset=13, ms=False)


def small_mlp():
    inits = [numpy_helper.from_array(f32(16, 32, scale=0.3), "w1"), numpy_helper.from_array(f32(32, scale=0.1), "b1"),
             numpy_helper.from_array(f32(32, 8, scale=0.3), "w2"), numpy_helper.from_array(f32(8, scale=0.1), "b2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]), helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["o"]), helper.make_node("Add", ["o", "b2"], ["y"])]
    return model_of(nodes, [vi("x", TensorProto.FLOAT, ["N", 16])], [vi("y", TensorProto.FLOAT, ["N", 8])], inits, opset=13, ms=False)


def small_lstm():
    hidden, size = 6, 5
    inits = [numpy_helper.from_array(f32(2, 4 * hidden, size, scale=0.4), "W"), numpy_helper.from_array(f32(2, 4 * hidden, hidden, scale=0.4), "R"),
             numpy_helper.from_array(f32(2, 8 * hidden, scale=0.2), "B"), numpy_helper.from_array(f32(2 * hidden, 3, scale=0.4), "proj")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden, direction="bidirectional"),
             helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["yt", "shape"], ["flat"]), helper.make_node("MatMul", ["flat", "proj"], ["out"])]
    inits.append(numpy_helper.from_array(np.array([0, 0, 2 * hidden], dtype=np.int64), "shape"))
    return model_of(nodes, [vi("x", TensorProto.FLOAT, [7, "N", size])], [vi("out", TensorProto.FLOAT, None), vi("y_h", TensorProto.FLOAT, None)],
                    inits, opset=13, ms=False)


def output_scale(model, output):
    """The scale of the DequantizeLinear (or float-producing quantized op) that writes `output`, when there is one."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if output in node.output and node.op_type == "DequantizeLinear" and node.input[1] in inits:
            return float(inits[node.input[1]].max())
    return None


def quantized_models():
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static
    work = os.path.join(HERE, ".work")
    os.makedirs(work, exist_ok=True)
    cnn, mlp, lstm = small_cnn(), small_mlp(), small_lstm()
    x_cnn = f32(3, 3, 12, 12)
    x_mlp, x_lstm = f32(4, 16), f32(7, 2, 5)
    save_case("small_cnn", cnn, {"x": x_cnn})
    for name, model in (("cnn", cnn), ("mlp", mlp), ("lstm", lstm)):
        onnx.save(model, os.path.join(work, name + ".onnx"))

    def finish(name, path, feeds, output):
        model = onnx.load(path)
        scale = output_scale(model, output)
        # onnxruntime disagrees with itself across optimisation levels where float summation order decides a rounding
        # tie of a requantized value (QDQ AveragePool, for one): no engine can be held closer than that spread.
        levels = [run_ort(model, feeds, level)[output] for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                                                     ort.GraphOptimizationLevel.ORT_ENABLE_ALL)]
        spread = float(np.abs(levels[0] - levels[1]).max())
        tolerance = None
        if scale:
            tolerance = {output: {"step": max(scale, spread), "scale": scale, "onnxruntime_level_spread": spread}}
        save_case(name, model, feeds, tolerance=tolerance)

    for fmt, label in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qoperator")):
        for activation, suffix in ((QuantType.QUInt8, "u8"), (QuantType.QInt8, "s8")):
            path = os.path.join(work, f"cnn_{label}_{suffix}.onnx")
            quantize_static(os.path.join(work, "cnn.onnx"), path, Reader("x", [f32(2, 3, 12, 12) for _ in range(4)]), quant_format=fmt,
                            activation_type=activation, weight_type=QuantType.QInt8, per_channel=suffix == "s8",
                            calibrate_method=CalibrationMethod.MinMax)
            finish(f"cnn_static_{label}_{suffix}", path, {"x": x_cnn}, "logits")
        path = os.path.join(work, f"mlp_{label}.onnx")
        quantize_static(os.path.join(work, "mlp.onnx"), path, Reader("x", [f32(8, 16) for _ in range(4)]), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        finish(f"mlp_static_{label}", path, {"x": x_mlp}, "y")
    save_case("small_mlp", mlp, {"x": x_mlp})
    save_case("small_lstm", lstm, {"x": x_lstm})
    for name, feeds in (("mlp", {"x": x_mlp}), ("lstm", {"x": x_lstm})):
        path = os.path.join(work, f"{name}_dynamic.onnx")
        # reduce_range: 7-bit weights keep onnxruntime's AVX2 u8 x s8 products from saturating (see quantized_matmul_full_range).
        quantize_dynamic(os.path.join(work, name + ".onnx"), path, weight_type=QuantType.QInt8, reduce_range=True)
        finish(f"{name}_dynamic", path, feeds, "y" if name == "mlp" else "out")
        # What onnxruntime's own graph optimizer writes back (DynamicQuantizeMatMul / MatMulIntegerToFloat fusions).
        optimized = os.path.join(work, f"{name}_dynamic_ort.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = optimized
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        finish(f"{name}_dynamic_ort_optimized", optimized, feeds, "y" if name == "mlp" else "out")
    # A float CNN after onnxruntime's extended optimizations (FusedConv, FusedGemm ...), as `optimized_model_filepath` saves it.
    optimized = os.path.join(work, "cnn_ort.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = optimized
    ort.InferenceSession(os.path.join(work, "cnn.onnx"), options, providers=["CPUExecutionProvider"])
    save_case("small_cnn_ort_optimized", onnx.load(optimized), {"x": x_cnn})
    shutil.rmtree(work)


# ---- control flow and sequences -------------------------------------------------------------------------------------

HIDDEN = 6


def loop_decoder():
    """A greedy decoder as paddle2onnx writes Loops: iteration count and condition declared [1], not scalars; the
    tokens are collected in a sequence and concatenated after the loop."""
    hidden, vocab = HIDDEN, 9
    emb, cell, out_w = f32(vocab, hidden, scale=0.5), f32(2 * hidden, hidden, scale=0.4), f32(hidden, vocab, scale=0.6)
    body = helper.make_graph(
        [helper.make_node("Gather", ["emb", "token"], ["e"], axis=0),
         helper.make_node("Concat", ["e", "state"], ["joined"], axis=1),
         helper.make_node("MatMul", ["joined", "cell"], ["pre"]), helper.make_node("Tanh", ["pre"], ["state_out"]),
         helper.make_node("MatMul", ["state_out", "out_w"], ["logits"]),
         helper.make_node("ArgMax", ["logits"], ["token_out"], axis=1, keepdims=0),
         helper.make_node("Cast", ["i"], ["i_float"], to=TensorProto.FLOAT),
         helper.make_node("Less", ["i_float", "limit"], ["cond_out"]),
         helper.make_node("SequenceInsert", ["tokens", "token_out"], ["tokens_out"]),
         helper.make_node("Identity", ["logits"], ["scan_logits"])],
        "decoder_step",
        [vi("i", TensorProto.INT64, [1]), vi("cond", TensorProto.BOOL, [1]), vi("token", TensorProto.INT64, ["B"]),
         vi("state", TensorProto.FLOAT, ["B", hidden]), helper.make_tensor_sequence_value_info("tokens", TensorProto.INT64, None)],
        [vi("cond_out", TensorProto.BOOL, [1]), vi("token_out", TensorProto.INT64, ["B"]), vi("state_out", TensorProto.FLOAT, ["B", hidden]),
         helper.make_tensor_sequence_value_info("tokens_out", TensorProto.INT64, None), vi("scan_logits", TensorProto.FLOAT, ["B", vocab])])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.INT64),
             helper.make_node("Loop", ["max_steps", "start", "first_token", "h0", "empty"], ["last_token", "last_state", "tokens", "all_logits"], body=body),
             helper.make_node("ConcatFromSequence", ["tokens"], ["decoded"], axis=1, new_axis=1),
             helper.make_node("SequenceLength", ["tokens"], ["steps"])]
    inits = [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(cell, "cell"), numpy_helper.from_array(out_w, "out_w"),
             numpy_helper.from_array(np.array([5.0], dtype=np.float32), "limit"), numpy_helper.from_array(np.array([8], dtype=np.int64), "max_steps"),
             numpy_helper.from_array(np.array([True]), "start")]
    m = model_of(nodes, [vi("first_token", TensorProto.INT64, ["B"]), vi("h0", TensorProto.FLOAT, ["B", hidden])],
                 [vi("decoded", TensorProto.INT64, None), vi("steps", TensorProto.INT64, None), vi("last_state", TensorProto.FLOAT, None),
                  vi("all_logits", TensorProto.FLOAT, None)], inits, ms=False)
    return m


def scan_decoder():
    """An Elman cell run by Scan: state carried, one scan input read backwards, outputs stacked on two axes."""
    hidden = HIDDEN
    w, u = f32(4, hidden, scale=0.5), f32(hidden, hidden, scale=0.4)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "w"], ["a"]), helper.make_node("MatMul", ["h", "u"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Add", ["s", "r_t"], ["s2"]), helper.make_node("Tanh", ["s2"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["h_copy"]), helper.make_node("ReduceSum", ["h_out"], ["y_t"], keepdims=0)],
        "scan_step",
        [vi("h", TensorProto.FLOAT, ["B", hidden]), vi("x_t", TensorProto.FLOAT, ["B", 4]), vi("r_t", TensorProto.FLOAT, ["B", hidden])],
        [vi("h_out", TensorProto.FLOAT, ["B", hidden]), vi("h_copy", TensorProto.FLOAT, ["B", hidden]), vi("y_t", TensorProto.FLOAT, [])])
    nodes = [helper.make_node("Scan", ["h0", "x", "r"], ["h_last", "hs", "ys"], body=body, num_scan_inputs=2,
                              scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[1, 0])]
    m = model_of(nodes, [vi("h0", TensorProto.FLOAT, [2, hidden]), vi("x", TensorProto.FLOAT, [2, 5, 4]), vi("r", TensorProto.FLOAT, [5, 2, hidden])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("h_last", "hs", "ys")], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(u, "u")],
                 ms=False)
    return m


def control_flow():
    """The decoders above and the sequence / optional operators."""
    save_case("loop_decoder_rank1", loop_decoder(), {"first_token": np.array([1, 4, 7], dtype=np.int64), "h0": f32(3, HIDDEN)})
    save_case("scan_decoder", scan_decoder(), {"h0": f32(2, HIDDEN), "x": f32(2, 5, 4), "r": f32(5, 2, HIDDEN)})

    x = f32(3, 6)
    nodes = [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
             helper.make_node("SplitToSequence", ["x", "sizes"], ["chunks"], axis=1),
             helper.make_node("SplitToSequence", ["x", "two"], ["pairs"], axis=1),
             helper.make_node("SequenceAt", ["chunks", "minus_one"], ["last_chunk"]),
             helper.make_node("SequenceErase", ["rows", "zero"], ["tail"]),
             helper.make_node("SequenceInsert", ["tail", "extra", "zero"], ["reinserted"]),
             helper.make_node("ConcatFromSequence", ["reinserted"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("ConcatFromSequence", ["pairs"], ["joined"], axis=-1),
             helper.make_node("SequenceLength", ["pairs"], ["pair_count"]),
             helper.make_node("SequenceConstruct", ["x", "x"], ["twice"]),
             helper.make_node("ConcatFromSequence", ["twice"], ["doubled"], axis=0),
             helper.make_node("Optional", ["x"], ["maybe"]),
             helper.make_node("OptionalHasElement", ["maybe"], ["has"]),
             helper.make_node("OptionalGetElement", ["maybe"], ["got"])]
    inits = [numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64), "sizes"), numpy_helper.from_array(np.array(2, dtype=np.int64), "two"),
             numpy_helper.from_array(np.array(-1, dtype=np.int64), "minus_one"), numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")]
    outs = [("last_chunk", TensorProto.FLOAT), ("stacked", TensorProto.FLOAT), ("joined", TensorProto.FLOAT), ("pair_count", TensorProto.INT64),
            ("doubled", TensorProto.FLOAT), ("has", TensorProto.BOOL), ("got", TensorProto.FLOAT)]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [3, 6]), vi("extra", TensorProto.FLOAT, [6])], [vi(n, t, None) for n, t in outs], inits, opset=18, ms=False)
    save_case("sequence_ops", m, {"x": x, "extra": f32(6)})


def control_flow_models(zoo, manifest, record):
    """Writes the two decoders into the compatibility harness's zoo (Benchmarks/compat/export_models.py)."""
    for name, model, inputs in (("ort_loop_decoder_rank1", loop_decoder(),
                                 [{"name": "first_token", "shape": ["N"], "dtype": "int64", "sample": "tokens", "vocab": 9},
                                  {"name": "h0", "shape": ["N", HIDDEN], "dtype": "float32"}]),
                                ("ort_scan_decoder", scan_decoder(),
                                 [{"name": "h0", "shape": [2, HIDDEN], "dtype": "float32"}, {"name": "x", "shape": [2, 5, 4], "dtype": "float32"},
                                  {"name": "r", "shape": [5, 2, HIDDEN], "dtype": "float32"}])):
        path = os.path.join(zoo, name + ".onnx")
        onnx.save(model, path)
        record(manifest, name, path, inputs, "onnx.helper (Loop with [1] body inputs, as paddle2onnx)" if "loop" in name else "onnx.helper (Scan)", 17)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        # Named parts only (e.g. matmul_nbits_shapes), leaving the other cases as they are.
        for part in sys.argv[1:]:
            globals()[part]()
        sys.exit(0)
    control_flow()
    fused_ops()
    normalization_ops()
    attention_ops()
    quantized_ops()
    qlinear_rounding()
    matmul_nbits()
    matmul_nbits_shapes()
    matmul_nbits_float16()
    matmul_nbits_accuracy4()
    decoder_ops()
    optimized_bert()
    quantized_models()
