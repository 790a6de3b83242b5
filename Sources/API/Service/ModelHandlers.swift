import HTTP
import Serving

extension ServiceContext {
    /// `GET /v2/models/{model}[/versions/{version}]`: name, loaded versions, platform and tensor specs.
    func modelMetadata(_ p: PathParameters) throws -> HTTPResponse {
        let model = p.model ?? ""
        let served = try registry.resolve(model: model, version: p.version)
        let versions = registry.index().filter { $0.name == model && $0.state == .ready }.compactMap(\.version).sorted().map(String.init)
        return V2Codec.encodeModelMetadata(
            name: model, versions: versions.isEmpty ? [String(served.version)] : versions,
            inputs: served.inputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) },
            outputs: served.outputs.map { V2TensorMetadata(name: $0.name, dtype: $0.dtype, dimensions: $0.shape) })
    }

    /// `GET .../ready`: 200 `{"name", "ready": true}` when the model (or that version) can serve; unknown names 404,
    /// otherwise 503 with the reason (loading, failed, unloaded).
    func modelReady(_ p: PathParameters) throws -> HTTPResponse {
        let model = p.model ?? ""
        _ = try registry.resolve(model: model, version: p.version)
        return .json(.object(["name": .string(model), "ready": .bool(true)]))
    }

    /// `GET .../stats`: Triton's statistics extension shape.
    func statistics(_ p: PathParameters) throws -> HTTPResponse {
        RepositoryCodec.encodeStatistics(try registry.statistics(model: p.model ?? "", version: p.version))
    }

    /// `GET /metrics`: Prometheus text format 0.0.4.
    func metricsExposition() -> HTTPResponse {
        return HTTPResponse(status: 200, headers: ["Content-Type": Metrics.contentType], body: Array(metrics.exposition().utf8))
    }
}
