import API
import Engine
import Foundation
import HTTP
import Infrastructure
import Serving

/// `osprey serve`: the model repository behind the HTTP server, with graceful shutdown on SIGTERM/SIGINT.
let serveCommand = Command(name: "serve", summary: "serve models over HTTP (KServe V2)", help: """
    osprey serve: serve models over HTTP/1.1 (KServe V2 / Open Inference Protocol)

    Usage: osprey serve [options]

    Every flag can also be set with an environment variable: --max-body-bytes -> OSPREY_MAX_BODY_BYTES.

    Options:
      --host ADDR              address to bind, IPv4 or IPv6 literal (default 127.0.0.1)
      --port N                 TCP port, 0 picks a free one (default 8080)
      --grpc-port N|off        KServe V2 over gRPC (HTTP/2 cleartext), 0 picks a free one (default 8081)
      --grpc-max-message-bytes SIZE
                               gRPC request message limit, else RESOURCE_EXHAUSTED (default: --max-body-bytes)
      --model-repository DIR   directory of models (default models)
      --io-threads N           event-loop threads sharing the port (default 1)
      --max-header-bytes SIZE  request line + headers limit, else 431 (default 16KiB)
      --max-body-bytes SIZE    request body limit, else 413 (default 64MiB)
      --max-connections N      open connections allowed; more get 503 and are closed (default 10000)
      --idle-timeout DURATION  keep-alive idle limit (default 60s)
      --read-timeout DURATION  time for a started request to arrive completely, else 408 (default 30s)
      --shutdown-timeout DURATION
                               on SIGTERM/SIGINT, time in-flight requests get to finish (default 30s)
      --drain-delay DURATION   on SIGTERM/SIGINT, report not ready but keep accepting for this long before
                               closing the listener, so load balancers stop sending first (default 0)
      --threads N              compute threads for the engine, OpenBLAS included, per execution (default: all
                               cores); cores / N executions run at once (see instance_group)
      --admin-token TOKEN      require 'Authorization: Bearer TOKEN' on /v2/repository/* (default: loopback clients only)
      --poll-interval DURATION watch the repository for added and removed versions (default: off)
      --max-image-pixels N     largest image accepted by classify, checked before decoding (default 50000000)
      --max-image-bytes SIZE   largest decoded image (width x height x channels x bytes per sample), checked
                               from the header before decoding, else 413 (default 256MiB)
      --max-bytes-elements N   BYTES elements one infer request may hold, else 413 (default 65536)
      --max-decoded-bytes SIZE decoded tensor bytes one infer request may hold, else 413 (default 256MiB)
      --model-name NAME        single-model layout (KServe's /mnt/models): the repository folder itself is model NAME,
                               its model.onnx (or only .onnx file) version 1, with config.json and labels.txt beside it
      --require-models A,B     models that must have a READY version for /v2/health/ready (default: every model
                               whose directory holds a version at start)
      --cache-bytes SIZE       response cache shared by models with "response_cache": {"enable": true}; repeated
                               requests are answered from it, least recently used entries go first (default 0: off)
      --max-model-memory SIZE  bytes all loaded versions may hold together (weights, packed constants, activations
                               at the max batch size); loads past it are refused (default: no limit)
      --stale-upload-age DURATION
                               at start, remove staging entries and temp files of interrupted uploads older than
                               this (default 1h)
      --log-format FORMAT      json or logfmt (default logfmt)
      --log-level LEVEL        debug, info, warn, error or off; access lines are info (default info)
      --help                   show this help

    Sizes accept 65536, 64KiB, 16MiB; durations accept 30, 250ms, 2s, 1m, 1h.
    """) { args in
    let options = try ServeOptions(args)
    let logger = options.configuration.logger
    let repository = options.modelRepository
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: repository, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw UsageError(description: "--model-repository '\(repository)' is not a directory")
    }
    EngineThreads.configure(threads: options.computeThreads)
    // So the memory a hot swap releases goes back to the system: RSS returns to its level before the swap. 32 MiB, not
    // 4: a batch of 32 MobileNetV2 inputs (19 MiB) mapped and page-faulted afresh per execution cost a quarter of the
    // server's CPU per request; below the threshold it reuses arena memory (loads still trim the heap afterwards).
    CompiledModel.returnLargeFreesToSystem(threshold: 32 << 20)
    // Freed request bodies and tensors were otherwise unmapped and faulted in again by the next request (half the
    // server's CPU per binary MobileNetV2-sized request); loads and unloads still trim the heap explicitly.
    CompiledModel.keepFreedMemoryForReuse(upTo: 32 << 20)
    let metrics = Metrics()
    // Executions at once: as many as the cores hold at --threads each (1 by default; 2 at --threads 1 on 2 cores, for
    // models whose instance_group count asks for concurrent executions).
    let slots = max(1, ProcessInfo.processInfo.activeProcessorCount / options.computeThreads)
    let registryOptions = RegistryOptions(computeSlots: slots, pollInterval: options.pollInterval.map { .milliseconds(Int($0 * 1000)) },
                                          requiredModels: options.requiredModels, maxModelMemory: options.maxModelMemory,
                                          staleUploadAge: options.staleUploadAge, singleModel: options.singleModel)
    let registry = ModelRegistry(repositoryPath: repository, loader: engineLoader, options: registryOptions, metrics: metrics, logger: logger)
    // Not ready until the repository has been scanned: before that the empty routing table looks "all loaded".
    let readiness = ReadinessFlag(ready: false)
    // Request work (decoding, hashing) gets one thread per compute thread; executions are limited by the compute gate.
    let service = OspreyService(registry: registry, metrics: metrics, workers: BlockingExecutor(name: "osprey-worker", threads: options.computeThreads),
                                options: options.service, readiness: readiness,
                                log: { line in logger.error(line) })
    let grpc = options.grpcPort.map { GRPCEndpoint(port: $0, maxMessageBytes: options.grpcMaxMessageBytes ?? options.configuration.maxBodyBytes,
                                                   responder: service.grpcResponder) }
    let server = HTTPServer(configuration: options.configuration, responder: service.responder, inlineResponder: service.inlineResponder,
                            admission: service.admission, connectionObserver: service.connectionObserver, grpc: grpc)
    // Started in this order, stopped in the reverse one: HTTP drains first, then polling stops, then the versions
    // are unloaded and their batchers finish. Models load in the background: the server answers (not ready) at once.
    let http = HTTPService(server: server, readiness: readiness, drainDelay: options.drainDelay, shutdownTimeout: options.shutdownTimeout,
                           logger: logger)
    let lifecycle = ServiceGroup(services: [
        ModelService(registry: registry, timeout: options.shutdownTimeout, logger: logger),
        RepositoryService(registry: registry, readiness: readiness, path: repository, isShuttingDown: { http.draining.opened }, logger: logger),
        http,
    ], logger: logger)
    return try await serve(lifecycle, readiness: readiness, drainDelay: options.drainDelay, shutdownTimeout: options.shutdownTimeout,
                           logger: logger)
}

