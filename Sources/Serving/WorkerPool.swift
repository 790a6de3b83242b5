import Foundation

/// Dedicated threads for blocking request work (image decoding, large JSON bodies, hashing), so it never runs on an I/O loop
/// or occupies Swift's cooperative pool. Jobs are spread round-robin.
public final class WorkerPool: Sendable {
    private let workers: [BlockingWorker]
    private let next = Locked(0)

    /// Starts `threads` worker threads (at least 1).
    public init(threads: Int) {
        workers = (0..<max(1, threads)).map { BlockingWorker(name: "osprey-worker-\($0)") }
    }

    /// Runs `body` on the next worker thread and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let index = next.withLock { value -> Int in
            defer { value = (value + 1) % workers.count }
            return value
        }
        return try await workers[index].run(body)
    }
}
