import HTTP
import Serving
import Tensor

extension ServiceContext {
    /// The serving entry point every inference route calls (HTTP JSON and binary here, gRPC beside it).
    var inference: Inference {
        Inference(registry: registry, workers: workers, imageLimits: ImageLimits(maxPixels: options.maxImagePixels, maxBytes: options.maxImageBytes),
                  cache: responseCache)
    }

    /// `POST /v2/models/{model}[/versions/{version}]/infer`: the V2 codec on both sides of one `Inference.infer` call.
    /// The model is resolved before the body is read (an unknown model answers 404 without decoding it); a request
    /// with no version in the path is routed again once its V2 `id` is known (the traffic split hashes it).
    func infer(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        let served = try registry.resolve(model: p.model ?? "", version: p.version)
        try rejectContentEncoding(request)
        let limits = options.decodeLimits
        // Binary tensor bytes are only copied, some 64 times faster than JSON is parsed: a 600 KB image after a short
        // JSON header decodes inline instead of paying two thread hand-offs.
        let jsonBytes = (try? V2Codec.jsonLength(headers: request.headers, bodyCount: request.body.count)) ?? nil ?? request.body.count
        let decoded = try await offloaded(jsonBytes + (request.body.count - jsonBytes) / 64) {
            try V2Codec.decodeInferRequest(body: request.body, headers: request.headers, limits: limits)
        }
        let response = try await runInference(decoded, model: served.name, version: p.version, clientRequestID: request.clientRequestID,
                                              protocol: .http)
        let outputBytes = response.outputs.reduce(0) { $0 + $1.tensor.byteCount }
        var encoded = try await offloaded(outputBytes) { V2Codec.encodeInferResponse(response) }
        if let outcome = response.cache { encoded.headers.set("X-Cache", outcome.rawValue) }
        return encoded
    }

    /// A decoded V2 request through the one serving call, for either front end (HTTP and gRPC share this).
    /// `deadline` (gRPC's `grpc-timeout`) and the `timeout` parameter bound the queue wait; the earlier wins.
    /// `version` nil lets the traffic split choose, keyed by the V2 `id`, else `clientRequestID`.
    func runInference(_ decoded: V2InferenceRequest, model: String, version: Int?, clientRequestID: String?, deadline: Duration? = nil,
                      protocol proto: InferenceProtocol) async throws -> V2InferenceResponse {
        var timeout = try requestTimeout(decoded)
        if let deadline { timeout = min(timeout ?? deadline, deadline) }
        let inputs = Dictionary(decoded.inputs.map { ($0.name, $0.tensor) }, uniquingKeysWith: { first, _ in first })
        let call = InferenceRequest(model: model, version: version, id: decoded.id, inputs: inputs,
                                    outputs: decoded.requestedOutputs.map(\.name),
                                    parameters: InferenceParameters(timeout: timeout, protocol: proto),
                                    routingKey: routingKey(id: decoded.id, clientRequestID: clientRequestID))
        let result = try await inference.infer(call)
        let outputs = try V2Codec.makeOutputs(result.outputs.map { ($0.name, $0.tensor) }, request: decoded, labels: result.labels)
        var response = V2InferenceResponse(modelName: result.model, modelVersion: String(result.version), id: result.id,
                                           parameters: V2Codec.cascadeParameters(result.cascade), outputs: outputs)
        response.cache = result.cache
        return response
    }

    /// Compressed bodies (tritonclient's `request_compression_algorithm`) are not decoded: 415 naming the encoding,
    /// instead of a misleading "body too short" or "invalid JSON".
    private func rejectContentEncoding(_ request: HTTPRequest) throws {
        if let encoding = request.headers["Content-Encoding"], encoding.lowercased() != "identity" {
            throw APIError.unsupportedMediaType("Content-Encoding '\(encoding)' is not supported: send the body uncompressed")
        }
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
