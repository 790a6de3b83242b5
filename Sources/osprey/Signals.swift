import Glibc
import HTTP
import Infrastructure

/// Runs `lifecycle` until SIGTERM or SIGINT, then lets it shut down in order; returns the exit status.
///
/// The first signal starts the shutdown (readiness down at once, the drain delay, then in-flight requests get
/// `shutdownTimeout` seconds; see `HTTPService`); a second signal exits immediately.
func serve(_ lifecycle: ServiceGroup, readiness: ReadinessFlag, drainDelay: Double, shutdownTimeout: Double, logger: Logger) async throws -> Int32 {
    let waiter = try SignalWaiter(signals: [SIGINT, SIGTERM]) { signal, count in
        let name = signal == SIGTERM ? "SIGTERM" : "SIGINT"
        if count == 1 {
            readiness.set(false)
            logger.info("shutting down", [("signal", name), ("drain_delay_seconds", String(drainDelay)),
                                          ("grace_seconds", String(shutdownTimeout))])
            lifecycle.triggerShutdown()
        } else {
            logger.warn("second signal, exiting now", [("signal", name)])
            exit(1)
        }
    }
    waiter.start()
    try await lifecycle.run()
    logger.info("stopped")
    return 0
}

/// Write end of the self-pipe; the signal handler may only make async-signal-safe calls, so it just writes here.
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// Turns signals into calls on an ordinary thread: a handler writes the signal number to a pipe that a
/// dedicated thread reads. (A mask + sigwait would miss threads the runtime started before the mask was set.)
private final class SignalWaiter: @unchecked Sendable {
    private let readEnd: Int32
    private let handler: @Sendable (Int32, Int) -> Void

    init(signals: [Int32], handler: @escaping @Sendable (Int32, Int) -> Void) throws {
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

    /// Starts the thread that turns signals into handler calls.
    func start() {
        DedicatedThread.start(name: "osprey-signals") { [self] in loop() }
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
