import Testing
@testable import Serving
import TestSupport


private func key(_ model: String, _ version: Int, _ bytes: [UInt8], outputs: [String] = ["y"]) -> ResponseCacheKey {
    var builder = ResponseCacheKey.Builder(model: model, version: version)
    bytes.withUnsafeBytes { builder.addInput(name: "x", datatype: "FP32", shape: [1, bytes.count / 4], bytes: $0) }
    builder.addOutputs(outputs)
    return builder.finish()
}

@Suite struct ResponseCacheTests {
    @Test func keyCoversVersionBytesShapeAndOutputs() {
        let base = key("m", 1, [1, 2, 3, 4])
        #expect(base == key("m", 1, [1, 2, 3, 4]))
        #expect(base != key("m", 2, [1, 2, 3, 4]), "another version never shares an entry")
        #expect(base != key("n", 1, [1, 2, 3, 4]))
        #expect(base != key("m", 1, [1, 2, 3, 5]))
        #expect(base != key("m", 1, [1, 2, 3, 4], outputs: ["z"]))
        var reshaped = ResponseCacheKey.Builder(model: "m", version: 1)
        [UInt8]([1, 2, 3, 4]).withUnsafeBytes { reshaped.addInput(name: "x", datatype: "FP32", shape: [1, 1, 1], bytes: $0) }
        reshaped.addOutputs(["y"])
        #expect(base != reshaped.finish(), "the shape is part of the key")
        #expect(base.digest.count == 32)
    }

    @Test func hitsMissesAndMetrics() {
        let metrics = Metrics(includeProcessMetrics: false)
        let cache = ResponseCache<[Float]>(capacityBytes: 1000, metrics: metrics)
        let k = key("m", 1, [0, 0, 128, 63])
        guard case .miss = cache.lookup(k, model: "m", version: 1) else { Issue.record("empty cache hit"); return }
        cache.insert(k, value: [1, 2], bytes: 8, model: "m", version: 1)
        guard case .hit(let value) = cache.lookup(k, model: "m", version: 1) else { Issue.record("stored value missed"); return }
        #expect(value == [1, 2])
        let text = metrics.exposition()
        #expect(text.contains("osprey_cache_hits_total{model=\"m\",version=\"1\"} 1"))
        #expect(text.contains("osprey_cache_misses_total{model=\"m\",version=\"1\"} 1"))
        #expect(text.contains("osprey_cache_bytes 8"))
    }

    @Test func evictsLeastRecentlyUsedToStayWithinBytes() {
        let metrics = Metrics(includeProcessMetrics: false)
        let cache = ResponseCache<Int>(capacityBytes: 300, metrics: metrics)
        let keys = (0..<4).map { key("m", 1, [UInt8($0), 0, 0, 0]) }
        cache.insert(keys[0], value: 0, bytes: 100, model: "m", version: 1)
        cache.insert(keys[1], value: 1, bytes: 100, model: "m", version: 1)
        cache.insert(keys[2], value: 2, bytes: 100, model: "m", version: 1)
        _ = cache.lookup(keys[0], model: "m", version: 1)  // 0 is now the most recent; 1 is the oldest
        cache.insert(keys[3], value: 3, bytes: 100, model: "m", version: 1)
        #expect(cache.heldBytes == 300)
        #expect(cache.count == 3)
        #expect(cache.evictions == 1)
        if case .hit = cache.lookup(keys[1], model: "m", version: 1) { Issue.record("the least recently used entry survived") }
        for i in [0, 2, 3] {
            guard case .hit(let value) = cache.lookup(keys[i], model: "m", version: 1) else { Issue.record("entry \(i) evicted"); continue }
            #expect(value == i)
        }
        cache.insert(key("m", 1, [9, 9, 9, 9]), value: 9, bytes: 301, model: "m", version: 1)
        #expect(cache.count == 3, "an entry larger than the budget is not stored and evicts nothing")
        #expect(metrics.exposition().contains("osprey_cache_evictions_total 1"))
    }

    @Test func removingAVersionDropsOnlyItsEntries() {
        let cache = ResponseCache<Int>(capacityBytes: 1000)
        cache.insert(key("m", 1, [1, 0, 0, 0]), value: 1, bytes: 10, model: "m", version: 1)
        cache.insert(key("m", 2, [1, 0, 0, 0]), value: 2, bytes: 10, model: "m", version: 2)
        cache.insert(key("n", 1, [1, 0, 0, 0]), value: 3, bytes: 10, model: "n", version: 1)
        cache.removeAll(model: "m", version: 1)
        #expect(cache.count == 2 && cache.heldBytes == 20)
        cache.removeAll(model: "m")
        #expect(cache.count == 1)
        // Slots are reused after removal.
        cache.insert(key("m", 3, [1, 0, 0, 0]), value: 4, bytes: 10, model: "m", version: 3)
        guard case .hit(let value) = cache.lookup(key("m", 3, [1, 0, 0, 0]), model: "m", version: 3) else { Issue.record("miss"); return }
        #expect(value == 4)
    }
}

