#!/usr/bin/env python3
"""Makes float16 versions of harness models and compares `osprey predict` with onnxruntime on them.

    swift build -c release --product osprey
    python3 Benchmarks/compat/export_models.py --only torch,minilm     # the float32 sources, once
    Benchmarks/out/venv-torch/bin/python Benchmarks/compat/float16_models.py [--write-benchmarks] [--filter SUBSTRING]

Each source in Benchmarks/out/zoo is converted by onnxconverter_common's convert_float_to_float16 twice:
`<source>_fp16` (keep_io_types=False: float16 inputs and outputs) and `<source>_fp16_io32` (keep_io_types=True: float32
inputs and outputs around a float16 body), written to Benchmarks/out/zoo-fp16. Both engines get the same random input
at batch 1 and 3. Float16 cannot meet the float32 tolerance of compare.py: a model passes when
max|osprey - ort| <= 1e-2 * max|ort| + 1e-5 on every output and, for classifiers, every row's top-1 class agrees.
The notes give both engines' distance from the float32 source (onnxruntime on it), the error float16 itself brings.
With --write-benchmarks the rows go into the `## Compatibility` table of BENCHMARKS.md through compare.py.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (make_input, sanitized, write_benchmarks, paths)

ROOT, ZOO, OSPREY = compare.ROOT, compare.ZOO, compare.OSPREY
OUT = os.path.join(ROOT, "Benchmarks", "out", "zoo-fp16")
IMAGE = [{"name": "input", "shape": ["N", 3, 224, 224], "dtype": "float32"}]
TEXT = [{"name": "input_ids", "shape": ["N", 16], "dtype": "int64", "sample": "tokens"},
        {"name": "attention_mask", "shape": ["N", 16], "dtype": "int64", "sample": "mask"},
        {"name": "token_type_ids", "shape": ["N", 16], "dtype": "int64", "sample": "zeros"}]
# Source model in Benchmarks/out/zoo: (input specs as export_models.py records them, is a classifier, opset).
SOURCES = {
    "tv_mobilenet_v2_op13": (IMAGE, True, 13),
    "tv_resnet18_op17": (IMAGE, True, 17),
    "tv_efficientnet_b0_op17": (IMAGE, True, 17),
    "minilm_l6_v2_op17": (TEXT, False, 17),
    "minilm_l6_v2_transformer_optimized": (TEXT, False, 17),
}
RELATIVE = 1e-2


def convert(source, keep_io_types):
    """Writes the float16 version of `source` and returns its path (reused when newer than the source)."""
    import onnx
    from onnxconverter_common import float16
    src = os.path.join(ZOO, source + ".onnx")
    path = os.path.join(OUT, f"{source}_fp16{'_io32' if keep_io_types else ''}.onnx")
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(src):
        os.makedirs(OUT, exist_ok=True)
        model = float16.convert_float_to_float16(onnx.load(src), keep_io_types=keep_io_types)
        # The converter retypes the value_info of Cast(int64 -> float) outputs (MiniLM's mask.to(hidden.dtype)) to
        # float16 but leaves `to` at float, which onnxruntime rejects; float16 exports cast to float16 there.
        half = {v.name for v in model.graph.value_info if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
        for node in model.graph.node:
            if node.op_type == "Cast" and node.output[0] in half:
                for attribute in node.attribute:
                    if attribute.name == "to" and attribute.i == onnx.TensorProto.FLOAT:
                        attribute.i = onnx.TensorProto.FLOAT16
        onnx.save(model, path)
    return path


def session(path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def osprey(path, feeds, names):
    """Outputs of `osprey predict` at one thread, or raises with its last error line."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [OSPREY, "predict", path, "--output-dir", tmp, "--threads", "1"]
        for key, value in feeds.items():
            file = os.path.join(tmp, "in_" + compare.sanitized(key))
            np.save(file, value)
            args += ["--input", f"{key}={file}"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError((proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1])
        return {n: np.load(os.path.join(tmp, compare.sanitized(n)), allow_pickle=False) for n in names}


def run(source, keep_io_types):
    """One table row for the float16 version of `source`."""
    specs, classifier, opset = SOURCES[source]
    path = convert(source, keep_io_types)
    name = os.path.basename(path)[:-5]
    exporter = f"onnxconverter_common float16 (keep_io_types={keep_io_types}) of {source}"
    half, full = session(path), session(os.path.join(ZOO, source + ".onnx"))
    names = [o.name for o in half.get_outputs()]
    types = {i.name: i.type for i in half.get_inputs()}
    ok, worst, scale, drift, own, notes, agree, rows = True, 0.0, 0.0, 0.0, 0.0, [], 0, 0
    for batch in (1, 3):
        rng = np.random.default_rng(batch)
        feeds32 = {s["name"]: compare.make_input(s, batch, rng) for s in specs}
        feeds = {k: v.astype(np.float16) if types[k] == "tensor(float16)" else v for k, v in feeds32.items()}
        expected = dict(zip(names, half.run(None, feeds)))
        source_out = dict(zip(names, full.run(None, feeds32)))
        try:
            actual = osprey(path, feeds, names)
        except Exception as e:  # the engine refusing the model is the row's result
            return (name, exporter, opset, "FAIL", "-", "-", str(e)[:200])
        for out in names:
            a, e = actual[out], expected[out]
            if a.shape != e.shape or a.dtype != e.dtype:
                ok = False
                notes.append(f"{out}: {a.dtype}{list(a.shape)} vs ort {e.dtype}{list(e.shape)}")
                continue
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
            diff, ref = float(np.max(np.abs(a64 - e64))), float(np.max(np.abs(e64)))
            worst, scale = max(worst, diff), max(scale, ref)
            drift = max(drift, float(np.max(np.abs(e64 - source_out[out].astype(np.float64)))))
            own = max(own, float(np.max(np.abs(a64 - source_out[out].astype(np.float64)))))
            if diff > RELATIVE * ref + 1e-5:
                ok = False
                notes.append(f"{out}: max diff {diff:.3g} > tol {RELATIVE * ref + 1e-5:.3g}")
            if classifier:
                same = np.argmax(a64, axis=-1) == np.argmax(e64, axis=-1)
                agree, rows = agree + int(np.sum(same)), rows + same.size
    if classifier and agree != rows:
        ok = False
    check = f"float16 tolerance {RELATIVE:g}*max/ort/+1e-5" + (f", top-1 agrees on {agree}/{rows} rows" if classifier else "")
    notes = [check, f"float16 vs the float32 source: ort {drift:.2g}, osprey {own:.2g}"] + notes
    return (name, exporter, opset, "PASS" if ok else "FAIL", f"{scale:.2g}", f"{worst:.2g}", "; ".join(notes))


def main():
    try:
        import onnxconverter_common  # noqa: F401
    except ImportError:
        venv = os.path.join(ROOT, "Benchmarks", "out", "venv-torch", "bin", "python")
        if os.path.exists(venv) and os.path.realpath(sys.executable) != os.path.realpath(venv):
            os.execv(venv, [venv] + sys.argv)
        sys.exit("onnxconverter_common is missing: pip install onnxconverter-common into Benchmarks/out/venv-torch")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--filter", default="")
    parser.add_argument("--write-benchmarks", action="store_true")
    args = parser.parse_args()
    jobs = [(f"{source}_fp16{'_io32' if keep else ''}", lambda source=source, keep=keep: run(source, keep))
            for source in SOURCES for keep in (False, True)]
    return run_rows(jobs, args.filter, args.write_benchmarks)


def run_rows(jobs, name_filter, write_benchmarks):
    """Runs each (name, make_row) job whose name holds `name_filter`, printing its row; writes them into BENCHMARKS.md
    when asked; returns the exit status (0 when every row passed)."""
    rows = []
    for name, make_row in jobs:
        if name_filter and name_filter not in name:
            continue
        rows.append(make_row())
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
    passed = sum(r[3] == "PASS" for r in rows)
    print(f"{passed}/{len(rows)} pass")
    if write_benchmarks:
        compare.write_benchmarks(rows)
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
