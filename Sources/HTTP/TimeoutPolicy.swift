/// What a connection is waiting for, with the monotonic time (ns) that wait began.
enum ConnectionPhase: Equatable {
    /// Connected but no byte of a first request yet: held to the read limit, not the (longer) idle one.
    case awaitingFirstRequest(since: UInt64)
    /// Between requests on a kept-alive connection.
    case idle(since: UInt64)
    /// A request has started arriving but is not complete.
    case reading(since: UInt64)
    /// Every received request is with the responder: the server owes the next bytes.
    case awaitingResponder
    /// Output is queued but the client is not draining it.
    case writing(since: UInt64)
    /// The final response was sent and the write side shut; unread input is being discarded.
    case lingering(since: UInt64)
}

/// What the periodic sweep should do with a connection.
enum TimeoutAction: Equatable {
    /// Nothing yet.
    case none
    /// Close silently (idle keep-alive, stalled writer, lingering done).
    case close
    /// Answer 408 and close (the request did not arrive in time).
    case requestTimeout
}

/// Pure timeout rules, so they can be tested with a fake clock.
struct TimeoutPolicy {
    /// Keep-alive idle limit, nanoseconds.
    var idle: UInt64
    /// Limit for a started request to arrive completely, nanoseconds.
    var read: UInt64
    /// How long unread input is discarded after the final response, nanoseconds.
    var linger: UInt64

    /// Builds the policy from seconds.
    init(idleSeconds: Double, readSeconds: Double, lingerSeconds: Double = 2) {
        idle = UInt64(max(0, idleSeconds) * 1e9)
        read = UInt64(max(0, readSeconds) * 1e9)
        linger = UInt64(max(0, min(lingerSeconds, readSeconds)) * 1e9)
    }

    /// The action for a connection in `phase` at time `now`.
    func action(for phase: ConnectionPhase, now: UInt64) -> TimeoutAction {
        switch phase {
        case .awaitingResponder: return .none
        case .awaitingFirstRequest(let since): return elapsed(since, now) >= min(read, idle) ? .close : .none
        case .idle(let since): return elapsed(since, now) >= idle ? .close : .none
        case .reading(let since): return elapsed(since, now) >= read ? .requestTimeout : .none
        case .writing(let since): return elapsed(since, now) >= idle ? .close : .none
        case .lingering(let since): return elapsed(since, now) >= linger ? .close : .none
        }
    }

    /// How often the sweep should run: a quarter of the shortest limit, between 10 ms and 1 s.
    var sweepIntervalMilliseconds: UInt64 {
        let shortest = min(idle, read) / 4 / 1_000_000
        return min(1000, max(10, shortest))
    }

    private func elapsed(_ since: UInt64, _ now: UInt64) -> UInt64 { now > since ? now - since : 0 }
}
