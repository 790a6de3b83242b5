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
        for (key, value) in response.parameters { encodeParameter(key, value, into: &writer) }
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

    /// One `parameters` (#4) entry: key #1, value #2 an `InferParameter` (bool #1, int64 #2, string #3, double #4);
    /// a value the oneof cannot hold (a per-row list) travels as its JSON text in `string_param`.
    static func encodeParameter(_ key: String, _ value: JSONValue, into writer: inout WireWriter) {
        writer.message(4) { entry in
            entry.stringAlways(1, key)
            entry.message(2) { parameter in
                switch value {
                case .bool(let flag): parameter.boolAlways(1, flag)
                case .integer(let number): parameter.uint64Always(2, UInt64(bitPattern: number))
                case .double(let number): parameter.doubleAlways(4, number)
                case .string(let text): parameter.stringAlways(3, text)
                default:
                    var json = JSONWriter(capacity: 64)
                    json.value(value)
                    parameter.stringAlways(3, String(decoding: json.bytes, as: UTF8.self))
                }
            }
        }
    }
}
