/// A confidence cascade (config.json `"cascade": {"model": "big", "min_confidence": 0.6, "version": 2}`): rows whose
/// top-1 probability is below `minConfidence` are answered by the other model instead.
public struct CascadePolicy: Sendable, Equatable {
    /// The model that answers unsure rows.
    public var model: String
    /// Its version; nil means its default version.
    public var version: Int?
    /// Rows with a top-1 probability below this escalate (0...1).
    public var minConfidence: Double

    /// A policy value.
    public init(model: String, version: Int? = nil, minConfidence: Double) {
        self.model = model
        self.version = version
        self.minConfidence = minConfidence
    }

    /// Parses the `cascade` section; throws `ServingError.invalidConfig` naming the key, expected and actual value.
    public init(parsing value: ConfigValue, key: String = "cascade") throws {
        guard let fields = value.objectValue else {
            throw ServingError.invalidConfig(key: key, expected: "an object like {\"model\": \"big\", \"min_confidence\": 0.6}", got: value.typeName)
        }
        for name in fields.keys where !["model", "version", "min_confidence"].contains(name) {
            throw ServingError.invalidConfig(key: "\(key).\(name)", expected: "one of model, version, min_confidence", got: "an unknown key")
        }
        guard case .string(let model)? = fields["model"], ModelRepository.isValidModelName(model) else {
            throw ServingError.invalidConfig(key: "\(key).model", expected: "a model name", got: fields["model"]?.brief ?? "nothing")
        }
        guard case .number(let threshold)? = fields["min_confidence"], threshold >= 0, threshold <= 1 else {
            throw ServingError.invalidConfig(key: "\(key).min_confidence", expected: "a number from 0 to 1", got: fields["min_confidence"]?.brief ?? "nothing")
        }
        var version: Int?
        switch fields["version"] {
        case nil, .null?: version = nil
        case .number(let n)? where n >= 1 && n == n.rounded() && n <= Double(Int32.max): version = Int(n)
        case .string(let text)? where Int(text).map { $0 >= 1 } == true: version = Int(text)
        case let other?: throw ServingError.invalidConfig(key: "\(key).version", expected: "a positive integer", got: other.brief)
        }
        self.init(model: model, version: version, minConfidence: threshold)
    }

    /// Whether a row with this top-1 probability goes to the cascade target.
    public func escalates(topProbability: Double) -> Bool { !(topProbability >= minConfidence) }

    /// The cycle that following cascade targets from `model` runs into (e.g. ["a", "b", "a"]), or nil when the
    /// chain ends. `targets` maps each model with a cascade to its target.
    public static func cycle(from model: String, targets: [String: String]) -> [String]? {
        var path = [model]
        var seen: Set<String> = [model]
        var current = model
        while let next = targets[current] {
            path.append(next)
            if seen.contains(next), let start = path.firstIndex(of: next) { return Array(path[start...]) }
            seen.insert(next)
            current = next
        }
        return nil
    }
}
