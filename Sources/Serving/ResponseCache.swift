import Infrastructure

/// The key of a cached response: SHA-256 over everything that decides the answer.
///
/// A 256-bit digest rather than a 64-bit hash (Triton's): two different requests never share an entry in practice,
/// so a hit is always the answer to this request.
public struct ResponseCacheKey: Hashable, Sendable {
    /// The 32-byte digest.
    public let digest: [UInt8]

    /// Starts a key for one model version; add inputs, requested outputs and parameters, then `finish()`.
    public struct Builder {
        private var hasher = SHA256.Hasher()

        /// A builder for `model` at `version` (a response is never reused for another version).
        public init(model: String, version: Int) {
            hasher.update(field: "osprey.response-cache.v1")
            hasher.update(field: model)
            hasher.update(integer: version)
        }

        /// Adds one input: name, datatype, shape and its bytes.
        public mutating func addInput(name: String, datatype: String, shape: [Int], bytes: UnsafeRawBufferPointer) {
            addInputHeader(name: name, datatype: datatype, shape: shape)
            hasher.update(integer: bytes.count)
            hasher.update(bytes)
        }

        /// Adds one BYTES input: name, datatype, shape and each element length-prefixed (so ["ab", "c"] and
        /// ["a", "bc"] differ).
        public mutating func addInput(name: String, datatype: String, shape: [Int], strings: [[UInt8]]) {
            addInputHeader(name: name, datatype: datatype, shape: shape)
            hasher.update(integer: strings.count)
            for element in strings {
                hasher.update(integer: element.count)
                hasher.update(element)
            }
        }

        private mutating func addInputHeader(name: String, datatype: String, shape: [Int]) {
            hasher.update(field: "input")
            hasher.update(field: name)
            hasher.update(field: datatype)
            hasher.update(integer: shape.count)
            for dimension in shape { hasher.update(integer: dimension) }
        }

        /// Adds the requested output names in request order (with any per-output parameter that changes the result,
        /// such as a classification count, as `name=value` fields).
        public mutating func addOutputs(_ outputs: [String]) {
            hasher.update(field: "outputs")
            hasher.update(integer: outputs.count)
            for output in outputs { hasher.update(field: output) }
        }

        /// Adds a request parameter that changes the result (names sorted by the caller or not: order is hashed).
        public mutating func addParameter(_ name: String, _ value: String) {
            hasher.update(field: "parameter")
            hasher.update(field: name)
            hasher.update(field: value)
        }

        /// The key.
        public consuming func finish() -> ResponseCacheKey { ResponseCacheKey(digest: hasher.finalize()) }
    }
}

/// A byte-bounded LRU cache of responses, shared by every model that enables it; any thread may use it.
///
/// `Value` is what the serving layer stores (the outputs, not an encoded body, so a hit is encoded for the current
/// request and echoes its id). Entries larger than the whole budget are not stored.
public final class ResponseCache<Value: Sendable>: Sendable {
    /// What one lookup found.
    public enum Lookup {
        /// The stored value.
        case hit(Value)
        /// Nothing stored under the key.
        case miss
    }

    private struct Entry {
        var key: ResponseCacheKey
        var value: Value
        var bytes: Int
        var model: String
        var version: Int
        var newer: Int?  // towards the most recently used end
        var older: Int?
    }

    private struct State {
        var slots: [Entry?] = []
        var free: [Int] = []
        var index: [ResponseCacheKey: Int] = [:]
        var newest: Int?
        var oldest: Int?
        var bytes = 0
        var evictions = 0
    }

    /// The byte budget.
    public let capacityBytes: Int
    private let state = Locked(State())
    private let metrics: CacheMetrics?

    /// A cache holding at most `capacityBytes` of values (as their `bytes` say); `metrics` records hits, misses,
    /// evictions and the bytes held.
    public init(capacityBytes: Int, metrics: Metrics? = nil) {
        self.capacityBytes = max(0, capacityBytes)
        self.metrics = metrics.map(CacheMetrics.init)
    }

    /// The value stored under `key`, made the most recently used; counts a hit or a miss for `model`/`version`.
    public func lookup(_ key: ResponseCacheKey, model: String, version: Int) -> Lookup {
        let found: Value? = state.withLock { s in
            guard let slot = s.index[key], let entry = s.slots[slot] else { return nil }
            Self.unlink(slot, &s)
            Self.linkNewest(slot, &s)
            return entry.value
        }
        metrics?.record(hit: found != nil, model: model, version: version)
        if let found { return .hit(found) }
        return .miss
    }

