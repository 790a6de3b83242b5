import CKernelShim
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

/// Splits `0..<total` into contiguous ranges of at least `minimumChunk` items, up to `partsPerThread` per thread, and
/// runs them in parallel.
public func parallelRanges(_ total: Int, minimumChunk: Int = 1, partsPerThread: Int = 4, _ body: (Range<Int>) -> Void) {
    guard total > 0 else { return }
    let threads = EngineThreads.threads
    // A few chunks per thread balance uneven work and a core stolen by another process.
    let wanted = threads > 1 ? threads * max(1, partsPerThread) : 1
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

    // The hot path (publish, enter, claim indices, leave) is atomics only: a mutex handoff per operator cost about
    // 1 us on an idle box and tens of microseconds on a loaded one, where the thread holding it was descheduled.
    // Cold path only: spawning, and sleeping once a spin budget ran out.
    private let sleepMutex = Lock()
    private let workAvailable = Condition()
    private let workFinished = Condition()
    private let submitMutex = Lock()
    private var spawned = 0
    // The job, written by the submitter before it publishes `entry` and read by the workers that entered it.
    private var job: ((Int) -> Void)?
    private var jobCount = 0
    /// generation << 16 | participants: the announcement workers poll.
    private let announced = Atomic<Int>(0)
    /// generation << 16 | closed << 15 | workers inside the job: workers enter with a compare-exchange while it is
    /// open, and the submitter closes it once every index is claimed, so a worker that wakes late never delays it.
    private let entry = Atomic<Int>(0)
    private let nextIndex = Atomic<Int>(0)
    /// Threads asleep on a condition (workers on `workAvailable`, the submitter on `workFinished`).
    private let sleepers = Atomic<Int>(0)
    private let submitterSleeping = Atomic<Bool>(false)
    private let threadCount = Atomic<Int>(1)
    /// The core the submitter published the current job from, and the cores (bit `cpu % 64`) of workers that entered
    /// it: a waiter that shares its core with the thread it waits for yields instead of polling.
    private let submitterCPU = Atomic<Int>(-1)
    private let workerCPUs = Atomic<Int>(0)
    private var generation = 0

    private static let closedBit = 1 << 15
    private static let countMask = (1 << 15) - 1

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
        sleepMutex.lock()
        while spawned < threads - 1 {
            let id = spawned
            spawned += 1
            DedicatedThread.start(name: "osprey-compute-\(id)") { [self] in self.workerLoop(id: id) }
        }
        threadCount.store(threads, ordering: .relaxed)
        sleepMutex.unlock()
        submitMutex.unlock()
    }

    /// Runs `body` for every index of `0..<count` on the caller and up to `threads - 1` workers; serial when the pool
    /// is busy (a nested call or another model running) or inside a part of `parallelParts`.
    func run(_ count: Int, _ body: (Int) -> Void) {
        let workers = Self.runsPartAlone ? 0 : min(threads - 1, count - 1)
        if workers <= 0 || !submitMutex.tryLock() {
            for index in 0..<count { body(index) }
            return
        }
        withoutActuallyEscaping(body) { escaping in
            job = escaping
            jobCount = count
            nextIndex.store(0, ordering: .relaxed)
            // Generations wrap within 40 bits so that `generation << 16` stays inside an Int.
            generation = (generation &+ 1) & ((1 << 40) - 1)
            entry.store(generation << 16, ordering: .relaxed)
            submitterCPU.store(Int(osprey_current_cpu()), ordering: .relaxed)
            workerCPUs.store(0, ordering: .relaxed)
            // Sequentially consistent, paired with the workers' increment of `sleepers` before they recheck it.
            announced.store(generation << 16 | workers, ordering: .sequentiallyConsistent)
            if sleepers.load(ordering: .sequentiallyConsistent) > 0 {
                sleepMutex.lock()
                workAvailable.broadcast()
                sleepMutex.unlock()
            }
            drain(escaping, count: count)
            // Every index is claimed: close the job so that workers not yet inside skip it, then wait for those inside.
            var state = entry.bitwiseOr(Self.closedBit, ordering: .acquiringAndReleasing).newValue
            var spin = SpinWait()
            let myCPU = Self.cpuBit(osprey_current_cpu())
            while state & Self.countMask != 0 {
                // A worker inside on this very core cannot finish while this thread polls: hand the core over.
                if !spin.keepSpinning(yield: workerCPUs.load(ordering: .relaxed) & myCPU != 0) {
                    sleepMutex.lock()
                    submitterSleeping.store(true, ordering: .sequentiallyConsistent)
                    while entry.load(ordering: .sequentiallyConsistent) & Self.countMask != 0 { workFinished.wait(sleepMutex) }
                    submitterSleeping.store(false, ordering: .relaxed)
                    sleepMutex.unlock()
                }
                state = entry.load(ordering: .acquiring)
            }
            job = nil
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

    /// A worker: polls for the next announcement, sleeps on `workAvailable` once the spin budget runs out, and joins
    /// each job it is a participant of while the job is still open.
    private func workerLoop(id: Int) {
        var seen = 0
        while true {
            var word = announced.load(ordering: .acquiring)
            var spin = SpinWait()
            // Polling on the submitter's core keeps the submitter off it: yield there (the scheduler often wakes a
            // worker on its waker's core).
            while word >> 16 == seen && spin.keepSpinning(yield: submitterCPU.load(ordering: .relaxed) == Int(osprey_current_cpu())) {
                word = announced.load(ordering: .acquiring)
            }
            if word >> 16 == seen {
                sleepMutex.lock()
                sleepers.wrappingAdd(1, ordering: .sequentiallyConsistent)
                while announced.load(ordering: .sequentiallyConsistent) >> 16 == seen { workAvailable.wait(sleepMutex) }
                sleepers.wrappingSubtract(1, ordering: .relaxed)
                sleepMutex.unlock()
                word = announced.load(ordering: .acquiring)
            }
            seen = word >> 16
            guard id < word & 0xFFFF, enter(generation: seen) else { continue }
            workerCPUs.bitwiseOr(Self.cpuBit(osprey_current_cpu()), ordering: .relaxed)
            takeShare()
            let left = entry.wrappingSubtract(1, ordering: .sequentiallyConsistent).newValue
            if left & Self.countMask == 0 && submitterSleeping.load(ordering: .sequentiallyConsistent) {
                sleepMutex.lock()
                workFinished.signal()
                sleepMutex.unlock()
            }
        }
    }

    /// Joins the job of `generation` unless the submitter closed it (or moved on): true when the caller is inside.
    private func enter(generation: Int) -> Bool {
        var state = entry.load(ordering: .relaxed)
        while state >> 16 == generation && state & Self.closedBit == 0 {
            let (exchanged, current) = entry.compareExchange(expected: state, desired: state + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            state = current
        }
        return false
    }

    /// The bit of core `cpu` in `workerCPUs` (0 when unknown).
    private static func cpuBit(_ cpu: Int32) -> Int { cpu < 0 ? 0 : 1 << (Int(cpu) & 63) }

    /// Runs indices of the current job. A function of its own so the worker's reference to the job is released
    /// before it leaves (the submitter checks the closure did not escape).
    @inline(never)
    private func takeShare() {
        guard let body = job else { return }
        drain(body, count: jobCount)
    }
}

/// A bounded busy-wait for the pool's hand-offs, timed rather than counted: layers follow each other within
/// microseconds, and a worker that slept between them (its count of polls ran out within tens of microseconds) cost
/// a futex wake-up of tens of microseconds on most steps of a small model.
struct SpinWait {
    private var polls = 0
    private var start: UInt64 = 0

    /// Waiting this long in all before sleeping on a condition.
    static let budgetNanoseconds: UInt64 = 100_000

    /// Call before each poll; false once the budget is spent. Every 64 polls it reads the clock and, when `yield`
    /// (the thread waited for shares this core), gives the core up; it never yields to other processes otherwise,
    /// which would keep the waiter off its core for a whole time slice.
    mutating func keepSpinning(yield: @autoclosure () -> Bool = false) -> Bool {
        polls += 1
        if polls & 63 != 0 { return true }
        let now = SystemClock.nanoseconds()
        if start == 0 { start = now; return true }
        if now &- start > Self.budgetNanoseconds { return false }
        if yield() { sched_yield() }
        return true
    }
}
