import Glibc

/// The one lock of the code base: a pthread mutex on the heap, so its address never moves (an inline
/// `pthread_mutex_t` stored property has no stable address in Swift), and ThreadSanitizer sees it (unlike the futex
/// inside `Synchronization.Mutex`).
public final class Lock: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// A new, unlocked lock.
    public init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Blocks until the lock is held by the caller.
    @inlinable public func lock() { pthread_mutex_lock(mutex) }

    /// Takes the lock only if it is free; true when it was taken.
    @inlinable public func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    /// Releases the lock; only its holder may call this.
    @inlinable public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock.
    @inlinable public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value only reachable while holding its lock, so any thread can read or update it without awaiting.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let lock = Lock()
    @usableFromInline var value: Value

    /// Guards `value`.
    public init(_ value: Value) { self.value = value }

    /// Runs `body` on the value, holding the lock.
    @inlinable public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A condition variable on the monotonic clock, used with a `Lock` to sleep until another thread signals.
public final class Condition: @unchecked Sendable {
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    /// A condition whose timed waits count on `CLOCK_MONOTONIC` (so wall-clock jumps do not shorten or stretch them).
    public init() {
        condition = .allocate(capacity: 1)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    /// Releases `lock` (held by the caller), sleeps until signalled (or spuriously), and retakes `lock`.
    public func wait(_ lock: Lock) { pthread_cond_wait(condition, lock.mutex) }

    /// Like `wait(_:)`, but also wakes at `deadline` (`SystemClock` nanoseconds); false when the deadline passed.
    @discardableResult
    public func wait(_ lock: Lock, until deadline: UInt64) -> Bool {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, lock.mutex, &time) == 0
    }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(condition) }

    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(condition) }
}
