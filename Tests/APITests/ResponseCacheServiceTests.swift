import Foundation
import HTTP
import Infrastructure
import Protobuf
import Serving
import Testing
@testable import API

/// The response cache end to end on the real engine (the digits model): `X-Cache`, ids, `/stats`, `/config`, eviction
/// by size and a replaced version.
@Suite(.serialized) struct ResponseCacheServiceTests {
    /// Adds `"response_cache": {"enable": true}` to the config.json at `url`.
    static func enableResponseCache(in url: URL) throws {
        var config = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        config["response_cache"] = ["enable": true]
        try JSONSerialization.data(withJSONObject: config).write(to: url)
    }

    /// A V2 JSON request for digits' one 1x1x8x8 input, every pixel `value`.
    static func inferBody(_ value: Int, id: String, outputs: String = "") -> [UInt8] {
        let pixels = Array(repeating: String(value), count: 64).joined(separator: ",")
        return Array(#"{"id":"\#(id)","inputs":[{"name":"image","shape":[1,1,8,8],"datatype":"FP32","data":[\#(pixels)]}]\#(outputs)}"#.utf8)
    }

    private static func infer(_ service: OspreyService, _ value: Int, id: String, outputs: String = "") async -> HTTPResponse {
        await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/infer", body: inferBody(value, id: id, outputs: outputs)))
    }

    private static func get(_ service: OspreyService, _ path: String) async throws -> API.JSONValue {
        try API.JSONValue.parse(await service.responder(HTTPRequest(method: "GET", path: path)).body)
    }

    /// The value of an unlabelled sample in the exposition.
    private static func sample(_ service: OspreyService, _ name: String) -> Double? {
        service.metrics.exposition().split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    @Test func aSecondIdenticalRequestIsAHitWithTheSameOutputsAndTheCurrentID() async throws {
        let (service, temp) = try await ServiceTests.makeService(cacheBytes: 1 << 20, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        let first = await Self.infer(service, 3, id: "first")
        let second = await Self.infer(service, 3, id: "second")
        #expect(first.status == 200 && second.status == 200)
        #expect(first.headers["X-Cache"] == "miss" && second.headers["X-Cache"] == "hit")
        let a = try API.JSONValue.parse(first.body), b = try API.JSONValue.parse(second.body)
        #expect(b["id"] == .string("second"), "a hit echoes the current request's id")
        #expect(a["outputs"] == b["outputs"] && a["outputs"] != nil)
        // Encoding parameters are applied to the cached tensors for the current request: still a hit.
        let classified = await Self.infer(service, 3, id: "third", outputs: #","outputs":[{"name":"probabilities","parameters":{"classification":2}}]"#)
        #expect(classified.headers["X-Cache"] == "miss", "naming the outputs is another key")
        let again = await Self.infer(service, 3, id: "fourth", outputs: #","outputs":[{"name":"probabilities","parameters":{"classification":1}}]"#)
        #expect(again.headers["X-Cache"] == "hit")
        let top = try API.JSONValue.parse(again.body)["outputs"]?.arrayValue?.first
        #expect(top?["datatype"] == .string("BYTES") && top?["shape"] == .array([.integer(1), .integer(1)]))

        let stats = try await Self.get(service, "/v2/models/digits/stats")
        let inference = stats["model_stats"]?.arrayValue?.first?["inference_stats"]
        #expect(inference?["cache_hit"]?["count"] == .integer(2))
        #expect(inference?["cache_miss"]?["count"] == .integer(2))
        #expect((inference?["cache_hit"]?["ns"]?.intValue ?? 0) > 0)
        #expect(inference?["success"]?["count"] == .integer(4), "hits are successful requests too")
        #expect(stats["model_stats"]?.arrayValue?.first?["execution_count"]?.intValue ?? 0 >= 2)
        let config = try await Self.get(service, "/v2/models/digits/config")
        #expect(config["response_cache"] == .object(["enable": .bool(true)]))
    }

    @Test func classifyIsCachedAndAppliesTopKToAHit() async throws {
        let (service, temp) = try await ServiceTests.makeService(cacheBytes: 1 << 20, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        let image = try [UInt8](Data(contentsOf: ServiceTests.examples.appendingPathComponent("digit_8.png")))
        func classify(_ topK: Int) async throws -> (String?, [API.JSONValue]) {
            let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", query: "top_k=\(topK)", body: image))
            #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
            return (response.headers["X-Cache"], try ServiceTests.json(response)["classifications"]?.arrayValue?.first?.arrayValue ?? [])
        }
        let (first, ranked) = try await classify(3)
        let (second, again) = try await classify(1)
        #expect(first == "miss" && second == "hit")
        #expect(ranked.count == 3 && again.count == 1 && again.first == ranked.first, "top_k is applied to the hit")
        #expect(ranked.first?["label"]?.stringValue == "8")
        let other = try [UInt8](Data(contentsOf: ServiceTests.examples.appendingPathComponent("digit_2.png")))
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", body: other))
        #expect(response.headers["X-Cache"] == "miss", "another image is another key")
    }

    @Test func noHeaderWithoutACacheOrForAModelThatDoesNotEnableIt() async throws {
        let (serverOff, temp) = try await ServiceTests.makeService(cacheBytes: 0, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        for id in ["a", "b"] {
            let response = await Self.infer(serverOff, 1, id: id)
            #expect(response.status == 200 && response.headers["X-Cache"] == nil)
        }
        let (modelOff, temp2) = try await ServiceTests.makeService(cacheBytes: 1 << 20)
        defer { try? FileManager.default.removeItem(at: temp2) }
        for id in ["a", "b"] {
            let response = await Self.infer(modelOff, 1, id: id)
            #expect(response.status == 200 && response.headers["X-Cache"] == nil)
        }
        let config = try await Self.get(modelOff, "/v2/models/digits/config")
        #expect(config["response_cache"] == .object(["enable": .bool(false)]))
        let stats = try await Self.get(modelOff, "/v2/models/digits/stats")
        #expect(stats["model_stats"]?.arrayValue?.first?["inference_stats"]?["cache_miss"] == .object(["count": .integer(0), "ns": .integer(0)]))
    }

    @Test func theLeastRecentlyUsedEntryIsEvictedWhenTheBytesRunOut() async throws {
        // One entry's size, measured on a roomy cache; then a cache that holds two and a half entries.
        let (probe, temp) = try await ServiceTests.makeService(cacheBytes: 1 << 20, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        _ = await Self.infer(probe, 0, id: "x")
        let entry = Int(try #require(Self.sample(probe, "osprey_cache_bytes")))
        #expect(entry > 40)
        let (service, temp2) = try await ServiceTests.makeService(cacheBytes: 2 * entry + entry / 2, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp2) }
        for value in [1, 2] { #expect(await Self.infer(service, value, id: "fill").headers["X-Cache"] == "miss") }
        #expect(await Self.infer(service, 1, id: "touch").headers["X-Cache"] == "hit")  // 2 is now the oldest
        #expect(Self.sample(service, "osprey_cache_evictions_total") == 0)
        #expect(await Self.infer(service, 3, id: "new").headers["X-Cache"] == "miss")
        #expect(Self.sample(service, "osprey_cache_evictions_total") == 1)
        #expect(Self.sample(service, "osprey_cache_bytes") == Double(2 * entry))
        #expect(await Self.infer(service, 1, id: "kept").headers["X-Cache"] == "hit")
        #expect(await Self.infer(service, 3, id: "kept").headers["X-Cache"] == "hit")
        #expect(await Self.infer(service, 2, id: "gone").headers["X-Cache"] == "miss", "the least recently used entry was evicted")
    }

    @Test func aReplacedVersionIsNeverAnsweredFromTheOldEntry() async throws {
        let (service, temp) = try await ServiceTests.makeService(cacheBytes: 1 << 20, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        #expect(await Self.infer(service, 5, id: "a").headers["X-Cache"] == "miss")
        #expect(await Self.infer(service, 5, id: "b").headers["X-Cache"] == "hit")
        let bytes = try [UInt8](Data(contentsOf: temp.appendingPathComponent("digits/1/model.onnx")))
        try await service.registry.putVersion(model: "digits", version: 1, bytes: bytes, replace: true)
        let after = await Self.infer(service, 5, id: "c")
        #expect(after.status == 200 && after.headers["X-Cache"] == "miss", "the new load starts with an empty cache")
        let stats = try await Self.get(service, "/v2/models/digits/versions/1/stats")
        let inference = stats["model_stats"]?.arrayValue?.first?["inference_stats"]
        #expect(inference?["cache_hit"]?["count"] == .integer(0) && inference?["cache_miss"]?["count"] == .integer(1))
        #expect(await Self.infer(service, 5, id: "d").headers["X-Cache"] == "hit")
    }

    @Test func aCascadedAnswerIsCachedWithWhoAnsweredButAFallbackIsNot() async throws {
        let temp = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-cache-cascade-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: CascadeTests.fixtures.appendingPathComponent("repository"), to: temp)
        defer { try? FileManager.default.removeItem(at: temp) }
        try Self.enableResponseCache(in: temp.appendingPathComponent("small/config.json"))
        let metrics = Metrics(includeProcessMetrics: false)
        let registry = ModelRegistry(repositoryPath: temp.path, loader: engineLoader, metrics: metrics)
        await registry.loadAll()
        var options = ServiceOptions()
        options.cacheBytes = 1 << 20
        let service = OspreyService(registry: registry, metrics: metrics, workers: BlockingExecutor(name: "cache-cascade", threads: 2),
                                    options: options)
        func infer(_ row: [Float], id: String) async throws -> (String?, API.JSONValue) {
            let data = row.map { String($0) }.joined(separator: ",")
            let body = #"{"id":"\#(id)","inputs":[{"name":"x","shape":[1,1,4,4],"datatype":"FP32","data":[\#(data)]}]}"#
            let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/small/infer", body: Array(body.utf8)))
            #expect(response.status == 200)
            return (response.headers["X-Cache"], try ServiceTests.json(response))
        }
        let (first, computed) = try await infer(CascadeTests.unsure, id: "a")
        let (second, answered) = try await infer(CascadeTests.unsure, id: "b")
        #expect(first == "miss" && second == "hit")
        #expect(computed["parameters"]?["answered_by"] == .string("large/1") && answered["parameters"] == computed["parameters"],
                "a hit says who answered, as the computed response did")
        #expect(answered["outputs"] == computed["outputs"] && answered["id"] == .string("b"))

        // The target gone, an unsure row keeps small's answer, marked unavailable: not stored, so once the target is
        // back the next request escalates again.
        try await registry.unload(model: "large")
        var faint = CascadeTests.unsure
        faint[1] = 0.05
        let (fallback, unavailable) = try await infer(faint, id: "c")
        #expect(fallback == "miss" && unavailable["parameters"]?["cascade_unavailable"]?.boolValue == true)
        let (again, _) = try await infer(faint, id: "d")
        #expect(again == "miss", "a fallback answer is not cached")
    }

    @Test func grpcStatisticsAndConfigCarryTheCacheFields() async throws {
        let (service, temp) = try await ServiceTests.makeService(responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        // ModelConfigResponse.config #1 -> response_cache #24 -> enable #1.
        let config = GRPCModelConfigEncoder.encode(try service.registry.resolve(model: "digits"))
        #expect(try Self.scalars(config, path: [1, 24]) == [1: 1])
        var stats = ModelStatistics(name: "m", version: 1)
        stats.cacheHit = DurationStatistic(count: 3, nanoseconds: 700)
        stats.cacheMiss = DurationStatistic(count: 2, nanoseconds: 900)
        let encoded = GRPCMessages.encodeStatistics([stats])
        // ModelStatisticsResponse.model_stats #1 -> inference_stats #6 -> cache_hit #7 / cache_miss #8 -> count #1, ns #2.
        #expect(try Self.scalars(encoded, path: [1, 6, 7]) == [1: 3, 2: 700])
        #expect(try Self.scalars(encoded, path: [1, 6, 8]) == [1: 2, 2: 900])
    }

    /// The scalar fields of the message found by following `path` (field numbers of nested messages).
    private static func scalars(_ bytes: [UInt8], path: [Int]) throws -> [Int: UInt64] {
        try bytes.withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            var remaining = path[...]
            var found: [Int: UInt64] = [:]
            while let field = try reader.next() {
                if let next = remaining.first {
                    guard field.number == next else { continue }
                    remaining = remaining.dropFirst()
                    reader = try field.message("nested")
                } else {
                    found[field.number] = field.scalar
                }
            }
            return found
        }
    }
}
