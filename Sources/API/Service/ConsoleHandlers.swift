import HTTP
import Serving

extension ServiceContext {
    /// `GET /`: the web console.
    func consolePage() -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": ConsolePage.contentType, "Cache-Control": "no-cache"], body: ConsolePage.bytes)
    }

    /// `GET /openapi.yaml`: the contract this server implements.
    func openAPISpec() -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": EmbeddedSpec.contentType], body: Array(EmbeddedSpec.text.utf8))
    }

    /// `GET /v2/models`: every model with its default version and each version's state, public and read-only,
    /// so failure reasons (which may name files) stay behind the admin index.
    func modelList() async -> HTTPResponse {
        var byModel: [String: [ModelIndexEntry]] = [:]
        for entry in registry.index() { byModel[entry.name, default: []].append(entry) }
        var models: [JSONValue] = []
        for name in byModel.keys.sorted() {
            let versions = byModel[name, default: []].compactMap { entry -> (Int, ModelState)? in
                entry.version.map { ($0, entry.state) }
            }.sorted { $0.0 < $1.0 }
            let current = try? registry.resolve(model: name, version: nil)
            let pinned = await registry.pinnedVersion(model: name) != nil
            models.append(.object([
                "name": .string(name),
                "default_version": current.map { .string(String($0.version)) } ?? .null,
                "pinned": .bool(pinned),
                "versions": .array(versions.map { .object(["version": .string(String($0.0)), "state": .string($0.1.rawValue)]) }),
            ]))
        }
        return .json(.object(["models": .array(models)]))
    }
}
