#!/usr/bin/env python3
"""Times every conv layer of a layers JSON (as make_models.py writes it) alone in onnxruntime, one thread, thread CPU
time: the per-layer peer of `harness LAYERS_JSON 1 BATCH REPEAT --layers`.

    ort_layers.py LAYERS_JSON MODEL BATCH REPEAT
"""
import json
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def layer_model(l, batch):
    """Conv (+ Add residual) (+ Relu / Clip 0..6) with random weights, as one graph."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((l["M"], l["C"] // l["groups"], l["k"], l["k"]), dtype=np.float32) * 0.1
    b = rng.standard_normal(l["M"], dtype=np.float32) * 0.1
    oh = (l["H"] + 2 * l["pad"] - l["k"]) // l["stride"] + 1
    ow = (l["W"] + 2 * l["pad"] - l["k"]) // l["stride"] + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[l["k"]] * 2, strides=[l["stride"]] * 2,
                              pads=[l["pad"]] * 4, group=l["groups"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, l["C"], l["H"], l["W"]])]
    last = "c"
    if l["residual"]:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, l["M"], oh, ow]))
        nodes.append(helper.make_node("Add", [last, "r"], ["a"]))
        last = "a"
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    if l["activation"] == "relu":
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    elif l["activation"] == "relu6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "layer", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), oh, ow


def main():
    layers = json.load(open(sys.argv[1]))[sys.argv[2]]
    batch, repeat = int(sys.argv[3]), int(sys.argv[4])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    total = 0.0
    for l in layers:
        model, oh, ow = layer_model(l, batch)
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        feeds = {"x": rng.random((batch, l["C"], l["H"], l["W"]), dtype=np.float32)}
        if l["residual"]:
            feeds["r"] = rng.random((batch, l["M"], oh, ow), dtype=np.float32)
        session.run(None, feeds)
        best = 1e9
        for _ in range(repeat):
            c0 = time.thread_time()
            session.run(None, feeds)
            best = min(best, time.thread_time() - c0)
        total += best
        print(f"{sys.argv[2]} {l['name']} C{l['C']} {l['H']}x{l['W']} M{l['M']} k{l['k']} s{l['stride']} g{l['groups']}: {best * 1000:.3f} ms")
    print(f"{sys.argv[2]} total: {total * 1000:.3f} ms")


if __name__ == "__main__":
    main()
