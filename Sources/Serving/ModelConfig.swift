/// A model's `config.json`: Triton-like keys controlling batching, versions and output interpretation.
public struct ModelConfig: Sendable, Equatable {
    /// Which on-disk versions are loaded.
    public enum VersionPolicy: Sendable, Equatable {
        /// The `count` highest versions.
        case latest(count: Int)
        /// Every version.
        case all
        /// Exactly these versions (those present on disk).
        case specific([Int])

        /// The versions of `available` the policy selects, highest first.
        public func select(from available: [Int]) -> [Int] {
            let sorted = available.sorted(by: >)
            switch self {
            case .latest(let count): return Array(sorted.prefix(count))
            case .all: return sorted
            case .specific(let versions): return sorted.filter { versions.contains($0) }
            }
        }
    }

    /// The `dynamic_batching` section.
    public struct DynamicBatching: Sendable, Equatable {
        /// Longest wait after the first queued request before a partial batch runs.
        public var maxQueueDelayMicroseconds: Int
        /// Batch sizes that run as soon as they are reached.
        public var preferredBatchSizes: [Int]
        /// Requests that may wait in the queue; more are refused with `queueFull`.
        public var maxQueueSize: Int
        /// Per-request timeout in the queue when the caller gives none; 0 means none.
        public var defaultTimeoutMicroseconds: Int

        /// Defaults: no delay (greedy: a batch is whatever queued while the previous execution ran, so an idle
        /// server adds no latency and a busy one batches anyway), no preferred sizes, 256 queued requests, no timeout.
        public init(maxQueueDelayMicroseconds: Int = 0, preferredBatchSizes: [Int] = [], maxQueueSize: Int = 256,
                    defaultTimeoutMicroseconds: Int = 0) {
            self.maxQueueDelayMicroseconds = maxQueueDelayMicroseconds
            self.preferredBatchSizes = preferredBatchSizes
            self.maxQueueSize = maxQueueSize
            self.defaultTimeoutMicroseconds = defaultTimeoutMicroseconds
        }
    }

    /// Explicit `max_batch_size`; nil means "derive from the model" (32 if its batch dimension is dynamic, else 1).
    public var maxBatchSize: Int?
    /// Batching and queueing parameters.
    public var dynamicBatching: DynamicBatching
    /// Which versions to load.
    public var versionPolicy: VersionPolicy
    /// `output.probabilities`: true if classification outputs already are probabilities, nil to detect.
    public var outputsAreProbabilities: Bool?
    /// The raw `image` section, interpreted by the layer that preprocesses images.
    public var image: ConfigValue?
    /// The whole file as parsed (for sections other modules own).
    public var raw: ConfigValue
    /// `cascade`: the model that answers rows this one is unsure of.
    public var cascade: CascadePolicy?
    /// `traffic`: the canary split over versions for requests that name none.
    public var traffic: TrafficSplit?
    /// `response_cache.enable` (Triton's key): answers may be served from the response cache (when `--cache-bytes` > 0).
    public var responseCacheEnabled = false
    /// `instance_group` (Triton's key): the summed `count` of its CPU groups, executions of a version that may run at
    /// once (each with `--threads` engine threads, within the process's compute slots).
    public var instanceCount = 1

    /// The configuration used when a model has no config.json.
    public init(maxBatchSize: Int? = nil, dynamicBatching: DynamicBatching = DynamicBatching(),
                versionPolicy: VersionPolicy = .latest(count: 1), outputsAreProbabilities: Bool? = nil,
                image: ConfigValue? = nil, raw: ConfigValue = .object([:])) {
        self.maxBatchSize = maxBatchSize
        self.dynamicBatching = dynamicBatching
        self.versionPolicy = versionPolicy
        self.outputsAreProbabilities = outputsAreProbabilities
        self.image = image
        self.raw = raw
    }

    /// Parses config.json bytes; throws `ServingError.invalidConfig` naming the key, expected and actual value.
    public init(json bytes: [UInt8]) throws {
        let root: ConfigValue
        do {
            root = try ConfigValue(parsing: bytes)
        } catch {
            throw ServingError.invalidConfig(key: "(file)", expected: "a JSON object", got: "invalid JSON")
        }
        try self.init(json: root)
    }

