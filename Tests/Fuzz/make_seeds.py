#!/usr/bin/env python3
"""Writes the seed corpora for every fuzz target into Tests/Fuzz/out/seeds/TARGET from the repo's own fixtures,
models/digits, the ONNX node-test models (Debian libonnx-testdata, when installed) and small valid requests.
Usage: Tests/Fuzz/make_seeds.py   (run from anywhere; output is gitignored)"""
import glob, hashlib, json, os, struct

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "Tests", "Fuzz", "out", "seeds")


def write(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


# HTTP: request shapes the server must handle, including pipelining, chunking and the framing errors it must refuse.
http = [
    b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v2/models/digits?x=1&top_k=%205 HTTP/1.1\r\nHost: x\r\nX-Request-ID: abc-123\r\n\r\n",
    b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"inputs\":[]}",
    b"POST /v2/models/m/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: v\r\n\r\n",
    b"POST /upload HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\nabcd",
    b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\nGET /c HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
    b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    b"DELETE /v2/repository/models/m/unload HTTP/1.1\r\nHost: x\r\nFolded: a\r\n b\r\n\r\n",
    b"GET http://host:8000/v2?q HTTP/1.1\r\n\r\n",
]
for r in http:
    write("http", r)  # the harness splits at an offset derived from byte 0

# V2 infer requests (JSON and binary extension). Byte 0: bit 0 = send Inference-Header-Content-Length (bytes 1-2 LE).
def v2(body, json_len=None):
    if json_len is None:
        return b"\x00\x00\x00" + body
    return bytes([1]) + struct.pack("<H", json_len) + body

jsons = [
    {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1.0, -2.5, 3e-7, 1e38]}]},
    {"id": "r1", "parameters": {"binary_data_output": True, "a": [1, {"b": None}]},
     "inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT64", "data": [[1, 2], [3, -9223372036854775808]]}],
     "outputs": [{"name": "x", "parameters": {"classification": 2}}]},
    {"inputs": [{"name": "s", "shape": [2], "datatype": "BYTES", "data": ["héllo", "\\u00e9\\ud83d\\ude00"]},
                {"name": "b", "shape": [3], "datatype": "BOOL", "data": [True, False, True]},
                {"name": "h", "shape": [1], "datatype": "FP16", "data": [65504]},
                {"name": "u", "shape": [2], "datatype": "UINT8", "data": [0, 255]},
                {"name": "d", "shape": [1], "datatype": "FP64", "data": [2.2250738585072014e-308]}],
     "outputs": [{"name": "s", "parameters": {"binary_data": True}}, {"name": "b"}]},
    {"inputs": [{"name": "x", "shape": [0, 3], "datatype": "INT8", "data": []}]},
    {"inputs": [{"name": "x", "shape": [3], "datatype": "UINT64", "data": [18446744073709551615, 0, 7]},
                {"name": "y", "shape": [1], "datatype": "INT32", "data": [-2147483648]},
                {"name": "z", "shape": [1], "datatype": "BF16", "data": [1.5]}]},
]
for j in jsons:
    write("v2", v2(json.dumps(j).encode()))
header = json.dumps({"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
                                {"name": "s", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 7}}],
                     "outputs": [{"name": "x", "parameters": {"binary_data": True}}]}).encode()
binary = struct.pack("<2f", 1.0, -1.0) + struct.pack("<I", 3) + b"abc"
write("v2", v2(header + binary, len(header)))
header2 = json.dumps({"inputs": [{"name": "x", "shape": [4], "datatype": "INT16", "parameters": {"binary_data_size": 8}}]}).encode()
write("v2", v2(header2 + b"\x01\x00\xff\xff\x00\x80\x10\x00", len(header2)))

# gRPC ModelInferRequest: the bytes Python's protobuf wrote for Tests/APITests/GRPCMessageTests (typed contents with
# parameters and a classification output; raw_input_contents).
for hexed in ["0a016d1201321a03726571220a0a04666c616712020801220e0a0774696d656f7574120310e8072a1d0a01611205494e5433321a01022a0e12"
              "0cffffffffffffffffff01ac022a190a01621204465033321a0201022a0a32080000c03f000000c02a150a0163120542595445531a01022a0642"
              "0278794200321b0a036f757412140a0e636c617373696669636174696f6e12021002",
              "0a016d2a0d0a01781205494e5436341a01033a180100000000000000feffffffffffffff0300000000000000"]:
    write("grpc", bytes.fromhex(hexed))

# Multipart and classify: the forms clients send (curl -F, requests, browsers).
png = read("models/digits/examples/digit_0.png")
jpg = read("models/digits/examples/digit_1.jpg")
def form(boundary, parts, preamble=b"", epilogue=b""):
    body = preamble
    for headers, data in parts:
        body += b"--" + boundary + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + data + b"\r\n"
    return body + b"--" + boundary + b"--\r\n" + epilogue

forms = [
    (b"XyZ", [([b'Content-Disposition: form-data; name="image"; filename="d.png"', b"Content-Type: image/png"], png),
              ([b'Content-Disposition: form-data; name="top_k"'], b"3")]),
    (b"----WebKitFormBoundary7MA4YWxkTrZu0gW", [([b'Content-Disposition: form-data; name="a"; filename="a.jpg"'], jpg),
                                               ([b'content-disposition: form-data; name="b"; filename*=UTF-8\'\'%C3%A9.jpg', b"Content-Type: image/jpg"], jpg)]),
    (b"b", [([b"Content-Disposition: form-data; name=\"q\\\"x\""], b"text")]),
]
for boundary, parts in forms:
    ct = b'multipart/form-data; boundary="' + boundary + b'"' if boundary == b"b" else b"multipart/form-data; boundary=" + boundary
    body = form(boundary, parts, preamble=b"preamble\r\n", epilogue=b"epilogue")
    write("multipart", ct + b"\n" + body)
    write("classify", b"top_k=2\n" + ct + b"\n" + body)
for ct, data in [(b"image/png", png), (b"image/jpeg", jpg), (b"", png), (b"application/octet-stream; x=1", jpg)]:
    write("classify", b"top_k=1&x\n" + ct + b"\n" + data)

# ONNX decoder and engine: every committed model, the digits model and the ONNX node tests (small ones).
models = sorted(glob.glob(os.path.join(ROOT, "Tests/Fixtures/**/*.onnx"), recursive=True)) + [os.path.join(ROOT, "models/digits/1/model.onnx")]
node_tests = sorted(glob.glob("/usr/share/libonnx-testdata/data/node/*/model.onnx"))
for path in models + node_tests:
    data = open(path, "rb").read()
    if len(data) <= 64 * 1024:
        write("onnx", data)
    if len(data) <= 16 * 1024:
        write("engine", data)

# Images: every fixture image with a few preprocessing selectors (byte 0).
for path in sorted(glob.glob(os.path.join(ROOT, "Tests/Fixtures/images/*"))) + sorted(glob.glob(os.path.join(ROOT, "models/digits/examples/*"))):
    if path.endswith((".png", ".jpg", ".gif", ".txt")):
        data = open(path, "rb").read()
        if len(data) <= 64 * 1024:
            for selector in (0x00, 0x5B, 0xA4):
                write("imaging", bytes([selector]) + data)

for t in sorted(os.listdir(OUT)):
    print(f"{t}: {len(os.listdir(os.path.join(OUT, t)))} seeds")
