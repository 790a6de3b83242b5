import Foundation

/// A dedicated OS thread running blocking jobs in order, so file reads and model loads never occupy Swift's cooperative pool.
final class BlockingWorker: Sendable {
    /// The queue shared with the thread; the thread owns it, so the worker can go away and close it.
    private final class Jobs: @unchecked Sendable {
        let condition = NSCondition()
        var pending: [@Sendable () -> Void] = []
        var closed = false
    }

    private let jobs = Jobs()

    /// Starts the thread.
    init(name: String) {
        let jobs = self.jobs
        let thread = Thread { BlockingWorker.drain(jobs) }
        thread.name = name
        thread.start()
    }

    deinit {
        jobs.condition.lock()
        jobs.closed = true
        jobs.condition.signal()
        jobs.condition.unlock()
    }

    /// Runs `body` on the worker thread and returns its result to the awaiting task.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            submit { continuation.resume(with: Result { try body() }) }
        }
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.condition.lock()
        jobs.pending.append(job)
        jobs.condition.signal()
        jobs.condition.unlock()
    }

    private static func drain(_ jobs: Jobs) {
        while true {
            jobs.condition.lock()
            while jobs.pending.isEmpty && !jobs.closed { jobs.condition.wait() }
            if jobs.pending.isEmpty {
                jobs.condition.unlock()
                return
            }
            let job = jobs.pending.removeFirst()
            jobs.condition.unlock()
            job()
        }
    }
}

/// Limits how many model executions run at once in the process, so compute threads and BLAS threads share the cores.
public final class ComputeGate: Sendable {
    private let semaphore: DispatchSemaphore
    /// Maximum concurrent executions.
    public let slots: Int

    /// A gate admitting `slots` executions at a time (at least 1).
    public init(slots: Int = 1) {
        self.slots = max(1, slots)
        semaphore = DispatchSemaphore(value: self.slots)
    }

    /// Blocks the calling (dedicated) thread until a slot is free.
    func acquire() { semaphore.wait() }

    /// Frees a slot.
    func release() { semaphore.signal() }
}
