import Glibc

/// A source of monotonic time in nanoseconds, injected where timing decisions are made so tests can use `ManualClock`.
public protocol MonotonicClock: Sendable {
    /// Nanoseconds since an arbitrary fixed origin; never decreases.
    func now() -> UInt64
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`): every production timestamp and duration comes from it.
public struct SystemClock: MonotonicClock {
    /// The system clock (it has no state).
    public init() {}

    /// `CLOCK_MONOTONIC` now, in nanoseconds.
    @inlinable public func now() -> UInt64 { SystemClock.nanoseconds() }

    /// `CLOCK_MONOTONIC` now, in nanoseconds (for code that needs no injected clock).
    @inlinable public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// `CLOCK_MONOTONIC` now, in seconds.
    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}

/// A clock that moves only when a test says so: timing logic is checked without sleeping.
public final class ManualClock: MonotonicClock {
    private let time: Locked<UInt64>

    /// A clock reading `start` nanoseconds until advanced.
    public init(start: UInt64 = 1_000_000_000) { time = Locked(start) }

    /// The current reading.
    public func now() -> UInt64 { time.withLock { $0 } }

    /// Moves the clock forward by `nanoseconds`.
    public func advance(by nanoseconds: UInt64) { time.withLock { $0 &+= nanoseconds } }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) { advance(by: duration.clampedNanoseconds) }
}

extension Duration {
    /// The duration in whole nanoseconds, 0 when negative.
    public var clampedNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}
