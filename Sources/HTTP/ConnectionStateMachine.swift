/// The rules of one HTTP/1.1 connection as a pure value: events in (with the current monotonic instant), actions out.
///
/// It owns the order of answers, the pipelining window and backpressure, cancellation when the client goes away,
/// half-close, draining and timeouts; `Connection` only performs the actions on libuv and reports what happened.
/// Nothing here reads a clock, touches a socket or starts a task, so tests drive it with a fake clock.
struct ConnectionStateMachine {
    /// Limits fixed for the connection's lifetime.
    struct Limits {
        /// Parsed requests held per connection before parsing (and then reading) pauses.
        var maxPipelinedRequests: Int
        /// Requests of this connection with the responder at once.
        var maxConcurrentRequests: Int
        /// Unsent output (with a write waiting on a full socket) above which nothing more is read or parsed.
        var maxUnsentOutputBytes: Int
        /// Over the connection budget: answers probes (inline responses) only, one request, then closes.
        var overflow: Bool
        /// The connection budget, named in the 503 of an over-budget connection.
        var maxConnections: Int
        /// Idle, read and linger limits.
        var policy: TimeoutPolicy
    }

    /// Where the connection is in its life.
    enum State: Equatable {
        /// Reading and answering requests.
        case active
        /// The last request is known (it said close, an error was answered, or the server drains): answer what is
        /// queued, then shut the write side.
        case finishing
        /// The final answer is on the socket and the write side shut; unread input is discarded until the peer closes
        /// or the linger time ends, so the peer reads our answer instead of a reset caused by unread bytes.
        case lingering(since: UInt64)
        /// Closed; every later event is ignored.
        case closed
    }

    /// What the access log and the serializer need to know about one request.
    struct Record: Equatable {
        /// Method as sent, `-` for a request that never parsed.
        var method: String
        /// Path, `-` for a request that never parsed.
        var path: String
        /// Id echoed as `X-Request-ID`; empty for answers to unparsed input (the driver generates one).
        var requestID: String
        /// Monotonic instant the request's first byte arrived.
        var startedAt: UInt64
        /// HEAD: headers only.
        var isHead = false
        /// HTTP/1.0: keep-alive must be spelled out.
        var http10 = false
        /// False for the connection's last answer.
        var keepAlive = false
        /// The request's trace (nil for unparsed input: the driver starts a new one).
        var trace: TraceContext? = nil
    }

    /// A request that arrived, in the order answers go out.
    private struct Slot {
        enum Progress {
            /// Parsed; waits for a place in the connection's responder window.
            case waiting(HTTPRequest)
            /// With the responder.
            case running
            /// Answer ready, waiting for every earlier one to be written.
            case answered(HTTPResponse)
        }
        var record: Record
        var progress: Progress
    }

    /// What the parser has just produced (the driver translates parser events, adding what only it knows).
    enum Input {
        /// A complete request; `inline` is the loop-thread answer to it, if the inline responder had one.
        case request(HTTPRequest, keepAlive: Bool, startedAt: UInt64, inline: HTTPResponse?)
        /// Headers of a request that waits for `100 Continue`.
        case expectContinue
        /// The stream is unusable (parse error) or the request was refused from its headers: answer this, take no more.
        case rejected(HTTPResponse, startedAt: UInt64)
    }

    /// The parser's position after a feed.
    struct ParserStatus: Equatable {
        /// A request has started and is not complete.
        var inMessage = false
        /// When that request began.
        var messageStartedAt: UInt64 = 0
        /// The parser hit an error or an upgrade: it takes no more bytes.
        var stopped = false
    }

    /// What handing queued output to the socket achieved.
    enum FlushResult: Equatable {
        /// Everything is on the socket.
        case drained
        /// A write waits on a full socket; `unsentBytes` are not on it yet; `started` when this flush began that write.
        case pending(unsentBytes: Int, started: Bool)
        /// The socket failed.
        case failed
    }

    /// A side effect for the driver, performed in the order given.
    enum Action {
        /// Start reading the socket.
        case startReading
        /// Stop reading the socket.
        case stopReading
        /// Hand `request` to the responder; its answer comes back as `responseReady(sequence:)`.
        case dispatch(sequence: UInt64, request: HTTPRequest)
        /// Serialize this answer behind earlier output and log it.
        case send(Record, HTTPResponse)
        /// Queue `100 Continue`.
        case sendContinue
        /// Hand queued output to the socket, then report `flushed(_:)`.
        case flush
        /// Parse the bytes held back at a request boundary, then report `parsed(_:heldBack:)`.
        case feedHeldBackInput
        /// Drop the bytes held back at a request boundary.
        case discardHeldBackInput
        /// These requests will never be answered: log them as aborted (499) and cancel the responder tasks of
        /// `cancel` (queued batch rows and worker jobs are dropped, not computed).
        case abandon([Record], cancel: [UInt64])
        /// Shut the write side (the final answer is queued), keep reading to discard input.
        case shutdownWrite
        /// Close the socket.
        case close
    }