    /// Interprets an already parsed config object.
    public init(json root: ConfigValue) throws {
        guard let top = root.objectValue else {
            throw ServingError.invalidConfig(key: "(file)", expected: "a JSON object", got: root.typeName)
        }
        self.init(raw: root)
        if let value = top["max_batch_size"] {
            maxBatchSize = try Self.integer(value, key: "max_batch_size", minimum: 0)
        }
        if let section = top["dynamic_batching"] {
            let fields = try Self.object(section, key: "dynamic_batching")
            if let value = fields["max_queue_delay_microseconds"] {
                dynamicBatching.maxQueueDelayMicroseconds = try Self.integer(value, key: "dynamic_batching.max_queue_delay_microseconds", minimum: 0)
            }
            if let value = fields["preferred_batch_size"] {
                guard case .array(let items) = value else {
                    throw ServingError.invalidConfig(key: "dynamic_batching.preferred_batch_size", expected: "an array of positive integers", got: value.typeName)
                }
                dynamicBatching.preferredBatchSizes = try items.map {
                    try Self.integer($0, key: "dynamic_batching.preferred_batch_size", minimum: 1)
                }
            }
            if let value = fields["max_queue_size"] {
                dynamicBatching.maxQueueSize = try Self.integer(value, key: "dynamic_batching.max_queue_size", minimum: 1)
            }
            if let value = fields["default_timeout_microseconds"] {
                dynamicBatching.defaultTimeoutMicroseconds = try Self.integer(value, key: "dynamic_batching.default_timeout_microseconds", minimum: 0)
            }
        }
        if let section = top["version_policy"] {
            versionPolicy = try Self.versionPolicy(section)
        }
        // Triton-style configs list output tensors in an array; only the object form carries our keys.
        if let section = top["output"], !(section.typeName == "array") {
            let fields = try Self.object(section, key: "output")
            if let value = fields["probabilities"] {
                switch value {
                case .bool(let b): outputsAreProbabilities = b
                case .null: outputsAreProbabilities = nil
                default: throw ServingError.invalidConfig(key: "output.probabilities", expected: "true, false or null", got: value.brief)
                }
            }
        }
        if let section = top["image"] {
            _ = try Self.object(section, key: "image")
            image = section
        }
        if let section = top["cascade"], section != .null { cascade = try CascadePolicy(parsing: section) }
        if let section = top["traffic"], section != .null { traffic = try TrafficSplit(parsing: section) }
        if let section = top["response_cache"] {
            let fields = try Self.object(section, key: "response_cache")
            switch fields["enable"] {
            case .bool(let flag)?: responseCacheEnabled = flag
            case nil: responseCacheEnabled = false
            case let other?: throw ServingError.invalidConfig(key: "response_cache.enable", expected: "true or false", got: other.brief)
            }
        }
        if let section = top["instance_group"] { instanceCount = try Self.instanceCount(section) }
        if let max = maxBatchSize, max > 0, let biggest = dynamicBatching.preferredBatchSizes.max(), biggest > max {
            throw ServingError.invalidConfig(key: "dynamic_batching.preferred_batch_size", expected: "sizes <= max_batch_size \(max)", got: String(biggest))
        }
    }

    /// The `image` section as a Foundation dictionary, the form `PreprocessConfig(json:defaults:)` takes; nil when absent.
    public var imageJSONObject: [String: Any]? {
        image?.foundationObject as? [String: Any]
    }

    /// The batch limit for a model whose batch dimension is (or is not) dynamic.
    public func effectiveMaxBatchSize(batchDimensionIsDynamic: Bool) -> Int {
        maxBatchSize ?? (batchDimensionIsDynamic ? 32 : 1)
    }

    private static func versionPolicy(_ section: ConfigValue) throws -> VersionPolicy {
        let fields = try object(section, key: "version_policy")
        guard fields.count == 1, let (kind, body) = fields.first else {
            throw ServingError.invalidConfig(key: "version_policy", expected: "exactly one of latest, all, specific", got: "\(fields.count) keys")
        }
        switch kind {
        case "latest":
            let inner = try object(body, key: "version_policy.latest")
            guard let count = inner["num_versions"] else { return .latest(count: 1) }
            return .latest(count: try integer(count, key: "version_policy.latest.num_versions", minimum: 1))
        case "all":
            _ = try object(body, key: "version_policy.all")
            return .all
        case "specific":
            let inner = try object(body, key: "version_policy.specific")
            guard let list = inner["versions"], case .array(let items) = list, !items.isEmpty else {
                throw ServingError.invalidConfig(key: "version_policy.specific.versions", expected: "a non-empty array of positive integers",
                                                 got: inner["versions"]?.typeName ?? "nothing")
            }
            return .specific(try items.map { try integer($0, key: "version_policy.specific.versions", minimum: 1) })
        default:
            throw ServingError.invalidConfig(key: "version_policy", expected: "latest, all or specific", got: "\"\(kind)\"")
        }
    }

    /// Sums the counts of `instance_group` (an array of `{"count": N, "kind": "KIND_CPU"}`; count defaults to 1).
    private static func instanceCount(_ section: ConfigValue) throws -> Int {
        guard case .array(let groups) = section, !groups.isEmpty else {
            throw ServingError.invalidConfig(key: "instance_group", expected: "a non-empty array of {\"count\": N, \"kind\": \"KIND_CPU\"}",
                                             got: section.brief)
        }
        var total = 0
        for group in groups {
            let fields = try object(group, key: "instance_group[]")
            if let kind = fields["kind"], kind != .string("KIND_CPU"), kind != .string("KIND_AUTO") {
                throw ServingError.invalidConfig(key: "instance_group[].kind", expected: "\"KIND_CPU\" or \"KIND_AUTO\" (CPU only)", got: kind.brief)
            }
            total += try fields["count"].map { try integer($0, key: "instance_group[].count", minimum: 1) } ?? 1
        }
        return min(total, Int(Int32.max))
    }

    private static func object(_ value: ConfigValue, key: String) throws -> [String: ConfigValue] {
        guard let fields = value.objectValue else {
            throw ServingError.invalidConfig(key: key, expected: "an object", got: value.typeName)
        }
        return fields
    }

    private static func integer(_ value: ConfigValue, key: String, minimum: Int) throws -> Int {
        guard case .number(let n) = value, n == n.rounded(), n >= Double(minimum), n <= Double(Int32.max) else {
            throw ServingError.invalidConfig(key: key, expected: "an integer >= \(minimum)", got: value.brief)
        }
        return Int(n)
    }
}
