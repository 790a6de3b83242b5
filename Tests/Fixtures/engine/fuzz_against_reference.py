#!/usr/bin/env python3
"""Randomised Conv/ConvTranspose/pooling/Resize configurations checked against onnx.reference through `osprey predict`.
Usage (from the repo root, after `swift build --product osprey`): python3 Tests/Fixtures/engine/fuzz_against_reference.py [COUNT]
Known, accepted differences: windows lying wholly in padding (reference gives nan/inf), SAME auto_pad with dilated pooling
(we follow the spec formula), exclude_outside with nearest (onnxruntime rejects it), cubic half_pixel_symmetric (we match onnxruntime)."""
import os, random, subprocess, sys, tempfile
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
from onnx.reference import ReferenceEvaluator
rng = np.random.default_rng(23); random.seed(23)
OSPREY = os.path.abspath(os.environ.get("OSPREY", ".build/debug/osprey"))
os.chdir(tempfile.mkdtemp(prefix="osprey-fuzz-"))  # scratch models and arrays stay out of the repo
def check(tag, node, inputs, inits, opset=18):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]); m.ir_version = 8
    try:
        ref = ReferenceEvaluator(m).run(None, inputs)[0]
    except Exception as e:
        return None
    onnx.save(m, "m.onnx")
    args = [OSPREY, "predict", "m.onnx", "--output", "y.npy"]
    for k, v in inputs.items():
        np.save(f"{k}.npy", v); args += ["--input", f"{k}={k}.npy"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print("ERROR", tag, r.stderr.strip()[:300]); return False
    y = np.load("y.npy")
    if y.shape != ref.shape or not np.allclose(y, ref, rtol=1e-4, atol=1e-4 * max(1, abs(ref).max())):
        print("MISMATCH", tag, y.shape, ref.shape, abs(y - ref).max() if y.shape == ref.shape else ""); return False
    return True
ok = bad = 0
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    kind = random.choice(["conv", "convT", "maxpool", "avgpool", "resize"])
    x = rng.standard_normal((2, 4, random.randint(5, 9), random.randint(5, 9))).astype(np.float32)
    k = [random.randint(1, 3), random.randint(1, 3)]
    s = [random.randint(1, 3), random.randint(1, 3)]
    d = [random.randint(1, 2), random.randint(1, 2)]
    auto = random.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
    pads = [random.randint(0, 2) for _ in range(4)] if auto == "NOTSET" else None
    attrs = {"kernel_shape": k, "strides": s, "auto_pad": auto}
    if pads: attrs["pads"] = pads
    if kind == "conv":
        gr = random.choice([1, 2, 4])
        w = rng.standard_normal((random.choice([2, 4, 8]) // 2 * gr, 4 // gr, *k)).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=gr, dilations=d, **attrs)
        res = check(f"conv {attrs} g={gr} d={d}", node, {"x": x}, {"w": w, "b": rng.standard_normal(w.shape[0]).astype(np.float32)})
    elif kind == "convT":
        gr = random.choice([1, 2])
        w = rng.standard_normal((4, random.randint(1, 3), *k)).astype(np.float32)
        extra = {}
        if random.random() < 0.5:
            extra["output_padding"] = [random.randint(0, s[0] - 1), random.randint(0, s[1] - 1)]
        if random.random() < 0.3:
            extra["output_shape"] = [x.shape[2] * s[0] + random.randint(-1, 1), x.shape[3] * s[1]]
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=gr, dilations=d, **attrs, **extra)
        res = check(f"convT {attrs} g={gr} d={d} {extra}", node, {"x": x}, {"w": w})
    elif kind in ("maxpool", "avgpool"):
        ceil = random.randint(0, 1)
        if kind == "maxpool":
            node = helper.make_node("MaxPool", ["x"], ["y"], ceil_mode=ceil, dilations=d, **attrs)
        else:
            node = helper.make_node("AveragePool", ["x"], ["y"], ceil_mode=ceil, count_include_pad=random.randint(0, 1), **attrs)
        res = check(f"{kind} {attrs} ceil={ceil} d={d}", node, {"x": x}, {}, opset=18)
    else:
        mode = random.choice(["nearest", "linear", "cubic"])
        ctm = random.choice(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"])
        nm = random.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
        if random.random() < 0.5:
            scales = np.array([1, 1, random.choice([0.5, 0.75, 1.5, 2.0, 1.3]), random.choice([0.6, 1.0, 2.5, 1.7])], np.float32)
            node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nm, exclude_outside=random.randint(0, 1))
            res = check(f"resize {mode} {ctm} {nm} scales {scales}", node, {"x": x}, {"sc": scales})
        else:
            sizes = np.array([2, 4, random.randint(1, 14), random.randint(1, 14)], np.int64)
            node = helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nm)
            res = check(f"resize {mode} {ctm} {nm} sizes {sizes}", node, {"x": x}, {"sz": sizes})
    if res is True: ok += 1
    elif res is False: bad += 1
print("ok", ok, "bad", bad)
