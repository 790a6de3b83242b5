#!/usr/bin/env python3
"""Runs every zoo model through onnxruntime and `osprey predict` on the same random input and compares.

    swift build -c release --product osprey
    python3 Benchmarks/compat/export_models.py
    python3 Benchmarks/compat/compare.py [--write-benchmarks] [--filter SUBSTRING]

Float outputs pass when max|osprey - ort| <= 1e-4 * max|ort| + 1e-5; integer and string outputs must match
exactly. Each model runs at batch 1 and 3. With --write-benchmarks the table replaces the `## Compatibility`
section of BENCHMARKS.md (other sections are left as they are).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(ROOT, "Benchmarks", "out", "zoo")
OSPREY = os.path.join(ROOT, ".build", "release", "osprey")


def make_input(spec, batch, rng):
    """A random input for one model input of the manifest, with the batch axis set to `batch`."""
    shape = [batch if d == "N" else d for d in spec["shape"]]
    kind = spec.get("sample")
    if kind == "features":
        data = np.load(os.path.join(ZOO, "features.npy"))
        rows = rng.choice(data.shape[0], batch)
        return np.ascontiguousarray(data[rows][:, : shape[1]])
    if kind == "tokens" and "vocab" in spec:
        return rng.integers(1, spec["vocab"], size=shape).astype(np.int64)
    if kind == "tokens":
        ids = rng.integers(1000, 30000, size=shape).astype(np.int64)
        ids[:, 0], ids[:, -1] = 101, 102
        return ids
    if kind == "mask":
        mask = np.ones(shape, np.int64)
        mask[1:, -3:] = 0  # padding on every row but the first
        return mask
    if kind == "zeros":
        return np.zeros(shape, np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def sanitized(name):
    safe = "".join(c if (c.isascii() and (c.isalnum() or c in "-_.")) else "_" for c in name)
    return ("_" + safe if not safe or safe.startswith(".") else safe) + ".npy"


def compare(actual, expected, step=0.0):
    """(ok, max abs diff or None, message); `step` is the extra allowance of a float output computed from quantized tensors."""
    if actual.shape != expected.shape:
        return False, None, f"shape {list(actual.shape)} vs ort {list(expected.shape)}"
    if expected.dtype.kind == "f":
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        diff = float(np.max(np.abs(a - e))) if e.size else 0.0
        tol = step + 1e-4 * (float(np.max(np.abs(e))) if e.size else 0.0) + 1e-5
        return diff <= tol, diff, "" if diff <= tol else f"max diff {diff:.3g} > tol {tol:.3g}"
    if step and expected.dtype in (np.uint8, np.int8):
        diff = float(np.max(np.abs(actual.astype(np.int64) - expected.astype(np.int64)))) if expected.size else 0.0
        return diff <= 1, diff, "" if diff <= 1 else f"{expected.dtype} values differ by {diff:.0f} quantization steps"
    same = actual.dtype == expected.dtype and np.array_equal(actual, expected)
    return same, 0.0 if same else None, "" if same else f"{expected.dtype} values differ ({int(np.sum(actual != expected))} of {expected.size})"


def output_scales(path):
    """Scale of the DequantizeLinear that writes each graph output, where one does."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    return {n.output[0]: float(np.max(inits[n.input[1]])) for n in model.graph.node
            if n.op_type == "DequantizeLinear" and n.output[0] in outputs and n.input[1] in inits}


