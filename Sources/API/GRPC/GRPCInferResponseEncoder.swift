import Protobuf
import Tensor

/// Encodes `inference.ModelInferResponse`: every output's data in `raw_output_contents` (#6), in output order,
/// which is where `tritonclient.grpc`'s `as_numpy` reads it.
public enum GRPCInferResponseEncoder {
    /// The serialized response.
    public static func encode(_ response: V2InferenceResponse) -> [UInt8] {
        let dataBytes = response.outputs.reduce(0) { $0 + V2Codec.binarySize(of: $1.tensor) + 8 }
        var writer = WireWriter(capacity: 256 + dataBytes)
        writer.string(1, response.modelName)
        writer.string(2, response.modelVersion)
        if let id = response.id { writer.string(3, id) }
        for output in response.outputs {
            writer.message(5) { tensor in
                tensor.string(1, output.name)
                tensor.string(2, V2Datatype(output.tensor.dtype).rawValue)
                tensor.packedInt64s(3, output.tensor.shape.map { Int64($0) })
            }
        }
        var raw: [UInt8] = []
        for output in response.outputs {
            raw.removeAll(keepingCapacity: true)
            V2Codec.appendBinary(output.tensor, to: &raw)
            writer.bytesAlways(6, raw)
        }
        return writer.bytes
    }
}
