import HTTP
import Serving
import Tensor

extension ServiceContext {
    /// `POST /v2/models/{model}[/versions/{version}]/infer`: JSON or binary-extension request through the version's batcher.
    func infer(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        let served = try registry.resolve(model: p.model ?? "", version: p.version)
        let decoded = try V2Codec.decodeInferRequest(body: request.body, headers: request.headers)
        let feeds = try await modelFeeds(decoded, for: served)
        let requested = decoded.requestedOutputs.map(\.name)
        let results = try await served.infer(feeds, outputs: requested.isEmpty ? nil : requested, timeout: try requestTimeout(decoded))
        let produced = served.outputs.compactMap { spec in results[spec.name].map { (name: spec.name, tensor: $0) } }
        let labels = served.labels.isEmpty ? [:] : Dictionary(uniqueKeysWithValues: served.outputs.map { ($0.name, served.labels) })
        let outputs = try V2Codec.makeOutputs(modelOutputs: produced, request: decoded, labels: labels)
        return V2Codec.encodeInferResponse(V2InferenceResponse(modelName: served.name, modelVersion: String(served.version),
                                                               id: decoded.id, outputs: outputs))
    }

    /// Each decoded input as the tensor the model expects: lossless dtype widening, and for a model with an
    /// image input, a BYTES tensor of encoded PNG/JPEG images preprocessed exactly as `classify` does.
    private func modelFeeds(_ decoded: V2InferenceRequest, for served: ServedVersion) async throws -> [String: Tensor] {
        var feeds: [String: Tensor] = [:]
        for input in decoded.inputs {
            guard let spec = served.inputs.first(where: { $0.name == input.name }) else {
                throw ServingError.invalidInput("unknown input '\(input.name)': model '\(served.name)' expects inputs [\(served.inputs.map(\.name).joined(separator: ", "))]")
            }
            if input.tensor.dtype == .string && spec.dtype != .string {
                guard let plan = try served.imageInputPlan(), plan.input.name == spec.name else {
                    throw ServingError.invalidInput("input '\(spec.name)': expected \(V2Datatype(spec.dtype).rawValue), got BYTES (the model has no image input of that name)")
                }
                feeds[spec.name] = try await served.imageBatch(input.tensor.strings, plan: plan, maxPixels: options.maxImagePixels,
                                                               workers: imageWorkers)
            } else {
                feeds[spec.name] = try V2Codec.convert(input, to: spec.dtype)
            }
        }
        return feeds
    }

    /// The `timeout` request parameter (microseconds, as Triton's), if given.
    private func requestTimeout(_ decoded: V2InferenceRequest) throws -> Duration? {
        guard let value = decoded.parameters["timeout"] else { return nil }
        guard let micros = value.intValue, micros >= 0 else {
            throw APIError.badRequest("parameter 'timeout': expected a non-negative integer (microseconds), got \(value.kindName)")
        }
        return micros == 0 ? nil : .microseconds(micros)
    }
}
