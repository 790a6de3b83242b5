#!/usr/bin/env python3
"""Checks Osprey's output against the peer's at the engine tolerance |a-b| <= 1e-4 * max|ref| + 1e-5.

    compare_outputs.py REFERENCE.npy OSPREY.npy      prints "ok maxdiff=.. scale=.." or "FAIL ..."
"""
import sys

import numpy as np

ref, got = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
if ref.shape != got.shape:
    print(f"FAIL shape {got.shape} vs {ref.shape}")
    sys.exit(0)
diff = float(np.abs(ref - got).max()) if ref.size else 0.0
scale = float(np.abs(ref).max()) if ref.size else 0.0
print(f"{'ok' if diff <= 1e-4 * scale + 1e-5 else 'FAIL'} maxdiff={diff:.2g} scale={scale:.3g}")
