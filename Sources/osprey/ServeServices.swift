import HTTP
import Infrastructure
import Serving

/// The HTTP server as a service: it listens when started; at shutdown readiness goes down at once, the listener keeps
/// accepting for the drain delay (so load balancers stop sending first), then closes, and in-flight requests get
/// the shutdown timeout to be answered.
struct HTTPService: Service {
    let name = "http"
    let server: HTTPServer
    let readiness: ReadinessFlag
    let drainDelay: Double
    let shutdownTimeout: Double
    let logger: Logger
    /// Opened when shutdown begins, before readiness goes down.
    let draining = Latch()

    /// Listens until the server has stopped.
    func run() async throws {
        let port = try server.start()
        let host = server.configuration.host
        let shown = host.contains(":") ? "[\(host)]" : host
        logger.info("listening on http://\(shown):\(port)", [("io_threads", String(server.configuration.ioThreads))])
        if let grpcPort = server.grpcPort { logger.info("listening for gRPC on \(shown):\(grpcPort)", [("protocol", "h2c")]) }
        await server.stopped()
    }

    /// Readiness down, drain delay, then a graceful stop of every connection.
    func shutdown() async {
        draining.open()
        readiness.set(false)
        if server.port != nil && drainDelay > 0 {
            try? await Task.sleep(for: .milliseconds(Int(drainDelay * 1000)))
            logger.info("drain delay over, closing the listener")
        }
        await server.shutdown(gracePeriod: shutdownTimeout)
    }
}

/// The model repository: loads every model at start (readiness comes up once it has), then polls for changes until
/// cancelled.
struct RepositoryService: Service {
    let name = "repository"
    let registry: ModelRegistry
    let readiness: ReadinessFlag
    let path: String
    /// True once the process is shutting down: readiness must then stay down.
    let isShuttingDown: @Sendable () -> Bool
    let logger: Logger

    /// Loads, then polls (returns at once after loading when polling is off).
    func run() async throws {
        await registry.loadAll()
        guard !Task.isCancelled else { return }
        // Set, then re-checked: a shutdown that began in between must still see readiness down.
        if !isShuttingDown() { readiness.set(true) }
        if isShuttingDown() { readiness.set(false) }
        logger.info("model repository loaded", [("path", path), ("ready", String(registry.isReady))])
        await registry.run()
    }
}

/// The loaded versions and their batchers: nothing to do while serving; at shutdown every version is unloaded and
/// the batchers drain what they hold and stop, so no model runs after the process says it stopped.
struct ModelService: Service {
    let name = "models"
    let registry: ModelRegistry
    /// Longest wait for the batchers.
    let timeout: Double
    let logger: Logger

    /// The batchers run on their own threads.
    func run() async throws {}

    /// Unloads every version, then waits (at most `timeout`) until every batcher has finished.
    func shutdown() async {
        let running = await registry.unloadAll(waitingAtMost: timeout)
        if running == 0 {
            logger.info("models unloaded")
        } else {
            logger.warn("models unloaded; batchers still running at exit", [("batchers", String(running))])
        }
    }
}
