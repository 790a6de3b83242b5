import Infrastructure
import XCTest
@testable import Serving

/// The batcher's decisions over a fake clock: no threads, no sleeps, every instant chosen by the test.
final class BatchingMachineTests: XCTestCase {
    /// A machine, a clock, and the driver's bookkeeping reduced to ids.
    private struct Harness {
        var machine: BatchingMachine
        let clock = ManualClock()
        var nextID: UInt64 = 0
        /// Rows of every execution, in order.
        var executions: [[UInt64]] = []
        var rowsOf: [UInt64: Int] = [:]

        init(maxBatchRows: Int, delayMicroseconds: UInt64 = 0, preferred: Set<Int> = [], maxQueue: Int = 1000, instances: Int = 1) {
            machine = BatchingMachine(policy: .init(maxBatchRows: maxBatchRows, maxDelayNanos: delayMicroseconds * 1000,
                                                    preferredRows: preferred, maxQueue: maxQueue, instances: instances))
        }

        /// Queues a request now; its id, or the refusal.
        @discardableResult
        mutating func submit(rows: Int = 1, width: Int = 4, timeoutMicroseconds: UInt64? = nil) -> (id: UInt64, refusal: BatchingMachine.Refusal?) {
            nextID += 1
            let now = clock.now()
            rowsOf[nextID] = rows
            let refusal = machine.submit(.init(id: nextID, rows: rows, shapeKey: [[width]], enqueued: now,
                                               deadline: timeoutMicroseconds.map { now + $0 * 1000 }))
            return (nextID, refusal)
        }

        /// Polls; when an execution starts, takes its batch (left running until `finish()`); returns the decision.
        mutating func step() -> (decision: BatchingMachine.Decision, batch: [UInt64]) {
            let decision = machine.poll(now: clock.now())
            guard decision.startExecution else { return (decision, []) }
            let batch = machine.takeBatch(now: clock.now()).batch.map(\.id)
            if !batch.isEmpty { executions.append(batch) }
            return (decision, batch)
        }

        mutating func finish() { machine.executionFinished() }

        /// Runs executions back to back until the queue is empty, with the clock past every delay.
        mutating func drain() {
            while machine.queueDepth > 0 {
                clock.advance(by: machine.policy.maxDelayNanos)
                _ = step()
                finish()
            }
        }

        func rows(_ batch: [UInt64]) -> Int { batch.reduce(0) { $0 + rowsOf[$1]! } }
    }

