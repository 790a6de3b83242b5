import HTTP
import Serving
import Tensor

extension ServiceContext {
    /// `POST /v2/models/{model}[/versions/{version}]/infer`: JSON or binary-extension request through the version's batcher.
    func infer(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        let served = try registry.resolve(model: p.model ?? "", version: p.version)
        try rejectContentEncoding(request)
        let limits = options.decodeLimits
        let decoded = try await offloaded(request.body.count) {
            try V2Codec.decodeInferRequest(body: request.body, headers: request.headers, limits: limits)
        }
        let response = try await runInference(decoded, on: served, protocol: .http)
        let outputBytes = response.outputs.reduce(0) { $0 + $1.tensor.byteCount }
        return try await offloaded(outputBytes) { V2Codec.encodeInferResponse(response) }
    }

    /// A decoded request through `served`, for either front end: image inputs, binding, the batcher, output
    /// selection. `deadline` (gRPC's `grpc-timeout`) and the `timeout` parameter bound the queue wait, the earlier wins.
    func runInference(_ decoded: V2InferenceRequest, on served: ServedVersion, deadline: Duration? = nil,
                      protocol proto: InferenceProtocol) async throws -> V2InferenceResponse {
        let feeds = try await modelFeeds(decoded, for: served)
        let requested = decoded.requestedOutputs.map(\.name)
        var timeout = try requestTimeout(decoded)
        if let deadline { timeout = min(timeout ?? deadline, deadline) }
        let results = try await served.infer(feeds, outputs: requested.isEmpty ? nil : requested, timeout: timeout, protocol: proto)
        let produced = served.outputs.compactMap { spec in results[spec.name].map { (name: spec.name, tensor: $0) } }
        let labels = served.labels.isEmpty ? [:] : Dictionary(uniqueKeysWithValues: served.outputs.map { ($0.name, served.labels) })
        let outputs = try V2Codec.makeOutputs(modelOutputs: produced, request: decoded, labels: labels)
        return V2InferenceResponse(modelName: served.name, modelVersion: String(served.version), id: decoded.id, outputs: outputs)
    }

    /// Compressed bodies (tritonclient's `request_compression_algorithm`) are not decoded: 415 naming the encoding,
    /// instead of a misleading "body too short" or "invalid JSON".
    private func rejectContentEncoding(_ request: HTTPRequest) throws {
        if let encoding = request.headers["Content-Encoding"], encoding.lowercased() != "identity" {
            throw APIError.unsupportedMediaType("Content-Encoding '\(encoding)' is not supported: send the body uncompressed")
        }
    }

    /// Each decoded input as the tensor the model expects (`bindInputs`: names, lossless widening, shapes); for a
    /// model with an image input, a BYTES tensor of encoded PNG/JPEG images is first preprocessed exactly as `classify` does.
    private func modelFeeds(_ decoded: V2InferenceRequest, for served: ServedVersion) async throws -> [String: Tensor] {
        var request = decoded
        for (index, input) in decoded.inputs.enumerated() where input.tensor.dtype == .string {
            guard let plan = try served.imageInputPlan(), plan.input.name == input.name else { continue }
            let batch = try await served.imageBatch(input.tensor.strings, plan: plan, maxPixels: options.maxImagePixels,
                                                    maxBytes: options.maxImageBytes, workers: workers)
            request.inputs[index] = V2Input(name: input.name, datatype: V2Datatype(batch.dtype), tensor: batch, parameters: input.parameters)
        }
        let tensors = try V2Codec.bindInputs(request, to: served.inputs)
        return Dictionary(uniqueKeysWithValues: zip(served.inputs.map(\.name), tensors))
    }

    /// The `timeout` request parameter (microseconds, as Triton's), if given.
    private func requestTimeout(_ decoded: V2InferenceRequest) throws -> Duration? {
        guard let value = decoded.parameters["timeout"] else { return nil }
        guard let micros = value.intValue, micros >= 0 else {
            throw APIError.badRequest("parameter 'timeout': expected a non-negative integer (microseconds), got \(value.kindName)")
        }
        return micros == 0 ? nil : .microseconds(micros)
    }

    /// Runs codec work of `size` bytes inline when small, else on a worker thread: parsing megabytes of JSON
    /// would otherwise stall one of the few cooperative threads every other request needs.
    func offloaded<T: Sendable>(_ size: Int, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        size < 64 * 1024 ? try work() : try await workers.run(work)
    }
}
