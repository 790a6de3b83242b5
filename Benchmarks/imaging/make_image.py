#!/usr/bin/env python3
"""Writes Benchmarks/out/photo12mp.jpg: a 4000x3000 JPEG (quality 90, 4:2:0) of gradients, shapes and noise."""
import os

import numpy as np
from PIL import Image

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "out")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(42)
h, w = 3000, 4000
yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
img = np.stack([255 * xx / w, 255 * yy / h, 128 + 100 * np.sin(xx / 37.0) * np.cos(yy / 23.0)], axis=-1)
img[800:1600, 1000:2200] = [230, 40, 30]
img += rng.normal(0, 12, img.shape).astype(np.float32)
Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(os.path.join(out, "photo12mp.jpg"), quality=90)
print("wrote", os.path.join(out, "photo12mp.jpg"), os.path.getsize(os.path.join(out, "photo12mp.jpg")), "bytes")