    /// Stores `value` (`bytes` long) under `key`, evicting least recently used entries to stay within the budget.
    public func insert(_ key: ResponseCacheKey, value: Value, bytes: Int, model: String, version: Int) {
        guard bytes <= capacityBytes else { return }
        let (held, evicted) = state.withLock { s -> (Int, Int) in
            if let slot = s.index[key] { Self.remove(slot, &s) }
            var evicted = 0
            while s.bytes + bytes > capacityBytes, let oldest = s.oldest {
                Self.remove(oldest, &s)
                evicted += 1
            }
            let entry = Entry(key: key, value: value, bytes: bytes, model: model, version: version, newer: nil, older: nil)
            let slot: Int
            if let reused = s.free.popLast() { s.slots[reused] = entry; slot = reused } else { s.slots.append(entry); slot = s.slots.count - 1 }
            s.index[key] = slot
            s.bytes += bytes
            s.evictions += evicted
            Self.linkNewest(slot, &s)
            return (s.bytes, evicted)
        }
        metrics?.recordStore(heldBytes: held, evicted: evicted)
    }

    /// Drops every entry of `model` (all versions when `version` is nil), e.g. when a version is unloaded.
    public func removeAll(model: String, version: Int? = nil) {
        let held = state.withLock { s -> Int in
            for (slot, entry) in s.slots.enumerated() {
                guard let entry, entry.model == model, version == nil || entry.version == version else { continue }
                Self.remove(slot, &s)
            }
            return s.bytes
        }
        metrics?.recordStore(heldBytes: held, evicted: 0)
    }

    /// Observes how long a hit took to answer (hashing the request and the lookup), in `osprey_cache_hit_duration_seconds`.
    public func recordHitDuration(seconds: Double, model: String, version: Int) {
        metrics?.recordHitDuration(seconds: seconds, model: model, version: version)
    }

    /// Bytes held now.
    public var heldBytes: Int { state.withLock { $0.bytes } }
    /// Entries held now.
    public var count: Int { state.withLock { $0.index.count } }
    /// Entries evicted to make room since the start.
    public var evictions: Int { state.withLock { $0.evictions } }

    private static func remove(_ slot: Int, _ s: inout State) {
        guard let entry = s.slots[slot] else { return }
        unlink(slot, &s)
        s.index[entry.key] = nil
        s.bytes -= entry.bytes
        s.slots[slot] = nil
        s.free.append(slot)
    }

    private static func unlink(_ slot: Int, _ s: inout State) {
        guard let entry = s.slots[slot] else { return }
        if let newer = entry.newer { s.slots[newer]?.older = entry.older } else { s.newest = entry.older }
        if let older = entry.older { s.slots[older]?.newer = entry.newer } else { s.oldest = entry.newer }
        s.slots[slot]?.newer = nil
        s.slots[slot]?.older = nil
    }

    private static func linkNewest(_ slot: Int, _ s: inout State) {
        s.slots[slot]?.older = s.newest
        s.slots[slot]?.newer = nil
        if let newest = s.newest { s.slots[newest]?.newer = slot }
        s.newest = slot
        if s.oldest == nil { s.oldest = slot }
    }
}

/// The cache's Prometheus series (names as the README's metrics table lists them).
private struct CacheMetrics: Sendable {
    let metrics: Metrics
    let evictions: Counter
    let bytes: Gauge

    init(_ metrics: Metrics) {
        self.metrics = metrics
        evictions = metrics.counter("osprey_cache_evictions_total", help: "Response cache entries evicted to stay within --cache-bytes.")
        bytes = metrics.gauge("osprey_cache_bytes", help: "Bytes held by the response cache.")
    }

    func record(hit: Bool, model: String, version: Int) {
        let labels = ["model": model, "version": String(version)]
        if hit {
            metrics.counter("osprey_cache_hits_total", help: "Requests answered from the response cache.", labels: labels).increment()
        } else {
            metrics.counter("osprey_cache_misses_total", help: "Cache-enabled requests not found in the response cache.", labels: labels).increment()
        }
    }

    /// Hits take microseconds (a hash and a dictionary lookup), far below the request latency buckets.
    static let hitBuckets: [Double] = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1]

    func recordHitDuration(seconds: Double, model: String, version: Int) {
        metrics.histogram("osprey_cache_hit_duration_seconds", help: "Time to answer a request from the response cache, in seconds.",
                          labels: ["model": model, "version": String(version)], buckets: Self.hitBuckets).observe(seconds)
    }

    func recordStore(heldBytes: Int, evicted: Int) {
        if evicted > 0 { evictions.increment(by: Double(evicted)) }
        bytes.set(Double(heldBytes))
    }
}
