import HTTP
import Serving
import Tensor

extension OspreyService {
    /// The responder for the gRPC port: `inference.GRPCInferenceService` and `grpc.health.v1.Health`.
    public var grpcResponder: GRPCResponder {
        let context = self.context
        return { request in await context.grpc(request) }
    }
}

/// Full method paths this service implements.
enum GRPCMethod: String {
    case serverLive = "/inference.GRPCInferenceService/ServerLive"
    case serverReady = "/inference.GRPCInferenceService/ServerReady"
    case modelReady = "/inference.GRPCInferenceService/ModelReady"
    case serverMetadata = "/inference.GRPCInferenceService/ServerMetadata"
    case modelMetadata = "/inference.GRPCInferenceService/ModelMetadata"
    case modelInfer = "/inference.GRPCInferenceService/ModelInfer"
    case modelConfig = "/inference.GRPCInferenceService/ModelConfig"
    case modelStatistics = "/inference.GRPCInferenceService/ModelStatistics"
    case repositoryIndex = "/inference.GRPCInferenceService/RepositoryIndex"
    case repositoryModelLoad = "/inference.GRPCInferenceService/RepositoryModelLoad"
    case repositoryModelUnload = "/inference.GRPCInferenceService/RepositoryModelUnload"
    case healthCheck = "/grpc.health.v1.Health/Check"
    case healthWatch = "/grpc.health.v1.Health/Watch"
}

extension ServiceContext {
    /// One unary call: decode the request message, run the same serving calls as the HTTP routes, encode the answer.
    func grpc(_ call: GRPCRequest) async -> GRPCResponse {
        guard let method = GRPCMethod(rawValue: call.path) else {
            return .error(GRPCStatus(.unimplemented, "method '\(call.path)' is not implemented"))
        }
        do {
            if method == .healthWatch { return try healthWatch(call) }
            return .ok(try await answer(method, call))
        } catch {
            return .error(GRPCErrorMapping.status(for: error))
        }
    }

