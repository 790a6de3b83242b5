import Foundation

/// A dedicated OS thread running blocking jobs in order, so file reads and model loads never occupy Swift's cooperative pool.
///
/// The queue is a ring buffer (O(1) per job however deep it gets), and a job whose task was cancelled before the thread
/// reached it is answered with `CancellationError` without running: work does not outlive a client that left.
final class BlockingWorker: Sendable {
    /// The queue shared with the thread; the thread owns it, so the worker can go away and close it.
    private final class Jobs: @unchecked Sendable {
        let condition = NSCondition()
        var pending = RingBuffer<Job>()
        /// Queued plus running jobs.
        var outstanding = 0
        var closed = false
    }

    /// One queued job: `run` does the work, `cancel` answers it without doing it.
    private struct Job {
        let state: JobState
        let run: @Sendable () -> Void
    }

    /// Whether a job has started or was cancelled first; whichever comes first wins.
    private final class JobState: @unchecked Sendable {
        private let lock = NSLock()
        private var started = false
        private var cancelled = false
        private var onCancel: (@Sendable () -> Void)?

        init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = onCancel }

        /// True when the job may run (it was not cancelled); afterwards cancellation is ignored.
        func begin() -> Bool {
            lock.withLock {
                if cancelled { return false }
                started = true
                onCancel = nil
                return true
            }
        }

        /// Answers the job as cancelled unless it already started.
        func cancel() {
            let answer: (@Sendable () -> Void)? = lock.withLock {
                guard !started, !cancelled else { return nil }
                cancelled = true
                defer { onCancel = nil }
                return onCancel
            }
            answer?()
        }
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

    /// Jobs queued or running (cancelled ones included until the thread skips them).
    var outstanding: Int {
        jobs.condition.lock()
        defer { jobs.condition.unlock() }
        return jobs.outstanding
    }

    /// Runs `body` on the worker thread and returns its result to the awaiting task.
    ///
    /// Cancelling the task before the thread starts `body` throws `CancellationError` at once and `body` never runs.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let box = ContinuationBox<T>()
        let state = JobState(onCancel: { box.resume(with: .failure(CancellationError())) })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                box.set(continuation)
                if Task.isCancelled {
                    state.cancel()
                    return
                }
                submit(Job(state: state, run: { box.resume(with: Result { try body() }) }))
            }
        } onCancel: {
            state.cancel()
        }
    }

    private func submit(_ job: Job) {
        jobs.condition.lock()
        jobs.pending.append(job)
        jobs.outstanding += 1
        jobs.condition.signal()
        jobs.condition.unlock()
    }

    private static func drain(_ jobs: Jobs) {
        while true {
            jobs.condition.lock()
            while jobs.pending.isEmpty && !jobs.closed { jobs.condition.wait() }
            guard let job = jobs.pending.popFirst() else {
                jobs.condition.unlock()
                return
            }
            jobs.condition.unlock()
            if job.state.begin() { job.run() }
            jobs.condition.lock()
            jobs.outstanding -= 1
            jobs.condition.unlock()
        }
    }
}

/// Resumes a continuation exactly once, whoever gets there first (the job or its cancellation).
private final class ContinuationBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, Error>?
    private var early: Result<T, Error>?

    func set(_ continuation: CheckedContinuation<T, Error>) {
        let result: Result<T, Error>? = lock.withLock {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        if let result { continuation.resume(with: result) }
    }

    func resume(with result: Result<T, Error>) {
        let target: CheckedContinuation<T, Error>? = lock.withLock {
            guard let continuation else {
                if early == nil { early = result }
                return nil
            }
            self.continuation = nil
            return continuation
        }
        target?.resume(with: result)
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
