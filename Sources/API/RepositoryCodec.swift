import HTTP

/// State of a model version in the repository index.
public enum RepositoryVersionState: String, Sendable {
    /// Known on disk, not loaded (or failed to load).
    case unavailable = "UNAVAILABLE"
    /// Being compiled.
    case loading = "LOADING"
    /// Serving.
    case ready = "READY"
    /// Draining before removal.
    case unloading = "UNLOADING"
}

/// One row of `POST /v2/repository/index`.
public struct RepositoryIndexEntry: Sendable, Equatable {
    /// Model name.
    public var name: String
    /// Version, when the row is about one version.
    public var version: Int?
    /// Its state.
    public var state: RepositoryVersionState
    /// Why it is unavailable, when known.
    public var reason: String?

    /// An entry value.
    public init(name: String, version: Int?, state: RepositoryVersionState, reason: String? = nil) {
        self.name = name
        self.version = version
        self.state = state
        self.reason = reason
    }
}

/// Timing counter of the statistics response: events and their total nanoseconds.
public struct DurationTotals: Sendable, Equatable {
    /// Number of events.
    public var count: UInt64
    /// Total nanoseconds across them.
    public var nanoseconds: UInt64

    /// A counter value.
    public init(count: UInt64, nanoseconds: UInt64) {
        self.count = count
        self.nanoseconds = nanoseconds
    }
}

/// Statistics of one model version (the `model_stats` items of `/stats`).
public struct ModelVersionStatistics: Sendable, Equatable {
    /// Model name.
    public var name: String
    /// Version.
    public var version: Int
    /// Milliseconds since the epoch of the last inference, 0 if none.
    public var lastInferenceMilliseconds: UInt64
    /// Requests served (each counts its batch rows).
    public var inferenceCount: UInt64
    /// Model executions (batches).
    public var executionCount: UInt64
    /// Successful requests, end to end.
    public var success: DurationTotals
    /// Failed requests.
    public var fail: DurationTotals
    /// Time spent queued for a batch.
    public var queue: DurationTotals
    /// Input decoding/preparation.
    public var computeInput: DurationTotals
    /// Model execution.
    public var computeInfer: DurationTotals
    /// Output encoding.
    public var computeOutput: DurationTotals
    /// Executions by batch size.
    public var batches: [(batchSize: Int, computeInfer: DurationTotals)]

    /// A statistics value with zero counters.
    public init(name: String, version: Int) {
        self.name = name
        self.version = version
        lastInferenceMilliseconds = 0
        inferenceCount = 0
        executionCount = 0
        let zero = DurationTotals(count: 0, nanoseconds: 0)
        success = zero
        fail = zero
        queue = zero
        computeInput = zero
        computeInfer = zero
        computeOutput = zero
        batches = []
    }

    /// Field-wise equality.
    public static func == (a: ModelVersionStatistics, b: ModelVersionStatistics) -> Bool {
        a.name == b.name && a.version == b.version && a.lastInferenceMilliseconds == b.lastInferenceMilliseconds
            && a.inferenceCount == b.inferenceCount && a.executionCount == b.executionCount && a.success == b.success
            && a.fail == b.fail && a.queue == b.queue && a.computeInput == b.computeInput && a.computeInfer == b.computeInfer
            && a.computeOutput == b.computeOutput
            && a.batches.map(\.batchSize) == b.batches.map(\.batchSize) && a.batches.map(\.computeInfer) == b.batches.map(\.computeInfer)
    }
}

/// Bodies of the repository and statistics routes, as openapi.yaml describes them.
public enum RepositoryCodec {
    /// Reads `{"version": "2"}` (a JSON integer is accepted too) for `POST .../default`.
    public static func decodeDefaultVersionRequest(_ body: [UInt8]) throws -> Int {
        let value: JSONValue
        do { value = try JSONValue.parse(body) } catch let error as JSONError {
            throw APIError.badRequest("invalid JSON: \(error)")
        }
        guard let object = value.objectValue else { throw APIError.badRequest("body must be a JSON object like {\"version\": \"2\"}") }
        guard let field = object["version"] else { throw APIError.badRequest("missing 'version'") }
        let text: String
        switch field {
        case .string(let s): text = s
        case .integer(let i): text = String(i)
        default: throw APIError.badRequest("'version' must be a positive integer or its string, got \(field.kindName)")
        }
        guard PathParameterRules.isValidVersion(text), let version = Int(text) else {
            throw APIError.badRequest("'version' must be a positive integer, got '\(text.prefix(40))'")
        }
        return version
    }

    /// Reads the optional `{"ready": true}` body of `POST /v2/repository/index`: true lists only ready versions.
    public static func decodeIndexRequest(_ body: [UInt8]) throws -> Bool {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return false }
        let value: JSONValue
        do { value = try JSONValue.parse(body) } catch let error as JSONError {
            throw APIError.badRequest("invalid JSON: \(error)")
        }
        guard let object = value.objectValue else { throw APIError.badRequest("body must be a JSON object") }
        guard let ready = object["ready"] else { return false }
        guard let flag = ready.boolValue else { throw APIError.badRequest("'ready' must be a boolean") }
        return flag
    }

    /// `[{"name","version","state","reason"}]`.
    public static func encodeIndex(_ entries: [RepositoryIndexEntry]) -> HTTPResponse {
        .json(.array(entries.map { e in
            var o: JSONObject = ["name": .string(e.name)]
            if let v = e.version { o["version"] = .string(String(v)) }
            o["state"] = .string(e.state.rawValue)
            if let r = e.reason { o["reason"] = .string(r) }
            return .object(o)
        }))
    }

    /// `201 {"name","version","sha256"}` after a successful upload.
    public static func encodeUploaded(name: String, version: Int, sha256: [UInt8]) -> HTTPResponse {
        .json(.object(["name": .string(name), "version": .string(String(version)), "sha256": .string(DigestHeader.hex(sha256))]), status: 201)
    }

    /// `{"name","default_version","pinned"}`.
    public static func encodeDefaultVersion(name: String, defaultVersion: Int?, pinned: Bool) -> HTTPResponse {
        .json(.object(["name": .string(name), "default_version": defaultVersion.map { .string(String($0)) } ?? .null,
                       "pinned": .bool(pinned)]))
    }

    /// `{"model_stats":[...]}` in the shape of Triton's statistics extension.
    public static func encodeStatistics(_ stats: [ModelVersionStatistics]) -> HTTPResponse {
        func duration(_ d: DurationTotals) -> JSONValue {
            .object(["count": .integer(Int64(clamping: d.count)), "ns": .integer(Int64(clamping: d.nanoseconds))])
        }
        return .json(.object(["model_stats": .array(stats.map { s in
            .object([
                "name": .string(s.name),
                "version": .string(String(s.version)),
                "last_inference": .integer(Int64(clamping: s.lastInferenceMilliseconds)),
                "inference_count": .integer(Int64(clamping: s.inferenceCount)),
                "execution_count": .integer(Int64(clamping: s.executionCount)),
                "inference_stats": .object([
                    "success": duration(s.success), "fail": duration(s.fail), "queue": duration(s.queue),
                    "compute_input": duration(s.computeInput), "compute_infer": duration(s.computeInfer),
                    "compute_output": duration(s.computeOutput),
                ]),
                "batch_stats": .array(s.batches.map { b in
                    .object(["batch_size": .integer(Int64(b.batchSize)), "compute_infer": duration(b.computeInfer)])
                }),
            ])
        })]))
    }
}
