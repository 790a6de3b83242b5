#!/usr/bin/env python3
"""schemathesis against openapi.yaml on a live `osprey serve` over a scratch repository (a copy of models/digits).

Usage: contract.py OSPREY_BINARY MODELS_DIR [SECONDS]

Checks: not_a_server_error (no 5xx other than documented 503s counts), status_code_conformance (no undocumented
status), content_type_conformance. Exits 1 when schemathesis reports a failure (ST1xx); schemathesis's own internal
errors (its generator crashing on a schema) are printed but do not fail the run.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import hostile  # noqa: E402


def main():
    binary, models = sys.argv[1], sys.argv[2]
    seconds = sys.argv[3] if len(sys.argv) > 3 else "120"
    workdir = tempfile.mkdtemp(prefix="osprey-contract-")
    repository = os.path.join(workdir, "models")
    shutil.copytree(os.path.join(models, "digits"), os.path.join(repository, "digits"))
    spec = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "openapi.yaml"))
    server = hostile.Server(binary, repository)
    try:
        result = subprocess.run(["schemathesis", "run", spec, "--url", f"http://127.0.0.1:{server.port}",
                                 "--checks", "not_a_server_error,status_code_conformance,content_type_conformance",
                                 "--max-time", seconds, "-w", "2", "--seed", "11"],
                                capture_output=True, text=True, cwd=workdir)  # its .schemathesis cache goes there
    finally:
        code = server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    output = result.stdout + result.stderr
    summary = output[output.rfind("SUMMARY"):] if "SUMMARY" in output else output[-3000:]
    print(summary)
    failures = re.findall(r"❌ (ST\d+ [^:]+): (\d+)", summary)
    for name, count in failures:
        print(f"FAILURE {name}: {count}")
    if failures:
        for block in re.findall(r"_{5,} (.+?) _{5,}\n(.*?)(?=\n_{5,}|\n={5,})", output, re.S):
            if "ST1" in block[1]:
                print(f"--- {block[0]}\n{block[1][:1500]}")
    print(f"server exit status {code}")
    return 1 if failures or code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
