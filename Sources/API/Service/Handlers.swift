import HTTP

extension ServiceContext {
    /// Every operation of `Routes.all` bound to its handler.
    static func handlers(_ c: ServiceContext) -> [OperationID: RouteHandler] {
        [
            .serverMetadata: { _, _ in
                V2Codec.encodeServerMetadata(name: c.options.serverName, version: c.options.serverVersion, extensions: protocolExtensions)
            },
            .serverLive: { _, _ in .json(.object(["live": .bool(true)])) },
            .serverReady: { _, _ in
                let ready = c.isReady
                return .json(.object(["ready": .bool(ready)]), status: ready ? 200 : 503)
            },
            .modelMetadata: { _, p in try c.modelMetadata(p) },
            .modelVersionMetadata: { _, p in try c.modelMetadata(p) },
            .modelReady: { _, p in c.modelReady(p) },
            .modelVersionReady: { _, p in c.modelReady(p) },
            .modelInfer: { r, p in try await c.infer(r, p) },
            .modelVersionInfer: { r, p in try await c.infer(r, p) },
            .modelClassify: { r, p in try await c.classify(r, p) },
            .modelVersionClassify: { r, p in try await c.classify(r, p) },
            .modelStats: { _, p in try c.statistics(p) },
            .modelVersionStats: { _, p in try c.statistics(p) },
            .repositoryIndex: { r, _ in try c.repositoryIndex(r) },
            .repositoryModelLoad: { r, p in try await c.loadModel(r, p) },
            .repositoryModelUnload: { r, p in try await c.unloadModel(r, p) },
            .repositoryVersionUpload: { r, p in try await c.uploadVersion(r, p) },
            .repositorySetDefault: { r, p in try await c.setDefault(r, p) },
            .repositoryClearDefault: { r, p in try await c.clearDefault(r, p) },
            .metrics: { _, _ in c.metricsExposition() },
        ]
    }
}
