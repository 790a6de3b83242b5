import XCTest
@testable import HTTP

/// The connection's rules without a socket: events with a fake clock in, actions out; no sleeps.
final class ConnectionStateMachineTests: XCTestCase {
    typealias Machine = ConnectionStateMachine

    private let second: UInt64 = 1_000_000_000
    /// idle 10 s, read 5 s, linger 2 s.
    private let policy = TimeoutPolicy(idleSeconds: 10, readSeconds: 5, lingerSeconds: 2)

    private func machine(pipelined: Int = 8, window: Int = 4, unsent: Int = 1000, overflow: Bool = false) -> Machine {
        Machine(limits: .init(maxPipelinedRequests: pipelined, maxConcurrentRequests: window, maxUnsentOutputBytes: unsent,
                              overflow: overflow, maxConnections: 7, policy: policy), now: 0)
    }

    private func request(_ path: String, method: String = "GET") -> HTTPRequest {
        HTTPRequest(method: method, path: path, requestID: "id" + path)
    }

    private func receive(_ m: inout Machine, _ path: String, keepAlive: Bool = true, inline: HTTPResponse? = nil, at now: UInt64 = 0) -> [String] {
        summary(m.received(.request(request(path), keepAlive: keepAlive, startedAt: now, inline: inline), now: now))
    }

    private func ok(_ text: String = "", headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        HTTPResponse(status: 200, headers: headers, body: Array(text.utf8))
    }

