import COpenBLAS
import Foundation
import Infrastructure
import Synchronization

/// Thread budget of the engine: OpenBLAS's pool and Osprey's own kernels share it so the cores are never oversubscribed.
///
/// OpenBLAS is kept single-threaded: `sgemm` splits large products across Osprey's own pool, which every kernel
/// shares, so at most `threads` threads compute at once.
public enum EngineThreads {
    /// Sets the number of compute threads (clamped to at least 1) of Osprey's kernel pool, the caller's thread included.
    public static func configure(threads: Int) {
        ComputePool.shared.resize(threads: max(1, threads))
    }

    /// Compute threads a kernel may split its work across: the configured budget, or 1 inside a part of
    /// `parallelParts` (that thread runs its part alone, so its kernels plan for one thread, as a 1-thread engine does).
    public static var threads: Int { ComputePool.runsPartAlone ? 1 : ComputePool.shared.threads }
}

/// Runs `body(0..<count)` on the compute threads like `parallelFor`, but each call runs single-threaded inside: kernels
/// it calls see `EngineThreads.threads == 1`, plan their work for one thread and never wait on the others.
///
/// A coarse schedule (whole chains of steps per part, one barrier at the end) instead of one split and one barrier
/// per operator; each part computes exactly what a 1-thread engine computes.
public func parallelParts(_ count: Int, _ body: (Int) -> Void) {
    ComputePool.shared.run(count) { index in
        let outer = ComputePool.runsPartAlone
        ComputePool.runsPartAlone = true
        defer { ComputePool.runsPartAlone = outer }
        body(index)
    }
}

/// Runs `body(0..<count)` split across the engine's compute threads, the caller's thread included; returns when all ran.
///
/// Falls back to a serial loop when the pool is busy (a nested call or another model running), which keeps the
/// total number of busy threads within the budget instead of queueing.
public func parallelFor(_ count: Int, _ body: (Int) -> Void) {
    ComputePool.shared.run(count, body)
}

/// Splits `0..<total` into contiguous ranges of at least `minimumChunk` items, one or a few per thread, and runs them in parallel.
public func parallelRanges(_ total: Int, minimumChunk: Int = 1, _ body: (Range<Int>) -> Void) {
    guard total > 0 else { return }
    let threads = EngineThreads.threads
    // A few chunks per thread balance uneven work and a core stolen by another process.
    let wanted = threads > 1 ? threads * 4 : 1
    let chunks = max(1, min(wanted, total / max(1, minimumChunk)))
    if chunks == 1 { body(0..<total); return }
    parallelFor(chunks) { index in
        let start = total * index / chunks, end = total * (index + 1) / chunks
        if start < end { body(start..<end) }
    }
}

/// A persistent set of dedicated pthreads (never Swift's cooperative pool) that execute one `parallelFor` at a time.
final class ComputePool: @unchecked Sendable {
    /// The process-wide pool, sized by `EngineThreads.configure`.
    static let shared: ComputePool = {
        let pool = ComputePool()
        // Each pool thread may call OpenBLAS; its own threads would oversubscribe the cores.
        openblas_set_num_threads(1)
        // The pthread build starts its workers at load time and they poll with sched_yield between calls (10% of a
        // core, and a stolen core at two threads); with one thread it never uses them again, so stop them.
        _ = blas_thread_shutdown_()
        // Until the engine configures a budget, use every core, as OpenBLAS does by default.
        pool.resize(threads: max(1, ProcessInfo.processInfo.activeProcessorCount))
        return pool
    }()

    private let mutex = Lock()
    private let workAvailable = Condition()
    private let workFinished = Condition()
    private let submitMutex = Lock()
    // State below is guarded by `mutex`.
    private var generation = 0
    private var job: ((Int) -> Void)?
    private var jobCount = 0
    private var participants = 0
    private var pending = 0
    private var spawned = 0
    private let nextIndex = Atomic<Int>(0)
    // Lock-free mirrors of `generation` and `pending` that spinning threads poll before they sleep on a condition.
    private let published = Atomic<Int>(0)
    private let remaining = Atomic<Int>(0)
    private let threadCount = Atomic<Int>(1)

    private init() {}

    /// Thread-specific key set while the thread runs a part of `parallelParts`.
    private static let partKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// True while the calling thread runs a part of `parallelParts` (its kernels then plan for one thread).
    static var runsPartAlone: Bool {
        get { pthread_getspecific(partKey) != nil }
        set { pthread_setspecific(partKey, newValue ? UnsafeRawPointer(bitPattern: 1) : nil) }
    }

    /// Threads that take part in a run, the caller included.
    var threads: Int { threadCount.load(ordering: .relaxed) }

    /// Sets the budget; workers are spawned lazily and extra ones sit idle when the budget shrinks.
    func resize(threads: Int) {
        submitMutex.lock()
        mutex.lock()
        while spawned < threads - 1 {
            let id = spawned
            spawned += 1
            DedicatedThread.start(name: "osprey-compute-\(id)") { [self] in self.workerLoop(id: id) }
        }
        threadCount.store(threads, ordering: .relaxed)
        mutex.unlock()
        submitMutex.unlock()
    }

    func run(_ count: Int, _ body: (Int) -> Void) {
        // Inside a part of `parallelParts` the thread computes alone: its kernels never take the pool.
        let workers = Self.runsPartAlone ? 0 : min(threads - 1, count - 1)
        if workers <= 0 || !submitMutex.tryLock() {
            for index in 0..<count { body(index) }
            return
        }
        withoutActuallyEscaping(body) { escaping in
            mutex.lock()
            job = escaping
            jobCount = count
            participants = workers
            pending = workers
            remaining.store(workers, ordering: .relaxed)
            nextIndex.store(0, ordering: .relaxed)
            generation &+= 1
            published.store(generation, ordering: .releasing)
            workAvailable.broadcast()
            mutex.unlock()

            drain(escaping, count: count)

            // Workers usually finish within microseconds of the caller: poll briefly before sleeping on the condition.
            var spins = 0
            while remaining.load(ordering: .acquiring) > 0 && spins < Self.spinLimit { spins += 1 }
            mutex.lock()
            while pending > 0 { workFinished.wait(mutex) }
            job = nil
            mutex.unlock()
        }
        submitMutex.unlock()
    }

    private func drain(_ body: (Int) -> Void, count: Int) {
        while true {
            let index = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
            if index >= count { return }
            body(index)
        }
    }

    private func workerLoop(id: Int) {
        var seen = 0
        mutex.lock()
        while true {
            if generation == seen {
                // Layers follow each other within tens of microseconds: a short bounded poll avoids the futex wake-up
                // per layer, and stays short so a contended box loses little to it.
                mutex.unlock()
                var spins = 0
                while published.load(ordering: .acquiring) == seen && spins < Self.spinLimit { spins += 1 }
                mutex.lock()
            }
            while generation == seen { workAvailable.wait(mutex) }
            seen = generation
            guard id < participants else { continue }
            takeShare()
            pending -= 1
            remaining.wrappingSubtract(1, ordering: .releasing)
            if pending == 0 { workFinished.signal() }
        }
    }

    /// Polls of an atomic before a thread sleeps on a condition (tens of microseconds).
    private static let spinLimit = 100_000

    /// Runs indices of the current job; called and returns with `mutex` held. A function of its own so the worker's
    /// reference to the job is released before `pending` drops (the caller checks the closure did not escape).
    @inline(never)
    private func takeShare() {
        guard let body = job else { return }
        let count = jobCount
        mutex.unlock()
        drain(body, count: count)
        mutex.lock()
    }
}
