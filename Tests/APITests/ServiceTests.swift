import Infrastructure
import Foundation
import HTTP
import Serving
import Tensor
import Testing
@testable import API

/// The service end to end without a socket: the real engine on the embedded digits model.
@Suite(.serialized) struct ServiceTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let examples = repoRoot.appendingPathComponent("models/digits/examples")

    /// A service over a temporary copy of models/ (so uploads never touch the checkout); `prepare` may change the
    /// copy of models/digits before it loads. With `responseCache`, digits' config.json enables the response cache,
    /// and `cacheBytes` sizes the server's.
    static func makeService(adminToken: String? = nil, cacheBytes: Int = 0, responseCache: Bool = false,
                            prepare: (URL) throws -> Void = { _ in }) async throws -> (OspreyService, URL) {
        let temp = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-service-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temp, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: repoRoot.appendingPathComponent("models/digits"), to: temp.appendingPathComponent("digits"))
        if responseCache { try ResponseCacheServiceTests.enableResponseCache(in: temp.appendingPathComponent("digits/config.json")) }
        try prepare(temp.appendingPathComponent("digits"))
        let metrics = Metrics()
        let registry = ModelRegistry(repositoryPath: temp.path, loader: engineLoader, metrics: metrics)
        await registry.loadAll()
        var options = ServiceOptions(adminToken: adminToken)
        options.cacheBytes = cacheBytes
        let service = OspreyService(registry: registry, metrics: metrics, workers: BlockingExecutor(name: "test-worker", threads: 2),
                                    options: options)
        return (service, temp)
    }

    static func json(_ response: HTTPResponse) throws -> API.JSONValue { try API.JSONValue.parse(response.body) }

    @Test func everyRouteHasAHandler() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        #expect(service.routes.unhandledOperations.isEmpty)
    }

    @Test func classifyReturnsTheTrueLabelForEveryExample() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let ready = await service.responder(HTTPRequest(method: "GET", path: "/v2/health/ready"))
        #expect(ready.status == 200)
        for digit in 0..<10 {
            let name = digit % 2 == 0 ? "digit_\(digit).png" : "digit_\(digit).jpg"
            let bytes = try [UInt8](Data(contentsOf: Self.examples.appendingPathComponent(name)))
            let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", query: "top_k=3", body: bytes))
            #expect(response.status == 200, "\(name): \(String(decoding: response.body, as: UTF8.self))")
            let body = try Self.json(response)
            let top = body["classifications"]?.arrayValue?.first?.arrayValue
            #expect(top?.count == 3)
            #expect(top?.first?["label"]?.stringValue == String(digit), "\(name): \(String(decoding: response.body, as: UTF8.self))")
            let scores = top?.compactMap { $0["score"]?.doubleValue } ?? []
            #expect(scores == scores.sorted(by: >))
        }
    }

    @Test func multipartImagesRunAsOneBatchInUploadOrder() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        var body: [UInt8] = []
        for digit in [3, 8] {
            let name = digit % 2 == 0 ? "digit_\(digit).png" : "digit_\(digit).jpg"
            body += Array("--XyZ\r\nContent-Disposition: form-data; name=\"file\(digit)\"; filename=\"\(name)\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
            body += try [UInt8](Data(contentsOf: Self.examples.appendingPathComponent(name)))
            body += Array("\r\n".utf8)
        }
        body += Array("--XyZ\r\nContent-Disposition: form-data; name=\"notes\"\r\n\r\nhello\r\n--XyZ--\r\n".utf8)
        var request = HTTPRequest(method: "POST", path: "/v2/models/digits/classify", headers: ["Content-Type": "multipart/form-data; boundary=XyZ"], body: body)
        let refused = await service.responder(request)
        #expect(refused.status == 415)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("notes"))
        let cut = body.count - Array("--XyZ\r\nContent-Disposition: form-data; name=\"notes\"\r\n\r\nhello\r\n--XyZ--\r\n".utf8).count
        request.body = Array(body[..<cut]) + Array("--XyZ--\r\n".utf8)
        let response = await service.responder(request)
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        let rows = try Self.json(response)["classifications"]?.arrayValue ?? []
        #expect(rows.map { $0.arrayValue?.first?["label"]?.stringValue } == ["3", "8"])
    }

    @Test func badImagesGetClearClientErrors() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let text = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", body: Array("hello".utf8)))
        #expect(text.status == 415)
        let png = try [UInt8](Data(contentsOf: Self.examples.appendingPathComponent("digit_0.png")))
        let truncated = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", body: Array(png.prefix(png.count / 2))))
        #expect(truncated.status == 400)
        #expect(String(decoding: truncated.body, as: UTF8.self).contains("\"error\""))
        let badK = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/classify", query: "top_k=zero", body: png))
        #expect(badK.status == 400)
        let unknown = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/nope/classify", body: png))
        #expect(unknown.status == 404)
    }

    @Test func v2InferJSONAndImageBytes() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let meta = try Self.json(await service.responder(HTTPRequest(method: "GET", path: "/v2/models/digits")))
        let input = try #require(meta["inputs"]?.arrayValue?.first)
        let name = try #require(input["name"]?.stringValue)
        let shape = (input["shape"]?.arrayValue ?? []).compactMap(\.intValue)
        #expect(shape.first == -1)
        let count = shape.dropFirst().reduce(1) { $0 * Int($1) }
        let zeros = Array(repeating: "0", count: count).joined(separator: ",")
        let body = #"{"id":"r1","inputs":[{"name":"\#(name)","shape":[1\#(shape.dropFirst().map { ",\($0)" }.joined())],"datatype":"FP32","data":[\#(zeros)]}]}"#
        let response = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/infer", body: Array(body.utf8)))
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        let decoded = try Self.json(response)
        #expect(decoded["id"]?.stringValue == "r1")
        #expect(decoded["model_version"]?.stringValue == "1")

        let wrong = body.replacingOccurrences(of: "\"FP32\"", with: "\"INT64\"")
        let refused = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/infer", body: Array(wrong.utf8)))
        #expect(refused.status == 400)

        let png = try [UInt8](Data(contentsOf: Self.examples.appendingPathComponent("digit_4.png")))
        let header = #"{"inputs":[{"name":"\#(name)","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":\#(png.count + 4)}}],"outputs":[{"name":"\#(meta["outputs"]?.arrayValue?.first?["name"]?.stringValue ?? "")","parameters":{"classification":1}}]}"#
        var binary = Array(header.utf8)
        let length = UInt32(png.count)
        binary += [UInt8(length & 0xff), UInt8(length >> 8 & 0xff), UInt8(length >> 16 & 0xff), UInt8(length >> 24)]
        binary += png
        let imageResponse = await service.responder(HTTPRequest(method: "POST", path: "/v2/models/digits/infer",
                                                                headers: ["Inference-Header-Content-Length": String(header.utf8.count)], body: binary))
        #expect(imageResponse.status == 200, "\(String(decoding: imageResponse.body, as: UTF8.self))")
        let text = String(decoding: imageResponse.body, as: UTF8.self)
        #expect(text.contains(":4:4"), "\(text)")
    }

    @Test func repositoryEndpointsRequireTheTokenAndRollBack() async throws {
        let (service, temp) = try await Self.makeService(adminToken: "s3cret")
        defer { try? FileManager.default.removeItem(at: temp) }
        let anonymous = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/index"))
        #expect(anonymous.status == 401)
        let auth: HTTPHeaders = ["Authorization": "Bearer s3cret"]
        let index = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/index", headers: auth))
        #expect(index.status == 200)
        #expect(try Self.json(index).arrayValue?.first?["state"]?.stringValue == "READY")

        let onnx = try [UInt8](Data(contentsOf: temp.appendingPathComponent("digits/1/model.onnx")))
        var upload = HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/2", headers: auth, body: onnx)
        upload.headers.add("Digest", "sha-256=" + Data(repeating: 0, count: 32).base64EncodedString())
        #expect(await service.responder(upload).status == 400)
        upload.headers.remove("Digest")
        let uploaded = await service.responder(upload)
        #expect(uploaded.status == 201)
        #expect(try Self.json(uploaded)["sha256"]?.stringValue == SHA256.hexDigest(onnx))
        #expect(try service.registry.resolve(model: "digits").version == 2)

        let broken = HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/3", headers: auth, body: Array(onnx.prefix(100)))
        let brokenResponse = await service.responder(broken)
        #expect(brokenResponse.status == 400, "\(String(decoding: brokenResponse.body, as: UTF8.self))")
        #expect(try service.registry.resolve(model: "digits").version == 2)

        let pin = HTTPRequest(method: "POST", path: "/v2/repository/models/digits/default", headers: auth, body: Array(#"{"version": "1"}"#.utf8))
        let pinned = await service.responder(pin)
        #expect(pinned.status == 200)
        #expect(try Self.json(pinned)["pinned"]?.boolValue == true)
        #expect(try Self.json(pinned)["default_version"]?.stringValue == "1")
        #expect(try service.registry.resolve(model: "digits").version == 1)
        let unpin = HTTPRequest(method: "DELETE", path: "/v2/repository/models/digits/default", headers: auth)
        #expect(await service.responder(unpin).status == 200)
        let afterUnpin = try service.registry.resolve(model: "digits").version
        let finalIndex = String(decoding: await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/index", headers: auth)).body, as: UTF8.self)
        #expect(afterUnpin == 2, "\(finalIndex)")
    }

    @Test func loopbackOnlyWithoutToken() {
        #expect(ServiceContext.isLoopback("127.0.0.1:5000"))
        #expect(ServiceContext.isLoopback("[::1]:80"))
        #expect(ServiceContext.isLoopback("::ffff:127.0.0.1"))
        #expect(!ServiceContext.isLoopback("10.0.0.5:80"))
        #expect(!ServiceContext.isLoopback("[2001:db8::1]:80"))
    }

    @Test func modelConfigIsTritonShaped() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let response = await service.responder(HTTPRequest(method: "GET", path: "/v2/models/digits/config"))
        #expect(response.status == 200)
        let config = try Self.json(response)
        #expect(config["max_batch_size"]?.intValue == 32)
        #expect(config["input"]?.arrayValue?.first?["data_type"]?.stringValue == "TYPE_FP32")
        #expect(config["input"]?.arrayValue?.first?["dims"]?.arrayValue?.compactMap(\.intValue) == [1, 8, 8])
        #expect(config["dynamic_batching"]?["max_queue_delay_microseconds"]?.intValue == 2000)
        #expect(config["instance_group"]?.arrayValue?.first?["count"]?.intValue == 1)
        #expect(config["instance_group"]?.arrayValue?.first?["kind"]?.stringValue == "KIND_CPU")
        #expect(config["image"]?["channel_order"]?.stringValue == "gray")
        let missing = await service.responder(HTTPRequest(method: "GET", path: "/v2/models/digits/versions/9/config"))
        #expect(missing.status == 404)
    }

    @Test func loadWithConfigReplacesConfigJSON() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let original = try Data(contentsOf: temp.appendingPathComponent("digits/config.json"))
        let bad = HTTPRequest(method: "POST", path: "/v2/repository/models/digits/load", body: Array(#"{"parameters": {"config": "{\"max_batch_size\": \"many\"}"}}"#.utf8))
        #expect(await service.responder(bad).status == 400)
        #expect(try Data(contentsOf: temp.appendingPathComponent("digits/config.json")) == original, "a rejected config is never written")
        let good = HTTPRequest(method: "POST", path: "/v2/repository/models/digits/load", body: Array(#"{"parameters": {"config": "{\"max_batch_size\": 8}"}}"#.utf8))
        #expect(await service.responder(good).status == 200)
        let config = try Self.json(await service.responder(HTTPRequest(method: "GET", path: "/v2/models/digits/config")))
        #expect(config["max_batch_size"]?.intValue == 8)
    }

    @Test func metricsExposeRequestsAndProcess() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        _ = await service.responder(HTTPRequest(method: "GET", path: "/v2/health/live"))
        let response = await service.responder(HTTPRequest(method: "GET", path: "/metrics"))
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(response.status == 200)
        #expect(text.contains("osprey_http_requests_total{"))
        #expect(text.contains("process_resident_memory_bytes"))
    }
}
