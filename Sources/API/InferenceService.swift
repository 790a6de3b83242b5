import HTTP
import Tensor

/// A model version as the API sees it; `handle` is the serving layer's own object for that version,
/// so a request keeps the version it was admitted on even if the default changes meanwhile.
public struct ServedModel: Sendable {
    /// Model name.
    public var name: String
    /// The version this value refers to.
    public var version: Int
    /// Every loaded version of the model, ascending.
    public var versions: [Int]
    /// True when it accepts inference.
    public var ready: Bool
    /// Declared inputs.
    public var inputs: [ModelInputSpec]
    /// Declared outputs (name, dtype, shape).
    public var outputs: [ModelInputSpec]
    /// Class labels per output name, for the classification extension.
    public var labels: [String: [String]]
    /// The serving layer's version object.
    public var handle: any Sendable

    /// A value describing one served version.
    public init(name: String, version: Int, versions: [Int], ready: Bool, inputs: [ModelInputSpec], outputs: [ModelInputSpec],
                labels: [String: [String]] = [:], handle: any Sendable) {
        self.name = name
        self.version = version
        self.versions = versions
        self.ready = ready
        self.inputs = inputs
        self.outputs = outputs
        self.labels = labels
        self.handle = handle
    }
}

/// Everything the HTTP handlers need from the serving layer. The lead adapts Serving's registry to this;
/// errors it throws are mapped by conforming them to `HTTPErrorConvertible` (else they become 500s).
public protocol InferenceService: Sendable {
    /// Server name for `GET /v2`.
    var serverName: String { get }
    /// Server version for `GET /v2`.
    var serverVersion: String { get }
    /// True once the server accepts inference.
    func isReady() async -> Bool
    /// The named model at `version` (nil = its default version); nil when unknown.
    func model(named name: String, version: Int?) async throws -> ServedModel?
    /// Runs one request's inputs (in `model.inputs` order); returns the outputs named in `outputs`
    /// (every output when nil), in `model.outputs` order. `timeout` (the request's `timeout` parameter,
    /// Triton-style microseconds) bounds its queueing; nil means the model's default.
    func infer(_ model: ServedModel, inputs: [Tensor], outputs: [String]?, timeout: Duration?) async throws -> [(name: String, tensor: Tensor)]
    /// Decodes, preprocesses and classifies images, `topK` classes per image.
    func classify(_ model: ServedModel, images: [ImageUpload], topK: Int) async throws -> [[Classification]]
    /// Statistics of the model's versions (`version` nil = all loaded versions).
    func statistics(model: String, version: Int?) async throws -> [ModelVersionStatistics]?
    /// Repository contents.
    func repositoryIndex(readyOnly: Bool) async throws -> [RepositoryIndexEntry]
    /// Loads or reloads a model from the repository.
    func load(model: String) async throws
    /// Unloads a model.
    func unload(model: String) async throws
    /// Stores, compiles and publishes an uploaded ONNX file as a version.
    func upload(model: String, version: Int, onnx: [UInt8]) async throws
    /// Pins (`version` non-nil) or unpins the default version; returns the default now in effect.
    func setDefault(model: String, version: Int?) async throws -> (defaultVersion: Int?, pinned: Bool)
    /// Prometheus text exposition of every metric.
    func metricsText() async -> [UInt8]
    /// Runs CPU-heavy decoding/encoding off the cooperative pool (on the server's worker threads).
    func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T
}

extension InferenceService {
    /// Runs `work` inline; servers with worker threads override this.
    public func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T { try work() }
}
