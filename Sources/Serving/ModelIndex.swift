/// Lifecycle state of a model version, as the repository index reports it.
public enum ModelState: String, Sendable, CaseIterable {
    /// Being read, compiled or warmed up.
    case loading = "LOADING"
    /// Warmed up and accepting requests.
    case ready = "READY"
    /// Not loaded (not selected by the version policy, unloaded, or no version on disk).
    case unavailable = "UNAVAILABLE"
    /// The last load attempt failed; `reason` says why.
    case failed = "FAILED"
}

/// One row of the repository index: a model version (or a model with no version) and its state.
public struct ModelIndexEntry: Sendable, Equatable {
    /// Model name.
    public var name: String
    /// Version number; nil for a model with no version on disk.
    public var version: Int?
    /// Current state.
    public var state: ModelState
    /// Why the version is not READY (nil when loading, and when ready unless its file left the repository).
    public var reason: String?
    /// Bytes the loaded version holds (weights, packed constants, activations at the maximum batch); nil when not loaded.
    public var memoryBytes: Int?
    /// The model's traffic split in effect and its source (the same on every row of the model); nil when it has none.
    public var traffic: ModelTraffic?

    /// An index row.
    public init(name: String, version: Int?, state: ModelState, reason: String?, memoryBytes: Int? = nil, traffic: ModelTraffic? = nil) {
        self.name = name
        self.version = version
        self.state = state
        self.reason = reason
        self.memoryBytes = memoryBytes
        self.traffic = traffic
    }
}

/// Registry settings.
public struct RegistryOptions: Sendable {
    /// Limits model executions in the process to `computeSlots` at once (1 suits a 2-core box: the engine's own
    /// threads use the cores); shared by every version's batcher and the warm-up runs.
    public let computeGate: ComputeGate
    /// Model executions allowed at once in the process.
    public var computeSlots: Int { computeGate.slots }
    /// How often `run()` rescans the repository for added, removed or replaced models and versions; nil disables polling.
    public var pollInterval: Duration?
    /// Run each new version once on zero inputs before marking it READY.
    public var warmUp: Bool
    /// Models that must have a READY version for the server to be ready; nil: every model whose directory held a
    /// version when the repository was first loaded.
    public var requiredModels: [String]?
    /// Most bytes all loaded versions may hold together (`ServedVersion.memoryBytes`); nil: no limit.
    public var maxModelMemory: Int?
    /// At the first load, staging entries and interrupted-write temp files older than this many seconds are removed.
    public var staleUploadAge: Double
    /// Serve the repository folder itself as this one model (KServe's single-model layout); nil: `<model>/` folders.
    public var singleModel: String?

    /// Options with one compute slot, no polling, warm-up on, no memory limit, stale uploads removed after an hour.
    public init(computeSlots: Int = 1, pollInterval: Duration? = nil, warmUp: Bool = true, requiredModels: [String]? = nil,
                maxModelMemory: Int? = nil, staleUploadAge: Double = 3600, singleModel: String? = nil) {
        computeGate = ComputeGate(slots: computeSlots)
        self.pollInterval = pollInterval
        self.warmUp = warmUp
        self.requiredModels = requiredModels
        self.maxModelMemory = maxModelMemory
        self.staleUploadAge = staleUploadAge
        self.singleModel = singleModel
    }
}
