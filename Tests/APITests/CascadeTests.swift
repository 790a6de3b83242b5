import Foundation
import HTTP
import Infrastructure
import Protobuf
import Serving
import Testing
@testable import API

/// The confidence cascade end to end on the real engine: Tests/Fixtures/cascade's `small` (sure of class c when the top
/// pixel row holds a white pixel at column c, unsure of a faint one) cascades below 0.6 to `large` (the second row).
@Suite(.serialized) struct CascadeTests {
    static let fixtures = ServiceTests.repoRoot.appendingPathComponent("Tests/Fixtures/cascade")
    /// small: sure of class 0 (p 0.9989); large: sure of class 2.
    static let sure: [Float] = [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    /// small: unsure (logit 0.8, p 0.426, class 0); large: sure of class 2.
    static let unsure: [Float] = [0.1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]

    /// A service over a temporary copy of the cascade repository; `logged` collects warnings and errors. With
    /// `cacheBytes`, the server has a response cache of that size and `small` enables it.
    static func makeService(logged: Locked<[String]> = Locked([]), cacheBytes: Int = 0) async throws -> (OspreyService, URL) {
        let temp = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-cascade-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: fixtures.appendingPathComponent("repository"), to: temp)
        if cacheBytes > 0 { try ResponseCacheServiceTests.enableResponseCache(in: temp.appendingPathComponent("small/config.json")) }
        let metrics = Metrics(includeProcessMetrics: false)
        let logger = Logger(level: .warning) { _, message, _ in logged.withLock { $0.append(message) } }
        let registry = ModelRegistry(repositoryPath: temp.path, loader: engineLoader, metrics: metrics, logger: logger)
        await registry.loadAll()
        var options = ServiceOptions()
        options.cacheBytes = cacheBytes
        let service = OspreyService(registry: registry, metrics: metrics, workers: BlockingExecutor(name: "cascade-worker", threads: 2),
                                    options: options)
        return (service, temp)
    }

    static func infer(_ service: OspreyService, _ model: String = "small", rows: [[Float]], extra: String = "") async throws -> API.JSONValue {
        let data = rows.flatMap { $0 }.map { String($0) }.joined(separator: ",")
        let body = #"{"inputs":[{"name":"x","shape":[\#(rows.count),1,4,4],"datatype":"FP32","data":[\#(data)]}]\#(extra)}"#
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/\(model)/infer", body: Array(body.utf8)))
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try ServiceTests.json(response)
    }

