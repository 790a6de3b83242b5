// Fuzz target: KServe V2 infer request decoding (JSONReader, JSON numbers/strings, tensor data, binary extension),
// then what the server does next with a decoded request: dtype conversion, output selection and response encoding.
// Input layout: byte 0 bit 0 set = binary extension, then bytes 1-2 (little endian) are the
// Inference-Header-Content-Length value; the rest is the body.
import API
import HTTP
import Tensor

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzV2Decoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size >= 3 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var headers = HTTPHeaders()
    if input[0] & 1 == 1 {
        // Mostly valid lengths, sometimes text the header parser must refuse.
        let n = Int(input[1]) | Int(input[2]) << 8
        headers.add(V2Codec.inferenceHeaderContentLength, input[0] & 2 == 0 ? String(n) : " \(n)x")
    }
    let body = Array(input[3...])
    guard let request = try? V2Codec.decodeInferRequest(body: body, headers: headers) else { return 0 }
    for v2Input in request.inputs {
        for target in [DType.float32, .int64, .uint8, .float16, v2Input.tensor.dtype] {
            _ = v2Input.tensor.losslesslyConverted(to: target)
        }
    }
    // What the serving call returns: the requested outputs in request order (here the first input's tensor for each).
    let produced = request.requestedOutputs.isEmpty
        ? request.inputs.map { (name: $0.name, tensor: $0.tensor) }
        : request.requestedOutputs.map { (name: $0.name, tensor: request.inputs[0].tensor) }
    if let outputs = try? V2Codec.makeOutputs(produced, request: request, labels: []) {
        let response = V2InferenceResponse(modelName: "m", modelVersion: "1", id: request.id, parameters: request.parameters, outputs: outputs)
        _ = V2Codec.encodeInferResponse(response)
    }
    return 0
}