    private func answer(_ method: GRPCMethod, _ call: GRPCRequest) async throws -> [UInt8] {
        switch method {
        case .serverLive:
            return GRPCMessages.encodeBool(true)
        case .serverReady:
            return GRPCMessages.encodeBool(isReady)
        case .modelReady:
            let (name, version) = try GRPCMessages.decodeNameVersion(call.message)
            let ready = (try? registry.resolve(model: name, version: try Self.grpcVersion(version))) != nil
            return GRPCMessages.encodeBool(ready)
        case .serverMetadata:
            return GRPCMessages.encodeServerMetadata(name: options.serverName, version: options.serverVersion, extensions: protocolExtensions)
        case .modelMetadata:
            let (name, version) = try GRPCMessages.decodeNameVersion(call.message)
            let served = try registry.resolve(model: name, version: try Self.grpcVersion(version))
            let versions = registry.index().filter { $0.name == name && $0.state == .ready }.compactMap(\.version).sorted().map(String.init)
            return GRPCMessages.encodeModelMetadata(
                name: name, versions: versions.isEmpty ? [String(served.version)] : versions, platform: "onnx",
                inputs: served.inputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) },
                outputs: served.outputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) })
        case .modelInfer:
            return try await grpcInfer(call)
        case .modelConfig:
            let (name, version) = try GRPCMessages.decodeNameVersion(call.message)
            return GRPCModelConfigEncoder.encode(try registry.resolve(model: name, version: try Self.grpcVersion(version)))
        case .modelStatistics:
            let (name, version) = try GRPCMessages.decodeNameVersion(call.message)
            let stats = name.isEmpty
                ? try Set(registry.index().map(\.name)).sorted().flatMap { try registry.statistics(model: $0) }
                : try registry.statistics(model: name, version: try Self.grpcVersion(version))
            return GRPCMessages.encodeStatistics(stats)
        case .repositoryIndex:
            try authorizeAdmin(grpcCall: call)
            let (_, onlyReady) = try GRPCMessages.decodeIndexRequest(call.message)
            return GRPCMessages.encodeIndex(registry.index().filter { !onlyReady || $0.state == .ready })
        case .repositoryModelLoad:
            try authorizeAdmin(grpcCall: call)
            let load = try GRPCMessages.decodeLoadRequest(call.message)
            if let file = load.parameterNames.first(where: { $0.hasPrefix("file:") }) {
                throw GRPCStatus(.invalidArgument, "parameter '\(file)': file overrides are not supported; upload over HTTP with PUT /v2/repository/models/{model}/versions/{version}")
            }
            try await registry.load(model: load.model, config: load.config)
            return []
        case .repositoryModelUnload:
            try authorizeAdmin(grpcCall: call)
            try await registry.unload(model: try GRPCMessages.decodeLoadRequest(call.message).model)
            return []
        case .healthCheck, .healthWatch:
            let service = try GRPCMessages.decodeHealthRequest(call.message)
            guard let status = health(of: service) else {
                throw GRPCStatus(.notFound, "unknown service '\(service)': expected \"\" (the server) or a model name")
            }
            return GRPCMessages.encodeHealth(status)
        }
    }

    /// SERVING or NOT_SERVING for the server (`""`) or a model (a READY version, not draining); nil for other names.
    private func health(of service: String) -> HealthStatus? {
        if service.isEmpty { return isReady ? .serving : .notServing }
        guard registry.index().contains(where: { $0.name == service }) else { return nil }
        let ready = readiness.isReady && (try? registry.resolve(model: service, version: nil)) != nil
        return ready ? .serving : .notServing
    }

    /// grpc.health.v1.Health/Watch: the current status, then each change (checked every half second) until the
    /// client leaves or the server drains; an unknown service is SERVICE_UNKNOWN, as the protocol asks.
    private func healthWatch(_ call: GRPCRequest) throws -> GRPCResponse {
        let service = try GRPCMessages.decodeHealthRequest(call.message)
        let context = self
        let first = health(of: service) ?? .serviceUnknown
        let updates = AsyncStream<[UInt8]> { continuation in
            let poller = Task {
                var last = first
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    let now = context.health(of: service) ?? .serviceUnknown
                    if now != last { continuation.yield(GRPCMessages.encodeHealth(now)) }
                    last = now
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in poller.cancel() }
        }
        return .streaming(GRPCMessages.encodeHealth(first), updates: updates)
    }

    /// ModelInfer: the same path as `POST .../infer` from the decoded request on (`runInference`), so an HTTP and a
    /// gRPC request can share one execution.
    private func grpcInfer(_ call: GRPCRequest) async throws -> [UInt8] {
        let limits = options.decodeLimits
        let message = call.message
        let decoded = try await offloaded(message.count) { try GRPCInferRequestDecoder.decode(message, limits: limits) }
        let response = try await runInference(decoded.request, model: decoded.modelName, version: try Self.grpcVersion(decoded.modelVersion),
                                              clientRequestID: call.metadata["x-request-id"], deadline: call.timeout, protocol: .grpc)
        let outputBytes = response.outputs.reduce(0) { $0 + $1.tensor.byteCount }
        return try await offloaded(outputBytes) { GRPCInferResponseEncoder.encode(response) }
    }

    /// A request's `version` string: empty means the default version.
    static func grpcVersion(_ text: String) throws -> Int? {
        if text.isEmpty { return nil }
        guard PathParameterRules.isValidVersion(text), let version = Int(text) else {
            throw GRPCStatus(.invalidArgument, "version must be a positive integer, got '\(text.prefix(40))'")
        }
        return version
    }

    /// The HTTP admin rule over gRPC metadata: `authorization: Bearer <token>` when a token is set, else loopback only.
    func authorizeAdmin(grpcCall call: GRPCRequest) throws {
        var headers = HTTPHeaders()
        if let value = call.metadata["authorization"] { headers.add("Authorization", value) }
        try authorizeAdmin(HTTPRequest(method: "POST", path: call.path, headers: headers, remoteAddress: call.remoteAddress))
    }
}
