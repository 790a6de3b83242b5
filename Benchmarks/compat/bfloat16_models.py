#!/usr/bin/env python3
"""Exports bfloat16 versions of torchvision models and compares `osprey predict` on them with onnxruntime on the
same model's float32 export.

    swift build -c release --product osprey
    Benchmarks/out/venv-torch/bin/python Benchmarks/compat/bfloat16_models.py [--write-benchmarks] [--filter SUBSTRING]

Each model (random weights, as export_models.py makes them) is cast to bfloat16 in torch and exported by the
TorchScript exporter (`tv_<arch>_bf16`: bfloat16 weights, input and output); onnxruntime refuses such models (Conv
takes bfloat16 only from opset 22, and its CPU provider has no bfloat16 Conv or MatMul kernel), so the reference is onnxruntime on the float32 export of the same module
with its weights rounded to bfloat16, on the same input (rounded to bfloat16 as well), at batch 1 and 3. What remains
is the bfloat16 rounding of the outputs: a model passes when max|osprey - ref| <= 1e-2 * max|ref| + 1e-5 on every
output and every row's top-1 class agrees. With --write-benchmarks the rows go into the `## Compatibility` table of
BENCHMARKS.md through compare.py. Written to Benchmarks/out/zoo-bf16.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (make_input, write_benchmarks, paths)
import float16_models  # noqa: E402  (osprey, session, run_rows)

OUT = os.path.join(compare.ROOT, "Benchmarks", "out", "zoo-bf16")
ARCHS = {"mobilenet_v2": 13, "resnet18": 17, "efficientnet_b0": 17}
IMAGE = {"name": "input", "shape": ["N", 3, 224, 224], "dtype": "float32"}
RELATIVE = 1e-2


def export(arch, opset):
    """(bfloat16 path, float32 reference path) of `arch`, exported once."""
    import export_models
    torch, torchvision = export_models.import_torchvision()
    paths = tuple(os.path.join(OUT, f"tv_{arch}_{kind}.onnx") for kind in ("bf16", "bf16_reference_f32"))
    if all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = export_models.randomized(getattr(torchvision.models, arch)(weights=None).eval()).to(torch.bfloat16)
    sample = torch.randn(1, 3, 224, 224)
    common = dict(input_names=["input"], output_names=["logits"], opset_version=opset,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
    torch.onnx.export(model, (sample.to(torch.bfloat16),), paths[0], **common)
    torch.onnx.export(model.to(torch.float32), (sample,), paths[1], **common)  # the same bfloat16-valued weights
    return paths


def run(arch, opset):
    """One table row for the bfloat16 export of `arch`."""
    import ml_dtypes
    path, reference_path = export(arch, opset)
    name = os.path.basename(path)[:-5]
    exporter = f"torch.onnx (TorchScript) of torchvision {arch} cast to bfloat16"
    reference = float16_models.session(reference_path)
    ok, worst, scale, agree, rows, notes = True, 0.0, 0.0, 0, 0, []
    for batch in (1, 3):
        x = compare.make_input(IMAGE, batch, np.random.default_rng(batch)).astype(ml_dtypes.bfloat16).astype(np.float32)
        expected = reference.run(None, {"input": x})[0].astype(np.float64)
        try:
            actual = float16_models.osprey(path, {"input": x}, ["logits"])["logits"].astype(np.float64)
        except Exception as e:  # the engine refusing the model is the row's result
            return (name, exporter, opset, "FAIL", "-", "-", str(e)[:200])
        if actual.shape != expected.shape:
            return (name, exporter, opset, "FAIL", "-", "-", f"shape {list(actual.shape)} vs {list(expected.shape)}")
        diff, ref = float(np.max(np.abs(actual - expected))), float(np.max(np.abs(expected)))
        worst, scale = max(worst, diff), max(scale, ref)
        if diff > RELATIVE * ref + 1e-5:
            ok = False
            notes.append(f"batch {batch}: max diff {diff:.3g} > tol {RELATIVE * ref + 1e-5:.3g}")
        same = np.argmax(actual, axis=-1) == np.argmax(expected, axis=-1)
        agree, rows = agree + int(np.sum(same)), rows + same.size
    ok = ok and agree == rows
    notes = [f"onnxruntime refuses the bfloat16 model (type error); reference: onnxruntime on the float32 export of the same "
             f"bfloat16 weights; tolerance {RELATIVE:g}*max/ref/+1e-5, top-1 agrees on {agree}/{rows} rows"] + notes
    return (name, exporter, opset, "PASS" if ok else "FAIL", f"{scale:.2g}", f"{worst:.2g}", "; ".join(notes))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--filter", default="")
    parser.add_argument("--write-benchmarks", action="store_true")
    args = parser.parse_args()
    jobs = [(arch, lambda arch=arch, opset=opset: run(arch, opset)) for arch, opset in ARCHS.items()]
    return float16_models.run_rows(jobs, args.filter, args.write_benchmarks)


if __name__ == "__main__":
    sys.exit(main())
