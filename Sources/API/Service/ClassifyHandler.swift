import HTTP
import Serving
import Tensor

extension ServiceContext {
    /// `POST /v2/models/{model}[/versions/{version}]/classify`: one image body or multipart images, top-k labels each.
    /// Without a version in the path the traffic split chooses, keyed by a client-sent `X-Request-ID`.
    func classify(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        let served = try registry.route(model: p.model ?? "", version: p.version, routingKey: request.clientRequestID)
        let decoded = try ClassifyCodec.decodeRequest(request, defaultTopK: options.defaultTopK)
        let result: InferenceResponse
        do {
            result = try await inference.classify(decoded.images.map { Array($0.bytes) }, on: served)
        } catch let error as ImageInputError {
            // Name the multipart field (or "body") rather than a bare index.
            throw APIError(status: error.httpStatus, "image '\(decoded.images[error.index].source)': \(error.reason)")
        }
        let ranked = try V2Codec.topK(result.outputs[0].tensor, k: decoded.topK, labels: result.labels.isEmpty ? nil : result.labels)
        var response = V2Codec.encodeClassifyResponse(modelName: served.name, modelVersion: String(served.version), classifications: ranked,
                                                      parameters: V2Codec.cascadeParameters(result.cascade))
        if let outcome = result.cache { response.headers.set("X-Cache", outcome.rawValue) }
        return response
    }
}
