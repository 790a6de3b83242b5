#if canImport(Glibc)
import Glibc
#endif

/// A one-shot gate threads can block on until it opens (pthread mutex + condition variable).
final class Latch: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Opens the gate and wakes every waiter.
    func open() {
        pthread_mutex_lock(mutex)
        isOpen = true
        let resumed = waiters
        waiters = []
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
        for continuation in resumed { continuation.resume() }
    }

    /// True once opened.
    var opened: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return isOpen
    }

    /// Blocks the calling thread until the gate opens.
    func wait() {
        pthread_mutex_lock(mutex)
        while !isOpen { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Suspends until the gate opens, without blocking a thread.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pthread_mutex_lock(mutex)
            if isOpen {
                pthread_mutex_unlock(mutex)
                continuation.resume()
            } else {
                waiters.append(continuation)
                pthread_mutex_unlock(mutex)
            }
        }
    }
}
