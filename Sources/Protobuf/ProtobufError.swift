/// Why protobuf bytes could not be read; the message names the field involved.
public struct ProtobufError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kind of failure.
    public enum Code: Sendable, Equatable {
        /// The bytes end inside a field (a varint, a fixed value or a length-delimited payload).
        case truncated
        /// The bytes are not valid protobuf, or a field has the wrong wire type.
        case malformed
    }

    /// The kind of failure.
    public let code: Code
    /// What was wrong, naming the field.
    public let message: String

    /// An error of `code` described by `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
