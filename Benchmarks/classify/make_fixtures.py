#!/usr/bin/env python3
"""Classification benchmark fixtures in OUT_DIR (default Benchmarks/out/classify), all generated, none committed:

- photo.jpg: a 1920x1080 "photo" (gradients, sky-like band, shapes, Gaussian noise; quality 90, 4:2:0), about 1 MB
- repo/digits: a copy of models/digits (8x8 gray stretch preprocessing from its config.json)
- repo/mobilenetv2: the MobileNetV2-1.0 shaped model of Benchmarks/engine/make_models.py with an `image` section:
  resize the shorter side to 256, center crop 224x224, RGB, NCHW, ImageNet mean/std
- tensor_<model>.bin + .hdr: a binary V2 infer body with an already preprocessed tensor (the no-decode comparison)

usage: make_fixtures.py [OUT_DIR]
"""
import json
import os
import shutil
import sys

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "engine"))
import make_models  # noqa: E402


def photo(path):
    rng = np.random.default_rng(11)
    h, w = 1080, 1920
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([60 + 150 * yy / h, 120 + 80 * np.sin(xx / 211.0), 200 - 120 * yy / h], axis=-1)
    img[600:, :] = np.stack([70 + 60 * np.cos(xx[600:] / 97.0), 110 + 40 * np.sin(yy[600:] / 41.0), 50 + 0 * xx[600:]], axis=-1)
    img[300:700, 700:1100] = [200, 60, 40]
    img[((xx - 1500) ** 2 + (yy - 350) ** 2) < 150 ** 2] = [240, 220, 90]
    img += rng.normal(0, 10, img.shape).astype(np.float32)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(path, quality=90)


def tensor_request(path, name, output, shape):
    data = np.random.default_rng(0).random(shape, dtype=np.float32)
    header = json.dumps({"inputs": [{"name": name, "shape": list(shape), "datatype": "FP32", "parameters": {"binary_data_size": data.nbytes}}],
                         "outputs": [{"name": output, "parameters": {"binary_data": True}}]}).encode()
    with open(path + ".bin", "wb") as f:
        f.write(header + data.tobytes())
    with open(path + ".hdr", "w") as f:
        f.write(str(len(header)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "out", "classify")
    repo = os.path.join(out, "repo")
    os.makedirs(repo, exist_ok=True)
    if not os.path.exists(os.path.join(out, "photo.jpg")):
        photo(os.path.join(out, "photo.jpg"))
    shutil.rmtree(os.path.join(repo, "digits"), ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "models", "digits"), os.path.join(repo, "digits"))
    model_dir = os.path.join(repo, "mobilenetv2", "1")
    os.makedirs(model_dir, exist_ok=True)
    if not os.path.exists(os.path.join(model_dir, "model.onnx")):
        make_models.mobilenet_v2().save(os.path.join(model_dir, "model.onnx"))
    config = {
        "max_batch_size": 32,
        "dynamic_batching": {"max_queue_delay_microseconds": 2000},
        "image": {"width": 224, "height": 224, "resize_mode": "center_crop", "resize_size": 256, "interpolation": "bilinear",
                  "antialias": True, "channel_order": "rgb", "layout": "nchw", "scale": 1 / 255,
                  "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "dtype": "float32"},
    }
    with open(os.path.join(repo, "mobilenetv2", "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensor_request(os.path.join(out, "tensor_mobilenetv2"), "input", "logits", (1, 3, 224, 224))
    tensor_request(os.path.join(out, "tensor_digits"), "image", "probabilities", (1, 1, 8, 8))


if __name__ == "__main__":
    main()