@Suite struct TrafficSplitTests {
    @Test func parsesAndRefusesBadSplits() throws {
        let split = try TrafficSplit(parsing: .object(["2": .number(90), "3": .number(10)]))
        #expect(split.byVersion == [2: 90, 3: 10])
        for bad: ConfigValue in [.array([]), .object([:]), .object(["x": .number(1)]), .object(["0": .number(1)]),
                                 .object(["2": .number(-1)]), .object(["2": .string("90")]), .object(["2": .number(0)])] {
            #expect(throws: ServingError.self) { try TrafficSplit(parsing: bad) }
        }
    }

    @Test func proportionsOverAThousandRequestsFollowTheWeights() throws {
        let split = try TrafficSplit([2: 90, 3: 10])
        var generator = SeededGenerator(seed: 42)
        var counts: [Int: Int] = [:]
        for _ in 0..<1000 { counts[split.choose(ready: [2, 3], requestID: nil, using: &generator)!, default: 0] += 1 }
        #expect(abs(counts[3, default: 0] - 100) <= 30, "version 3 got \(counts[3, default: 0]) of 1000 at weight 10%")
        // Client ids: deterministic per id, proportional over many ids.
        var byID: [Int: Int] = [:]
        for i in 0..<1000 {
            let id = "request-\(i)"
            let first = split.choose(ready: [2, 3], requestID: id, using: &generator)
            #expect(first == split.choose(ready: [2, 3], requestID: id, using: &generator), "a retry of \(id) moved")
            byID[first!, default: 0] += 1
        }
        #expect(abs(byID[3, default: 0] - 100) <= 30, "version 3 got \(byID[3, default: 0]) of 1000 ids")
    }

    @Test func onlyReadyVersionsTakeTraffic() throws {
        let split = try TrafficSplit([2: 90, 3: 10])
        var generator = SeededGenerator(seed: 1)
        for _ in 0..<50 { #expect(split.choose(ready: [3, 4], requestID: nil, using: &generator) == 3) }
        #expect(split.choose(ready: [4], requestID: "x", using: &generator) == nil, "no weighted version READY: the default serves")
    }
}

@Suite struct CascadePolicyTests {
    @Test func parsesTheSection() throws {
        let policy = try CascadePolicy(parsing: .object(["model": .string("big"), "min_confidence": .number(0.6), "version": .number(2)]))
        #expect(policy == CascadePolicy(model: "big", version: 2, minConfidence: 0.6))
        #expect(policy.escalates(topProbability: 0.59) && !policy.escalates(topProbability: 0.6) && policy.escalates(topProbability: .nan))
        for bad: ConfigValue in [.string("big"), .object(["model": .string("big")]), .object(["min_confidence": .number(0.5)]),
                                 .object(["model": .string("../x"), "min_confidence": .number(0.5)]),
                                 .object(["model": .string("big"), "min_confidence": .number(1.5)]),
                                 .object(["model": .string("big"), "min_confidence": .number(0.5), "version": .number(0)]),
                                 .object(["model": .string("big"), "min_confidence": .number(0.5), "threshold": .number(1)])] {
            #expect(throws: ServingError.self) { try CascadePolicy(parsing: bad) }
        }
    }

    @Test func findsCycles() {
        #expect(CascadePolicy.cycle(from: "a", targets: ["a": "b", "b": "c"]) == nil)
        #expect(CascadePolicy.cycle(from: "a", targets: ["a": "b", "b": "a"]) == ["a", "b", "a"])
        #expect(CascadePolicy.cycle(from: "x", targets: ["x": "a", "a": "b", "b": "a"]) == ["a", "b", "a"])
        #expect(CascadePolicy.cycle(from: "a", targets: ["a": "a"]) == ["a", "a"])
    }

    @Test func configJSONCarriesAllThree() throws {
        let config = try ModelConfig(json: Array(#"{"cascade": {"model": "big", "min_confidence": 0.6}, "traffic": {"1": 1}, "response_cache": {"enable": true}}"#.utf8))
        #expect(config.cascade?.model == "big")
        #expect(config.traffic?.byVersion == [1: 1])
        #expect(config.responseCacheEnabled)
        #expect(throws: ServingError.self) { try ModelConfig(json: Array(#"{"response_cache": {"enable": "yes"}}"#.utf8)) }
    }
}
