// Which version an inference request runs on (issue #15, step 1 of a request):
//
//  1. a version named in the request (path, gRPC `model_version`) always wins: canary checks and pinned clients
//     bypass the split;
//  2. else a pinned default (`POST /v2/repository/models/{m}/default`) wins: a pin is a rollback, so it overrides
//     any split;
//  3. else the model's traffic split (the run-time override, else config.json's `traffic`) draws among its READY
//     versions, by a hash of the routing key when the client sent one (the V2 `id`, else its `X-Request-ID`) so a
//     retry lands on the same version, at random otherwise;
//  4. else (no split, or none of its versions READY) the highest READY version.

/// Where a model's effective traffic split comes from.
public enum TrafficSource: String, Sendable {
    /// config.json's `traffic`.
    case config
    /// Set with `POST /v2/repository/models/{m}/traffic`; lasts until `DELETE`, an unload or a restart.
    case override
}

/// A model's split in effect and where it came from (the repository index's `traffic` and `traffic_source`).
public struct ModelTraffic: Sendable, Equatable {
    /// Weights by version.
    public var split: TrafficSplit
    /// Config or run-time override.
    public var source: TrafficSource

    /// A split from `source`.
    public init(split: TrafficSplit, source: TrafficSource) {
        self.split = split
        self.source = source
    }

    /// The run-time override when set, else the config's split; nil when there is neither.
    public static func effective(config: TrafficSplit?, override: TrafficSplit?) -> ModelTraffic? {
        if let override { return ModelTraffic(split: override, source: .override) }
        return config.map { ModelTraffic(split: $0, source: .config) }
    }
}

/// The version rules above as a pure function, so tests can drive each one.
public enum TrafficRouting {
    /// The version to run on, or nil for "the normal default" (highest READY). `pinned` is the pinned version only
    /// while it is READY; `ready` are the READY versions; `routingKey` is the client's id, never a generated one.
    public static func version<R: RandomNumberGenerator>(requested: Int?, pinned: Int?, split: TrafficSplit?, ready: Set<Int>,
                                                         routingKey: String?, using generator: inout R) -> Int? {
        if let requested { return requested }
        if let pinned { return pinned }
        return split?.choose(ready: ready, requestID: routingKey, using: &generator)
    }
}

extension ModelRegistry {
    /// The version an inference request runs on, by the rules above; `routingKey` is the client's request id (nil
    /// when it sent none: the split then draws at random).
    ///
    /// Throws like `resolve(model:version:)`: `.modelNotFound`, `.versionNotFound` or `.notReady`.
    public nonisolated func route(model: String, version: Int?, routingKey: String?) throws -> ServedVersion {
        guard version == nil, let state = trafficState(of: model), let traffic = state.traffic else {
            return try resolve(model: model, version: version)
        }
        var generator = SystemRandomNumberGenerator()
        let chosen = TrafficRouting.version(requested: nil, pinned: state.pinned, split: traffic.split, ready: Set(state.ready.keys),
                                            routingKey: routingKey, using: &generator)
        return try chosen.flatMap { state.ready[$0] } ?? resolve(model: model, version: nil)
    }
}

/// What `route` needs of one model, published with the registry's routing table after every change.
struct TrafficState: Sendable {
    /// The pinned version while it is READY.
    var pinned: Int?
    /// The split in effect.
    var traffic: ModelTraffic?
    /// READY versions.
    var ready: [Int: ServedVersion]
}

extension TrafficSplit: CustomStringConvertible {
    /// `{"2": 90, "3": 10}`, the config.json form (whole weights without a fraction).
    public var description: String {
        "{" + weights.map { "\"\($0.version)\": \(TrafficSplit.text($0.weight))" }.joined(separator: ", ") + "}"
    }

    /// A weight as config.json would spell it: `90`, `12.5`.
    static func text(_ weight: Double) -> String {
        weight == weight.rounded() && abs(weight) < 1e15 ? String(Int64(weight)) : String(weight)
    }
}
