#!/usr/bin/env python3
"""Writes the node test cases of a newer onnx release (pip `onnx`, whose wheel carries the case definitions but not
their data) that Debian's libonnx-testdata (onnx 1.12, opset 17) lacks, as backend test data the conformance harness
reads: <out>/<case>/model.onnx and test_data_set_N/{input,output}_K.pb.

    python3 Tests/Fixtures/onnx/make_newer_node_tests.py OUT_DIR [CASES_FILE]

CASES_FILE (default newer-node-cases.txt beside this script) lists case-name prefixes, one per line: the operators and
dtypes the engine supports in opsets 18-25; a line "-TEXT" leaves out every case whose name contains TEXT. `.ci/onnx-newer-tests` runs this before `swift test`.
"""
import os
import shutil
import sys
import warnings

import onnx.backend.test.case.node as node_cases
from onnx import TensorProto, numpy_helper


def dump(values, infos, directory, prefix):
    for j, value in enumerate(values):
        kind = infos[j].type
        if kind.HasField("sequence_type"):
            proto = numpy_helper.from_list(value, infos[j].name)
        elif kind.HasField("optional_type"):
            proto = numpy_helper.from_optional(value, infos[j].name)
        elif kind.HasField("map_type"):
            proto = numpy_helper.from_dict(value, infos[j].name)
        elif isinstance(value, TensorProto):
            proto = value
        else:
            proto = numpy_helper.from_array(value, infos[j].name)
        with open(os.path.join(directory, f"{prefix}_{j}.pb"), "wb") as f:
            f.write(proto.SerializeToString())


def main():
    warnings.filterwarnings("ignore")  # the case definitions divide by zero on purpose (inf and nan cases)
    out = sys.argv[1]
    listing = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "newer-node-cases.txt")
    with open(listing) as f:
        lines = [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]
    prefixes = [line for line in lines if not line.startswith("-")]
    excluded = [line[1:] for line in lines if line.startswith("-")]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    written = 0
    for case in node_cases.collect_testcases(None):
        if not any(case.name.startswith(p) for p in prefixes) or any(text in case.name for text in excluded):
            continue
        directory = os.path.join(out, case.name)
        os.makedirs(directory)
        with open(os.path.join(directory, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data = os.path.join(directory, f"test_data_set_{i}")
            os.makedirs(data)
            dump(inputs, case.model.graph.input, data, "input")
            dump(outputs, case.model.graph.output, data, "output")
        written += 1
    print(f"{written} newer onnx node cases in {out}")


if __name__ == "__main__":
    main()
