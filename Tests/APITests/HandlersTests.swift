import HTTP
import Synchronization
import Testing
import Tensor
@testable import API

private struct NotLoaded: Error {}

/// A serving layer with one model `doubler` (versions 1 and 2): y = 2x, x is FP32 [N, 4].
private final class FakeService: InferenceService {
    let serverName = "osprey"
    let serverVersion = "0.0-test"
    let uploads = Mutex<[(String, Int, Int)]>([])
    let offloads = Atomic<Int>(0)

    func isReady() async -> Bool { true }

    func model(named name: String, version: Int?) async throws -> ServedModel? {
        guard name == "doubler", [nil, 1, 2].contains(version) else { return nil }
        let io = [ModelInputSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
        return ServedModel(name: name, version: version ?? 2, versions: [1, 2], ready: true, inputs: io,
                           outputs: [ModelInputSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])],
                           labels: ["y": ["a", "b", "c", "d"]], handle: version ?? 2)
    }

    let lastTimeout = Mutex<Duration?>(nil)

    func infer(_ model: ServedModel, inputs: [Tensor], outputs: [String]?, timeout: Duration?) async throws -> [(name: String, tensor: Tensor)] {
        lastTimeout.withLock { $0 = timeout }
        let x = inputs[0]
        return [(name: "y", tensor: Tensor(shape: x.shape, scalars: x.scalars(as: Float.self).map { $0 * 2 }))]
    }

    func classify(_ model: ServedModel, images: [ImageUpload], topK: Int) async throws -> [[Classification]] {
        images.map { _ in [Classification(index: 0, score: 0.9, label: "a")] }
    }

    func statistics(model: String, version: Int?) async throws -> [ModelVersionStatistics]? {
        model == "doubler" ? [ModelVersionStatistics(name: model, version: version ?? 2)] : nil
    }

    func repositoryIndex(readyOnly: Bool) async throws -> [RepositoryIndexEntry] {
        [RepositoryIndexEntry(name: "doubler", version: 2, state: .ready)]
    }

    func load(model: String) async throws { if model != "doubler" { throw NotLoaded() } }
    func unload(model: String) async throws {}
    func upload(model: String, version: Int, onnx: [UInt8]) async throws { uploads.withLock { $0.append((model, version, onnx.count)) } }
    func setDefault(model: String, version: Int?) async throws -> (defaultVersion: Int?, pinned: Bool) { (version ?? 2, version != nil) }
    func metricsText() async -> [UInt8] { Array("osprey_requests_total 1\n".utf8) }

    func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        offloads.add(1, ordering: .relaxed)
        return try work()
    }
}

@Suite struct HandlersTests {
    private let service = FakeService()
    private var router: Router { Routes.makeRouter(handlers: OspreyHandlers.make(service: service), log: { _ in }) }

    private func call(_ method: String, _ path: String, _ body: [UInt8] = [], headers: HTTPHeaders = HTTPHeaders(), query: String = "") async -> HTTPResponse {
        await router.respond(HTTPRequest(method: method, path: path, query: query, headers: headers, body: body))
    }

    @Test func everyOperationHasAHandler() {
        #expect(router.unhandledOperations.isEmpty)
    }

    @Test func metadataAndHealth() async throws {
        let server = try JSONValue.parse(await call("GET", "/v2").body)
        #expect(server["extensions"]?.arrayValue?.contains(.string("binary_tensor_data")) == true)
        #expect(await call("GET", "/v2/health/live").status == 200)
        #expect(await call("GET", "/v2/health/ready").status == 200)
        let meta = try JSONValue.parse(await call("GET", "/v2/models/doubler").body)
        #expect(meta["versions"] == .array([.string("1"), .string("2")]))
        #expect(meta["inputs"]?.arrayValue?[0]["shape"] == .array([.integer(-1), .integer(4)]))
        #expect(await call("GET", "/v2/models/doubler/versions/1/ready").status == 200)
        let missing = await call("GET", "/v2/models/doubler/versions/9")
        #expect(missing.status == 404)
        #expect(try JSONValue.parse(missing.body)["error"] == .string("model 'doubler' has no version 9"))
        #expect(await call("GET", "/v2/models/nope/ready").status == 404)
    }

    @Test func jsonInferRoundTrip() async throws {
        let body = #"{"id": "q1", "parameters": {"timeout": 2500}, "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"#
        let response = await call("POST", "/v2/models/doubler/infer", Array(body.utf8))
        #expect(response.status == 200)
        let decoded = try V2Codec.decodeInferResponse(body: response.body, headers: response.headers)
        #expect(decoded.id == "q1" && decoded.modelVersion == "2")
        #expect(decoded.outputs[0].tensor.scalars(as: Float.self) == [2, 4, 6, 8])
        #expect(service.lastTimeout.withLock { $0 } == .microseconds(2500))
        let gz = await call("POST", "/v2/models/doubler/infer", Array(body.utf8), headers: ["Content-Encoding": "gzip"])
        #expect(gz.status == 415)
    }

