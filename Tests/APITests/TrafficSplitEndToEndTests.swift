import Infrastructure
import Foundation
import HTTP
import Protobuf
import Serving
import Testing
@testable import API

/// The canary split end to end on the real engine (issue #15, deliverable 2): the digits model as versions 1 and 2,
/// config.json `"traffic": {"1": 90, "2": 10}`, through HTTP JSON, HTTP binary, classify and gRPC, and the run-time route.
@Suite(.serialized) struct TrafficSplitEndToEndTests {
    /// A service over digits versions 1 and 2 (the same file), both loaded, split 90/10.
    static func makeService(adminToken: String? = nil) async throws -> (OspreyService, URL) {
        try await ServiceTests.makeService(adminToken: adminToken) { model in
            try FileManager.default.copyItem(at: model.appendingPathComponent("1"), to: model.appendingPathComponent("2"))
            let configURL = model.appendingPathComponent("config.json")
            var config = try JSONSerialization.jsonObject(with: Data(contentsOf: configURL)) as! [String: Any]
            config["version_policy"] = ["all": [String: Any]()]
            config["traffic"] = ["1": 90, "2": 10]
            try JSONSerialization.data(withJSONObject: config).write(to: configURL)
        }
    }

    static let zeros = Array(repeating: "0", count: 64).joined(separator: ",")

