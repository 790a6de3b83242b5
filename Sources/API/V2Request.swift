import Tensor

/// A decoded KServe V2 inference request, tensors already in their final storage.
public struct V2InferenceRequest: Sendable {
    /// The client's request id, echoed in the response.
    public var id: String?
    /// Request-level parameters (e.g. `binary_data_output`), as sent.
    public var parameters: JSONObject
    /// Inputs in request order.
    public var inputs: [V2Input]
    /// Outputs the client asked for; empty means every model output.
    public var requestedOutputs: [V2RequestedOutput]
    /// The request parameter `binary_data_output`: return outputs as binary unless an output says otherwise.
    public var binaryOutputsByDefault: Bool

    /// A request value (tests and the CLI client build these directly).
    public init(id: String? = nil, parameters: JSONObject = JSONObject(), inputs: [V2Input],
                requestedOutputs: [V2RequestedOutput] = [], binaryOutputsByDefault: Bool = false) {
        self.id = id
        self.parameters = parameters
        self.inputs = inputs
        self.requestedOutputs = requestedOutputs
        self.binaryOutputsByDefault = binaryOutputsByDefault
    }

    /// The input named `name`.
    public func input(named name: String) -> V2Input? { inputs.first { $0.name == name } }
}

/// One request input.
public struct V2Input: Sendable {
    /// Input name.
    public var name: String
    /// The datatype the client declared (the tensor's dtype follows it).
    public var datatype: V2Datatype
    /// The data, shaped as declared.
    public var tensor: Tensor
    /// Input parameters as sent (`binary_data_size` included when used).
    public var parameters: JSONObject

    /// An input value.
    public init(name: String, datatype: V2Datatype, tensor: Tensor, parameters: JSONObject = JSONObject()) {
        self.name = name
        self.datatype = datatype
        self.tensor = tensor
        self.parameters = parameters
    }
}

/// One entry of the request's `outputs` list.
public struct V2RequestedOutput: Sendable, Equatable {
    /// Output name.
    public var name: String
    /// Return this output as binary (its own `binary_data`, else the request's `binary_data_output`).
    public var binary: Bool
    /// Top-k classification requested via the classification extension.
    public var classification: Int?

    /// A requested output value.
    public init(name: String, binary: Bool = false, classification: Int? = nil) {
        self.name = name
        self.binary = binary
        self.classification = classification
    }
}

/// Why a V2 request or response body was rejected (maps to 400; a per-request limit to 413).
public typealias V2CodecError = CodecError<V2CodecFailure>

/// The closed set of V2 codec failures, for tests and status mapping.
public enum V2CodecFailure: CodecErrorKind {
    /// The JSON text itself is malformed.
    case invalidJSON
    /// A required field is absent.
    case missingField
    /// A field has the wrong type or an invalid value.
    case invalidField
    /// Element count or byte size disagrees with the declared shape.
    case shapeMismatch
    /// Datatype unknown or not convertible to what the model expects.
    case datatypeMismatch
    /// Binary extension framing is inconsistent (header length, sizes, leftovers).
    case binaryData
    /// Two inputs (or requested outputs) share a name.
    case duplicateName
    /// A recognised feature Osprey does not implement (e.g. shared memory).
    case unsupported
    /// The request asks for more than a per-request limit allows (maps to 413).
    case limitExceeded

    /// A request over a per-request limit is too large (413); every other codec failure is a bad request.
    public var httpStatus: Int { self == .limitExceeded ? 413 : 400 }
}
