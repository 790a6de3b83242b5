import HTTP

extension ServiceContext {
    /// Every operation of `Routes.all` bound to its handler.
    static func handlers(_ c: ServiceContext) -> [OperationID: RouteHandler] {
        var handlers: [OperationID: RouteHandler] = [
            .serverMetadata: { _, _ in
                V2Codec.encodeServerMetadata(name: c.options.serverName, version: c.options.serverVersion, extensions: protocolExtensions)
            },
            .serverLive: { _, _ in c.liveResponse() },
            .serverReady: { _, _ in c.readyResponse() },
            .repositoryIndex: { r, _ in try c.repositoryIndex(r) },
            .repositoryModelLoad: { r, p in try await c.loadModel(r, p) },
            .repositoryModelUnload: { r, p in try await c.unloadModel(r, p) },
            .repositoryVersionUpload: { r, p in try await c.uploadVersion(r, p) },
            .repositorySetDefault: { r, p in try await c.setDefault(r, p) },
            .repositoryClearDefault: { r, p in try await c.clearDefault(r, p) },
            .repositorySetTraffic: { r, p in try await c.setTraffic(r, p) },
            .repositoryClearTraffic: { r, p in try await c.clearTraffic(r, p) },
            .metrics: { _, _ in c.metricsExposition() },
            .console: { _, _ in c.consolePage() },
            .openAPISpec: { _, _ in c.openAPISpec() },
            .modelList: { _, _ in await c.modelList() },
        ]
        // Each model operation has a default-version route and a `/versions/{version}` route; one handler serves both
        // (it reads the optional `version` parameter).
        let modelOperations: [(OperationID, OperationID, RouteHandler)] = [
            (.modelMetadata, .modelVersionMetadata, { _, p in try c.modelMetadata(p) }),
            (.modelReady, .modelVersionReady, { _, p in try c.modelReady(p) }),
            (.modelInfer, .modelVersionInfer, { r, p in try await c.infer(r, p) }),
            (.modelClassify, .modelVersionClassify, { r, p in try await c.classify(r, p) }),
            (.modelConfig, .modelVersionConfig, { _, p in try c.modelConfiguration(p) }),
            (.modelStats, .modelVersionStats, { _, p in try c.statistics(p) }),
        ]
        for (latest, versioned, handler) in modelOperations {
            handlers[latest] = handler
            handlers[versioned] = handler
        }
        return handlers
    }

    /// `{"live": true}`: the process answers.
    func liveResponse() -> HTTPResponse { .json(.object(["live": .bool(true)])) }

    /// `{"ready": true}` (200) when not draining and every model has a READY version, else `{"ready": false}` (503).
    func readyResponse() -> HTTPResponse {
        let ready = isReady
        return .json(.object(["ready": .bool(ready)]), status: ready ? 200 : 503)
    }
}
