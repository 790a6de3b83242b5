import Infrastructure

/// Every operation of the Osprey HTTP API; raw values are the `operationId`s in openapi.yaml.
public enum OperationID: String, CaseIterable, Sendable {
    /// GET /v2
    case serverMetadata
    /// GET /v2/health/live
    case serverLive
    /// GET /v2/health/ready
    case serverReady
    /// GET /v2/models/{model}
    case modelMetadata
    /// GET /v2/models/{model}/versions/{version}
    case modelVersionMetadata
    /// GET /v2/models/{model}/ready
    case modelReady
    /// GET /v2/models/{model}/versions/{version}/ready
    case modelVersionReady
    /// POST /v2/models/{model}/infer
    case modelInfer
    /// POST /v2/models/{model}/versions/{version}/infer
    case modelVersionInfer
    /// POST /v2/models/{model}/classify
    case modelClassify
    /// POST /v2/models/{model}/versions/{version}/classify
    case modelVersionClassify
    /// GET /v2/models/{model}/config
    case modelConfig
    /// GET /v2/models/{model}/versions/{version}/config
    case modelVersionConfig
    /// GET /v2/models/{model}/stats
    case modelStats
    /// GET /v2/models/{model}/versions/{version}/stats
    case modelVersionStats
    /// POST /v2/repository/index
    case repositoryIndex
    /// POST /v2/repository/models/{model}/load
    case repositoryModelLoad
    /// POST /v2/repository/models/{model}/unload
    case repositoryModelUnload
    /// PUT /v2/repository/models/{model}/versions/{version}
    case repositoryVersionUpload
    /// POST /v2/repository/models/{model}/default
    case repositorySetDefault
    /// DELETE /v2/repository/models/{model}/default
    case repositoryClearDefault
    /// GET /metrics
    case metrics
    /// GET /
    case console
    /// GET /openapi.yaml
    case openAPISpec
    /// GET /v2/models
    case modelList
    /// POST /v2/repository/models/{model}/traffic
    case repositorySetTraffic
    /// DELETE /v2/repository/models/{model}/traffic
    case repositoryClearTraffic
}

/// One route: method, path pattern (`{name}` segments are parameters) and its operation.
public struct RouteSpec: Sendable, Hashable, CustomStringConvertible {
    /// Upper-case method.
    public var method: String
    /// Path pattern, e.g. `/v2/models/{model}/versions/{version}/infer`.
    public var pattern: String
    /// The operation it serves.
    public var operation: OperationID

    /// A route value.
    public init(_ method: String, _ pattern: String, _ operation: OperationID) {
        self.method = method
        self.pattern = pattern
        self.operation = operation
    }

    /// `GET /v2 (serverMetadata)`.
    public var description: String { "\(method) \(pattern) (\(operation.rawValue))" }
}

/// The single list of Osprey's routes; openapi.yaml is tested against it.
public enum Routes {
    /// Every route, in matching order.
    public static let all: [RouteSpec] = [
        RouteSpec("GET", "/v2", .serverMetadata),
        RouteSpec("GET", "/v2/health/live", .serverLive),
        RouteSpec("GET", "/v2/health/ready", .serverReady),
        RouteSpec("GET", "/v2/models/{model}", .modelMetadata),
        RouteSpec("GET", "/v2/models/{model}/versions/{version}", .modelVersionMetadata),
        RouteSpec("GET", "/v2/models/{model}/ready", .modelReady),
        RouteSpec("GET", "/v2/models/{model}/versions/{version}/ready", .modelVersionReady),
        RouteSpec("POST", "/v2/models/{model}/infer", .modelInfer),
        RouteSpec("POST", "/v2/models/{model}/versions/{version}/infer", .modelVersionInfer),
        RouteSpec("POST", "/v2/models/{model}/classify", .modelClassify),
        RouteSpec("POST", "/v2/models/{model}/versions/{version}/classify", .modelVersionClassify),
        RouteSpec("GET", "/v2/models/{model}/config", .modelConfig),
        RouteSpec("GET", "/v2/models/{model}/versions/{version}/config", .modelVersionConfig),
        RouteSpec("GET", "/v2/models/{model}/stats", .modelStats),
        RouteSpec("GET", "/v2/models/{model}/versions/{version}/stats", .modelVersionStats),
        RouteSpec("POST", "/v2/repository/index", .repositoryIndex),
        RouteSpec("POST", "/v2/repository/models/{model}/load", .repositoryModelLoad),
        RouteSpec("POST", "/v2/repository/models/{model}/unload", .repositoryModelUnload),
        RouteSpec("PUT", "/v2/repository/models/{model}/versions/{version}", .repositoryVersionUpload),
        RouteSpec("POST", "/v2/repository/models/{model}/default", .repositorySetDefault),
        RouteSpec("DELETE", "/v2/repository/models/{model}/default", .repositoryClearDefault),
        RouteSpec("GET", "/metrics", .metrics),
        RouteSpec("GET", "/", .console),
        RouteSpec("GET", "/openapi.yaml", .openAPISpec),
        RouteSpec("GET", "/v2/models", .modelList),
        RouteSpec("POST", "/v2/repository/models/{model}/traffic", .repositorySetTraffic),
        RouteSpec("DELETE", "/v2/repository/models/{model}/traffic", .repositoryClearTraffic),
    ]

    /// The route serving `operation`.
    public static func spec(for operation: OperationID) -> RouteSpec {
        guard let spec = all.first(where: { $0.operation == operation }) else {
            preconditionFailure("operation \(operation) has no route")
        }
        return spec
    }

    /// A router with Osprey's routes, each bound to `handlers[operation]`; operations without a
    /// handler answer 501 (see `Router.unhandledOperations`).
    public static func makeRouter(handlers: [OperationID: RouteHandler],
                                  log: @escaping @Sendable (String) -> Void = { Logger().error($0) }) -> Router {
        var router = Router(log: log)
        for spec in all {
            router.register(method: spec.method, path: spec.pattern, operation: spec.operation, handler: handlers[spec.operation])
        }
        return router
    }
}
