import Synchronization

/// A thread-safe ready/not-ready switch: shutdown flips it at once so readiness probes fail while requests drain.
public final class ReadinessFlag: Sendable {
    private let value: Atomic<Bool>

    /// A flag starting at `ready`.
    public init(ready: Bool = true) { value = Atomic(ready) }

    /// Whether the service should receive traffic.
    public var isReady: Bool { value.load(ordering: .acquiring) }

    /// Sets the flag.
    public func set(_ ready: Bool) { value.store(ready, ordering: .releasing) }
}
