// Fuzz target: gRPC ModelInferRequest decoding (protobuf wire reader, typed contents, raw_input_contents, parameters),
// then the response encoding the server does next with the decoded inputs as outputs.
import API
import Tensor

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGRPCDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let decoded = try? GRPCInferRequestDecoder.decode(input, limits: V2DecodeLimits(maxBytesElements: 4096, maxDecodedBytes: 1 << 20)) else {
        return 0
    }
    let produced = decoded.request.inputs.map { (name: $0.name, tensor: $0.tensor) }
    if let outputs = try? V2Codec.makeOutputs(modelOutputs: produced, request: decoded.request, labels: [:]) {
        let response = V2InferenceResponse(modelName: decoded.modelName, modelVersion: "1", id: decoded.request.id, outputs: outputs)
        _ = GRPCInferResponseEncoder.encode(response)
    }
    return 0
}
