import HTTP
import Tensor

/// Osprey's handlers for every operation in `Routes.all`, written against `InferenceService`.
public enum OspreyHandlers {
    /// Protocol extensions reported by `GET /v2`.
    public static let extensions = ["binary_tensor_data", "classification", "model_repository", "statistics"]

    /// Bodies at least this large are decoded/encoded through `service.offload`.
    public static let offloadThreshold = 64 * 1024

    /// A handler for each operation, ready for `Routes.makeRouter(handlers:)`.
    public static func make<S: InferenceService>(service: S) -> [OperationID: RouteHandler] {
        var h: [OperationID: RouteHandler] = [:]
        h[.serverMetadata] = { _, _ in
            V2Codec.encodeServerMetadata(name: service.serverName, version: service.serverVersion, extensions: extensions)
        }
        h[.serverLive] = { _, _ in HTTPResponse(status: 200) }
        h[.serverReady] = { _, _ in V2Codec.readiness(await service.isReady()) }
        let metadata: RouteHandler = { _, p in
            let model = try await lookup(service, p)
            return V2Codec.encodeModelMetadata(
                name: model.name, versions: model.versions.map(String.init),
                inputs: model.inputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) },
                outputs: model.outputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) })
        }
        h[.modelMetadata] = metadata
        h[.modelVersionMetadata] = metadata
        let ready: RouteHandler = { _, p in
            let model = try await lookup(service, p)
            return V2Codec.readiness(model.ready, subject: "model '\(model.name)' version \(model.version)")
        }
        h[.modelReady] = ready
        h[.modelVersionReady] = ready
        let infer: RouteHandler = { request, p in
            try rejectContentEncoding(request)
            let model = try await lookup(service, p)
            guard model.ready else { throw APIError.unavailable("model '\(model.name)' version \(model.version) is not ready", retryAfter: 1) }
            let decoded = try await maybeOffload(service, request.body.count) {
                try V2Codec.decodeInferRequest(body: request.body, headers: request.headers)
            }
            let inputs = try V2Codec.bindInputs(decoded, to: model.inputs)
            let wanted = decoded.requestedOutputs.isEmpty ? nil : decoded.requestedOutputs.map(\.name)
            if let wanted {
                for name in wanted where !model.outputs.contains(where: { $0.name == name }) {
                    throw V2CodecError(.invalidField, "unknown output '\(name)', the model's outputs are \(model.outputs.map { "'\($0.name)'" }.joined(separator: ", "))")
                }
            }
            var timeout: Duration?
            if let t = decoded.parameters["timeout"] {
                guard let micros = t.intValue, micros > 0 else {
                    throw V2CodecError(.invalidField, "parameter timeout must be a positive integer (microseconds)")
                }
                timeout = .microseconds(micros)
            }
            let produced = try await service.infer(model, inputs: inputs, outputs: wanted, timeout: timeout)
            let outputs = try V2Codec.makeOutputs(modelOutputs: produced, request: decoded, labels: model.labels)
            let response = V2InferenceResponse(modelName: model.name, modelVersion: String(model.version), id: decoded.id, outputs: outputs)
            let size = outputs.reduce(0) { $0 + V2Codec.binarySize(of: $1.tensor) }
            return try await maybeOffload(service, size) { V2Codec.encodeInferResponse(response) }
        }
        h[.modelInfer] = infer
        h[.modelVersionInfer] = infer
        let classify: RouteHandler = { request, p in
            let model = try await lookup(service, p)
            guard model.ready else { throw APIError.unavailable("model '\(model.name)' version \(model.version) is not ready", retryAfter: 1) }
            let decoded = try await maybeOffload(service, request.body.count) { try ClassifyCodec.decodeRequest(request) }
            let result = try await service.classify(model, images: decoded.images, topK: decoded.topK)
            return V2Codec.encodeClassifyResponse(modelName: model.name, modelVersion: String(model.version), classifications: result)
        }
        h[.modelClassify] = classify
        h[.modelVersionClassify] = classify
        let stats: RouteHandler = { _, p in
            let name = p.model ?? ""
            guard let list = try await service.statistics(model: name, version: p.version) else { throw notFound(name, p.version) }
            return RepositoryCodec.encodeStatistics(list)
        }
        h[.modelStats] = stats
        h[.modelVersionStats] = stats
        h[.repositoryIndex] = { request, _ in
            let readyOnly = try RepositoryCodec.decodeIndexRequest(request.body)
            return RepositoryCodec.encodeIndex(try await service.repositoryIndex(readyOnly: readyOnly))
        }
        h[.repositoryModelLoad] = { _, p in
            try await service.load(model: p.model ?? "")
            return HTTPResponse(status: 200)
        }
        h[.repositoryModelUnload] = { _, p in
            try await service.unload(model: p.model ?? "")
            return HTTPResponse(status: 200)
        }
        h[.repositoryVersionUpload] = { request, p in
            let type = (request.headers["Content-Type"] ?? "application/octet-stream").lowercased()
            guard type.hasPrefix("application/octet-stream") else {
                throw APIError.unsupportedMediaType("upload body must be application/octet-stream (an ONNX file), got '\(type)'")
            }
            guard !request.body.isEmpty else { throw APIError.badRequest("upload body is empty, expected an ONNX model") }
            let digest = try await maybeOffload(service, request.body.count) { () throws -> [UInt8] in
                if let header = request.headers["Digest"] { try DigestHeader.verify(header, body: request.body) }
                return SHA256Hash.hash(request.body)
            }
            let version = p.version ?? 0
            try await service.upload(model: p.model ?? "", version: version, onnx: request.body)
            return RepositoryCodec.encodeUploaded(name: p.model ?? "", version: version, sha256: digest)
        }
        h[.repositorySetDefault] = { request, p in
            let version = try RepositoryCodec.decodeDefaultVersionRequest(request.body)
            let now = try await service.setDefault(model: p.model ?? "", version: version)
            return RepositoryCodec.encodeDefaultVersion(name: p.model ?? "", defaultVersion: now.defaultVersion, pinned: now.pinned)
        }
        h[.repositoryClearDefault] = { _, p in
            let now = try await service.setDefault(model: p.model ?? "", version: nil)
            return RepositoryCodec.encodeDefaultVersion(name: p.model ?? "", defaultVersion: now.defaultVersion, pinned: now.pinned)
        }
        h[.metrics] = { _, _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: await service.metricsText())
        }
        return h
    }

    /// Compressed bodies (tritonclient's request_compression_algorithm) are not decoded: say so instead of "invalid JSON".
    private static func rejectContentEncoding(_ request: HTTPRequest) throws {
        if let encoding = request.headers["Content-Encoding"], encoding.lowercased() != "identity" {
            throw APIError.unsupportedMediaType("Content-Encoding '\(encoding)' is not supported; send the body uncompressed")
        }
    }

    private static func lookup<S: InferenceService>(_ service: S, _ p: PathParameters) async throws -> ServedModel {
        let name = p.model ?? ""
        guard let model = try await service.model(named: name, version: p.version) else { throw notFound(name, p.version) }
        return model
    }

    private static func notFound(_ name: String, _ version: Int?) -> APIError {
        .notFound(version.map { "model '\(name)' has no version \($0)" } ?? "unknown model '\(name)'")
    }

    private static func maybeOffload<S: InferenceService, T: Sendable>(_ service: S, _ size: Int,
                                                                       _ work: @escaping @Sendable () throws -> T) async throws -> T {
        size >= offloadThreshold ? try await service.offload(work) : try work()
    }
}
