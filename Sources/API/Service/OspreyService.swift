import HTTP
import Imaging
import Infrastructure
import Serving

/// Settings of the HTTP-facing service that are not the HTTP server's own.
public struct ServiceOptions: Sendable {
    /// Name reported by `GET /v2`.
    public var serverName: String
    /// Version reported by `GET /v2`.
    public var serverVersion: String
    /// Bearer token required by the repository endpoints; nil restricts them to loopback clients.
    public var adminToken: String?
    /// Largest decoded image accepted, in pixels (checked from the header before decoding).
    public var maxImagePixels: Int
    /// `top_k` when a classify request gives none.
    public var defaultTopK: Int
    /// Largest decoded image accepted, in bytes (width x height x channels x bytes per sample, from the header).
    public var maxImageBytes = DecodeOptions.defaultMaxBytes
    /// BYTES elements and decoded tensor bytes one infer request may claim (413 beyond them).
    public var decodeLimits = V2DecodeLimits()
    /// Bytes of the response cache shared by models with `"response_cache": {"enable": true}`; 0 turns it off.
    public var cacheBytes = 0

    /// Options with Osprey's defaults.
    public init(serverName: String = "osprey", serverVersion: String = ospreyVersion, adminToken: String? = nil,
                maxImagePixels: Int = 50_000_000, defaultTopK: Int = 5) {
        self.serverName = serverName
        self.serverVersion = serverVersion
        self.adminToken = adminToken
        self.maxImagePixels = maxImagePixels
        self.defaultTopK = defaultTopK
    }
}

/// Osprey's version string.
public let ospreyVersion = "0.1.0"

/// The KServe V2 / Triton protocol extensions this server implements (reported by `GET /v2`).
public let protocolExtensions = ["binary_tensor_data", "classification", "model_repository", "statistics", "schedule_policy"]

/// The application behind the HTTP server: routes from `Routes.all` bound to the model registry.
public final class OspreyService: Sendable {
    /// Everything the handlers use.
    let context: ServiceContext
    private let router: Router

    /// Assembles the service; `log` receives one line per unmapped (500) error.
    /// `readiness` is the server's drain switch: shutdown clears it so `/v2/health/ready` fails while requests finish.
    public init(registry: ModelRegistry, metrics: Metrics, workers: BlockingExecutor, options: ServiceOptions = ServiceOptions(),
                readiness: ReadinessFlag = ReadinessFlag(), log: @escaping @Sendable (String) -> Void = { Logger().error($0) }) {
        let cache = options.cacheBytes > 0 ? InferenceCache(capacityBytes: options.cacheBytes, metrics: metrics) : nil
        context = ServiceContext(registry: registry, metrics: metrics, workers: workers, options: options, readiness: readiness, responseCache: cache)
        router = Routes.makeRouter(handlers: ServiceContext.handlers(context), log: log)
        let context = self.context
        metrics.computedGauge("osprey_ready", help: "1 when the server reports ready.") { context.isReady ? 1 : 0 }
        _ = metrics.openConnections
    }

    /// Models, versions and their batchers.
    public var registry: ModelRegistry { context.registry }
    /// Prometheus registry shared with Serving.
    public var metrics: Metrics { context.metrics }

    /// The router with every operation bound (for tests that check nothing is left unhandled).
    public var routes: Router { router }

    /// Ready when not draining and every model in the repository has a READY version.
    public var isReady: Bool { context.isReady }

    /// Keeps `osprey_http_open_connections` as connections open and close (give it to the HTTP server).
    public var connectionObserver: HTTPConnectionObserver {
        let gauge = context.metrics.openConnections
        return { change in gauge.increment(by: Double(change)) }
    }

    /// Health probes answered on the loop thread (no hop, so probes stay fast under load); nil defers to `responder`.
    public var inlineResponder: HTTPInlineResponder {
        let context = self.context
        return { request in
            guard request.method == "GET" || request.method == "HEAD" else { return nil }
            let started = SystemClock.nanoseconds()
            var response: HTTPResponse
            switch request.path {
            case "/v2/health/live": response = context.liveResponse()
            case "/v2/health/ready": response = context.readyResponse()
            default: return nil
            }
            response.route = request.path
            context.record(request, response, since: started)
            return response
        }
    }

    /// The responder for the HTTP server: routing (the route resolved once), handlers and per-route HTTP metrics.
    public var responder: HTTPResponder {
        let router = self.router
        let context = self.context
        return { request in
            let started = SystemClock.nanoseconds()
            let response = await router.respond(request)
            context.record(request, response, since: started)
            return response
        }
    }
}

/// The shared objects every handler works with.
struct ServiceContext: Sendable {
    let registry: ModelRegistry
    let metrics: Metrics
    let workers: BlockingExecutor
    let options: ServiceOptions
    let readiness: ReadinessFlag
    /// The response cache (nil when `cacheBytes` is 0).
    let responseCache: InferenceCache?

    var isReady: Bool { readiness.isReady && registry.isReady }

    /// Counts the request under its route pattern (`unmatched` when none matched) and observes its handling time.
    func record(_ request: HTTPRequest, _ response: HTTPResponse, since started: UInt64) {
        let seconds = Double(SystemClock.nanoseconds() &- started) / 1e9
        metrics.recordHTTPRequest(route: response.route ?? "unmatched", method: request.method, status: response.status, seconds: seconds)
    }
}
