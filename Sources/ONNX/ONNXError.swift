import Infrastructure
import Protobuf

/// Why decoding an ONNX model or tensor failed; the message names the field, tensor or node involved.
public typealias ONNXError = CodedError<ONNXErrorCode>

/// The kind of ONNX decoding failure.
public enum ONNXErrorCode: Sendable, Equatable {
    /// The bytes end inside a field (a varint, a fixed value or a length-delimited payload).
    case truncated
    /// The bytes are not valid protobuf, or a field has the wrong wire type or an impossible value.
    case malformed
    /// Valid ONNX that this decoder does not handle (e.g. segmented tensors, complex dtypes).
    case unsupported
    /// A tensor's declared shape and data disagree, or its data is unusable.
    case invalidTensor
    /// An external-data reference is unsafe, missing, or does not match its file.
    case externalData
    /// A file could not be read.
    case io
    /// Subgraphs or nested types go deeper than the decoder allows.
    case tooDeep
}

extension ONNXError {
    /// The same error with `context` (e.g. `node 'conv1' (Conv)`) prepended to its message.
    func within(_ context: String) -> ONNXError {
        ONNXError(code, "\(context): \(message)")
    }
}

/// Runs `body`, prefixing any `ONNXError` it throws with `context` so messages read outside-in.
@inline(__always)
func withContext<T>(_ context: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ONNXError {
        throw error.within(context())
    } catch let error as ProtobufError {
        throw ONNXError(error).within(context())
    }
}

/// Runs `body`, turning a `ProtobufError` from the shared wire reader into the `ONNXError` callers expect.
@inline(__always)
func asONNXError<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ProtobufError {
        throw ONNXError(error)
    }
}

extension ONNXError {
    /// The ONNX error for a wire-level failure (same code, same message).
    init(_ error: ProtobufError) {
        switch error.code {
        case .truncated: self.init(.truncated, error.message)
        case .malformed: self.init(.malformed, error.message)
        }
    }
}
