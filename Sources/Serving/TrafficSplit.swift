/// A canary split: weights by version (config.json `"traffic": {"2": 90, "3": 10}` or set at run time).
///
/// Requests that name no version go to a version drawn by weight among the READY ones; with a client request id the
/// draw is a hash of the id, so a retry lands on the same version. Weights need not sum to 100.
public struct TrafficSplit: Sendable, Equatable {
    /// (version, weight) in ascending version order; every weight is finite and >= 0, at least one is > 0.
    public let weights: [(version: Int, weight: Double)]

    /// A split from weights by version; throws `ServingError.invalidConfig` (under `key`) naming what is wrong.
    public init(_ weights: [Int: Double], key: String = "traffic") throws {
        for (version, weight) in weights {
            guard version >= 1 else { throw ServingError.invalidConfig(key: key, expected: "positive version numbers as keys", got: String(version)) }
            guard weight.isFinite, weight >= 0 else {
                throw ServingError.invalidConfig(key: "\(key).\(version)", expected: "a weight >= 0", got: String(weight))
            }
        }
        guard weights.values.contains(where: { $0 > 0 }) else {
            throw ServingError.invalidConfig(key: key, expected: "at least one version with a weight > 0", got: weights.isEmpty ? "{}" : "only zero weights")
        }
        // An infinite total would send every draw to the last version.
        guard weights.values.reduce(0, +).isFinite else {
            throw ServingError.invalidConfig(key: key, expected: "weights with a finite sum", got: "a sum beyond \(Double.greatestFiniteMagnitude)")
        }
        self.weights = weights.sorted { $0.key < $1.key }.map { (version: $0.key, weight: $0.value) }
    }

    /// Parses `{"2": 90, "3": 10}`: keys are version numbers as strings, values are numbers.
    public init(parsing value: ConfigValue, key: String = "traffic") throws {
        guard let fields = value.objectValue else {
            throw ServingError.invalidConfig(key: key, expected: "an object of version: weight, like {\"2\": 90, \"3\": 10}", got: value.typeName)
        }
        var weights: [Int: Double] = [:]
        for (name, weight) in fields {
            guard let version = Int(name), version >= 1, String(version) == name else {
                throw ServingError.invalidConfig(key: key, expected: "positive version numbers as keys", got: "\"\(name.prefix(20))\"")
            }
            guard case .number(let w) = weight else {
                throw ServingError.invalidConfig(key: "\(key).\(name)", expected: "a number", got: weight.typeName)
            }
            weights[version] = w
        }
        try self.init(weights, key: key)
    }

    /// `{"2": 90, "3": 10}` as a plain dictionary (for the repository index and the traffic route's answer).
    public var byVersion: [Int: Double] { Dictionary(uniqueKeysWithValues: weights.map { ($0.version, $0.weight) }) }

    /// The version for one request among `ready` versions: nil when no weighted version is READY (the caller then
    /// uses the default version). `requestID` (the client's, never a generated one) makes the choice deterministic.
    public func choose<R: RandomNumberGenerator>(ready: Set<Int>, requestID: String?, using generator: inout R) -> Int? {
        let candidates = weights.filter { ready.contains($0.version) && $0.weight > 0 }
        guard let last = candidates.last else { return nil }
        let total = candidates.reduce(0) { $0 + $1.weight }
        let unit: Double  // in [0, 1)
        if let requestID {
            let digest = SHA256.hash(Array(requestID.utf8))
            let bits = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            unit = Double(bits >> 11) / Double(UInt64(1) << 53)
        } else {
            unit = Double.random(in: 0..<1, using: &generator)
        }
        var point = unit * total
        for candidate in candidates {
            if point < candidate.weight { return candidate.version }
            point -= candidate.weight
        }
        return last.version  // rounding at the top end
    }

    /// `choose` with the system's random generator.
    public func choose(ready: Set<Int>, requestID: String?) -> Int? {
        var generator = SystemRandomNumberGenerator()
        return choose(ready: ready, requestID: requestID, using: &generator)
    }

    /// Equal when the same versions carry the same weights.
    public static func == (a: TrafficSplit, b: TrafficSplit) -> Bool { a.byVersion == b.byVersion }
}
