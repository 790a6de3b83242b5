import Infrastructure
import Foundation
import HTTP
import Serving
import Testing
@testable import API

/// Uploads, loads and the index over HTTP semantics (issue 11): statuses, bodies without server paths, memory figures.
@Suite(.serialized) struct RepositoryUploadTests {
    /// A service over a scratch copy of models/digits with `options`.
    static func makeService(_ options: RegistryOptions = RegistryOptions()) async throws -> (OspreyService, URL) {
        let temp = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-upload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temp, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: ServiceTests.repoRoot.appendingPathComponent("models/digits"), to: temp.appendingPathComponent("digits"))
        let metrics = Metrics()
        let registry = ModelRegistry(repositoryPath: temp.path, loader: engineLoader, options: options, metrics: metrics)
        await registry.loadAll()
        return (OspreyService(registry: registry, metrics: metrics, workers: BlockingExecutor(name: "test-worker", threads: 2)), temp)
    }

    static func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    static func put(_ service: OspreyService, _ path: String, query: String = "", _ body: [UInt8]) async -> HTTPResponse {
        await service.responder(HTTPRequest(method: "PUT", path: path, query: query, body: body))
    }

    @Test func corruptPutOnAnExistingVersionIs409AndTheFileStays() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let file = temp.appendingPathComponent("digits/1/model.onnx")
        let original = try Data(contentsOf: file)
        let conflict = await Self.put(service, "/v2/repository/models/digits/versions/1", Array("not onnx".utf8))
        #expect(conflict.status == 409, "\(Self.text(conflict))")
        #expect(Self.text(conflict).contains("replace=true"))
        let replaced = await Self.put(service, "/v2/repository/models/digits/versions/1", query: "replace=true", Array("not onnx".utf8))
        #expect(replaced.status == 400, "\(Self.text(replaced))")
        #expect(!Self.text(replaced).contains(temp.path), "no absolute repository path: \(Self.text(replaced))")
        #expect(try Data(contentsOf: file) == original)
        let badFlag = await Self.put(service, "/v2/repository/models/digits/versions/1", query: "replace=maybe", Array(original))
        #expect(badFlag.status == 400)
        // Reloading (what a restart does) still serves the untouched file.
        #expect(await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/models/digits/load")).status == 200)
        #expect(await service.responder(HTTPRequest(method: "GET", path: "/v2/health/ready")).status == 200)
        let same = await Self.put(service, "/v2/repository/models/digits/versions/1", query: "replace=true", Array(original))
        #expect(same.status == 201, "\(Self.text(same))")
    }

    @Test func corruptNewModelLeavesReadinessAndTheRepositoryAlone() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let response = await Self.put(service, "/v2/repository/models/fresh/versions/1", Array("not onnx".utf8))
        #expect(response.status == 400, "\(Self.text(response))")
        #expect(!Self.text(response).contains(temp.path), "\(Self.text(response))")
        #expect(await service.responder(HTTPRequest(method: "GET", path: "/v2/health/ready")).status == 200)
        #expect(!FileManager.default.fileExists(atPath: temp.appendingPathComponent("fresh").path))
        let staging = (try? FileManager.default.contentsOfDirectory(atPath: temp.appendingPathComponent(".staging").path)) ?? []
        #expect(staging.isEmpty)
    }

    @Test func loadWithTheVersionDirectoryGoneIs409AndKeepsServing() async throws {
        let (service, temp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        try FileManager.default.removeItem(at: temp.appendingPathComponent("digits/1"))
        let load = await service.responder(HTTPRequest(method: "POST", path: "/v2/repository/models/digits/load"))
        #expect(load.status == 409, "\(Self.text(load))")
        #expect(Self.text(load).contains("version 1 keeps serving"))
        #expect(await service.responder(HTTPRequest(method: "GET", path: "/v2/health/ready")).status == 200)
        #expect(await service.responder(HTTPRequest(method: "GET", path: "/v2/models/digits/ready")).status == 200)
    }

    @Test func indexShowsMemoryAndTheBudgetRefusesWith507() async throws {
        let (probe, probeTemp) = try await Self.makeService()
        defer { try? FileManager.default.removeItem(at: probeTemp) }
        let index = try API.JSONValue.parse(await probe.responder(HTTPRequest(method: "POST", path: "/v2/repository/index")).body)
        let bytes = try #require(index.arrayValue?.first?["memory_bytes"]?.intValue)
        let fileBytes = try Data(contentsOf: probeTemp.appendingPathComponent("digits/1/model.onnx")).count
        #expect(bytes > fileBytes / 2 && bytes < fileBytes * 4, "memory_bytes \(bytes) for a \(fileBytes)-byte model")
        #expect(probe.registry.index().compactMap(\.memoryBytes).reduce(0, +) == bytes)

        // Room for one digits version, not two: a second version is refused while the first serves.
        let (service, temp) = try await Self.makeService(RegistryOptions(maxModelMemory: Int(Double(bytes) * 1.5)))
        defer { try? FileManager.default.removeItem(at: temp) }
        let onnx = try [UInt8](Data(contentsOf: temp.appendingPathComponent("digits/1/model.onnx")))
        let refused = await Self.put(service, "/v2/repository/models/digits/versions/2", onnx)
        #expect(refused.status == 507, "\(Self.text(refused))")
        #expect(Self.text(refused).contains("--max-model-memory") && Self.text(refused).contains("\(bytes) bytes"), "\(Self.text(refused))")
        #expect(try service.registry.resolve(model: "digits").version == 1)
        #expect(!FileManager.default.fileExists(atPath: temp.appendingPathComponent("digits/2").path))
    }

    @Test func replaceParameter() throws {
        #expect(try RepositoryCodec.decodeReplaceParameter(nil) == false)
        #expect(try RepositoryCodec.decodeReplaceParameter("false") == false)
        #expect(try RepositoryCodec.decodeReplaceParameter("true") == true)
        #expect(try RepositoryCodec.decodeReplaceParameter("TRUE") == true)
        #expect(throws: APIError.self) { try RepositoryCodec.decodeReplaceParameter("yes please") }
    }

    @Test func repositoryErrorsMapToDocumentedStatuses() {
        #expect(ServingError.versionExists(model: "m", version: 1).httpStatus == 409)
        #expect(ServingError.noVersionOnDisk(model: "m", serving: nil).httpStatus == 409)
        #expect(ServingError.repositoryReadOnly("x").httpStatus == 403)
        #expect(ServingError.insufficientStorage("x").httpStatus == 507)
        #expect(ServingError.memoryBudgetExceeded(model: "m", version: 1, needed: 1, loaded: 1, budget: 1).httpStatus == 507)
    }
}
