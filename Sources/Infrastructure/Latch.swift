/// A one-shot gate that threads block on, or tasks suspend on, until it opens.
public final class Latch: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let lock = Lock()
    private let condition = Condition()
    private nonisolated(unsafe) var state = State()

    /// A closed latch.
    public init() {}

    /// Opens the gate and wakes every waiter; later calls do nothing.
    public func open() {
        let resumed: [CheckedContinuation<Void, Never>] = lock.withLock {
            state.isOpen = true
            defer { state.waiters = [] }
            condition.broadcast()
            return state.waiters
        }
        for continuation in resumed { continuation.resume() }
    }

    /// True once opened.
    public var opened: Bool { lock.withLock { state.isOpen } }

    /// Blocks the calling thread until the gate opens.
    public func wait() {
        lock.lock()
        while !state.isOpen { condition.wait(lock) }
        lock.unlock()
    }

    /// Suspends until the gate opens, without blocking a thread.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = lock.withLock {
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if open { continuation.resume() }
        }
    }
}