    /// A V2 JSON request for one blank 8x8 image, with `id` when given.
    static func jsonInfer(id: String?, version: Int? = nil) -> HTTPRequest {
        let idField = id.map { #""id": "\#($0)", "# } ?? ""
        let body = #"{\#(idField)"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [\#(zeros)]}]}"#
        let path = version.map { "/v2/models/digits/versions/\($0)/infer" } ?? "/v2/models/digits/infer"
        return HTTPRequest(method: "POST", path: path, body: Array(body.utf8))
    }

    /// A request as the parser hands it on when the client sent `X-Request-ID: id`.
    static func withClientID(_ request: HTTPRequest, _ id: String) -> HTTPRequest {
        var request = request
        request.headers.add("X-Request-ID", id)
        request.requestID = id
        return request
    }

    static func answeredVersion(_ response: HTTPResponse) throws -> Int {
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return Int(try API.JSONValue.parse(response.body)["model_version"]?.stringValue ?? "") ?? -1
    }

    @Test func aThousandRequestsSplitByTheWeightsAndTheMetricsShowIt() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        var counts: [Int: Int] = [:]
        for i in 0..<1000 {
            counts[try Self.answeredVersion(await service.responder(Self.jsonInfer(id: "request-\(i)"))), default: 0] += 1
        }
        #expect(counts.keys.sorted() == [1, 2])
        #expect(abs(counts[2, default: 0] - 100) <= 30, "version 2 (weight 10%) answered \(counts[2, default: 0]) of 1000")
        // The per-version series are what a canary is compared with.
        let text = String(decoding: await service.responder(HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
        for version in [1, 2] {
            let series = #"osprey_inference_requests_total{model="digits",outcome="success",protocol="http",version="\#(version)"} "#
            let line = text.split(separator: "\n").first { $0.hasPrefix(series) }
            #expect(line.map { Int(Double($0.dropFirst(series.count)) ?? -1) } == counts[version], "\(series)")
        }
        // Without any id the split still holds (at random).
        var unkeyed = 0
        for _ in 0..<400 where try Self.answeredVersion(await service.responder(Self.jsonInfer(id: nil))) == 2 { unkeyed += 1 }
        #expect(abs(unkeyed - 40) <= 25, "version 2 answered \(unkeyed) of 400 requests without an id")
    }

    @Test func retriesLandOnTheSameVersionOverEveryFrontEnd() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        var seen: Set<Int> = []
        for i in 0..<60 {
            let id = "retry-\(i)"
            let json = try Self.answeredVersion(await service.responder(Self.jsonInfer(id: id)))
            seen.insert(json)
            #expect(try Self.answeredVersion(await service.responder(Self.jsonInfer(id: id))) == json, "a retry of \(id) moved")
            let header = try Self.answeredVersion(await service.responder(Self.withClientID(Self.jsonInfer(id: nil), id)))
            #expect(header == json, "X-Request-ID \(id) keys the split as the V2 id does")
            #expect(try Self.answeredVersion(await service.responder(Self.binaryInfer(clientID: id))) == json, "binary \(id)")
            #expect(try Self.answeredVersion(await service.responder(Self.classify(clientID: id))) == json, "classify \(id)")
            #expect(try await Self.grpcVersion(service, id: id) == json, "gRPC \(id)")
        }
        #expect(seen == [1, 2], "sixty ids reach both versions")
        // A version in the request bypasses the split.
        for i in 0..<20 {
            #expect(try Self.answeredVersion(await service.responder(Self.jsonInfer(id: "r\(i)", version: 2))) == 2)
        }
        // A generated request id is not a routing key: with none, requests still spread (over 150, both versions appear).
        var generated: Set<Int> = []
        for _ in 0..<150 {
            var request = Self.classify(clientID: nil)
            request.requestID = "3f9c2a1b-1"  // what the server generates when the client sends no X-Request-ID
            generated.insert(try Self.answeredVersion(await service.responder(request)))
        }
        #expect(generated == [1, 2])
    }

    @Test func aPinOverridesTheSplit() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let pin = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/models/digits/default", body: Array(#"{"version": "2"}"#.utf8)))
        #expect(pin.status == 200)
        for i in 0..<30 { #expect(try Self.answeredVersion(await service.responder(Self.jsonInfer(id: "p\(i)"))) == 2) }
        let traffic = try API.JSONValue.parse(await service.responder(Self.traffic("POST", #"{"1": 1}"#)).body)
        #expect(traffic["pinned_version"]?.stringValue == "2", "the answer says the pin overrides the split")
    }

    @Test func theRunTimeRouteSetsShowsAndClearsTheSplit() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let index = { try API.JSONValue.parse(await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/index")).body) }
        let first = try await index().arrayValue?.first
        #expect(first?["traffic"] == .object(["1": .integer(90), "2": .integer(10)]))
        #expect(first?["traffic_source"]?.stringValue == "config")

        let set = await service.responder(Self.traffic("POST", #"{"1": 0, "2": 100}"#))
        #expect(set.status == 200, "\(String(decoding: set.body, as: UTF8.self))")
        let body = try API.JSONValue.parse(set.body)
        #expect(body["traffic"] == .object(["1": .integer(0), "2": .integer(100)]))
        #expect(body["traffic_source"]?.stringValue == "override" && body["name"]?.stringValue == "digits" && body["pinned_version"] == .null)
        for i in 0..<30 { #expect(try Self.answeredVersion(await service.responder(Self.jsonInfer(id: "o\(i)"))) == 2) }
        let entries = try await index().arrayValue ?? []
        #expect(entries.count == 2 && entries.allSatisfy { $0["traffic_source"]?.stringValue == "override" && $0["traffic"] == body["traffic"] })

        let cleared = await service.responder(Self.traffic("DELETE", nil))
        #expect(cleared.status == 200)
        #expect(try API.JSONValue.parse(cleared.body)["traffic_source"]?.stringValue == "config")
        #expect(try await index().arrayValue?.first?["traffic_source"]?.stringValue == "config")
        let deleteAgain = await service.responder(Self.traffic("DELETE", nil))
        #expect(deleteAgain.status == 200, "DELETE without an override is harmless")
    }

    @Test func badSplitsAreRefusedNamingWhatIsWrong() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let cases: [(String, String)] = [
            ("not json", "invalid JSON"),
            ("[1, 2]", "JSON object"),
            (#"{}"#, "at least one version with a weight > 0"),
            (#"{"1": 0}"#, "at least one version with a weight > 0"),
            (#"{"one": 5}"#, "positive version numbers"),
            (#"{"0": 5}"#, "positive version numbers"),
            (#"{"1": -5}"#, "'traffic.1': expected a weight >= 0"),
            (#"{"1": "90"}"#, "'traffic.1': expected a number, got string"),
            (#"{"1": 90, "7": 10}"#, "version 7 (not in the repository)"),
        ]
        for (body, message) in cases {
            let response = await service.responder(Self.traffic("POST", body))
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 400, "\(body): \(text)")
            #expect(text.contains(message), "\(body): \(text)")
        }
        // A version that is in the repository but not READY is refused too.
        _ = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/models/digits/unload"))
        let unloaded = await service.responder(Self.traffic("POST", #"{"2": 1}"#))
        #expect(unloaded.status == 400 && String(decoding: unloaded.body, as: UTF8.self).contains("version 2 (UNAVAILABLE)"))
        let unknown = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/models/nope/traffic", body: Array(#"{"1": 1}"#.utf8)))
        #expect(unknown.status == 404)
        #expect(await service.responder(HTTPRequest(method: "DELETE", path: "/v2/repository/models/nope/traffic")).status == 404)
    }

    @Test func theRouteFollowsTheAdminRules() async throws {
        let (open, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        var remote = Self.traffic("POST", #"{"2": 1}"#)
        remote.remoteAddress = "10.1.2.3:5000"
        #expect(await open.responder(remote).status == 403, "without a token: loopback only")
        remote.method = "DELETE"
        #expect(await open.responder(remote).status == 403)

        let (guarded, guardedTemp) = try await Self.makeService(adminToken: "s3cret")
        defer { try? FileManager.default.removeItem(at: guardedTemp) }
        #expect(await guarded.responder(Self.traffic("POST", #"{"2": 1}"#)).status == 401, "no token")
        var wrong = Self.traffic("POST", #"{"2": 1}"#)
        wrong.headers.add("Authorization", "Bearer nope")
        #expect(await guarded.responder(wrong).status == 401)
        var right = Self.traffic("POST", #"{"2": 1}"#)
        right.headers.add("Authorization", "Bearer s3cret")
        right.remoteAddress = "10.1.2.3:5000"
        #expect(await guarded.responder(right).status == 200)
        // The unknown model still answers 404 before its (large, unread) body would be decoded.
        let early = await guarded.responder(HTTPRequest(method: "POST", path: "/v2/models/nope/infer", body: Array(repeating: 0x7B, count: 1 << 20)))
        #expect(early.status == 404)
    }

    // MARK: - Requests of each front end

    static func traffic(_ method: String, _ body: String?) -> HTTPRequest {
        HTTPRequest(method: method, path: "/v2/repository/models/digits/traffic", body: body.map { Array($0.utf8) } ?? [])
    }

    /// The binary extension: a JSON header naming the input's byte size, then 64 raw float32 zeros.
    static func binaryInfer(clientID: String) -> HTTPRequest {
        let header = Array(#"{"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "parameters": {"binary_data_size": 256}}]}"#.utf8)
        let request = HTTPRequest(method: "POST", path: "/v2/models/digits/infer",
                                  headers: ["Inference-Header-Content-Length": String(header.count), "Content-Type": "application/octet-stream"],
                                  body: header + Array(repeating: 0, count: 256))
        return withClientID(request, clientID)
    }

    /// One example PNG to classify.
    static func classify(clientID: String?) -> HTTPRequest {
        let image = (try? [UInt8](Data(contentsOf: ServiceTests.examples.appendingPathComponent("digit_4.png")))) ?? []
        let request = HTTPRequest(method: "POST", path: "/v2/models/digits/classify", body: image)
        return clientID.map { withClientID(request, $0) } ?? request
    }

    /// The version a gRPC ModelInfer with V2 `id` ran on.
    static func grpcVersion(_ service: OspreyService, id: String) async throws -> Int {
        var writer = WireWriter()
        writer.string(1, "digits")
        writer.string(3, id)
        writer.message(5) { input in
            input.string(1, "image")
            input.string(2, "FP32")
            input.packedInt64s(3, [1, 1, 8, 8])
            input.message(5) { contents in [Float](repeating: 0, count: 64).withUnsafeBytes { contents.packedFixed(6, $0) } }
        }
        let response = await service.grpcResponder(GRPCRequest(path: "/inference.GRPCInferenceService/ModelInfer", message: writer.bytes))
        let message = try #require(response.message, "gRPC status \(response.status)")
        return try message.withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            while let field = try reader.next() {
                if field.number == 2 { return Int(try field.string("model_version")) ?? -1 }
            }
            return -1
        }
    }
}
