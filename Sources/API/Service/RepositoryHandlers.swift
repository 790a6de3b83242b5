import Foundation
import HTTP
import Serving

extension ServiceContext {
    /// `POST /v2/repository/index`: every model and version with its state (and reason when not READY).
    /// Body `{"ready": true}` keeps only READY entries, as in Triton.
    func repositoryIndex(_ request: HTTPRequest) throws -> HTTPResponse {
        try authorizeAdmin(request)
        let onlyReady = try RepositoryCodec.decodeIndexRequest(request.body)
        return RepositoryCodec.encodeIndex(registry.index().filter { !onlyReady || $0.state == .ready })
    }

    /// `POST /v2/repository/models/{model}/load`: (re)load per the version policy, re-reading config and labels.
    /// Triton's optional body `{"parameters": {"config": "<config.json text>"}}` replaces the model's config first.
    func loadModel(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        try await registry.load(model: p.model ?? "", config: try RepositoryCodec.decodeLoadRequest(request.body))
        return HTTPResponse(status: 200)
    }

    /// `POST /v2/repository/models/{model}/unload`: stop serving; admitted requests finish first.
    func unloadModel(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        try await registry.unload(model: p.model ?? "")
        return HTTPResponse(status: 200)
    }

    /// `PUT /v2/repository/models/{model}/versions/{version}[?replace=true]`: verify `Digest`, then stage, compile and
    /// warm up the ONNX body before renaming it into place; an existing version answers 409 unless `replace=true`.
    func uploadVersion(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        let model = p.model ?? ""
        guard let version = p.version else { throw APIError.badRequest("version: expected a positive integer") }
        let replace = try RepositoryCodec.decodeReplaceParameter(request.queryItems.last { $0.name == "replace" }?.value)
        guard !request.body.isEmpty else { throw APIError.badRequest("empty body: expected the ONNX model bytes") }
        let expected = try request.headers["Digest"].map { DigestHeader.hex(try DigestHeader.expectedSHA256($0)) }
        // Hash once, on a worker thread (models run to hundreds of MB): it is both checked and reported.
        let body = request.body
        let actual = try await workers.run { SHA256.hexDigest(body) }
        if let expected, expected != actual {
            throw ServingError.digestMismatch(expected: expected, got: actual)
        }
        try await registry.putVersion(model: model, version: version, bytes: request.body, replace: replace)
        return .json(.object(["name": .string(model), "version": .string(String(version)), "sha256": .string(actual)]), status: 201)
    }

    /// `POST /v2/repository/models/{model}/default` with `{"version": "2"}`: pin (roll back or forward) in one call.
    func setDefault(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        let model = p.model ?? ""
        try await registry.pin(model: model, version: try RepositoryCodec.decodeDefaultVersionRequest(request.body))
        return await defaultVersionResponse(model)
    }

    /// `DELETE /v2/repository/models/{model}/default`: unpin; the highest READY version serves again.
    func clearDefault(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        let model = p.model ?? ""
        try await registry.unpin(model: model)
        return await defaultVersionResponse(model)
    }

    /// `{"name", "default_version", "pinned"}`: the version unversioned routes now use.
    private func defaultVersionResponse(_ model: String) async -> HTTPResponse {
        let current = try? registry.resolve(model: model, version: nil)
        let pinned = await registry.pinnedVersion(model: model) != nil
        return .json(.object(["name": .string(model), "default_version": current.map { .string(String($0.version)) } ?? .null,
                              "pinned": .bool(pinned)]))
    }

    /// Admin endpoints: with a token, `Authorization: Bearer <token>` is required; without one, loopback clients only.
    func authorizeAdmin(_ request: HTTPRequest) throws {
        if let token = options.adminToken {
            guard let header = request.headers["Authorization"] else {
                throw APIError.unauthorized("repository endpoints require 'Authorization: Bearer <token>'")
            }
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer", constantTimeEquals(Array(parts[1].utf8), Array(token.utf8)) else {
                throw APIError.unauthorized("invalid admin token")
            }
            return
        }
        guard Self.isLoopback(request.remoteAddress) else {
            throw APIError.forbidden("repository endpoints answer loopback clients only unless --admin-token is set; request came from \(request.remoteAddress)")
        }
    }

    /// True for 127.0.0.0/8 and ::1 peers (with or without a port, IPv6 possibly bracketed or v4-mapped).
    static func isLoopback(_ address: String) -> Bool {
        var host = address
        if host.hasPrefix("[") , let close = host.firstIndex(of: "]") {
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        if host.hasPrefix("::ffff:") { host = String(host.dropFirst(7)) }
        return host.hasPrefix("127.") || host == "::1" || host == "localhost"
    }
}

/// Compares secrets without an early exit, so timing does not reveal how much of a guess was right.
private func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for (x, y) in zip(a, b) { difference |= x ^ y }
    return difference == 0
}
