import Foundation

/// Dedicated threads for blocking request work (image decoding, large JSON bodies, hashing), so it never runs on an I/O loop
/// or occupies Swift's cooperative pool. Each job goes to the worker with the fewest outstanding jobs (round-robin among
/// equals), so a short job does not wait behind a long one while another worker idles.
public final class WorkerPool: Sendable {
    private let workers: [BlockingWorker]
    private let next = Locked(0)

    /// Starts `threads` worker threads (at least 1).
    public init(threads: Int) {
        workers = (0..<max(1, threads)).map { BlockingWorker(name: "osprey-worker-\($0)") }
    }

    /// Runs `body` on the least busy worker thread and returns its result; a task cancelled before its job starts
    /// gets `CancellationError` and the job never runs.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let start = next.withLock { value -> Int in
            defer { value = (value + 1) % workers.count }
            return value
        }
        var chosen = start
        var least = Int.max
        for offset in 0..<workers.count {
            let index = (start + offset) % workers.count
            let load = workers[index].outstanding
            if load < least { least = load; chosen = index }
            if load == 0 { break }
        }
        return try await workers[chosen].run(body)
    }
}
