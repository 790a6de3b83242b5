import Infrastructure

/// Why protobuf bytes could not be read; the message names the field involved.
public typealias ProtobufError = CodedError<ProtobufErrorCode>

/// The kind of protobuf failure.
public enum ProtobufErrorCode: Sendable, Equatable {
    /// The bytes end inside a field (a varint, a fixed value or a length-delimited payload).
    case truncated
    /// The bytes are not valid protobuf, or a field has the wrong wire type.
    case malformed
}