    /// Actions as short words, so sequences compare at a glance.
    private func summary(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .startReading: "read"
            case .stopReading: "pause"
            case .dispatch(let sequence, let request): "dispatch \(sequence) \(request.path)"
            case .send(let record, let response): "send \(record.path) \(response.status)\(record.keepAlive ? "" : " last")"
            case .sendContinue: "continue"
            case .flush: "flush"
            case .feedHeldBackInput: "feed"
            case .discardHeldBackInput: "discard"
            case .abandon(let records, let cancel): "abandon \(records.map(\.path).joined(separator: ",")) cancel \(cancel)"
            case .shutdownWrite: "shutdown"
            case .close: "close"
            }
        }
    }

    func testStartReadsAndAnswersGoOutInRequestOrder() {
        var m = machine()
        XCTAssertEqual(summary(m.start(now: 0)), ["read"])
        XCTAssertEqual(receive(&m, "/a"), ["dispatch 0 /a"])
        XCTAssertEqual(receive(&m, "/b"), ["dispatch 1 /b"])
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: false, now: 0)), ["flush"])
        // The second answer is ready first: it waits for the first.
        XCTAssertEqual(summary(m.responseReady(sequence: 1, response: ok(), now: 1)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 2)), ["send /a 200", "send /b 200", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [])
        XCTAssertEqual(m.phase, .idle(since: 2))
        // A duplicate or unknown answer changes nothing.
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 3)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 9, response: ok(), now: 3)), [])
    }

    func testAtMostTheWindowRunsAndParsingSuspendsAtThePipeliningLimit() {
        var m = machine(pipelined: 6, window: 4)
        _ = m.start(now: 0)
        var dispatched: [String] = []
        for i in 0..<6 {
            XCTAssertFalse(m.inputMustWait, "request \(i)")
            dispatched += receive(&m, "/\(i)")
        }
        XCTAssertEqual(dispatched, ["dispatch 0 /0", "dispatch 1 /1", "dispatch 2 /2", "dispatch 3 /3"])
        XCTAssertEqual(m.runningCount, 4)
        // The parser asks at the boundary and stops: the rest of the read is held back, and reading pauses.
        XCTAssertTrue(m.inputMustWait)
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: true, now: 0)), ["flush", "pause"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 0)), [])
        // One answer frees a place in the window: the next waiting request starts, the answer goes out.
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 1)), ["dispatch 4 /4", "send /0 200", "flush"])
        // Five still unanswered: above half the limit, so the held-back bytes stay put (hysteresis).
        XCTAssertEqual(summary(m.flushed(.drained, now: 1)), [])
        for sequence in 1...3 { _ = m.responseReady(sequence: UInt64(sequence), response: ok(), now: 2) }
        XCTAssertEqual(m.unansweredCount, 2)
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), ["feed"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [], "one feed at a time")
        XCTAssertEqual(receive(&m, "/6"), ["dispatch 6 /6"])
        // Three unanswered, half the limit: reading stays off until one more is answered.
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: false, now: 2)), ["flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 4, response: ok(), now: 3)), ["send /4 200", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 3)), ["read"])
    }

    func testUnreadAnswersStopReadingUntilTheSocketDrains() {
        var m = machine(unsent: 1000)
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        _ = m.parsed(.init(), heldBack: false, now: 0)
        _ = m.flushed(.drained, now: 0)
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 1)), ["send /a 200", "flush"])
        // The client does not read: the write waits and the unsent bytes pass the bound.
        XCTAssertEqual(summary(m.flushed(.pending(unsentBytes: 5000, started: true), now: 1)), ["pause"])
        XCTAssertTrue(m.inputMustWait)
        XCTAssertEqual(m.phase, .writing(since: 1))
        XCTAssertEqual(summary(m.writeCompleted(ok: true, now: 2)), ["flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), ["read"])
        XCTAssertFalse(m.inputMustWait)
    }

    func testAResetCancelsRunningRequestsAndNeverStartsWaitingOnes() {
        var m = machine(window: 4)
        _ = m.start(now: 0)
        for i in 0..<6 { _ = receive(&m, "/\(i)") }
        XCTAssertEqual(summary(m.closeNow(.peerReset, now: 1)), ["abandon /0,/1,/2,/3,/4,/5 cancel [0, 1, 2, 3]", "close"])
        XCTAssertEqual(m.state, .closed)
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 2)), [], "a gone client's answer is dropped")
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [])
        XCTAssertEqual(summary(m.timerFired(now: 100 * second)), [])
    }

    func testAWriteErrorClosesLikeAReset() {
        var m = machine()
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        _ = receive(&m, "/b")
        _ = m.responseReady(sequence: 0, response: ok(), now: 1)
        XCTAssertEqual(summary(m.flushed(.failed, now: 1)), ["abandon /b cancel [1]", "close"])
    }

    func testHalfCloseAnswersEveryReceivedRequestThenCloses() {
        var m = machine()
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        _ = receive(&m, "/b")
        _ = m.parsed(.init(), heldBack: false, now: 0)
        _ = m.flushed(.drained, now: 0)
        // FIN after two requests: no more bytes, but both are still answered (RFC 9112 9.6).
        XCTAssertEqual(summary(m.peerClosed(now: 1)), ["pause"])
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 2)), ["send /a 200", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 1, response: ok(), now: 3)), ["send /b 200", "flush"])
        // The peer sent everything already: close at once, no lingering.
        XCTAssertEqual(summary(m.flushed(.drained, now: 3)), ["close"])
    }

    func testHalfCloseStillParsesRequestsHeldBackByBackpressure() {
        var m = machine(pipelined: 2, window: 2)
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        _ = receive(&m, "/b")
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: true, now: 0)), ["flush", "pause"])
        _ = m.flushed(.drained, now: 0)
        XCTAssertEqual(summary(m.peerClosed(now: 1)), [])
        _ = m.responseReady(sequence: 0, response: ok(), now: 2)
        _ = m.responseReady(sequence: 1, response: ok(), now: 2)
        // Answers drained: the held-back request is parsed now (reading stays off: the peer finished).
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), ["feed"])
        XCTAssertEqual(receive(&m, "/c"), ["dispatch 2 /c"])
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: false, now: 2)), ["flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 2)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 2, response: ok(), now: 3)), ["send /c 200", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 3)), ["close"])
    }

    func testHalfCloseWhenIdleOrMidRequestClosesAtOnce() {
        var idle = machine()
        _ = idle.start(now: 0)
        XCTAssertEqual(summary(idle.peerClosed(now: 1)), ["pause", "close"])
        var partial = machine()
        _ = partial.start(now: 0)
        _ = partial.parsed(.init(inMessage: true, messageStartedAt: 0, stopped: false), heldBack: false, now: 0)
        _ = partial.flushed(.drained, now: 0)
        // The cut-off request can never complete.
        XCTAssertEqual(summary(partial.peerClosed(now: 1)), ["pause", "close"])
    }

    func testTheLastRequestIsAnsweredThenTheWriteSideShutsAndLingers() {
        var m = machine()
        _ = m.start(now: 0)
        XCTAssertEqual(receive(&m, "/a", keepAlive: false), ["dispatch 0 /a"])
        XCTAssertFalse(m.acceptsInput, "nothing after a closing request is parsed")
        XCTAssertEqual(summary(m.received(.request(request("/b"), keepAlive: true, startedAt: 0, inline: nil), now: 0)), [])
        _ = m.parsed(.init(), heldBack: true, now: 0)
        _ = m.flushed(.drained, now: 0)
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 1)), ["send /a 200 last", "flush"])
        // Reading resumes, only to discard what the peer still sends.
        XCTAssertEqual(summary(m.flushed(.drained, now: 1)), ["discard", "shutdown", "read"])
        XCTAssertEqual(m.state, .lingering(since: 1))
        XCTAssertEqual(summary(m.timerFired(now: 1 + 2 * second - 1)), [])
        XCTAssertEqual(summary(m.timerFired(now: 1 + 2 * second)), ["close"])
    }

    func testLingeringEndsWhenThePeerCloses() {
        var m = machine()
        _ = m.start(now: 0)
        _ = receive(&m, "/a", keepAlive: false, inline: ok())
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: false, now: 0)), ["send /a 200 last", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 0)), ["shutdown"])
        XCTAssertEqual(summary(m.peerClosed(now: 1)), ["pause", "close"])
    }

    func testAHandlerThatClosesDropsTheRequestsAfterIt() {
        var m = machine()
        _ = m.start(now: 0)
        for path in ["/a", "/b", "/c"] { _ = receive(&m, path) }
        let closing = ok(headers: ["Connection": "close"])
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: closing, now: 1)),
                       ["send /a 200", "abandon /b,/c cancel [1, 2]", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 1)), ["shutdown"])
    }

    func testAParseErrorIsAnsweredAfterEarlierAnswersAndEndsTheConnection() {
        var m = machine()
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        let error = ResponseSerializer.errorResponse(status: 400, message: "bad")
        XCTAssertEqual(summary(m.received(.rejected(error, startedAt: 0), now: 0)), [])
        XCTAssertEqual(summary(m.parsed(.init(inMessage: false, messageStartedAt: 0, stopped: true), heldBack: false, now: 0)), ["flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 0)), [])
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 1)), ["send /a 200", "send - 400 last", "flush"])
        XCTAssertEqual(summary(m.flushed(.drained, now: 1)), ["shutdown"])
    }

    func testExpectContinueIsSentOnlyWhenEarlierAnswersAreOut() {
        var m = machine()
        _ = m.start(now: 0)
        _ = receive(&m, "/a")
        _ = m.received(.expectContinue, now: 0)
        let inBody = Machine.ParserStatus(inMessage: true, messageStartedAt: 0, stopped: false)
        XCTAssertEqual(summary(m.parsed(inBody, heldBack: false, now: 0)), ["flush"])
        XCTAssertEqual(summary(m.responseReady(sequence: 0, response: ok(), now: 1)), ["send /a 200", "continue", "flush"])
    }

    func testTimeoutsFollowTheFakeClock() {
        // A silent new connection: closed at the read limit.
        var silent = machine()
        _ = silent.start(now: 0)
        XCTAssertEqual(summary(silent.timerFired(now: 5 * second - 1)), [])
        XCTAssertEqual(summary(silent.timerFired(now: 5 * second)), ["close"])
        // A request that does not arrive in time: 408, then the connection finishes.
        var slow = machine()
        _ = slow.start(now: 0)
        _ = slow.parsed(.init(inMessage: true, messageStartedAt: second, stopped: false), heldBack: false, now: second)
        _ = slow.flushed(.drained, now: second)
        XCTAssertEqual(summary(slow.timerFired(now: 6 * second - 1)), [])
        XCTAssertEqual(summary(slow.timerFired(now: 6 * second)), ["send - 408 last", "flush"])
        XCTAssertEqual(summary(slow.flushed(.drained, now: 6 * second)), ["shutdown"])
        // Idle after an answer: closed at the idle limit; awaiting the responder never times out.
        var idle = machine()
        _ = idle.start(now: 0)
        _ = receive(&idle, "/a")
        _ = idle.parsed(.init(), heldBack: false, now: 0)
        _ = idle.flushed(.drained, now: 0)
        XCTAssertEqual(summary(idle.timerFired(now: 1000 * second)), [])
        _ = idle.responseReady(sequence: 0, response: ok(), now: 1000 * second)
        _ = idle.flushed(.drained, now: 1000 * second)
        XCTAssertEqual(summary(idle.timerFired(now: 1010 * second - 1)), [])
        XCTAssertEqual(summary(idle.timerFired(now: 1010 * second)), ["close"])
        // A stalled writer: closed when no write progress was made for the idle limit.
        var stalled = machine()
        _ = stalled.start(now: 0)
        _ = receive(&stalled, "/a", inline: ok())
        _ = stalled.parsed(.init(), heldBack: false, now: 0)
        _ = stalled.flushed(.pending(unsentBytes: 10, started: true), now: second)
        XCTAssertEqual(summary(stalled.timerFired(now: 11 * second - 1)), [])
        XCTAssertEqual(summary(stalled.timerFired(now: 11 * second)), ["close"])
    }

    func testDrainClosesIdleConnectionsAndMakesTheCurrentRequestTheLast() {
        var idle = machine()
        _ = idle.start(now: 0)
        XCTAssertEqual(summary(idle.beginDrain(now: 1)), ["close"])
        var busy = machine()
        _ = busy.start(now: 0)
        _ = receive(&busy, "/a")
        XCTAssertEqual(summary(busy.beginDrain(now: 1)), [])
        XCTAssertEqual(summary(busy.responseReady(sequence: 0, response: ok(), now: 2)), ["send /a 200 last", "flush"])
        XCTAssertEqual(summary(busy.flushed(.drained, now: 2)), ["shutdown"])
        // A request half-received when draining starts is still read, and answered as the last one.
        var reading = machine()
        _ = reading.start(now: 0)
        _ = reading.parsed(.init(inMessage: true, messageStartedAt: 0, stopped: false), heldBack: false, now: 0)
        XCTAssertEqual(summary(reading.beginDrain(now: 1)), [])
        XCTAssertEqual(receive(&reading, "/a"), ["dispatch 0 /a"])
        XCTAssertEqual(summary(reading.responseReady(sequence: 0, response: ok(), now: 2)), ["send /a 200 last", "flush"])
    }

    func testOverBudgetConnectionsAnswerProbesOnlyAndOnce() {
        var m = machine(overflow: true)
        _ = m.start(now: 0)
        XCTAssertEqual(receive(&m, "/work"), [], "nothing is dispatched over the budget")
        XCTAssertEqual(summary(m.parsed(.init(), heldBack: false, now: 0)), ["send /work 503 last", "flush"])
        var probe = machine(overflow: true)
        _ = probe.start(now: 0)
        _ = receive(&probe, "/v2/health/live", inline: ok("live"))
        XCTAssertEqual(summary(probe.parsed(.init(), heldBack: false, now: 0)), ["send /v2/health/live 200 last", "flush"])
    }
}
