import Infrastructure

/// Limits how many model executions run at once in the process, so compute threads and the engine's threads share the
/// cores; it also counts the batchers running on it, so shutdown can wait until every one has finished.
public final class ComputeGate: Sendable {
    private struct State {
        var free: Int
        /// Threads blocked in `acquire`.
        var waiting = 0
        var batchers = 0
        var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// Maximum concurrent executions.
    public let slots: Int
    private let lock = Lock()
    private let slotFreed = Condition()
    private nonisolated(unsafe) var state: State

    /// A gate admitting `slots` executions at a time (at least 1).
    public init(slots: Int = 1) {
        self.slots = max(1, slots)
        state = State(free: self.slots)
    }

    /// Runs `body` holding a slot, blocking the calling (dedicated) thread until one is free.
    func withSlot<R>(_ body: () throws -> R) rethrows -> R {
        acquire()
        defer { release() }
        return try body()
    }

    /// Blocks the calling (dedicated) thread until a slot is free and takes it; prefer `withSlot`.
    func acquire() {
        lock.lock()
        state.waiting += 1
        while state.free == 0 { slotFreed.wait(lock) }
        state.waiting -= 1
        state.free -= 1
        lock.unlock()
    }

    /// Frees a slot taken by `acquire()`.
    func release() {
        lock.withLock {
            state.free += 1
            slotFreed.signal()
        }
    }

    /// True while another execution waits for a slot: a running one should not take on more work.
    var hasWaiters: Bool { lock.withLock { state.waiting > 0 } }

    /// Counts a batcher that started on this gate.
    func batcherStarted() { lock.withLock { state.batchers += 1 } }

    /// Counts a batcher that finished (closed, drained, runtime released).
    func batcherFinished() {
        let waiters: [CheckedContinuation<Void, Never>] = lock.withLock {
            state.batchers -= 1
            guard state.batchers == 0 else { return [] }
            defer { state.idleWaiters = [:] }
            return Array(state.idleWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Batchers running on this gate.
    public var runningBatchers: Int { lock.withLock { state.batchers } }

    /// Suspends until no batcher runs on this gate (every version closed and drained), or the task is cancelled.
    public func batchersFinished() async {
        let id = lock.withLock { () -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = lock.withLock {
                    let wait = state.batchers > 0 && !Task.isCancelled
                    if wait { state.idleWaiters[id] = continuation }
                    return !wait
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            lock.withLock { state.idleWaiters.removeValue(forKey: id) }?.resume()
        }
    }
}