    let limits: Limits
    private(set) var state = State.active
    private var slots: [Slot] = []
    /// Sequence number of `slots.first`; also how many requests were answered so far.
    private var headSequence: UInt64 = 0
    /// Requests with the responder.
    private var running = 0
    /// The socket is being read.
    private(set) var reading = false
    /// The peer half-closed (FIN): no more bytes come, but what was received is still answered.
    private(set) var peerFinished = false
    private var draining = false
    private var continueOwed = false
    /// Bytes were held back at a request boundary (backpressure) and wait to be parsed.
    private(set) var hasHeldBackInput = false
    private var feedScheduled = false
    private var parser = ParserStatus()
    private var writeInFlight = false
    private var unsentBytes = 0
    private var lastWriteProgress: UInt64 = 0
    private var idleSince: UInt64

    /// A connection accepted at `now`.
    init(limits: Limits, now: UInt64) {
        self.limits = limits
        idleSince = now
    }

    // MARK: - Queries

    /// True while no further request may be parsed: the pipelining limit is reached, or answers pile up unread.
    /// The parser asks this at every request boundary and suspends there.
    var inputMustWait: Bool { slots.count >= limits.maxPipelinedRequests || outputBacklogged }

    /// True while read bytes should be parsed (not after the last request, nor while lingering or closed).
    var acceptsInput: Bool { state == .active }

    /// Requests received and not yet written.
    var unansweredCount: Int { slots.count }

    /// Requests of this connection with the responder now.
    var runningCount: Int { running }

    private var outputBacklogged: Bool { writeInFlight && unsentBytes > limits.maxUnsentOutputBytes }

    /// What the connection waits for, for the timeout policy.
    var phase: ConnectionPhase {
        if case .lingering(let since) = state { return .lingering(since: since) }
        if writeInFlight { return .writing(since: lastWriteProgress) }
        if state == .active && parser.inMessage { return .reading(since: parser.messageStartedAt) }
        if !slots.isEmpty { return .awaitingResponder }
        return headSequence == 0 ? .awaitingFirstRequest(since: idleSince) : .idle(since: idleSince)
    }

    // MARK: - Events

    /// The connection was accepted: start reading.
    mutating func start(now: UInt64) -> [Action] {
        idleSince = now
        var actions: [Action] = []
        readIfAllowed(&actions)
        return actions
    }

    /// The parser produced `input` (called during a feed, in wire order; the driver performs the actions after it).
    mutating func received(_ input: Input, now: UInt64) -> [Action] {
        guard state == .active else { return [] }
        var actions: [Action] = []
        switch input {
        case .expectContinue:
            continueOwed = true
        case .request(let request, let keepAlive, let startedAt, let inline):
            continueOwed = false
            let keep = keepAlive && !draining && !limits.overflow
            let record = Record(method: request.method, path: request.path, requestID: request.requestID, startedAt: startedAt,
                                isHead: request.method == "HEAD", http10: request.version.major == 1 && request.version.minor == 0,
                                keepAlive: keep, trace: request.trace)
            if !keep { state = .finishing }
            if let inline {
                slots.append(Slot(record: record, progress: .answered(inline)))
            } else if limits.overflow {
                // Over the connection budget only probes are answered (so liveness does not fail under a flood).
                slots.append(Slot(record: record, progress: .answered(ResponseSerializer.errorResponse(
                    status: 503,
                    message: "too many open connections (limit \(limits.maxConnections)); only health probes are answered"))))
            } else {
                slots.append(Slot(record: record, progress: .waiting(request)))
                dispatchWaiting(&actions)
            }
        case .rejected(let response, let startedAt):
            continueOwed = false
            slots.append(Slot(record: Record(method: "-", path: "-", requestID: "", startedAt: startedAt), progress: .answered(response)))
            state = .finishing
        }
        return actions
    }

