/// A long-lived part of the process (the HTTP server, the repository poller, the batchers), run by a `ServiceGroup`.
///
/// Shutdown is cooperative, as in swift-service-lifecycle: the group first calls `shutdown()`, then cancels the task
/// running `run()`, and waits for `run()` to return before it shuts down the next service.
public protocol Service: Sendable {
    /// A short name for logs.
    var name: String { get }
    /// Does the service's work until it has nothing left to do, `shutdown()` made it finish, or its task is cancelled.
    func run() async throws
    /// Finishes gracefully (drain, unload); `run()` should return soon after. The default does nothing.
    func shutdown() async
}

extension Service {
    /// Nothing to do: cancelling `run()` is enough.
    public func shutdown() async {}
}

/// Starts services in the order given and, once shutdown is triggered (or a service fails), shuts them down in the
/// reverse order, each one finished before the next begins: the last started is the first stopped.
public final class ServiceGroup: Sendable {
    private let services: [any Service]
    private let logger: Logger
    private let trigger = Latch()
    private let failure = Locked<(any Error)?>(nil)

    /// A group running `services` (started first to last, stopped last to first).
    public init(services: [any Service], logger: Logger = .disabled) {
        self.services = services
        self.logger = logger
    }

    /// Starts the shutdown; safe from any thread (a signal handler's thread); later calls do nothing.
    public func triggerShutdown() { trigger.open() }

    /// True once shutdown was triggered.
    public var isShuttingDown: Bool { trigger.opened }

    /// Runs every service until shutdown is triggered or one of them throws, then shuts all of them down in reverse
    /// order and rethrows the first error. A service whose `run()` simply returns does not stop the others.
    public func run() async throws {
        let stops = services.map { _ in Latch() }
        let finished = services.map { _ in Latch() }
        await withTaskGroup(of: Void.self) { group in
            for (index, service) in services.enumerated() {
                group.addTask { [self] in
                    await withTaskGroup(of: Void.self) { running in
                        running.addTask { [self] in
                            do {
                                try await service.run()
                            } catch let error where !(error is CancellationError) {
                                logger.error("service failed", [("service", service.name), ("error", String(describing: error))])
                                failure.withLock { if $0 == nil { $0 = error } }
                                trigger.open()
                            } catch {}
                            finished[index].open()
                        }
                        await stops[index].wait()
                        running.cancelAll()
                    }
                }
            }
            await trigger.wait()
            for index in services.indices.reversed() {
                let service = services[index]
                logger.debug("stopping service", [("service", service.name)])
                await service.shutdown()
                stops[index].open()
                await finished[index].wait()
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