    static func classify(_ service: OspreyService, _ images: [String]) async throws -> API.JSONValue {
        var body: [UInt8] = []
        for name in images {
            body += Array("--B\r\nContent-Disposition: form-data; name=\"\(name)\"; filename=\"\(name)\"\r\nContent-Type: image/png\r\n\r\n".utf8)
            body += try [UInt8](Data(contentsOf: fixtures.appendingPathComponent(name)))
            body += Array("\r\n".utf8)
        }
        body += Array("--B--\r\n".utf8)
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/small/classify", query: "top_k=1",
                                                           headers: ["Content-Type": "multipart/form-data; boundary=B"], body: body))
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try ServiceTests.json(response)
    }

    static func numbers(_ value: API.JSONValue?) -> [Double] {
        value?.arrayValue?.compactMap(\.doubleValue) ?? value?.doubleValue.map { [$0] } ?? []
    }

    static func scrape(_ service: OspreyService) -> String { service.metrics.exposition() }

    @Test func inferEscalatesOnlyTheUnsureRowsAndMergesThemInOrder() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let body = try await Self.infer(service, rows: [Self.sure, Self.unsure, Self.sure])
        #expect(body["model_name"]?.stringValue == "small" && body["model_version"]?.stringValue == "1")
        let parameters = try #require(body["parameters"])
        #expect(parameters["cascaded"]?.boolValue == true)
        #expect(parameters["answered_by"]?.arrayValue?.compactMap(\.stringValue) == ["small/1", "large/1", "small/1"])
        let scores = Self.numbers(parameters["first_score"])
        #expect(scores.count == 3)
        #expect(abs(scores[0] - 0.99899) < 1e-4 && abs(scores[1] - 0.4259) < 1e-3 && abs(scores[2] - 0.99899) < 1e-4, "\(scores)")
        #expect(parameters["cascade_unavailable"] == nil)
        // Kept rows are small's logits; the escalated row is large's answer (its probabilities), in request order.
        let output = try #require(body["outputs"]?.arrayValue?.first)
        #expect(output["name"]?.stringValue == "logits")
        #expect(output["shape"]?.arrayValue?.compactMap(\.intValue) == [3, 4])
        let values = Self.numbers(output["data"])
        #expect(values.count == 12)
        #expect(Array(values[0..<4]) == [8, 0, 0, 0] && Array(values[8..<12]) == [8, 0, 0, 0])
        #expect(abs(values[6] - 0.99899) < 1e-4 && abs(values[4] - 0.000335) < 1e-5, "\(values)")

        let kept = try await Self.infer(service, rows: [Self.sure])
        #expect(kept["parameters"]?["cascaded"]?.boolValue == false)
        #expect(kept["parameters"]?["answered_by"]?.stringValue == "small/1")
        #expect(kept["parameters"]?["first_score"]?.doubleValue.map { abs($0 - 0.99899) < 1e-4 } == true)
        let escalated = try await Self.infer(service, rows: [Self.unsure, Self.unsure])
        #expect(escalated["parameters"]?["answered_by"]?.stringValue == "large/1", "one answer when every row agrees")
        #expect(Self.numbers(escalated["parameters"]?["first_score"]).count == 2)
        // A model without a cascade reports nothing; /config shows the cascade as config.json spells it.
        let plain = try await Self.infer(service, "large", rows: [Self.unsure])
        #expect(plain["parameters"] == nil)
        let config = try ServiceTests.json(await service.responder(HTTPRequest(method: "GET", path: "/v2/models/small/config")))
        #expect(config["cascade"]?["model"]?.stringValue == "large" && config["cascade"]?["min_confidence"]?.doubleValue == 0.6)
        #expect(config["cascade"]?["version"] == nil)

        let text = Self.scrape(service)
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="kept"} 3"#), "\(text)")
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="escalated"} 3"#))
        #expect(!text.contains(#"osprey_cascade_requests_total{model="large""#))
        // Top-1 scores on /infer: every row of small, and large's rows (3 escalated plus 1 called directly).
        #expect(text.contains(#"osprey_classification_top_score_count{model="small",version="1"} 6"#))
        #expect(text.contains(#"osprey_classification_top_score_count{model="large",version="1"} 4"#))
    }

    @Test func aCachedCascadedAnswerEndsWhenItsTargetChanges() async throws {
        let (service, temp) = try await Self.makeService(cacheBytes: 1 << 20)
        defer { try? FileManager.default.removeItem(at: temp) }
        func infer(_ row: [Float]) async throws -> (cache: String?, body: API.JSONValue) {
            let data = row.map { String($0) }.joined(separator: ",")
            let body = #"{"inputs":[{"name":"x","shape":[1,1,4,4],"datatype":"FP32","data":[\#(data)]}]}"#
            let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/small/infer", body: Array(body.utf8)))
            #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
            return (response.headers["X-Cache"], try ServiceTests.json(response))
        }
        #expect(try await infer(Self.unsure).cache == "miss")
        let hit = try await infer(Self.unsure)
        #expect(hit.cache == "hit" && hit.body["parameters"]?["answered_by"]?.stringValue == "large/1")
        #expect(try await infer(Self.sure).cache == "miss")
        // The target goes away: the escalated answer is recomputed (now marked unavailable), the kept one still hits.
        try await service.registry.unload(model: "large")
        let recomputed = try await infer(Self.unsure)
        #expect(recomputed.cache == "miss")
        #expect(recomputed.body["parameters"]?["answered_by"]?.stringValue == "small/1")
        #expect(recomputed.body["parameters"]?["cascade_unavailable"]?.boolValue == true)
        #expect(try await infer(Self.sure).cache == "hit")
    }

    @Test func binaryResponsesCarryTheParametersInTheirJSONHeader() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let data = (Self.sure + Self.unsure).map { String($0) }.joined(separator: ",")
        let body = #"{"inputs":[{"name":"x","shape":[2,1,4,4],"datatype":"FP32","data":[\#(data)]}],"outputs":[{"name":"logits","parameters":{"binary_data":true}}]}"#
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/small/infer", body: Array(body.utf8)))
        #expect(response.status == 200)
        let length = try #require(response.headers["Inference-Header-Content-Length"].flatMap { Int($0) })
        let header = try API.JSONValue.parse(Array(response.body[..<length]))
        #expect(header["parameters"]?["answered_by"]?.arrayValue?.compactMap(\.stringValue) == ["small/1", "large/1"])
        #expect(response.body.count - length == 2 * 4 * 4)
    }

    @Test func encodedImagesOnInferReachTheTargetStillEncoded() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        var data: [UInt8] = []
        for name in ["unsure.png", "sure.png"] {
            let png = try [UInt8](Data(contentsOf: Self.fixtures.appendingPathComponent(name)))
            let n = UInt32(png.count)
            data += [UInt8(n & 0xff), UInt8(n >> 8 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 24)] + png
        }
        let header = #"{"inputs":[{"name":"x","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":\#(data.count)}}]}"#
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/small/infer",
                                                           headers: ["Inference-Header-Content-Length": String(header.utf8.count)],
                                                           body: Array(header.utf8) + data))
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        let body = try ServiceTests.json(response)
        #expect(body["parameters"]?["answered_by"]?.arrayValue?.compactMap(\.stringValue) == ["large/1", "small/1"])
        let values = Self.numbers(body["outputs"]?.arrayValue?.first?["data"])
        #expect(values.count == 8 && abs(values[2] - 0.99899) < 1e-4 && values[4] == 8, "\(values)")
    }

    @Test func classifyReportsWhoAnsweredEachImage() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let body = try await Self.classify(service, ["sure.png", "unsure.png"])
        #expect(body["model_name"]?.stringValue == "small")
        let rows = body["classifications"]?.arrayValue ?? []
        #expect(rows.map { $0.arrayValue?.first?["label"]?.stringValue } == ["north", "south"], "small answers the sure image, large the other")
        let parameters = try #require(body["parameters"])
        #expect(parameters["cascaded"]?.boolValue == true)
        #expect(parameters["answered_by"]?.arrayValue?.compactMap(\.stringValue) == ["small/1", "large/1"])
        let scores = Self.numbers(parameters["first_score"])
        #expect(scores.count == 2 && scores[0] > 0.99 && abs(scores[1] - 0.4297) < 2e-3, "\(scores)")
        let single = try await Self.classify(service, ["unsure.png"])
        #expect(single["parameters"]?["answered_by"]?.stringValue == "large/1")
        let text = Self.scrape(service)
        #expect(text.contains(#"osprey_classification_top_score_count{model="small",version="1"} 3"#))
        #expect(text.contains(#"osprey_classification_top_score_count{model="large",version="1"} 2"#))
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="escalated"} 2"#))
    }

    @Test func aTargetThatCascadesTooAnswersThroughItsOwnTarget() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        // large hands everything below 0.9999 on to huge, a copy of large: small -> large -> huge.
        try FileManager.default.copyItem(at: temp.appendingPathComponent("large"), to: temp.appendingPathComponent("huge"))
        try await service.registry.load(model: "huge")
        let chained = #"{"max_batch_size": 8, "output": {"probabilities": true}, "cascade": {"model": "huge", "min_confidence": 0.9999}}"#
        try Data(chained.utf8).write(to: temp.appendingPathComponent("large/config.json"))
        try await service.registry.load(model: "large")
        let body = try await Self.infer(service, rows: [Self.sure, Self.unsure])
        #expect(body["parameters"]?["answered_by"]?.arrayValue?.compactMap(\.stringValue) == ["small/1", "huge/1"])
        #expect(Self.numbers(body["parameters"]?["first_score"]).count == 2)
        let text = Self.scrape(service)
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="escalated"} 1"#))
        #expect(text.contains(#"osprey_cascade_requests_total{model="large",outcome="escalated"} 1"#))
        #expect(text.contains(#"osprey_classification_top_score_count{model="huge",version="1"} 1"#))
    }

    @Test func anUnavailableTargetLeavesTheFirstAnswerMarked() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        try await service.registry.unload(model: "large")
        let body = try await Self.infer(service, rows: [Self.sure, Self.unsure])
        let parameters = try #require(body["parameters"])
        #expect(parameters["cascade_unavailable"]?.boolValue == true)
        #expect(parameters["cascaded"]?.boolValue == false)
        #expect(parameters["answered_by"]?.stringValue == "small/1")
        #expect(Array(Self.numbers(body["outputs"]?.arrayValue?.first?["data"])[4..<8]).first.map { abs($0 - 0.8) < 1e-5 } == true,
                "the unsure row keeps small's logits")
        let classified = try await Self.classify(service, ["unsure.png"])
        #expect(classified["parameters"]?["cascade_unavailable"]?.boolValue == true)
        #expect(classified["classifications"]?.arrayValue?.first?.arrayValue?.first?["label"]?.stringValue == "north")
        let text = Self.scrape(service)
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="unavailable"} 2"#), "\(text)")
        #expect(text.contains(#"osprey_cascade_requests_total{model="small",outcome="kept"} 1"#))
    }

    @Test func aTargetWithOtherClassesIsUnavailableAndLoggedOnce() async throws {
        let logged = Locked<[String]>([])
        let (service, temp) = try await Self.makeService(logged: logged)
        defer { try? FileManager.default.removeItem(at: temp) }
        let config = #"{"max_batch_size": 8, "output": {"probabilities": false}, "cascade": {"model": "narrow", "min_confidence": 0.6, "version": 1},"#
            + #" "image": {"width": 4, "height": 4, "resize_mode": "stretch", "interpolation": "nearest", "channel_order": "gray"}}"#
        try Data(config.utf8).write(to: temp.appendingPathComponent("small/config.json"))
        try await service.registry.load(model: "small")
        for _ in 0..<2 {
            let body = try await Self.infer(service, rows: [Self.unsure])
            #expect(body["parameters"]?["cascade_unavailable"]?.boolValue == true)
            #expect(body["parameters"]?["answered_by"]?.stringValue == "small/1")
        }
        let warnings = logged.withLock { $0 }.filter { $0.contains("cascade to 'narrow/1'") }
        #expect(warnings.count == 1, "\(logged.withLock { $0 })")
        #expect(warnings.first?.contains("expected float32[1, 4]") == true, "\(warnings)")
    }

    @Test func aCycleIsRefusedAtLoadAndTheServingVersionStays() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let cyclic = #"{"max_batch_size": 8, "output": {"probabilities": true}, "cascade": {"model": "small", "min_confidence": 0.5}}"#
        try Data(cyclic.utf8).write(to: temp.appendingPathComponent("large/config.json"))
        await #expect(throws: ServingError.loadFailed(model: "large", version: 1,
                                                      reason: "config.json cascade forms a cycle with the loaded models: large -> small -> large")) {
            try await service.registry.load(model: "large")
        }
        // The good large keeps serving (without a cascade), so small still escalates to it.
        #expect(try service.registry.resolve(model: "large").config.cascade == nil)
        let body = try await Self.infer(service, rows: [Self.unsure])
        #expect(body["parameters"]?["answered_by"]?.stringValue == "large/1")
        // A model cascading to itself is a cycle too; on a first load it fails and shows why in the index.
        let selfish = #"{"cascade": {"model": "narrow", "min_confidence": 0.5}}"#
        try Data(selfish.utf8).write(to: temp.appendingPathComponent("narrow/config.json"))
        try await service.registry.unload(model: "narrow")
        await #expect(throws: ServingError.self) { try await service.registry.load(model: "narrow") }
        let entry = service.registry.index().first { $0.name == "narrow" }
        #expect(entry?.state == .failed)
        #expect(entry?.reason?.contains("narrow -> narrow") == true, "\(String(describing: entry?.reason))")
    }

    @Test func grpcResponsesCarryTheParameters() throws {
        let report = CascadeReport(answeredBy: ["small/1", "large/1"], firstScores: [0.99, 0.25], outcomes: [.kept, .escalated])
        let parameters = V2Codec.cascadeParameters(report)
        let bytes = GRPCInferResponseEncoder.encode(V2InferenceResponse(modelName: "small", modelVersion: "1", parameters: parameters, outputs: []))
        var decoded = JSONObject()
        try bytes.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            while let field = try reader.next() {
                if field.number == 4 { try GRPCInferRequestDecoder.decodeParameter(field, "parameters", into: &decoded) }
            }
        }
        #expect(decoded["cascaded"] == .bool(true))
        #expect(decoded["answered_by"] == .string(#"["small/1","large/1"]"#), "a per-row list travels as JSON text")
        #expect(decoded["first_score"] == .string("[0.99,0.25]"))
        let one = V2Codec.cascadeParameters(CascadeReport(answeredBy: ["large/1"], firstScores: [0.25], outcomes: [.unavailable]))
        #expect(one["first_score"] == .double(0.25) && one["cascade_unavailable"] == .bool(true) && one["cascaded"] == .bool(false))
    }
}
