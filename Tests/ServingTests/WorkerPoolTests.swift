import Foundation
import Testing
@testable import Serving

/// The blocking workers (issue 11, defect 4): a queue that drains in linear time, and cancelled jobs that never run.
@Suite struct WorkerPoolTests {
    @Test func ringBufferIsFirstInFirstOutAcrossGrowth() {
        var ring = RingBuffer<Int>(capacity: 2)
        var expected: [Int] = []
        var popped: [Int] = []
        for round in 0..<50 {
            for i in 0..<(round % 7 + 1) { ring.append(round * 10 + i); expected.append(round * 10 + i) }
            for _ in 0..<(round % 3) { if let v = ring.popFirst() { popped.append(v) } }
        }
        while let v = ring.popFirst() { popped.append(v) }
        #expect(popped == expected)
        #expect(ring.isEmpty && ring.count == 0)
    }

    /// 200k queued jobs: `Array.removeFirst()` made this about 2e10 element moves; the ring buffer makes it 2e5.
    @Test func aDeepQueueDrainsInLinearTime() async throws {
        let worker = BlockingWorker(name: "test-deep-queue")
        let gate = DispatchSemaphore(value: 0)
        let counter = Locked(0)
        let blocker = Task { try await worker.run { gate.wait() } }
        while worker.outstanding == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        let start = Date()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<200_000 { group.addTask { try await worker.run { counter.withLock { $0 += 1 } } } }
            while worker.outstanding < 200_001 { try await Task.sleep(nanoseconds: 1_000_000) }
            gate.signal()
            try await group.waitForAll()
        }
        try await blocker.value
        #expect(counter.withLock { $0 } == 200_000)
        #expect(Date().timeIntervalSince(start) < 30, "quadratic draining would take minutes")
    }

    @Test func aJobCancelledWhileQueuedNeverRuns() async throws {
        let worker = BlockingWorker(name: "test-cancel")
        let gate = DispatchSemaphore(value: 0)
        let ran = Locked(false)
        let blocker = Task { try await worker.run { gate.wait() } }
        while worker.outstanding == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        let queued = Task { try await worker.run { ran.withLock { $0 = true } } }
        while worker.outstanding < 2 { try await Task.sleep(nanoseconds: 1_000_000) }
        queued.cancel()
        // Answered at once, while the worker is still blocked.
        await #expect(throws: CancellationError.self) { try await queued.value }
        gate.signal()
        try await blocker.value
        while worker.outstanding > 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        #expect(ran.withLock { $0 } == false)
    }

    @Test func aJobOfAnAlreadyCancelledTaskNeverRuns() async throws {
        let pool = WorkerPool(threads: 1)
        let ran = Locked(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pool.run { ran.withLock { $0 = true } }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ran.withLock { $0 } == false)
    }

    @Test func aShortJobDoesNotWaitBehindALongOneWhileAnotherWorkerIdles() async throws {
        let pool = WorkerPool(threads: 2)
        let gate = DispatchSemaphore(value: 0)
        let long = Task { try await pool.run { gate.wait() } }
        try await Task.sleep(nanoseconds: 20_000_000)
        // Round-robin alone would put every other job behind the blocked one.
        for i in 0..<4 { #expect(try await pool.run { i } == i) }
        gate.signal()
        try await long.value
    }
}
