import Infrastructure
import ONNX

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

/// Producer and metadata of a compiled model, for `inspect` and the V2 metadata endpoint.
public struct ModelInfo: Sendable {
    /// `producer_name`.
    public var producerName: String
    /// `producer_version`.
    public var producerVersion: String
    /// `ir_version`.
    public var irVersion: Int64
    /// Opset imports by domain (`""` is `ai.onnx`).
    public var opsets: [String: Int64]
    /// `metadata_props`, in file order.
    public var metadataProps: [(key: String, value: String)]
    /// `doc_string`.
    public var docString: String
    /// `model_version`.
    public var modelVersion: Int64
    /// `domain`.
    public var domain: String
    /// Graph name.
    public var graphName: String

    /// An info value.
    public init(producerName: String = "", producerVersion: String = "", irVersion: Int64 = 0, opsets: [String: Int64] = [:],
                metadataProps: [(key: String, value: String)] = [], docString: String = "", modelVersion: Int64 = 0,
                domain: String = "", graphName: String = "") {
        self.producerName = producerName
        self.producerVersion = producerVersion
        self.irVersion = irVersion
        self.opsets = opsets
        self.metadataProps = metadataProps
        self.docString = docString
        self.modelVersion = modelVersion
        self.domain = domain
        self.graphName = graphName
    }
}