    /// A feed ended: `status` is where the parser stands; `heldBack` when it suspended at a request boundary with
    /// bytes left over (they are parsed later, request by request, as the limits allow).
    mutating func parsed(_ status: ParserStatus, heldBack: Bool, now: UInt64) -> [Action] {
        guard state != .closed else { return [] }
        feedScheduled = false
        parser = status
        hasHeldBackInput = heldBack
        if status.stopped && state == .active { state = .finishing }
        var actions: [Action] = []
        writeReady(&actions)
        if inputMustWait || hasHeldBackInput { stopReading(&actions) }
        resumeHeldBackInput(&actions)
        return actions
    }

    /// The responder answered request `sequence` (answers for a connection gone or a request dropped are ignored).
    mutating func responseReady(sequence: UInt64, response: HTTPResponse, now: UInt64) -> [Action] {
        guard state != .closed, sequence >= headSequence else { return [] }
        let index = Int(sequence - headSequence)
        guard index < slots.count, case .running = slots[index].progress else { return [] }
        slots[index].progress = .answered(response)
        running -= 1
        var actions: [Action] = []
        dispatchWaiting(&actions)
        if index == 0 { writeReady(&actions) }
        return actions
    }

    /// The driver handed queued output to the socket with `result`.
    mutating func flushed(_ result: FlushResult, now: UInt64) -> [Action] {
        guard state != .closed else { return [] }
        var actions: [Action] = []
        switch result {
        case .failed:
            close(&actions)
        case .pending(let unsent, let started):
            writeInFlight = true
            unsentBytes = unsent
            if started { lastWriteProgress = now }
            if outputBacklogged { stopReading(&actions) }
        case .drained:
            writeInFlight = false
            unsentBytes = 0
            writesDrained(now: now, &actions)
        }
        return actions
    }

    /// The write in flight finished (`ok` false: the socket failed).
    mutating func writeCompleted(ok: Bool, now: UInt64) -> [Action] {
        guard state != .closed else { return [] }
        writeInFlight = false
        var actions: [Action] = []
        guard ok else { close(&actions); return actions }
        lastWriteProgress = now
        actions.append(.flush)
        return actions
    }

    /// The peer half-closed (read EOF).
    ///
    /// RFC 9112 9.6 lets a client half-close after its last request and still read the answers; so every request
    /// received completely (including pipelined ones held back by backpressure) is answered, in order, and the
    /// connection closes after the last one. A request cut off by the FIN can never complete and is not answered.
    mutating func peerClosed(now: UInt64) -> [Action] {
        guard state != .closed else { return [] }
        peerFinished = true
        var actions: [Action] = []
        stopReading(&actions)
        if case .lingering = state { close(&actions); return actions }
        if slots.isEmpty && !writeInFlight && !hasHeldBackInput { close(&actions); return actions }
        resumeHeldBackInput(&actions)
        return actions
    }

    /// Why a connection closes at once.
    enum CloseReason {
        /// The socket failed or the peer reset it: the client is gone.
        case peerReset
        /// Shutting the write side failed.
        case shutdownFailed
        /// The server's grace period is over (or its loop stops).
        case forced
    }

    /// Closes now; unanswered requests are logged as aborted and their responder tasks cancelled.
    mutating func closeNow(_ reason: CloseReason, now: UInt64) -> [Action] {
        var actions: [Action] = []
        close(&actions)
        return actions
    }

    /// The periodic timeout sweep ran at `now`.
    mutating func timerFired(now: UInt64) -> [Action] {
        guard state != .closed else { return [] }
        var actions: [Action] = []
        switch limits.policy.action(for: phase, now: now) {
        case .none:
            break
        case .close:
            close(&actions)
        case .requestTimeout:
            let seconds = Double(limits.policy.read) / 1e9
            slots.append(Slot(record: Record(method: "-", path: "-", requestID: "", startedAt: parser.messageStartedAt),
                              progress: .answered(ResponseSerializer.errorResponse(
                                status: 408, message: "request not completed within \(seconds) s"))))
            state = .finishing
            writeReady(&actions)
        }
        return actions
    }

    /// Server shutdown: close if idle, otherwise make the request in progress the last one.
    mutating func beginDrain(now: UInt64) -> [Action] {
        guard !draining, state != .closed else { return [] }
        draining = true
        var actions: [Action] = []
        if parser.inMessage && state == .active { return actions }
        if !slots.isEmpty {
            slots[slots.count - 1].record.keepAlive = false
            if state == .active { state = .finishing }
        } else if writeInFlight {
            if state == .active { state = .finishing }
        } else if case .lingering = state {
            // Already finishing its last answer.
        } else {
            close(&actions)
        }
        return actions
    }

    // MARK: - Transitions

