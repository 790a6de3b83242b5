import HTTP
import Tensor

/// An input or output as model metadata describes it (`-1` for dynamic dimensions).
public struct V2TensorMetadata: Sendable, Equatable {
    /// Tensor name.
    public var name: String
    /// V2 datatype.
    public var datatype: V2Datatype
    /// Shape with -1 for dynamic dimensions.
    public var shape: [Int]

    /// A metadata value.
    public init(name: String, datatype: V2Datatype, shape: [Int]) {
        self.name = name
        self.datatype = datatype
        self.shape = shape
    }

    /// From a model's declared dtype and dimensions (symbolic dimensions become -1).
    public init(name: String, dtype: DType, dimensions: [Dimension]) {
        self.init(name: name, datatype: V2Datatype(dtype), shape: dimensions.map(\.sizeOrMinusOne))
    }
}

extension V2Codec {
    /// `{"name","version","extensions":[...]}` for `GET /v2`.
    public static func encodeServerMetadata(name: String, version: String, extensions: [String]) -> HTTPResponse {
        .json(.object([
            "name": .string(name),
            "version": .string(version),
            "extensions": .array(extensions.map { .string($0) }),
        ]))
    }

    /// `{"name","versions","platform","inputs","outputs"}` for `GET /v2/models/{model}[/versions/{v}]`.
    public static func encodeModelMetadata(name: String, versions: [String], platform: String = "onnx",
                                           inputs: [V2TensorMetadata], outputs: [V2TensorMetadata]) -> HTTPResponse {
        func tensors(_ list: [V2TensorMetadata]) -> JSONValue {
            .array(list.map { t in
                .object(["name": .string(t.name), "datatype": .string(t.datatype.rawValue),
                         "shape": .array(t.shape.map { .integer(Int64($0)) })])
            })
        }
        return .json(.object([
            "name": .string(name),
            "versions": .array(versions.map { .string($0) }),
            "platform": .string(platform),
            "inputs": tensors(inputs),
            "outputs": tensors(outputs),
        ]))
    }

    /// Readiness as the V2 HTTP protocol reports it: 200 with an empty body when ready, else 503
    /// with `{"error": "<subject> is not ready"}`.
    public static func readiness(_ ready: Bool, subject: String = "server") -> HTTPResponse {
        ready ? HTTPResponse(status: 200) : .jsonError(503, "\(subject) is not ready")
    }
}
