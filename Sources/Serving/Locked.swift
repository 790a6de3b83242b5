import Foundation

/// A value guarded by a lock, so any thread can read or update it without awaiting.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Monotonic time in nanoseconds; cheap and comparable across threads.
@inline(__always)
func monotonicNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Nanoseconds in a Duration, clamped at zero.
func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    if seconds < 0 { return 0 }
    return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
}
