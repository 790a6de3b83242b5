import Infrastructure

/// A failure to compile or run a model; the message names the node, op, attribute, dtype or input and says expected vs got.
public typealias EngineError = CodedError<EngineErrorCode>

/// What kind of engine failure this is (stable for callers that map errors, e.g. to HTTP statuses).
public enum EngineErrorCode: String, Sendable {
    /// The model uses an operator (or operator domain) the engine does not implement.
    case unsupportedOperator
    /// An attribute value or combination the engine does not implement.
    case unsupportedAttribute
    /// A dtype the operator does not handle here.
    case unsupportedDType
    /// The model itself is malformed (cycles, dangling names, bad attributes).
    case invalidModel
    /// A required feed was not given.
    case missingInput
    /// A feed names no model input.
    case unknownInput
    /// A feed (or output request) does not match what the model declares.
    case invalidInput
    /// A requested output does not exist.
    case unknownOutput
    /// A value met an operator that cannot process it (shape mismatch at run time).
    case executionFailed
    /// Reading a model file failed.
    case io
}
