#!/usr/bin/env python3
"""Trains the default `digits` model and writes model.onnx, labels.txt, config.json and example images.

Reproducible (seeded), offline: scikit-learn's bundled 8x8 handwritten digits (load_digits), a numpy MLP
64 -> 128 -> 10 trained with Adam on shift-augmented data, exported with onnx.helper
(Flatten -> Gemm -> Relu -> Gemm -> Softmax, opset 13, input `image` float32 [N,1,8,8]).

Preprocessing (the config.json `image` section, applied by Osprey's Imaging module):
gray (ITU-R 601-2 luma), area-average resize to 8x8, then x * scale - mean with scale = -16/255 and
mean = -16, i.e. ink = 16 - 16 * gray / 255: white paper -> 0, black ink -> 16, the dataset's range.
Example images are 64x64 renders of held-out test digits (dark ink on white); the script checks with
onnxruntime that each is classified correctly through the same preprocessing (Pillow BOX == area).

Usage: python3 models/digits/train.py   (from the repository root or anywhere)
"""
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20240601
rng = np.random.default_rng(SEED)

digits = load_digits()
X = digits.images.astype(np.float32)  # (n, 8, 8), 0..16, ink high
y = digits.target.astype(np.int64)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def augment(images):
    """One-pixel shifts in each direction (zero fill) so slightly off-centre digits still classify."""
    out = [images]
    for dy, dx in [(-1, 0), (1, 0), (0, -1), (0, 1)]:
        shifted = np.zeros_like(images)
        ys = slice(max(dy, 0), 8 + min(dy, 0))
        yd = slice(max(-dy, 0), 8 + min(-dy, 0))
        xs = slice(max(dx, 0), 8 + min(dx, 0))
        xd = slice(max(-dx, 0), 8 + min(-dx, 0))
        shifted[:, yd, xd] = images[:, ys, xs]
        out.append(shifted)
    return np.concatenate(out)


Xa = augment(X_train).reshape(-1, 64) / 16.0
ya = np.tile(y_train, 5)

# Inputs are 0..16; the first layer absorbs the /16 so the graph takes dataset-range values directly.
H = 128
W1 = (rng.standard_normal((64, H)) * np.sqrt(2.0 / 64)).astype(np.float32)
b1 = np.zeros(H, np.float32)
W2 = (rng.standard_normal((H, 10)) * np.sqrt(1.0 / H)).astype(np.float32)
b2 = np.zeros(10, np.float32)
params = [W1, b1, W2, b2]
m = [np.zeros_like(p) for p in params]
v = [np.zeros_like(p) for p in params]
lr, beta1, beta2, eps, wd = 2e-3, 0.9, 0.999, 1e-8, 1e-4
step = 0
for epoch in range(60):
    order = rng.permutation(len(Xa))
    for start in range(0, len(order), 64):
        idx = order[start:start + 64]
        xb, yb = Xa[idx], ya[idx]
        h = np.maximum(xb @ W1 + b1, 0)
        logits = h @ W2 + b2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        g = p.copy()
        g[np.arange(len(yb)), yb] -= 1
        g /= len(yb)
        gW2 = h.T @ g + wd * W2
        gb2 = g.sum(0)
        gh = (g @ W2.T) * (h > 0)
        gW1 = xb.T @ gh + wd * W1
        gb1 = gh.sum(0)
        step += 1
        for i, grad in enumerate([gW1, gb1, gW2, gb2]):
            m[i] = beta1 * m[i] + (1 - beta1) * grad
            v[i] = beta2 * v[i] + (1 - beta2) * grad * grad
            mh = m[i] / (1 - beta1 ** step)
            vh = v[i] / (1 - beta2 ** step)
            params[i] -= (lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
W1, b1, W2, b2 = params


def predict_numpy(x):
    h = np.maximum(x.reshape(len(x), 64) / 16.0 @ W1 + b1, 0)
    return (h @ W2 + b2).argmax(1)


test_accuracy = float((predict_numpy(X_test) == y_test).mean())
train_accuracy = float((predict_numpy(X_train) == y_train).mean())

# Export: fold the /16 into W1.
inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])]
outputs = [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])]
inits = [
    numpy_helper.from_array((W1 / 16.0).T.astype(np.float32).copy(), "fc1.weight"),
    numpy_helper.from_array(b1.astype(np.float32), "fc1.bias"),
    numpy_helper.from_array(W2.T.astype(np.float32).copy(), "fc2.weight"),
    numpy_helper.from_array(b2.astype(np.float32), "fc2.bias"),
]
nodes = [
    helper.make_node("Flatten", ["image"], ["flat"], axis=1, name="flatten"),
    helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], transB=1, name="fc1"),
    helper.make_node("Relu", ["fc1"], ["relu1"], name="relu1"),
    helper.make_node("Gemm", ["relu1", "fc2.weight", "fc2.bias"], ["logits"], transB=1, name="fc2"),
    helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1, name="softmax"),
]
graph = helper.make_graph(nodes, "digits_mlp", inputs, outputs, inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="osprey-train-digits")
model.ir_version = 8
model.doc_string = f"8x8 handwritten digits MLP (sklearn load_digits); held-out accuracy {test_accuracy:.4f}"
onnx.checker.check_model(model)
onnx.save(model, os.path.join(HERE, "1", "model.onnx"))

