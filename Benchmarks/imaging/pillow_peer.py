#!/usr/bin/env python3
"""Peer measurement: Pillow (+numpy) decode + resize + normalise of the same JPEG to a 224x224 float tensor."""
import sys
import time

import numpy as np
from PIL import Image

path = sys.argv[1]
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 20
data = open(path, "rb").read()
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
import io


def run(draft, crop):
    """draft: 0 = full-size decode, else the margin (Pillow picks the smallest DCT scale >= requested size)."""
    im = Image.open(io.BytesIO(data))
    if draft:
        side = (256 if crop else 224) * draft
        im.draft("RGB", (side, side))
    im = im.convert("RGB")
    if crop:
        w, h = im.size
        s = 256
        nw, nh = (s, int(s * h / w)) if w <= h else (int(s * w / h), s)
        im = im.resize((nw, nh), Image.Resampling.BILINEAR)
        left, top = int(round((nw - 224) / 2)), int(round((nh - 224) / 2))
        im = im.crop((left, top, left + 224, top + 224))
    else:
        im = im.resize((224, 224), Image.Resampling.BILINEAR)
    x = (np.asarray(im, np.float32) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


for crop, name in [(False, "stretch 224 bilinear"), (True, "resize 256 + center_crop 224")]:
    for draft in (1, 2, 0):
        times = []
        for _ in range(iterations if draft else max(3, iterations // 4)):
            t = time.thread_time()  # CPU time: stable on a shared box
            run(draft, crop)
            times.append((time.thread_time() - t) * 1000)
        times.sort()
        label = f"draft margin {draft} (DCT scaling)" if draft else "full-size decode"
        print(f"pillow  {name:30s} {label}: {times[len(times) // 2]:.2f} ms")