    func testConcurrentRequestsAreBatchedWithinTheRowLimit() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 20000)
        for i in 0..<24 { h.submit(rows: i % 3 + 1) }
        h.drain()
        let batches = h.executions.map(h.rows)
        XCTAssertEqual(batches.reduce(0, +), (0..<24).reduce(0) { $0 + $1 % 3 + 1 })
        XCTAssertTrue(batches.allSatisfy { $0 <= 8 }, "\(batches)")
        XCTAssertTrue(batches.contains { $0 > 3 }, "some executions coalesce several requests: \(batches)")
        XCTAssertLessThan(h.executions.count, 24)
        XCTAssertEqual(h.executions.flatMap { $0 }.sorted(), Array(1...24), "each request runs exactly once")
    }

    func testDefaultGreedyBatchingCoalescesWhileTheModelIsBusy() {
        var h = Harness(maxBatchRows: 32)
        h.submit()
        let first = h.step()
        XCTAssertEqual(first.batch, [1], "with no delay a lone request runs at once")
        for _ in 0..<12 { h.submit() }
        let busy = h.step()
        XCTAssertFalse(busy.decision.startExecution, "one execution at a time")
        XCTAssertNil(busy.decision.wakeAt, "nothing to wake for while busy and no deadline")
        h.finish()
        let next = h.step()
        XCTAssertEqual(next.batch.count, 12, "requests queued during an execution run together next")
        h.finish()
        XCTAssertEqual(h.executions.map(h.rows).reduce(0, +), 13)
        XCTAssertTrue(h.executions.map(h.rows).contains { $0 > 1 })
    }

    func testOnlyRequestsWithIdenticalTrailingShapesBatchTogether() {
        var h = Harness(maxBatchRows: 32, delayMicroseconds: 20000)
        var widths: [UInt64: Int] = [:]
        for i in 0..<8 {
            let width = i % 2 == 0 ? 2 : 3
            widths[h.submit(width: width).id] = width
        }
        h.drain()
        XCTAssertEqual(h.executions.map(h.rows).reduce(0, +), 8)
        XCTAssertTrue(h.executions.contains { $0.count > 1 }, "\(h.executions)")
        for batch in h.executions { XCTAssertEqual(Set(batch.map { widths[$0]! }).count, 1, "mixed widths in \(batch)") }
    }

    func testALoneRequestWaitsForCompanyUpToTheDelay() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 80000)
        h.submit()
        let start = h.clock.now()
        let waiting = h.step()
        XCTAssertFalse(waiting.decision.startExecution)
        XCTAssertEqual(waiting.decision.wakeAt, start + 80_000_000, "the driver sleeps exactly until the delay is over")
        h.clock.advance(by: 79_999_999)
        XCTAssertFalse(h.step().decision.startExecution, "a lone request waits for company up to the delay")
        h.clock.advance(by: 1)
        XCTAssertEqual(h.step().batch, [1])
    }

    func testFullBatchOrPreferredSizeRunsWithoutWaitingForTheDelay() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 5_000_000, preferred: [2])
        h.submit()
        XCTAssertFalse(h.step().decision.startExecution)
        h.submit()
        XCTAssertEqual(h.step().batch, [1, 2], "the preferred size runs at once")
        h.finish()
        // A request that fills max_batch_size alone also runs at once.
        h.submit(rows: 8)
        XCTAssertEqual(h.step().batch, [3])
        h.finish()
        // Rows that would overflow the limit: what is queued runs now.
        h.submit(rows: 5)
        h.submit(rows: 5)
        XCTAssertEqual(h.step().batch, [4])
    }

    func testMoreQueuedThanAPreferredSizeRunsInBatchesOfTheLargestPreferredSize() {
        var h = Harness(maxBatchRows: 32, delayMicroseconds: 5_000_000, preferred: [4, 8])
        for _ in 0..<21 { h.submit() }
        XCTAssertEqual(h.step().batch, Array(1...8), "capped at the largest preferred size, as Triton's preferred_batch_size")
        h.finish()
        XCTAssertEqual(h.step().batch, Array(9...16))
        h.finish()
        XCTAssertEqual(h.step().batch, Array(17...20), "the smaller preferred size when the larger is out of reach")
        h.finish()
        XCTAssertFalse(h.step().decision.startExecution, "below every preferred size: waits for the delay")
        h.clock.advance(by: 5_000_000_000)
        XCTAssertEqual(h.step().batch, [21], "after the delay whatever is queued runs")
        // Multi-row requests: the cut falls where the rows reach a preferred size, else the batch stays whole.
        var rows = Harness(maxBatchRows: 32, preferred: [8])
        for n in [3, 3, 2, 3] { rows.submit(rows: n) }
        XCTAssertEqual(rows.rows(rows.step().batch), 8)
        rows.finish()
        for n in [3, 3, 3] { rows.submit(rows: n) }
        XCTAssertEqual(rows.rows(rows.step().batch), 12, "no prefix reaches 8 rows exactly: all that fits runs")
    }

    func testInstancesRunSeveralBatchesAtOnce() {
        var h = Harness(maxBatchRows: 32, preferred: [4], instances: 2)
        for _ in 0..<10 { h.submit() }
        let decision = h.machine.poll(now: h.clock.now())
        XCTAssertTrue(decision.startExecution)
        XCTAssertFalse(h.machine.poll(now: h.clock.now()).startExecution, "one execution awaiting its slot at a time")
        XCTAssertEqual(h.machine.takeBatch(now: h.clock.now()).batch.map(\.id), [1, 2, 3, 4])
        XCTAssertEqual(h.step().batch, [5, 6, 7, 8], "the second instance starts while the first computes")
        XCTAssertFalse(h.step().decision.startExecution, "both instances busy")
        XCTAssertEqual(h.machine.executions, .init(awaitingSlot: 0, running: 2))
        h.finish()
        XCTAssertEqual(h.step().batch, [9, 10], "a freed instance takes the rest (greedy: no delay)")
        h.finish()
        h.finish()
        XCTAssertTrue(h.machine.executions.isIdle)
        h.machine.close()
        XCTAssertTrue(h.machine.poll(now: h.clock.now()).finished)
    }

    func testUnbatchedModelsRunRequestsOneByOne() {
        var h = Harness(maxBatchRows: 1)
        for _ in 0..<6 { h.submit() }
        h.drain()
        XCTAssertEqual(h.executions, (1...6).map { [UInt64($0)] })
        // A request's own rows are not limited when batching is off (max_batch_size 0 lets it through validation).
        h.submit(rows: 50)
        h.submit(rows: 2)
        h.drain()
        XCTAssertEqual(h.executions.suffix(2).map(h.rows), [50, 2])
    }

    func testQueueFullIsRefusedImmediately() {
        var h = Harness(maxBatchRows: 1, maxQueue: 2)
        h.submit()
        XCTAssertEqual(h.step().batch, [1], "the first request executes, so the queue is empty again")
        XCTAssertNil(h.submit().refusal)
        XCTAssertNil(h.submit().refusal)
        XCTAssertEqual(h.machine.queueDepth, 2)
        XCTAssertEqual(h.submit().refusal, .queueFull)
        XCTAssertEqual(h.machine.queueDepth, 2)
        h.finish()
        h.drain()
        XCTAssertEqual(h.executions, [[1], [2], [3]])
    }

    func testTimedOutRequestsAreAnsweredAtTheirDeadlineAndNeverExecuted() {
        var h = Harness(maxBatchRows: 1)
        h.submit()
        XCTAssertEqual(h.step().batch, [1])
        let late = h.submit(timeoutMicroseconds: 30000).id
        let start = h.clock.now()
        let busy = h.step()
        XCTAssertEqual(busy.decision.wakeAt, start + 30_000_000, "the driver wakes at the deadline while the batch runs")
        h.clock.advance(by: .milliseconds(30))
        let expired = h.step()
        XCTAssertEqual(expired.decision.expired, [late], "answered at its deadline, not after the running batch")
        h.finish()
        h.drain()
        XCTAssertFalse(h.executions.flatMap { $0 }.contains(late), "an expired request is not executed")
    }

    func testARequestExpiringWhileTheSlotIsAwaitedIsNotTaken() {
        var h = Harness(maxBatchRows: 4)
        let id = h.submit(timeoutMicroseconds: 10).id
        XCTAssertTrue(h.machine.poll(now: h.clock.now()).startExecution)
        h.clock.advance(by: 10_000)
        let taken = h.machine.takeBatch(now: h.clock.now())
        XCTAssertEqual(taken.batch, [])
        XCTAssertEqual(taken.expired, [id])
        XCTAssertTrue(h.machine.executions.isIdle, "an empty take ends the execution")
    }

    func testCancelledRequestLeavesTheQueue() {
        var h = Harness(maxBatchRows: 1)
        h.submit()
        XCTAssertEqual(h.step().batch, [1])
        let second = h.submit().id
        XCTAssertEqual(h.machine.queueDepth, 1)
        XCTAssertTrue(h.machine.cancel(id: second))
        XCTAssertEqual(h.machine.queueDepth, 0)
        XCTAssertFalse(h.machine.cancel(id: 1), "a running request is not cancelled by the machine")
        h.finish()
        h.drain()
        XCTAssertFalse(h.executions.flatMap { $0 }.contains(second))
    }

    func testCancelledRowsOfABatchAreDroppedNotComputed() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 1000)
        h.submit()
        h.clock.advance(by: 1_000_000)
        XCTAssertEqual(h.step().batch, [1])
        let queued = (0..<6).map { _ in h.submit().id }
        XCTAssertEqual(h.machine.queueDepth, 6)
        for i in stride(from: 0, to: 6, by: 2) { XCTAssertTrue(h.machine.cancel(id: queued[i])) }
        h.finish()
        h.drain()
        XCTAssertEqual(h.executions.last, [queued[1], queued[3], queued[5]], "the others still batch together")
    }

    func testClosingRefusesNewRequestsRunsWhatIsQueuedThenFinishes() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 5_000_000)
        h.submit()
        h.submit()
        h.machine.close()
        XCTAssertEqual(h.submit().refusal, .closed)
        let run = h.step()
        XCTAssertEqual(run.batch, [1, 2], "closing runs the queue at once, without waiting for company")
        XCTAssertFalse(h.step().decision.finished, "not finished while the last batch runs")
        h.finish()
        XCTAssertTrue(h.step().decision.finished)
    }
    func testAStreamingExecutionTakesWhatIsQueuedAtOnceWithoutFinishing() {
        var h = Harness(maxBatchRows: 4, delayMicroseconds: 1000, preferred: [2])
        for _ in 0..<4 { h.submit() }
        XCTAssertEqual(h.step().batch, [1, 2], "the first batch is cut at the preferred size")
        XCTAssertEqual(h.machine.extend(now: h.clock.now()).batch.map(\.id), [3, 4], "queued rows join at once")
        XCTAssertEqual(h.machine.extend(now: h.clock.now()).batch.map(\.id), [], "nothing queued")
        h.submit()
        XCTAssertEqual(h.machine.extend(now: h.clock.now()).batch.map(\.id), [5], "a lone request joins without waiting for company")
        XCTAssertEqual(h.machine.executions.running, 1, "the batches join the running execution")
        h.submit()
        XCTAssertFalse(h.step().decision.startExecution, "no second execution while the first one streams")
        for _ in 0..<5 { h.submit(width: 8) }
        XCTAssertEqual(h.machine.extend(now: h.clock.now()).batch.map(\.id), [6], "only compatible shapes join one batch")
        XCTAssertEqual(h.machine.extend(now: h.clock.now()).batch.map(\.id), [7, 8], "cut at the preferred size")
        h.finish()
        XCTAssertTrue(h.machine.executions.isIdle)
    }

    func testAStreamingExecutionExpiresRequestsAndDrainsWhenClosed() {
        var h = Harness(maxBatchRows: 8, delayMicroseconds: 5_000_000)
        h.submit()
        h.submit()
        XCTAssertEqual(h.step().batch, [], "two rows wait for the delay")
        h.clock.advance(by: h.machine.policy.maxDelayNanos)
        XCTAssertEqual(h.step().batch, [1, 2])
        h.submit(timeoutMicroseconds: 10)
        h.clock.advance(by: 10_000)
        h.submit()
        let taken = h.machine.extend(now: h.clock.now())
        XCTAssertEqual(taken.expired, [3])
        XCTAssertEqual(taken.batch.map(\.id), [4])
        h.machine.close()
        h.finish()
        XCTAssertTrue(h.step().decision.finished)
    }
}