with open(os.path.join(HERE, "labels.txt"), "w") as f:
    f.write("".join(f"{d}\n" for d in range(10)))

image_config = {
    "width": 8, "height": 8, "resize_mode": "stretch", "interpolation": "area", "antialias": True,
    "channel_order": "gray", "layout": "nchw", "scale": -16.0 / 255.0, "mean": [-16.0], "std": [1.0],
    "dtype": "float32", "background": [255, 255, 255],
}
config = {
    "max_batch_size": 32,
    "dynamic_batching": {"max_queue_delay_microseconds": 2000},
    "output": {"probabilities": True},
    "image": image_config,
}
with open(os.path.join(HERE, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")


def preprocess(path):
    """The Imaging pipeline for this config, in Pillow/numpy: RGB on white, L, BOX to 8x8, affine."""
    im = Image.open(path)
    im = im.convert("RGBA")
    bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
    im = Image.alpha_composite(bg, im).convert("RGB").convert("L").resize((8, 8), Image.Resampling.BOX)
    g = np.asarray(im, np.float32)
    return (g * (-16.0 / 255.0) - (-16.0)).reshape(1, 1, 8, 8).astype(np.float32)


# Examples: held-out digits rendered 64x64 (bilinear upsampling of the ink map, dark on white).
session = ort.InferenceSession(os.path.join(HERE, "1", "model.onnx"), providers=["CPUExecutionProvider"])
examples_dir = os.path.join(HERE, "examples")
os.makedirs(examples_dir, exist_ok=True)
written = []
for digit in range(10):
    candidates = np.nonzero(y_test == digit)[0]
    for index in candidates:
        ink = X_test[index] / 16.0
        gray = np.clip(255.0 - ink * 255.0, 0, 255).astype(np.uint8)
        big = Image.fromarray(gray, "L").resize((64, 64), Image.Resampling.NEAREST)
        ext = "png" if digit % 2 == 0 else "jpg"
        path = os.path.join(examples_dir, f"digit_{digit}.{ext}")
        if ext == "png":
            big.save(path)
        else:
            big.save(path, quality=95)
        probs = session.run(None, {"image": preprocess(path)})[0][0]
        if int(probs.argmax()) == digit and probs.max() > 0.9:
            written.append((os.path.basename(path), digit, float(probs.max())))
            break
    else:
        raise SystemExit(f"no confidently classified example for digit {digit}")

onnx_x = X_test.reshape(-1, 1, 8, 8).astype(np.float32)
onnx_probs = session.run(None, {"image": onnx_x})[0]
onnx_accuracy = float((onnx_probs.argmax(1) == y_test).mean())
print(f"train accuracy {train_accuracy:.4f}  held-out test accuracy {test_accuracy:.4f} "
      f"(onnxruntime {onnx_accuracy:.4f}, {len(y_test)} test images)")
for name, digit, p in written:
    print(f"example {name}: class {digit} p={p:.3f}")
print(f"model.onnx {os.path.getsize(os.path.join(HERE, '1', 'model.onnx'))} bytes")