    private mutating func readIfAllowed(_ actions: inout [Action]) {
        guard !reading, !peerFinished, !hasHeldBackInput else { return }
        switch state {
        case .active: guard !inputMustWait else { return }
        case .lingering: break
        case .finishing, .closed: return
        }
        reading = true
        actions.append(.startReading)
    }

    private mutating func stopReading(_ actions: inout [Action]) {
        guard reading else { return }
        reading = false
        actions.append(.stopReading)
    }

    /// Hands waiting requests to the responder, oldest first, while fewer than the window run: one connection's
    /// pipelined burst cannot fill the task pool ahead of every other client.
    private mutating func dispatchWaiting(_ actions: inout [Action]) {
        let window = max(1, limits.maxConcurrentRequests)
        guard running < window else { return }
        for index in slots.indices where running < window {
            guard case .waiting(let request) = slots[index].progress else { continue }
            slots[index].progress = .running
            running += 1
            actions.append(.dispatch(sequence: headSequence + UInt64(index), request: request))
        }
    }

    /// Sends every leading answer that is ready, then flushes.
    private mutating func writeReady(_ actions: inout [Action]) {
        guard state != .closed else { return }
        while let first = slots.first, case .answered(let response) = first.progress {
            slots.removeFirst()
            headSequence += 1
            actions.append(.send(first.record, response))
            if response.asksToCloseConnection || !first.record.keepAlive {
                // Nothing after a closing response is answered.
                if state == .active { state = .finishing }
                abandonAll(&actions)
                break
            }
        }
        if continueOwed, slots.isEmpty, parser.inMessage, state == .active {
            actions.append(.sendContinue)
            continueOwed = false
        }
        actions.append(.flush)
    }

    /// Everything queued is on the socket: go idle, read on, or finish the connection.
    private mutating func writesDrained(now: UInt64, _ actions: inout [Action]) {
        guard slots.isEmpty else {
            // Hysteresis: reading resumes once half the pipelining window is free.
            if !reading, state == .active, slots.count < max(1, limits.maxPipelinedRequests / 2) { resumeHeldBackInput(&actions) }
            return
        }
        switch state {
        case .finishing:
            finish(now: now, &actions)
        case .active:
            if draining && !parser.inMessage && !hasHeldBackInput {
                close(&actions)
            } else if peerFinished && !hasHeldBackInput {
                // Half-closed and everything received is answered (a request cut off by the FIN never completes).
                close(&actions)
            } else {
                idleSince = now
                resumeHeldBackInput(&actions)
            }
        case .lingering, .closed:
            break
        }
    }

    /// Parses held-back input once the limits allow, else reads again (below half the window).
    private mutating func resumeHeldBackInput(_ actions: inout [Action]) {
        guard state == .active else { return }
        if hasHeldBackInput {
            if !inputMustWait && !feedScheduled {
                feedScheduled = true
                actions.append(.feedHeldBackInput)
            }
            return
        }
        if slots.count < max(1, limits.maxPipelinedRequests / 2) { readIfAllowed(&actions) }
    }

    /// After the final answer: shut the write side and linger (or close at once when the peer already finished).
    private mutating func finish(now: UInt64, _ actions: inout [Action]) {
        if peerFinished { close(&actions); return }
        state = .lingering(since: now)
        if hasHeldBackInput {
            hasHeldBackInput = false
            actions.append(.discardHeldBackInput)
        }
        actions.append(.shutdownWrite)
        readIfAllowed(&actions)
    }

    private mutating func abandonAll(_ actions: inout [Action]) {
        guard !slots.isEmpty else { return }
        var cancel: [UInt64] = []
        for (index, slot) in slots.enumerated() {
            if case .running = slot.progress { cancel.append(headSequence + UInt64(index)) }
        }
        actions.append(.abandon(slots.map(\.record), cancel: cancel))
        slots.removeAll()
        running = 0
    }

    private mutating func close(_ actions: inout [Action]) {
        guard state != .closed else { return }
        // The client is gone: its unanswered requests stop.
        abandonAll(&actions)
        state = .closed
        reading = false
        if hasHeldBackInput {
            hasHeldBackInput = false
            actions.append(.discardHeldBackInput)
        }
        actions.append(.close)
    }
}

extension HTTPResponse {
    /// True when the handler asked to close the connection after this response (`Connection: close`).
    var asksToCloseConnection: Bool {
        headers.fields.contains { $0.name.caseInsensitiveEquals("connection") && $0.value.lowercased().contains("close") }
    }
}
