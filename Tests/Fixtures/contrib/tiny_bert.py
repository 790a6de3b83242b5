"""A tiny BERT encoder written with onnx.helper in the pattern torch.onnx exports (opset 17), so that
onnxruntime's transformer optimizer fuses it into EmbedLayerNormalization, Attention, SkipLayerNormalization
and (Bias)Gelu. Random weights; no download."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def tiny_bert(vocab=40, hidden=16, heads=2, layers=2, intermediate=32, max_positions=32, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def const(value, prefix="c"):
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(*shape, scale=0.2):
        return const((rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def node(op, inputs, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def layer_norm(x):
        return node("LayerNormalization", [x, const((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)),
                                           const((0.1 * rng.standard_normal(hidden)).astype(np.float32))], axis=-1, epsilon=1e-12)

    def linear(x, n_in, n_out):
        return node("Add", [node("MatMul", [x, weight(n_in, n_out)]), const((0.1 * rng.standard_normal(n_out)).astype(np.float32))])

    # Embeddings: word + position (sliced from a constant position_ids row) + token type, then LayerNorm.
    words = node("Gather", [weight(vocab, hidden, scale=0.5), "input_ids"])
    seq_len = node("Unsqueeze", [node("Gather", [node("Shape", ["input_ids"]), const(np.array(1, dtype=np.int64))], axis=0),
                                 const(np.array([0], dtype=np.int64))])
    position_ids = node("Slice", [const(np.arange(max_positions, dtype=np.int64)[None, :]), const(np.array([0], dtype=np.int64)), seq_len,
                                  const(np.array([1], dtype=np.int64))])
    positions = node("Gather", [weight(max_positions, hidden, scale=0.5), position_ids])
    types = node("Gather", [weight(2, hidden, scale=0.5), "token_type_ids"])
    hidden_state = layer_norm(node("Add", [node("Add", [words, positions]), types]))

    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    mask = node("Unsqueeze", [node("Unsqueeze", ["attention_mask", const(np.array([1], dtype=np.int64))]), const(np.array([2], dtype=np.int64))])
    mask = node("Mul", [node("Sub", [const(np.array(1.0, dtype=np.float32)), node("Cast", [mask], to=TensorProto.FLOAT)]),
                        const(np.array(-10000.0, dtype=np.float32))])
    head = hidden // heads
    split_shape = const(np.array([0, 0, heads, head], dtype=np.int64))
    merge_shape = const(np.array([0, 0, hidden], dtype=np.int64))
    for _ in range(layers):
        q = node("Transpose", [node("Reshape", [linear(hidden_state, hidden, hidden), split_shape])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(hidden_state, hidden, hidden), split_shape])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(hidden_state, hidden, hidden), split_shape])], perm=[0, 2, 1, 3])
        scores = node("Div", [node("MatMul", [q, k]), const(np.array(np.sqrt(head), dtype=np.float32))])
        probs = node("Softmax", [node("Add", [scores, mask])], axis=-1)
        context = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_shape])
        hidden_state = layer_norm(node("Add", [linear(context, hidden, hidden), hidden_state]))
        up = linear(hidden_state, hidden, intermediate)
        gelu = node("Mul", [node("Mul", [up, node("Add", [node("Erf", [node("Div", [up, const(np.array(1.4142135381698608, dtype=np.float32))])]),
                                                       const(np.array(1.0, dtype=np.float32))])]), const(np.array(0.5, dtype=np.float32))])
        hidden_state = layer_norm(node("Add", [linear(gelu, intermediate, hidden), hidden_state]))
    nodes.append(helper.make_node("Identity", [hidden_state], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        nodes, "tiny_bert",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="osprey-fixtures")
    model.ir_version = 8
    return model
