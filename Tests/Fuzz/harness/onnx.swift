// Fuzz target: ONNX protobuf decoding (`Model(serialized:)`): wire format, tensors, attributes, sparse tensors,
// functions and their inlining. External data is refused without a directory, so no file is touched.
import ONNX

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzONNXDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let model = try? Model(serialized: bytes) {
        _ = model.graph.nodes.count + model.graph.initializers.count
    }
    return 0
}
