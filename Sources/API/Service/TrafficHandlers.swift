import HTTP
import Serving

extension ServiceContext {
    /// `POST /v2/repository/models/{model}/traffic` with `{"2": 90, "3": 10}`: the canary split until `DELETE`, an
    /// unload or a restart (config.json is not written). Every version named must be READY: a weight for a version
    /// that cannot take traffic is refused (400 naming it) rather than silently skipped, so the answer shows the split
    /// that really applies.
    func setTraffic(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        let model = p.model ?? ""
        let entries = try registry.versions(of: model)
        let split = try TrafficCodec.decodeSplit(request.body)
        let states = Dictionary(entries.compactMap { e in e.version.map { ($0, e.state) } }, uniquingKeysWith: { first, _ in first })
        let refused = split.weights.filter { states[$0.version] != .ready }.map { w in
            "\(w.version) (" + (states[w.version].map { $0.rawValue } ?? "not in the repository") + ")"
        }
        if !refused.isEmpty {
            let ready = states.filter { $0.value == .ready }.keys.sorted().map(String.init).joined(separator: ", ")
            throw APIError.badRequest("traffic: model '\(model)' version\(refused.count == 1 ? "" : "s") \(refused.joined(separator: ", ")) "
                                      + "cannot take traffic; expected READY versions (\(ready.isEmpty ? "none" : ready))")
        }
        let traffic = try await registry.setTraffic(model: model, split: split)
        return await trafficResponse(model, traffic)
    }

    /// `DELETE /v2/repository/models/{model}/traffic`: back to config.json's `traffic` (or no split).
    func clearTraffic(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        try authorizeAdmin(request)
        let model = p.model ?? ""
        let traffic = try await registry.clearTraffic(model: model)
        return await trafficResponse(model, traffic)
    }

    /// `{"name", "traffic", "traffic_source", "pinned_version"}`: the split now in effect (a pin overrides it).
    private func trafficResponse(_ model: String, _ traffic: ModelTraffic?) async -> HTTPResponse {
        let pinned = await registry.pinnedVersion(model: model)
        var fields: JSONObject = ["name": .string(model)]
        for (key, value) in TrafficCodec.fields(traffic) { fields[key] = value }
        fields["pinned_version"] = pinned.map { .string(String($0)) } ?? .null
        return .json(.object(fields))
    }

    /// The traffic split's key: a non-empty V2 `id`, else the client's `X-Request-ID`.
    func routingKey(id: String?, clientRequestID: String?) -> String? {
        if let id, !id.isEmpty { return id }
        return clientRequestID
    }
}

extension HTTPRequest {
    /// The `X-Request-ID` the client sent, nil when it sent none or one the server replaced by a generated id (the
    /// parser keeps only sane ids as `requestID`), so a generated id never steers the traffic split.
    var clientRequestID: String? {
        guard let header = headers["X-Request-ID"], !header.isEmpty, header == requestID else { return nil }
        return header
    }
}
