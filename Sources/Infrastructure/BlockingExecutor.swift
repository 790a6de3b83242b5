import Glibc

/// Dedicated OS threads running blocking jobs (file reads, model loads, image decoding, model executions) from one
/// shared FIFO queue, so that work never occupies an I/O loop or Swift's cooperative pool.
///
/// One queue for all threads: a short job never waits behind a long one while another thread idles. The queue is a ring
/// buffer (O(1) per job however deep it gets), and a job whose task was cancelled before a thread reached it is answered
/// with `CancellationError` without running: work does not outlive a client that left. Size pools so that, together
/// with the engine's own threads, they do not oversubscribe the cores (see `ServeCommand`).
public final class BlockingExecutor: Sendable {
    /// The queue shared with the threads; they own it, so the executor can go away and close it.
    private final class Jobs: @unchecked Sendable {
        let lock = Lock()
        let available = Condition()
        // Guarded by `lock`.
        var pending = RingBuffer<@Sendable () -> Void>()
        var outstanding = 0
        var closed = false
    }

    private let jobs = Jobs()
    /// Number of threads.
    public let threads: Int

    /// Starts `threads` (at least 1) threads named `name-0`, `name-1`, ...
    public init(name: String, threads: Int = 1) {
        self.threads = max(1, threads)
        let jobs = self.jobs
        for index in 0..<self.threads {
            DedicatedThread.start(name: "\(name)-\(index)") { BlockingExecutor.drain(jobs) }
        }
    }

    deinit { shutdown() }

    /// Refuses new jobs; the threads finish what is queued and exit.
    public func shutdown() {
        jobs.lock.withLock {
            jobs.closed = true
            jobs.available.broadcast()
        }
    }

    /// Jobs queued or running (cancelled ones included until a thread skips them).
    public var outstanding: Int { jobs.lock.withLock { jobs.outstanding } }

    /// Queues `job` (fire and forget); false, without running it, once the executor is shut down.
    @discardableResult
    public func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        jobs.lock.withLock {
            guard !jobs.closed else { return false }
            jobs.pending.append(job)
            jobs.outstanding += 1
            jobs.available.signal()
            return true
        }
    }

    /// Runs `body` on one of the threads and returns its result to the awaiting task.
    ///
    /// Cancelling the task before a thread starts `body` throws `CancellationError` at once and `body` never runs;
    /// once started, `body` runs to the end. Throws `CancellationError` too when the executor is shut down.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let job = PendingJob<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                guard job.attach(continuation) else { return }
                let queued = execute {
                    guard let continuation = job.begin() else { return }
                    continuation.resume(with: Result { try body() })
                }
                if !queued { job.cancel() }
            }
        } onCancel: {
            job.cancel()
        }
    }

    private static func drain(_ jobs: Jobs) {
        while true {
            jobs.lock.lock()
            while jobs.pending.isEmpty && !jobs.closed { jobs.available.wait(jobs.lock) }
            guard let job = jobs.pending.popFirst() else {
                jobs.lock.unlock()
                return
            }
            jobs.lock.unlock()
            job()
            jobs.lock.withLock { jobs.outstanding -= 1 }
        }
    }
}

/// One job's awaiting continuation; whoever comes first, the thread starting it or the task's cancellation, takes it.
private final class PendingJob<T: Sendable>: @unchecked Sendable {
    private enum Phase {
        case created
        case waiting(CheckedContinuation<T, Error>)
        case started
        case cancelled
    }

    private let phase = Locked(Phase.created)

    /// Stores the continuation; false (after answering it) when the task was cancelled first.
    func attach(_ continuation: CheckedContinuation<T, Error>) -> Bool {
        let cancelled = phase.withLock { phase -> Bool in
            guard case .created = phase else { return true }
            phase = .waiting(continuation)
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    /// The continuation to answer when the job may run; nil when it was cancelled.
    func begin() -> CheckedContinuation<T, Error>? {
        phase.withLock { phase in
            guard case .waiting(let continuation) = phase else { return nil }
            phase = .started
            return continuation
        }
    }

    /// Answers the job with `CancellationError` unless it already started.
    func cancel() {
        let waiting: CheckedContinuation<T, Error>? = phase.withLock { phase in
            switch phase {
            case .created:
                phase = .cancelled
                return nil
            case .waiting(let continuation):
                phase = .cancelled
                return continuation
            case .started, .cancelled:
                return nil
            }
        }
        waiting?.resume(throwing: CancellationError())
    }
}

/// Starts named, detached OS threads: the only way the code base creates a thread.
public enum DedicatedThread {
    /// Runs `body` on a new detached thread called `name` (Linux keeps the first 15 bytes).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let argument = Unmanaged.passRetained(ThreadBody(name: name, body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { argument in
            let body = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
            nameCurrentThread(body.name)
            body.run()
            return nil
        }, argument)
        precondition(status == 0, "pthread_create failed: \(status)")
        pthread_detach(thread)
    }
}

/// Names the calling thread for `top -H` and debuggers; `pthread_setname_np` needs `_GNU_SOURCE`, which Swift's Glibc
/// module does not define, so this writes the kernel's own file for it.
private func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

/// A closure handed to a new thread through a raw pointer.
private final class ThreadBody {
    let name: String
    let run: () -> Void
    init(name: String, _ run: @escaping () -> Void) {
        self.name = name
        self.run = run
    }
}
