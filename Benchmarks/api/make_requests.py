"""Writes the benchmark's V2 request bodies for a 1x3x224x224 FP32 input, as Python V2 clients build them."""
import json
import os
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/osprey-api-bench"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)

# tritonclient's JSON path: tolist() of float32 gives Python floats, json.dumps prints their 17-digit reprs.
body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32", "data": x.flatten().tolist()}]}
with open(os.path.join(out, "request.json"), "wb") as f:
    f.write(json.dumps(body).encode())

header = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                      "parameters": {"binary_data_size": x.nbytes}}]}
head = json.dumps(header).encode()
with open(os.path.join(out, "request.bin"), "wb") as f:
    f.write(head + x.tobytes())
with open(os.path.join(out, "request.bin.header"), "w") as f:
    f.write(str(len(head)))
