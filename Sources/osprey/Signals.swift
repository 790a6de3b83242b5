#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import HTTP

/// Runs `server` until SIGTERM or SIGINT, then shuts it down gracefully; returns the exit status.
///
/// The first signal flips `readiness` to not-ready at once; the listener stays open and serving for `drainDelay`
/// seconds (so a load balancer or Kubernetes can take the instance out of rotation before connections are refused),
/// then closes and gives in-flight requests `shutdownTimeout` seconds; a second signal exits immediately.
func serve(server: HTTPServer, readiness: ReadinessFlag, drainDelay: Double, shutdownTimeout: Double, logger: Logger) throws -> Int32 {
    let waiter = try SignalWaiter(signals: [SIGINT, SIGTERM]) { signal, count in
        let name = signal == SIGTERM ? "SIGTERM" : "SIGINT"
        if count == 1 {
            readiness.set(false)
            logger.info("shutting down", [("signal", name), ("drain_delay_seconds", String(drainDelay)),
                                          ("grace_seconds", String(shutdownTimeout))])
            // Off the signal thread, so a second signal during the delay still exits at once.
            DispatchQueue.global().asyncAfter(deadline: .now() + drainDelay) {
                if drainDelay > 0 { logger.info("drain delay over, closing the listener") }
                server.beginShutdown(gracePeriod: shutdownTimeout)
            }
        } else {
            logger.warn("second signal, exiting now", [("signal", name)])
            exit(1)
        }
    }
    let port = try server.start()
    let host = server.configuration.host
    let shown = host.contains(":") ? "[\(host)]" : host
    logger.info("listening on http://\(shown):\(port)", [("io_threads", String(server.configuration.ioThreads))])
    if let grpcPort = server.grpcPort { logger.info("listening for gRPC on \(shown):\(grpcPort)", [("protocol", "h2c")]) }
    waiter.start()
    server.waitUntilStopped()
    logger.info("stopped")
    return 0
}

/// Write end of the self-pipe; the signal handler may only make async-signal-safe calls, so it just writes here.
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// Turns signals into calls on an ordinary thread: a handler writes the signal number to a pipe that a
/// dedicated thread reads. (A mask + sigwait would miss threads the runtime started before the mask was set.)
private final class SignalWaiter: @unchecked Sendable {
    private let readEnd: Int32
    private let handler: (Int32, Int) -> Void

    init(signals: [Int32], handler: @escaping (Int32, Int) -> Void) throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw UsageError(description: "cannot create the signal pipe") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        readEnd = fds[0]
        signalPipeWriteEnd = fds[1]
        self.handler = handler
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                var byte = UInt8(truncatingIfNeeded: signal)
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signal, &action, nil)
        }
    }

    func start() {
        var thread = pthread_t()
        let argument = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { argument in
            let waiter = Unmanaged<SignalWaiter>.fromOpaque(argument!).takeRetainedValue()
            waiter.loop()
            return nil
        }, argument)
        pthread_detach(thread)
    }

    private func loop() {
        var count = 0
        while true {
            var byte: UInt8 = 0
            let n = read(readEnd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { return }
            count += 1
            handler(Int32(byte), count)
        }
    }
}
