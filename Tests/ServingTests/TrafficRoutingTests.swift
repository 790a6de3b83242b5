import Foundation
import Testing
@testable import Serving

/// Version resolution with a traffic split (issue #15, deliverable 2): the pure rules, then the registry over fake models.
@Suite struct TrafficRoutingTests {
    private struct FixedGenerator: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    @Test func aNamedVersionWinsThenAPinThenTheSplit() throws {
        let split = try TrafficSplit([2: 100])
        var generator = FixedGenerator(value: 0)
        #expect(TrafficRouting.version(requested: 1, pinned: 3, split: split, ready: [1, 2, 3], routingKey: "k", using: &generator) == 1)
        #expect(TrafficRouting.version(requested: nil, pinned: 3, split: split, ready: [1, 2, 3], routingKey: "k", using: &generator) == 3)
        #expect(TrafficRouting.version(requested: nil, pinned: nil, split: split, ready: [1, 2, 3], routingKey: "k", using: &generator) == 2)
        #expect(TrafficRouting.version(requested: nil, pinned: nil, split: nil, ready: [1, 2, 3], routingKey: "k", using: &generator) == nil,
                "no split: the normal default")
        #expect(TrafficRouting.version(requested: nil, pinned: nil, split: split, ready: [1, 3], routingKey: "k", using: &generator) == nil,
                "no weighted version READY: the normal default")
    }

    @Test func theEffectiveSplitIsTheOverrideElseTheConfig() throws {
        let config = try TrafficSplit([1: 1]), override = try TrafficSplit([2: 1])
        #expect(ModelTraffic.effective(config: config, override: override) == ModelTraffic(split: override, source: .override))
        #expect(ModelTraffic.effective(config: config, override: nil) == ModelTraffic(split: config, source: .config))
        #expect(ModelTraffic.effective(config: nil, override: nil) == nil)
        #expect(override.description == #"{"2": 1}"#)
        #expect(try TrafficSplit([2: 90, 3: 12.5]).description == #"{"2": 90, "3": 12.5}"#)
        #expect(throws: ServingError.self, "weights whose sum overflows") { try TrafficSplit([1: 1e308, 2: 1e308]) }
    }

    /// Model `m`: version 1 scales by 1, 2 by 2, 3 fails to load; all three selected by the policy.
    private func makeRegistry(traffic: String) async -> (ModelRegistry, TempRepository) {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        repo.addVersion("m", 2, "scale=2")
        repo.addVersion("m", 3, "garbage")
        repo.setConfig("m", #"{"version_policy": {"all": {}}, "traffic": \#(traffic)}"#)
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader())
        await registry.loadAll()
        return (registry, repo)
    }

    /// How many of `count` requests keyed `key-0...` each version took.
    private func counts(_ registry: ModelRegistry, version: Int? = nil, keyed: Bool = true, count: Int = 1000) throws -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for i in 0..<count {
            counts[try registry.route(model: "m", version: version, routingKey: keyed ? "key-\(i)" : nil).version, default: 0] += 1
        }
        return counts
    }

    @Test func notReadyVersionsAreSkippedAndTheRestFollowTheWeights() async throws {
        let (registry, repo) = await makeRegistry(traffic: #"{"1": 25, "2": 75, "3": 1000}"#)
        defer { withExtendedLifetime(repo) {} }
        #expect(registry.index().map(\.state) == [.ready, .ready, .failed])
        let split = try counts(registry)
        #expect(split[3] == nil, "the FAILED version takes nothing")
        #expect(abs(split[1, default: 0] - 250) <= 40, "version 1 (weight 25 of 100 READY) took \(split[1, default: 0]) of 1000")
        let unkeyed = try counts(registry, keyed: false)
        #expect(abs(unkeyed[1, default: 0] - 250) <= 60, "at random, version 1 took \(unkeyed[1, default: 0]) of 1000")
    }

    @Test func theSameKeyLandsOnTheSameVersion() async throws {
        let (registry, repo) = await makeRegistry(traffic: #"{"1": 50, "2": 50}"#)
        defer { withExtendedLifetime(repo) {} }
        for i in 0..<200 {
            let first = try registry.route(model: "m", version: nil, routingKey: "retry-\(i)").version
            for _ in 0..<3 { #expect(try registry.route(model: "m", version: nil, routingKey: "retry-\(i)").version == first) }
        }
        #expect(try counts(registry, count: 200).count == 2, "different keys reach both versions")
    }

    @Test func aNamedVersionBypassesTheSplitAndAPinOverridesIt() async throws {
        let (registry, repo) = await makeRegistry(traffic: #"{"2": 100}"#)
        defer { withExtendedLifetime(repo) {} }
        #expect(try counts(registry, count: 50) == [2: 50])
        #expect(try counts(registry, version: 1, count: 50) == [1: 50], "a version in the request wins")
        #expect(throws: ServingError.self) { try registry.route(model: "m", version: 3, routingKey: "k") }
        try await registry.pin(model: "m", version: 1)
        #expect(try counts(registry, count: 50) == [1: 50], "a pinned default overrides the split")
        try await registry.unpin(model: "m")
        #expect(try counts(registry, count: 50) == [2: 50])
    }

    @Test func withNoWeightedVersionReadyTheHighestReadyServes() async throws {
        let (registry, repo) = await makeRegistry(traffic: #"{"3": 100, "7": 1}"#)
        defer { withExtendedLifetime(repo) {} }
        #expect(try counts(registry, count: 50) == [2: 50])
        #expect(throws: ServingError.modelNotFound(model: "nope")) { try registry.route(model: "nope", version: nil, routingKey: nil) }
    }

    @Test func aRunTimeSplitOverridesTheConfigUntilClearedOrUnloaded() async throws {
        let (registry, repo) = await makeRegistry(traffic: #"{"2": 100}"#)
        defer { withExtendedLifetime(repo) {} }
        let config = ModelTraffic(split: try TrafficSplit([2: 100]), source: .config)
        #expect(registry.index().allSatisfy { $0.traffic == config })
        let override = try await registry.setTraffic(model: "m", split: try TrafficSplit([1: 100]))
        #expect(override.source == .override)
        #expect(try counts(registry, count: 50) == [1: 50])
        #expect(registry.index().allSatisfy { $0.traffic == override }, "the index shows the split in effect and its source")
        #expect(try await registry.clearTraffic(model: "m") == config)
        #expect(try counts(registry, count: 50) == [2: 50])
        try await registry.setTraffic(model: "m", split: try TrafficSplit([1: 100]))
        try await registry.unload(model: "m")
        try? await registry.load(model: "m")  // throws for the broken version 3; 1 and 2 load
        #expect(registry.index().first?.traffic == config, "an unload drops the run-time split, as it drops a pin")
        await #expect(throws: ServingError.modelNotFound(model: "nope")) { try await registry.setTraffic(model: "nope", split: try TrafficSplit([1: 1])) }
        await #expect(throws: ServingError.modelNotFound(model: "nope")) { try await registry.clearTraffic(model: "nope") }
    }
}