def run_model(name, entry, batch, rng):
    path = os.path.join(ROOT, entry["path"])
    feeds = {spec["name"]: make_input(spec, batch, rng) for spec in entry["inputs"]}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = dict(zip(names, session.run(None, feeds)))
    steps = {}
    if entry.get("quantized"):
        # One quantization step of each float output (the scale of the DequantizeLinear writing it), or onnxruntime's
        # own spread between its optimisation levels when larger: rounding ties of requantized values fall by float
        # summation order, so no engine can be held closer to it than it is to itself.
        # Its DynamicQuantizeLSTM also quantizes the hidden state per chunk of ceil(batch / threads) rows, so its
        # outputs move with its thread count too (Osprey quantizes per sequence, as onnxruntime at threads >= batch).
        variants = []
        for level, threads in ((ort.GraphOptimizationLevel.ORT_DISABLE_ALL, 1), (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, batch)):
            variant = ort.SessionOptions()
            variant.graph_optimization_level, variant.intra_op_num_threads = level, threads
            variants.append(dict(zip(names, ort.InferenceSession(path, variant, providers=["CPUExecutionProvider"]).run(None, feeds))))
        # A quantized model is a step function of its float inputs: float32 differences as small as two correct
        # kernels' summation orders (relative 1e-6) ahead of a dynamic quantizer flip rounding steps that later layers
        # amplify. onnxruntime's own outputs under such a perturbation of the float inputs are part of
        # the spread (eight draws; only float inputs are perturbed, token ids are not).
        noise = np.random.default_rng(11)
        for _ in range(8 if any(v.dtype == np.float32 for v in feeds.values()) else 0):
            perturbed = {k: (v * (1 + 1e-6 * noise.standard_normal(v.shape))).astype(v.dtype) if v.dtype == np.float32 else v
                         for k, v in feeds.items()}
            variants.append(dict(zip(names, session.run(None, perturbed))))
        scales = output_scales(path)
        for out in names:
            spread = max((float(np.max(np.abs(v[out].astype(np.float64) - expected[out].astype(np.float64)))) if expected[out].size else 0.0)
                         for v in variants)
            steps[out] = max(scales.get(out, 0.0), spread)
    with tempfile.TemporaryDirectory() as tmp:
        args = [OSPREY, "predict", path, "--output-dir", tmp, "--threads", "1"]
        for key, value in feeds.items():
            file = os.path.join(tmp, "in_" + sanitized(key))
            np.save(file, value)
            args += ["--input", f"{key}={file}"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            message = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
            return False, None, message, None
        worst, notes = 0.0, []
        scale = max((float(np.max(np.abs(v))) for v in expected.values() if v.dtype.kind == "f" and v.size), default=None)
        ok = True
        for out in names:
            actual = np.load(os.path.join(tmp, sanitized(out)), allow_pickle=False)
            good, diff, message = compare(actual, expected[out], steps.get(out, 0.0))
            ok &= good
            if diff is not None:
                worst = max(worst, diff)
            if message:
                notes.append(f"{out}: {message}")
        allowance = max(steps.values(), default=0.0)
        if allowance > 0:
            notes.append(f"quantized: allowed {allowance:.2g} on top (max of one output step and onnxruntime's own spread)")
        return ok, worst, "; ".join(notes), scale


def write_benchmarks(rows):
    """Replaces the `## Compatibility` section of BENCHMARKS.md with `rows` (7-cell tuples) merged into its table:
    rows of models this run did not cover (another --filter, a part not exported here, float16_models.py's) stay."""
    text = open(os.path.join(ROOT, "BENCHMARKS.md")).read() if os.path.exists(os.path.join(ROOT, "BENCHMARKS.md")) else ""
    section = re.search(r"^## Compatibility\n.*?(?=^## |\Z)", text, re.S | re.M)
    done = {r[0] for r in rows}
    rows = list(rows)
    for line in (section.group(0).splitlines() if section else []):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 7 and cells[0] not in ("model",) and not cells[0].startswith("---") and cells[0] not in done:
            rows.append(tuple(cells))
    rows.sort(key=lambda r: r[0])
    exported = [r for r in rows if r[3] != "not exported"]
    passed = sum(r[3] != "FAIL" for r in exported)
    table = ["| model | exporter | opset | result (batch 1 and 3) | max abs ref | max abs diff | notes |", "|---|---|---|---|---|---|---|"]
    table += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    section = "\n".join([
        "## Compatibility", "",
        "Models exported by real tools with random weights, run by onnxruntime and by `osprey predict` on the same random",
        "input at batch 1 and 3 (batch 1 where the exporter fixed the batch axis). Float outputs pass when",
        "`max|osprey - ort| <= 1e-4 * max|ort| + 1e-5`; int64 labels must match exactly. Quantized models (quantize_dynamic /",
        "quantize_static): integer outputs within one quantization step, float outputs within one step of their scale plus",
        "that tolerance, or within onnxruntime's own spread (its optimisation levels and thread counts, and its outputs under",
        "a relative 1e-6 perturbation of the float inputs) where that is larger (notes under the table). Float16 models (`*_fp16`, `*_fp16_io32`: convert_float_to_float16 with",
        "keep_io_types False / True, by Benchmarks/compat/float16_models.py) pass at `1e-2 * max|ort| + 1e-5` with every",
        "classifier row's top-1 class agreeing: Osprey computes their bodies in float32 (HalfFloatLowering), as onnxruntime",
        "does for the CNNs; for MiniLM onnxruntime 1.32 keeps float16 LayerNormalization and Reshape/Transpose chains. Bfloat16",
        "models (`*_bf16`: torchvision models cast to bfloat16 and exported, by Benchmarks/compat/bfloat16_models.py), which",
        "onnxruntime refuses, are compared with onnxruntime on the float32 export of the same bfloat16 weights, at the float16",
        "tolerance. Produced by:", "",
        "```", "swift build -c release --product osprey",
        "python3 Benchmarks/compat/export_models.py", "python3 Benchmarks/compat/compare.py --write-benchmarks",
        "Benchmarks/out/venv-torch/bin/python Benchmarks/compat/float16_models.py --write-benchmarks",
        "Benchmarks/out/venv-torch/bin/python Benchmarks/compat/bfloat16_models.py --write-benchmarks", "```", "",
        f"{passed} of {len(exported)} exported models pass" +
        (f" ({len(rows) - len(exported)} more could not be exported by their tool)." if len(rows) > len(exported) else "."),
        "", *table, "",
        "Where quantized models may differ from onnxruntime (and why the tolerance above has a spread term):",
        "- onnxruntime's AVX2 u8 x s8 kernels (vpmaddubsw, on CPUs without VNNI) saturate int16 sums of product pairs when",
        "  int8 weights use the full range; Osprey keeps the exact int32 sum. The harness therefore quantizes with",
        "  reduce_range (7-bit weights); Tests/Fixtures/contrib/quantized_matmul_full_range records the difference.",
        "- Requantizing an average (QDQ AveragePool) hits exact rounding ties that float summation order decides;",
        "  onnxruntime's own optimisation levels then differ by up to two steps at the logits.",
        "- QLinearAdd and QLinearMul follow onnxruntime's x86 kernels' float operations step for step (zero points folded",
        "  before rounding), so they match it bit for bit; adding the zero point after rounding goes one step off at every",
        "  tie where it is odd (`Tests/Fixtures/contrib/qlinear_rounding`); one step at a residual add of",
        "  `suite_mobilenetv2_static_qoperator` grows to ten at its logits.",
        "- `minilm_l6_v2_static_qoperator` at batch 3 (padded masks) matches onnxruntime's basic-level graph to 5e-08;",
        "  onnxruntime's extended-level fusions move its own output by 0.0075 on the unpadded row: the spread term above.",
        "- Dynamically quantized models of float inputs: a float32 difference of one unit in the last place ahead of a",
        "  DynamicQuantizeLinear moves an element across a rounding boundary and later layers amplify it; hence the",
        "  perturbation term. wav2vec2 quantized dynamically is left out of the harness: onnxruntime's own output moves by",
        "  0.04 (1% of its range) under a 1e-07 relative perturbation of the audio, and Osprey differed from it by 0.017",
        "  (batch 3) and 0.0007 (batch 1, one requantized attention element one step off).",
        "- MatMulNBits (`minilm_l6_v2_matmul_4bits`): Osprey dequantizes the 4-bit weights once at load and multiplies in",
        "  float32, as onnxruntime's CPU kernel does at accuracy levels 0-1 (the quantizer's default); at level 4",
        "  onnxruntime quantizes the activations to int8 per block instead.",
        "- Its QDQ form (`minilm_l6_v2_matmul_4bits_qdq`: DequantizeLinear(int4, block_size=32) -> MatMul): Osprey folds the",
        "  DequantizeLinear into float32 weights at load; onnxruntime fuses the pair into MatMulNBits at accuracy level 4",
        "  (its `session.qdq_matmulnbits_accuracy_level` default), so its optimized output moves from its unoptimized one,",
        "  which Osprey matches to 2e-07: the spread term above.",
        "- onnxruntime's DynamicQuantizeLSTM quantizes the hidden state per chunk of ceil(batch / threads) rows, so its",
        "  outputs depend on its thread count; Osprey quantizes each sequence on its own, so a row's result does not",
        "  depend on what it is batched with (onnxruntime's at threads >= batch).", ""])
    path = os.path.join(ROOT, "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    pattern = re.compile(r"^## Compatibility\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    open(path, "w").write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--filter", default="")
    parser.add_argument("--write-benchmarks", action="store_true")
    args = parser.parse_args()
    manifest = json.load(open(os.path.join(ZOO, "manifest.json")))
    rows = []
    for name in sorted(manifest):
        if args.filter and args.filter not in name:
            continue
        entry = manifest[name]
        if entry.get("export_error"):
            row = (name, entry["exporter"], entry["opset"], "not exported", "-", "-", "exporter failed: " + entry["export_error"])
            rows.append(row)
            print(" | ".join(str(c) for c in row), flush=True)
            continue
        results = []
        # An exporter may fix the batch axis (dynamo specialises ViT's to 1): then only batch 1 is a valid input.
        first = ort.InferenceSession(os.path.join(ROOT, entry["path"]), providers=["CPUExecutionProvider"]).get_inputs()[0].shape
        # The batch axis is where the manifest writes "N" (axis 1 for time-major recurrent models).
        axis = entry["inputs"][0]["shape"].index("N") if "N" in entry["inputs"][0]["shape"] else 0
        static_batch = len(first) > axis and isinstance(first[axis], int)
        first = [first[axis]] if static_batch else first
        for batch in ((first[0],) if static_batch else (1, 3)):
            rng = np.random.default_rng(batch)
            try:
                results.append(run_model(name, entry, batch, rng))
            except Exception as e:  # onnxruntime itself failing is reported, not fatal
                results.append((False, None, f"harness: {type(e).__name__}: {str(e)[:200]}", None))
        ok = all(r[0] for r in results)
        expected_error = entry.get("expect_error")
        if expected_error and all(not r[0] and expected_error in r[2].lower() for r in results):
            ok = True  # the engine refused it with the advice we want
        status = ("REJECTED as intended" if expected_error else "PASS") if ok else "FAIL"
        diffs = [r[1] for r in results if r[1] is not None]
        note = next((r[2] for r in results if r[2]), "")
        if static_batch:
            note = f"exported with a fixed batch of {first[0]}" + (f"; {note}" if note else "")
        if entry.get("notes"):
            note = f"{entry['notes']}: {note}" if note else entry["notes"]
        scales = [r[3] for r in results if r[3] is not None]
        if scales and max(scales) < 1e-3:
            # Random weights can make some architectures' outputs vanish; then the 1e-5 floor makes the check weak.
            relative = f", diff/ref {max(diffs) / max(scales):.1g}" if diffs and max(scales) > 0 else ""
            note = f"outputs near zero with random weights: absolute check is weak{relative}" + (f"; {note}" if note else "")
        row = (name, entry["exporter"], entry["opset"], status, f"{max(scales):.2g}" if scales else "-",
               f"{max(diffs):.2g}" if diffs else "-", note)
        rows.append(row)
        print(" | ".join(str(c) for c in row), flush=True)
    exported = [r for r in rows if r[3] != "not exported"]
    passed = sum(r[3] != "FAIL" for r in exported)
    if args.write_benchmarks:
        write_benchmarks(rows)
    print(f"{passed}/{len(exported)} pass")
    return 0 if passed == len(exported) else 1


if __name__ == "__main__":
    sys.exit(main())