/// `osprey serve` flags parsed into a server configuration.
struct ServeOptions {
    var configuration = HTTPServerConfiguration()
    var modelRepository = "models"
    var shutdownTimeout = 30.0
    var drainDelay = 0.0
    var service = ServiceOptions()
    var computeThreads = ProcessInfo.processInfo.activeProcessorCount
    var pollInterval: Double?
    var requiredModels: [String]?
    var singleModel: String?
    var maxModelMemory: Int?
    var staleUploadAge = 3600.0
    /// nil: no gRPC listener (`--grpc-port off`).
    var grpcPort: Int? = 8081
    var grpcMaxMessageBytes: Int?

    static let valueFlags: Set<String> = ["host", "port", "model-repository", "io-threads", "max-header-bytes", "max-body-bytes",
                                          "max-connections", "idle-timeout", "read-timeout", "shutdown-timeout", "drain-delay", "log-format", "log-level",
                                          "threads", "admin-token", "poll-interval", "max-image-pixels",
                                          "require-models", "max-model-memory", "stale-upload-age", "model-name",
                                          "grpc-port", "grpc-max-message-bytes", "cache-bytes"]

    init(_ args: ArraySlice<String>) throws {
        let arguments = try Arguments(args, valueFlags: ServeOptions.valueFlags.union(ServeOptions.requestLimitFlags), booleanFlags: [])
        guard arguments.positionals.isEmpty else {
            throw UsageError(description: "unexpected argument '\(arguments.positionals[0])'")
        }
        configuration.host = arguments.string("host") ?? configuration.host
        configuration.port = try arguments.int("port", default: configuration.port, minimum: 0)
        guard configuration.port <= 65535 else { throw UsageError(description: "--port expects 0...65535, got \(configuration.port)") }
        modelRepository = arguments.string("model-repository") ?? modelRepository
        if let text = arguments.string("grpc-port") {
            if text.lowercased() == "off" {
                grpcPort = nil
            } else {
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw UsageError(description: "--grpc-port expects 0...65535 or off, got '\(text)'")
                }
                grpcPort = port
            }
        }
        if arguments.string("grpc-max-message-bytes") != nil {
            grpcMaxMessageBytes = try arguments.bytes("grpc-max-message-bytes", default: 0)
        }
        configuration.ioThreads = try arguments.int("io-threads", default: configuration.ioThreads, minimum: 1)
        configuration.maxHeaderBytes = try arguments.bytes("max-header-bytes", default: configuration.maxHeaderBytes)
        configuration.maxBodyBytes = try arguments.bytes("max-body-bytes", default: configuration.maxBodyBytes)
        configuration.maxConnections = try arguments.int("max-connections", default: configuration.maxConnections, minimum: 1)
        configuration.idleTimeout = try arguments.seconds("idle-timeout", default: configuration.idleTimeout)
        configuration.readTimeout = try arguments.seconds("read-timeout", default: configuration.readTimeout)
        shutdownTimeout = try arguments.seconds("shutdown-timeout", default: shutdownTimeout)
        drainDelay = try arguments.seconds("drain-delay", default: drainDelay)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        computeThreads = min(try arguments.int("threads", default: cores, minimum: 1), cores)
        service.adminToken = arguments.string("admin-token").flatMap { $0.isEmpty ? nil : $0 }
        if arguments.string("poll-interval") != nil {
            let seconds = try arguments.seconds("poll-interval", default: 0)
            pollInterval = seconds > 0 ? seconds : nil
        }
        service.maxImagePixels = try arguments.int("max-image-pixels", default: service.maxImagePixels, minimum: 1)
        try parseRequestLimits(arguments)
        if let name = arguments.string("model-name") {
            guard ModelRegistry.isValidModelName(name) else {
                throw UsageError(description: "--model-name: '\(name)' is not a valid model name (1-64 characters of [A-Za-z0-9_.-])")
            }
            singleModel = name
        }
        if let text = arguments.string("require-models") {
            let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for name in names where !ModelRegistry.isValidModelName(name) {
                throw UsageError(description: "--require-models: '\(name)' is not a valid model name")
            }
            requiredModels = names
        }
        if arguments.string("max-model-memory") != nil {
            let bytes = try arguments.bytes("max-model-memory", default: 0)
            guard bytes > 0 else { throw UsageError(description: "--max-model-memory expects a positive size like 2GiB") }
            maxModelMemory = bytes
        }
        service.cacheBytes = try arguments.bytes("cache-bytes", default: 0)
        staleUploadAge = try arguments.seconds("stale-upload-age", default: staleUploadAge)
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
