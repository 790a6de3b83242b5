import Foundation
import HTTP
import Testing
@testable import API

/// Issue 11, defect 8 (API half): unknown methods get 405 with Allow, uploads are authorized from their headers,
/// and a cancelled request is answered 499 without a 500 log line.
@Suite struct ProtocolHardeningTests {
    @Test func unknownMethodsGet405WithAllowNot400() async throws {
        let (service, temp) = try await ServiceTests.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        for method in ["QUERY", "get", "PROPFIND", "BREW"] {
            let response = await service.responder(HTTPRequest(method: method, path: "/v2/health/live"))
            #expect(response.status == 405, "\(method)")
            #expect(response.headers["Allow"] == "GET, HEAD, OPTIONS", "\(method)")
        }
        #expect(service.inlineResponder(HTTPRequest(method: "get", path: "/v2/health/live")) == nil)
    }

    @Test func repositoryRoutesAreAuthorizedFromTheHeaders() async throws {
        let (service, temp) = try await ServiceTests.makeService(adminToken: "s3cret")
        defer { try? FileManager.default.removeItem(at: temp) }
        let admission = service.admission
        let anonymous = admission(HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/9", headers: ["Content-Length": "999999999"]))
        #expect(anonymous?.status == 401)
        #expect(anonymous?.headers["WWW-Authenticate"] == "Bearer")
        let wrong = admission(HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/9", headers: ["Authorization": "Bearer nope"]))
        #expect(wrong?.status == 401)
        #expect(admission(HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/9", headers: ["Authorization": "Bearer s3cret"])) == nil)
        // Inference bodies are not gated here: their limits are the codec's.
        #expect(admission(HTTPRequest(method: "POST", path: "/v2/models/digits/infer")) == nil)
    }

    @Test func repositoryRoutesWithoutATokenAnswerLoopbackOnlyFromTheHeaders() async throws {
        let (service, temp) = try await ServiceTests.makeService()
        defer { try? FileManager.default.removeItem(at: temp) }
        let remote = HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/9", remoteAddress: "10.1.2.3:5000")
        #expect(service.admission(remote)?.status == 403)
        #expect(service.admission(HTTPRequest(method: "PUT", path: "/v2/repository/models/digits/versions/9", remoteAddress: "127.0.0.1:5000")) == nil)
    }

    @Test func aCancelledRequestIs499AndNotLoggedAsAFailure() async throws {
        let logged = CancelLogLines()
        var router = Router(log: { logged.append($0) })
        router.register(method: "GET", path: "/slow") { _, _ in
            try await Task.sleep(nanoseconds: 10_000_000_000)
            return HTTPResponse(status: 200)
        }
        let task = Task { await router.respond(HTTPRequest(method: "GET", path: "/slow")) }
        try await Task.sleep(nanoseconds: 20_000_000)
        task.cancel()
        #expect(await task.value.status == 499)
        #expect(logged.lines.isEmpty)
    }
}

private final class CancelLogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
