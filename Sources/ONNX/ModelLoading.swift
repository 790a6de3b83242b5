import Glibc
import Tensor

/// Decoding notes: tensors are dense and little-endian; float16/bfloat16 keep their dtype and 16-bit patterns
/// (the engine decides how to widen them); sparse initializers are densified; model-local functions are inlined;
/// external data is read at decode time. Every failure is an `ONNXError` naming the tensor, node or field.
extension Model {
    /// Decodes a serialized `ModelProto`; external-data locations resolve against `externalDataDirectory`.
    public init(serialized bytes: [UInt8], externalDataDirectory: String? = nil) throws {
        self = try bytes.withUnsafeBytes { try Model(serializedBuffer: $0, externalDataDirectory: externalDataDirectory) }
    }

    /// Decodes a serialized `ModelProto` from memory the caller keeps alive for the call (no copy of the input).
    public init(serializedBuffer bytes: UnsafeRawBufferPointer, externalDataDirectory: String? = nil) throws {
        let decoder = ProtoDecoder(tensors: TensorDecoder(externalDataDirectory: externalDataDirectory))
        self = try asONNXError { try decoder.decodeModel(bytes) }
    }

    /// Reads and decodes the `.onnx` file at `path`; external data is looked up beside it.
    public init(contentsOf path: String) throws {
        let file = try PageBuffer(readingFile: path)
        let decoder = ProtoDecoder(tensors: TensorDecoder(externalDataDirectory: directoryOf(path), consumed: { file.release($0) }))
        self = try withContext("model '\(path)'") { try asONNXError { try decoder.decodeModel(file.bytes) } }
        withExtendedLifetime(file) {}
    }
}

/// Decodes a serialized `TensorProto` (e.g. an ONNX test-data `.pb` file) into its name and a dense tensor.
public func decodeTensorProto(_ bytes: [UInt8], externalDataDirectory: String? = nil) throws -> (name: String, tensor: Tensor) {
    try asONNXError { try bytes.withUnsafeBytes { try TensorDecoder(externalDataDirectory: externalDataDirectory).decodeTensor($0) } }
}

/// The directory part of `path` (`.` when it has none).
func directoryOf(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// The whole contents of a regular file.
public func readWholeFile(_ path: String) throws -> [UInt8] {
    let file = try PageBuffer(readingFile: path)
    return withExtendedLifetime(file) { [UInt8](file.bytes) }
}
