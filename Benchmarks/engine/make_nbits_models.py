#!/usr/bin/env python3
"""Int4 com.microsoft MatMulNBits models for timing the 4-bit kernels and their memory against onnxruntime.

    python3 Benchmarks/engine/make_nbits_models.py OUT_DIR

Random weights packed as onnxruntime's MatMulNBitsQuantizer writes them (asymmetric, uint8 zero points, blocks of
32, accuracy_level 0): nbits_4096.onnx, one K = N = 4096 layer (input x [M, 4096]); nbits_llama.onnx, four Llama-1B
sized layers of projections and SwiGLU MLP (hidden 2048, intermediate 8192, k/v 512; no attention, which is not what
is measured; input x [M, 2048]; 150 MB, 1 GB as floats); and inputs x{M}_{K}.npy for M = 1, 4, 128.
"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
rng = np.random.default_rng(0)
BLOCK = 32


def nbits(name, x, y, k, n, inits, nodes):
    blocks = (k + BLOCK - 1) // BLOCK
    inits.append(numpy_helper.from_array(rng.integers(0, 256, (n, blocks, BLOCK // 2), dtype=np.uint8), name + "_b"))
    inits.append(numpy_helper.from_array((rng.uniform(0.5, 1.5, n * blocks) * 0.02 / np.sqrt(k / 64)).astype(np.float32), name + "_s"))
    inits.append(numpy_helper.from_array(rng.integers(0, 256, n * ((blocks + 1) // 2), dtype=np.uint8), name + "_z"))
    nodes.append(helper.make_node("MatMulNBits", [x, name + "_b", name + "_s", name + "_z"], [y], domain=MS, K=k, N=n, bits=4,
                                  block_size=BLOCK, accuracy_level=0))


def save(path, nodes, inits, k, out):
    g = helper.make_graph(nodes, "nbits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, path)


def layer(path):
    nodes, inits = [], []
    nbits("l", "x", "y", 4096, 4096, inits, nodes)
    save(path, nodes, inits, 4096, "y")


def llama(path, layers=4, hidden=2048, inter=8192, kv=512):
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        p = f"l{i}_"
        # Attention projections (no attention itself): q, k, v, o; then the SwiGLU MLP; residual adds.
        nbits(p + "q", x, p + "qo", hidden, hidden, inits, nodes)
        nbits(p + "k", x, p + "ko", hidden, kv, inits, nodes)
        nbits(p + "v", x, p + "vo", hidden, kv, inits, nodes)
        nbits(p + "o", p + "qo", p + "oo", hidden, hidden, inits, nodes)
        nodes.append(helper.make_node("Add", [x, p + "oo"], [p + "h"]))
        nbits(p + "gate", p + "h", p + "g", hidden, inter, inits, nodes)
        nbits(p + "up", p + "h", p + "u", hidden, inter, inits, nodes)
        nodes.append(helper.make_node("Sigmoid", [p + "g"], [p + "gs"]))
        nodes.append(helper.make_node("Mul", [p + "g", p + "gs"], [p + "silu"]))
        nodes.append(helper.make_node("Mul", [p + "silu", p + "u"], [p + "gu"]))
        nbits(p + "down", p + "gu", p + "d", inter, hidden, inits, nodes)
        # k and v feed nothing in this stack: sum them into the output so no engine drops them.
        nodes.append(helper.make_node("Add", [p + "ko", p + "vo"], [p + "kv"]))
        nodes.append(helper.make_node("ReduceMean", [p + "kv"], [p + "kvm"], axes=[1], keepdims=1))
        nodes.append(helper.make_node("Add", [p + "h", p + "d"], [p + "r"]))
        nodes.append(helper.make_node("Add", [p + "r", p + "kvm"], [p + "out"]))
        x = p + "out"
    save(path, nodes, inits, hidden, x)


if __name__ == "__main__":
    out = sys.argv[1]
    layer(out + "/nbits_4096.onnx")
    llama(out + "/nbits_llama.onnx")
    for m in (1, 4, 128):
        for k in (2048, 4096):
            np.save(f"{out}/x{m}_{k}.npy", np.random.default_rng(1).standard_normal((m, k)).astype(np.float32))
