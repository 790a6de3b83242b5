"""Models the interop suite generates at run time (nothing binary is committed).

- `digits_v2`: the digits model with its final bias shifted towards class 9, so version 2 answers differ visibly.
- `slow_model`: a chain of square MatMuls sharing one weight, slow enough (about a second) to be in flight
  while the server is told to shut down.
- `digits_reference`: the digits MLP evaluated with numpy from the model's own weights (the expected outputs).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BOOSTED_CLASS = 9


def digits_v2(model_path):
    """The digits ONNX bytes with fc2.bias[BOOSTED_CLASS] raised by 50 (every input then predicts class 9)."""
    model = onnx.load(model_path)
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == "fc2.bias":
            bias = numpy_helper.to_array(tensor).copy()
            bias[BOOSTED_CLASS] += 50.0
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(bias, tensor.name))
    return model.SerializeToString()


def digits_reference(model_path, images):
    """Softmax(fc2(relu(fc1(flatten(images))))) with the model's weights; images is [N,1,8,8] float32."""
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(model_path).graph.initializer}
    x = images.reshape(images.shape[0], -1).astype(np.float64)
    hidden = np.maximum(x @ weights["fc1.weight"].T + weights["fc1.bias"], 0)
    logits = hidden @ weights["fc2.weight"].T + weights["fc2.bias"]
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)


def slow_model(size=512, rows=2048, depth=60):
    """ONNX bytes: x [-1,size] tiled to rows*batch rows -> depth MatMuls by one orthogonal weight -> y [-1*rows,size].

    An orthogonal weight preserves norms, so values stay finite; Tile makes a small request do a lot of work.
    """
    rng = np.random.default_rng(7)
    q, _ = np.linalg.qr(rng.normal(size=(size, size)))
    weight = numpy_helper.from_array(q.astype(np.float32), "w")
    repeats = numpy_helper.from_array(np.array([rows, 1], dtype=np.int64), "repeats")
    nodes, previous = [helper.make_node("Tile", ["x", "repeats"], ["tiled"])], "tiled"
    for i in range(depth):
        out = "y" if i == depth - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [previous, "w"], [out]))
        previous = out
    graph = helper.make_graph(nodes, "slow",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", size])], [weight, repeats])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()
