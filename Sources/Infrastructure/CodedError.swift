/// A typed failure: a closed set of codes plus a message that names what was wrong (ProtobufError, ONNXError,
/// EngineError, the API codecs' CodecError). Lives here, below every module, so each can name its own kinds.
public struct CodedError<Kind: Sendable>: Error, CustomStringConvertible, Sendable {
    /// The closed set of failure kinds (`EngineError.Code`, `ONNXError.Code`).
    public typealias Code = Kind
    /// The kind of failure.
    public let code: Code
    /// What was wrong, naming the field, tensor, node or input.
    public let message: String

    /// An error of `code` described by `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension CodedError: Equatable where Kind: Equatable {}
