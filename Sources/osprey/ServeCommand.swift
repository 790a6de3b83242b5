import HTTP

/// `osprey serve`: the HTTP server with its flags; the health routes below stand in until the API router lands.
let serveCommand = Command(name: "serve", summary: "serve models over HTTP (KServe V2)", help: """
    osprey serve: serve models over HTTP/1.1 (KServe V2 / Open Inference Protocol)

    Usage: osprey serve [options]

    Every flag can also be set with an environment variable: --max-body-bytes -> OSPREY_MAX_BODY_BYTES.

    Options:
      --host ADDR              address to bind, IPv4 or IPv6 literal (default 127.0.0.1)
      --port N                 TCP port, 0 picks a free one (default 8080)
      --model-repository DIR   directory of models (default models)
      --io-threads N           event-loop threads sharing the port (default 1)
      --max-header-bytes SIZE  request line + headers limit, else 431 (default 16KiB)
      --max-body-bytes SIZE    request body limit, else 413 (default 64MiB)
      --max-connections N      open connections allowed; more get 503 and are closed (default 10000)
      --idle-timeout DURATION  keep-alive idle limit (default 60s)
      --read-timeout DURATION  time for a started request to arrive completely, else 408 (default 30s)
      --shutdown-timeout DURATION
                               on SIGTERM/SIGINT, time in-flight requests get to finish (default 30s)
      --log-format FORMAT      json or logfmt (default logfmt)
      --log-level LEVEL        debug, info, warn, error or off; access lines are info (default info)
      --help                   show this help

    Sizes accept 65536, 64KiB, 16MiB; durations accept 30, 250ms, 2s, 1m.
    """) { args in
    let options = try ServeOptions(args)
    let readiness = ReadinessFlag(ready: true)
    let routes = HealthRoutes(readiness: readiness)
    let server = HTTPServer(configuration: options.configuration,
                            responder: { request in routes.respond(to: request) },
                            inlineResponder: { request in routes.respond(to: request) })
    return try serve(server: server, readiness: readiness, shutdownTimeout: options.shutdownTimeout,
                     logger: options.configuration.logger)
}

/// `osprey serve` flags parsed into a server configuration.
struct ServeOptions {
    var configuration = HTTPServerConfiguration()
    var modelRepository = "models"
    var shutdownTimeout = 30.0

    static let valueFlags: Set<String> = ["host", "port", "model-repository", "io-threads", "max-header-bytes", "max-body-bytes",
                                          "max-connections", "idle-timeout", "read-timeout", "shutdown-timeout", "log-format", "log-level"]

    init(_ args: ArraySlice<String>) throws {
        let arguments = try Arguments(args, valueFlags: ServeOptions.valueFlags, booleanFlags: [])
        guard arguments.positionals.isEmpty else {
            throw UsageError(description: "unexpected argument '\(arguments.positionals[0])'")
        }
        configuration.host = arguments.string("host") ?? configuration.host
        configuration.port = try arguments.int("port", default: configuration.port, minimum: 0)
        guard configuration.port <= 65535 else { throw UsageError(description: "--port expects 0...65535, got \(configuration.port)") }
        modelRepository = arguments.string("model-repository") ?? modelRepository
        configuration.ioThreads = try arguments.int("io-threads", default: configuration.ioThreads, minimum: 1)
        configuration.maxHeaderBytes = try arguments.bytes("max-header-bytes", default: configuration.maxHeaderBytes)
        configuration.maxBodyBytes = try arguments.bytes("max-body-bytes", default: configuration.maxBodyBytes)
        configuration.maxConnections = try arguments.int("max-connections", default: configuration.maxConnections, minimum: 1)
        configuration.idleTimeout = try arguments.seconds("idle-timeout", default: configuration.idleTimeout)
        configuration.readTimeout = try arguments.seconds("read-timeout", default: configuration.readTimeout)
        shutdownTimeout = try arguments.seconds("shutdown-timeout", default: shutdownTimeout)
        if let text = arguments.string("log-format") {
            guard let format = LogFormat(rawValue: text.lowercased()) else {
                throw UsageError(description: "--log-format expects json or logfmt, got '\(text)'")
            }
            configuration.logFormat = format
        }
        if let text = arguments.string("log-level") {
            guard let level = LogLevel(name: text) else {
                throw UsageError(description: "--log-level expects debug, info, warn, error or off, got '\(text)'")
            }
            configuration.logLevel = level
        }
        guard configuration.maxHeaderBytes >= 256 else {
            throw UsageError(description: "--max-header-bytes expects at least 256, got \(configuration.maxHeaderBytes)")
        }
    }
}

/// Stand-in router (health and server metadata only); the API module's router replaces it.
struct HealthRoutes: Sendable {
    let readiness: ReadinessFlag

    private static let json: HTTPHeaders = ["Content-Type": "application/json"]
    private static let live = Array(#"{"live": true}"#.utf8)
    private static let ready = Array(#"{"ready": true}"#.utf8)
    private static let notReady = Array(#"{"ready": false}"#.utf8)
    private static let metadata = Array(#"{"name":"osprey","version":"0.1.0","extensions":["binary_tensor_data","classification","model_repository"]}"#.utf8)

    /// Answers the health and metadata routes; 405 with `Allow` for other methods, 404 JSON elsewhere.
    func respond(to request: HTTPRequest) -> HTTPResponse {
        let body: [UInt8]
        var status = 200
        switch request.path {
        case "/v2/health/live": body = Self.live
        case "/v2/health/ready":
            if readiness.isReady { body = Self.ready } else { status = 503; body = Self.notReady }
        case "/v2", "/v2/": body = Self.metadata
        default:
            return error(404, "no route for \(request.method) \(request.path)")
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            var response = error(405, "method \(request.method) is not allowed on \(request.path); allowed: GET, HEAD")
            response.headers.add("Allow", "GET, HEAD")
            return response
        }
        return HTTPResponse(status: status, headers: Self.json, body: body)
    }

    private func error(_ status: Int, _ message: String) -> HTTPResponse {
        var body = Array(#"{"error": ""#.utf8)
        for byte in message.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { body.append(UInt8(ascii: "\\")) }
            body.append(byte < 0x20 ? UInt8(ascii: " ") : byte)
        }
        body.append(contentsOf: Array(#""}"#.utf8))
        return HTTPResponse(status: status, headers: Self.json, body: body)
    }
}
