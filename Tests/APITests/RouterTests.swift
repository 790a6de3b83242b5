import HTTP
import Synchronization
import Testing
@testable import API

private struct Boom: Error {}

private func router(log: @escaping @Sendable (String) -> Void = { _ in }) -> Router {
    var handlers: [OperationID: RouteHandler] = [:]
    for op in OperationID.allCases {
        handlers[op] = { request, params in
            let v = params.version.map(String.init) ?? "-"
            return HTTPResponse(status: 200, body: Array("\(op.rawValue) \(params.model ?? "-") \(v) \(request.method)".utf8))
        }
    }
    handlers[.modelStats] = { _, _ in throw Boom() }
    handlers[.modelReady] = { _, _ in throw APIError.unavailable("loading", retryAfter: 2) }
    handlers[.modelInfer] = { request, _ in
        _ = try V2Codec.decodeInferRequest(body: request.body, headers: request.headers)
        return HTTPResponse(status: 200)
    }
    return Routes.makeRouter(handlers: handlers, log: log)
}

private func call(_ r: Router, _ method: String, _ path: String, body: String = "") async -> HTTPResponse {
    await r.respond(HTTPRequest(method: method, path: path, body: Array(body.utf8), requestID: "req-7"))
}

private func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

@Suite struct RouterTests {
    @Test func dispatchesWithParameters() async {
        let r = router()
        #expect(text(await call(r, "GET", "/v2")) == "serverMetadata - - GET")
        #expect(text(await call(r, "POST", "/v2/models/resnet-18.v1/versions/12/classify")) == "modelVersionClassify resnet-18.v1 12 POST")
        #expect(text(await call(r, "PUT", "/v2/repository/models/m/versions/3")) == "repositoryVersionUpload m 3 PUT")
        #expect(text(await call(r, "DELETE", "/v2/repository/models/m/default")) == "repositoryClearDefault m - DELETE")
        #expect(text(await call(r, "GET", "/metrics")) == "metrics - - GET")
    }

    @Test func unknownPathIs404JSON() async throws {
        let response = await call(router(), "GET", "/v3/models")
        #expect(response.status == 404)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(try JSONValue.parse(response.body)["error"]?.stringValue?.contains("/v3/models") == true)
        #expect(await call(router(), "GET", "/v2/").status == 404)
        #expect(await call(router(), "GET", "/v2/models/m/versions/1/nope").status == 404)
    }

    @Test func wrongMethodIs405WithAllow() async throws {
        let r = router()
        let response = await call(r, "POST", "/v2/models/m")
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET, HEAD, OPTIONS")
        #expect(try JSONValue.parse(response.body)["error"] != nil)
        let infer = await call(r, "GET", "/v2/models/m/infer")
        #expect(infer.status == 405 && infer.headers["Allow"] == "POST, OPTIONS")
        let def = await call(r, "GET", "/v2/repository/models/m/default")
        #expect(def.headers["Allow"] == "POST, DELETE, OPTIONS")
        let options = await call(r, "OPTIONS", "/v2/models/m/infer")
        #expect(options.status == 204 && options.headers["Allow"] == "POST, OPTIONS")
    }

    @Test func headIsServedByGet() async {
        let response = await call(router(), "HEAD", "/v2/health/live")
        #expect(response.status == 200)
        #expect(text(response) == "serverLive - - HEAD")
    }

    @Test(arguments: [
        "/v2/models/bad%20name", "/v2/models/" + String(repeating: "a", count: 65), "/v2/models/..", "/v2/models/.",
        "/v2/models/a$b", "/v2/models/m/versions/0", "/v2/models/m/versions/-1", "/v2/models/m/versions/abc",
        "/v2/models/m/versions/01", "/v2/models/m/versions/1.5", "/v2/models/m/versions/9999999999999999999",
    ])
    func invalidParametersAre400(path: String) async {
        #expect(await call(router(), "GET", path).status == 400, "\(path)")
    }

    @Test func validNamesPass() async {
        #expect(await call(router(), "GET", "/v2/models/" + String(repeating: "a", count: 64)).status == 200)
        #expect(await call(router(), "GET", "/v2/models/a.b_c-D9/versions/123456").status == 200)
    }

    @Test func errorsMapToStatuses() async throws {
        let logged = LockedLines()
        let r = router(log: { logged.append($0) })
        let unmapped = await call(r, "GET", "/v2/models/m/stats")
        #expect(unmapped.status == 500)
        #expect(text(unmapped).contains("req-7"))
        #expect(logged.lines.count == 1 && logged.lines[0].contains("req-7") && logged.lines[0].contains("Boom"))
        let mapped = await call(r, "GET", "/v2/models/m/ready")
        #expect(mapped.status == 503 && mapped.headers["Retry-After"] == "2")
        let codec = await call(r, "POST", "/v2/models/m/infer", body: "{")
        #expect(codec.status == 400)
        #expect(try JSONValue.parse(codec.body)["error"]?.stringValue?.hasPrefix("invalid JSON") == true)
    }

    @Test func routesWithoutHandlersAnswer501() async {
        let r = Routes.makeRouter(handlers: [:])
        #expect(Set(r.unhandledOperations) == Set(OperationID.allCases))
        #expect(await call(r, "GET", "/v2").status == 501)
        var attached = r
        attached.attach(.serverMetadata) { _, _ in HTTPResponse(status: 200) }
        #expect(await call(attached, "GET", "/v2").status == 200)
        #expect(!attached.unhandledOperations.contains(.serverMetadata))
    }

    @Test func customRoutesCanBeRegistered() async {
        var r = Router(log: { _ in })
        r.register(method: "get", path: "/debug/{model}/x") { _, params in
            HTTPResponse(status: 200, body: Array((params.model ?? "").utf8))
        }
        #expect(r.routes.map { "\($0.method) \($0.pattern)" } == ["GET /debug/{model}/x"])
        #expect(text(await call(r, "GET", "/debug/abc/x")) == "abc")
        #expect(await call(r, "GET", "/debug/a%b/x").status == 400)
        #expect(r.unhandledOperations.isEmpty)
    }

    @Test func routeTableCoversEveryOperationOnce() {
        #expect(Routes.all.map(\.operation) == OperationID.allCases)
        let pairs = Routes.all.map { "\($0.method) \($0.pattern)" }
        #expect(Set(pairs).count == pairs.count)
        #expect(router().routes.map { "\($0.method) \($0.pattern)" } == pairs)
        #expect(router().unhandledOperations.isEmpty)
    }
}

/// Collects log lines from concurrent handlers.
final class LockedLines: Sendable {
    private let storage = Mutex<[String]>([])
    func append(_ line: String) { storage.withLock { $0.append(line) } }
    var lines: [String] { storage.withLock { $0 } }
}