    @Test func binaryInferWithClassification() async throws {
        let (body, headers) = binaryBody(#"""
            {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}}],
             "outputs": [{"name": "y", "parameters": {"classification": 2, "binary_data": true}}]}
            """#, [bytesOf([Float(1), 4, 2, 3, 9, 8, 7, 6])])
        let response = await call("POST", "/v2/models/doubler/versions/1/infer", body, headers: headers)
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "application/octet-stream")
        let decoded = try V2Codec.decodeInferResponse(body: response.body, headers: response.headers)
        #expect(decoded.outputs[0].tensor.shape == [2, 2])
        #expect(decoded.outputs[0].tensor.strings.map { String(decoding: $0, as: UTF8.self) }
                == ["8.000000:1:b", "6.000000:3:d", "18.000000:0:a", "16.000000:1:b"])
    }

    @Test func inferErrorsAreClientErrors() async throws {
        let wrongShape = #"{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}"#
        let r1 = await call("POST", "/v2/models/doubler/infer", Array(wrongShape.utf8))
        #expect(r1.status == 400)
        #expect(try JSONValue.parse(r1.body)["error"] == .string("input 'x': expected shape [-1, 4], got [1, 3] (axis 1)"))
        let wrongType = #"{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 4]}]}"#
        #expect(try JSONValue.parse(await call("POST", "/v2/models/doubler/infer", Array(wrongType.utf8)).body)["error"]
                == .string("input 'x': expected FP32, got INT64"))
        #expect(await call("POST", "/v2/models/nope/infer", Array(wrongShape.utf8)).status == 404)
        let unknownOutput = #"{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}], "outputs": [{"name": "z"}]}"#
        #expect(try JSONValue.parse(await call("POST", "/v2/models/doubler/infer", Array(unknownOutput.utf8)).body)["error"]
                == .string("unknown output 'z', the model's outputs are 'y'"))
    }

    @Test func largeBodiesAreOffloaded() async throws {
        let n = 20_000
        let data = (0..<(n * 4)).map { _ in "0.5" }.joined(separator: ",")
        let body = #"{"inputs": [{"name": "x", "shape": [\#(n), 4], "datatype": "FP32", "data": [\#(data)]}]}"#
        let before = service.offloads.load(ordering: .relaxed)
        #expect(await call("POST", "/v2/models/doubler/infer", Array(body.utf8)).status == 200)
        #expect(service.offloads.load(ordering: .relaxed) == before + 2)
    }

    @Test func classifyRoute() async throws {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]
        let response = await call("POST", "/v2/models/doubler/classify", png, headers: ["Content-Type": "image/png"], query: "top_k=1")
        #expect(response.status == 200)
        let v = try JSONValue.parse(response.body)
        #expect(v["classifications"]?.arrayValue?[0].arrayValue?[0]["label"] == .string("a"))
        #expect(await call("POST", "/v2/models/doubler/classify", png, headers: ["Content-Type": "text/plain"]).status == 415)
    }

    @Test func repositoryRoutes() async throws {
        #expect(try JSONValue.parse(await call("POST", "/v2/repository/index").body).arrayValue?.count == 1)
        #expect(await call("POST", "/v2/repository/models/doubler/load").status == 200)
        #expect(await call("POST", "/v2/repository/models/other/load").status == 500)
        #expect(await call("POST", "/v2/repository/models/doubler/unload").status == 200)
        let onnx: [UInt8] = [8, 7, 18, 4]
        let digest = "sha-256=" + Base64.encode(SHA256Hash.hash(onnx))
        let uploaded = await call("PUT", "/v2/repository/models/doubler/versions/3", onnx,
                                  headers: ["Content-Type": "application/octet-stream", "Digest": digest])
        #expect(uploaded.status == 201)
        #expect(service.uploads.withLock { $0.map { "\($0.0)/\($0.1)/\($0.2)" } } == ["doubler/3/4"])
        let bad = await call("PUT", "/v2/repository/models/doubler/versions/4", onnx, headers: ["Digest": "sha-256=" + Base64.encode(SHA256Hash.hash([1]))])
        #expect(bad.status == 400)
        #expect(await call("PUT", "/v2/repository/models/doubler/versions/4", onnx, headers: ["Content-Type": "text/plain"]).status == 415)
        let pinned = try JSONValue.parse(await call("POST", "/v2/repository/models/doubler/default", Array(#"{"version": "1"}"#.utf8)).body)
        #expect(pinned["default_version"] == .string("1") && pinned["pinned"] == .bool(true))
        let cleared = try JSONValue.parse(await call("DELETE", "/v2/repository/models/doubler/default").body)
        #expect(cleared["pinned"] == .bool(false))
    }

    @Test func statsAndMetrics() async throws {
        let stats = try JSONValue.parse(await call("GET", "/v2/models/doubler/versions/1/stats").body)
        #expect(stats["model_stats"]?.arrayValue?[0]["version"] == .string("1"))
        #expect(await call("GET", "/v2/models/nope/stats").status == 404)
        let metrics = await call("GET", "/metrics")
        #expect(metrics.headers["Content-Type"]?.hasPrefix("text/plain; version=0.0.4") == true)
    }
}
