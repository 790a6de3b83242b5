#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import Infrastructure

/// The blocking executor (issue 11, defect 4): a queue that drains in linear time, and cancelled jobs that never run.
@Suite struct BlockingExecutorTests {
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

    /// Draining n queued jobs moves each element O(1) times; `Array.removeFirst()` moved n^2/2 (2e10 for 200k jobs).
    @Test func theQueueMovesEachElementAConstantNumberOfTimes() {
        var ring = RingBuffer<Int>()
        let n = 200_000
        for i in 0..<n { ring.append(i) }
        var next = 0
        while let v = ring.popFirst() {
            if v != next { Issue.record("popped \(v), expected \(next)"); break }
            next += 1
        }
        #expect(next == n)
        #expect(ring.relocations < 2 * n, "\(ring.relocations) element moves for \(n) jobs")
    }

    /// 50k jobs queued behind a blocked one all run once it is released.
    @Test func aDeepQueueDrains() async throws {
        let worker = BlockingExecutor(name: "test-deep-queue")
        let gate = Latch()
        let order = Locked<[Int]>([])
        let blocker = Task { try await worker.run { gate.wait() as Void } }
        while worker.outstanding == 0 { await Task.yield() }
        let count = 50_000
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<count {
                group.addTask { try await worker.run { order.withLock { $0.append(i) } } }
            }
            while worker.outstanding < count + 1 { await Task.yield() }
            gate.open()
            try await group.waitForAll()
        }
        try await blocker.value
        let ran = order.withLock { $0 }
        #expect(ran.count == count)
        #expect(Set(ran).count == count)
    }

    @Test func aJobCancelledWhileQueuedNeverRuns() async throws {
        let worker = BlockingExecutor(name: "test-cancel")
        let gate = Latch()
        let ran = Locked(false)
        let blocker = Task { try await worker.run { gate.wait() as Void } }
        while worker.outstanding == 0 { await Task.yield() }
        let queued = Task { try await worker.run { ran.withLock { $0 = true } } }
        while worker.outstanding < 2 { await Task.yield() }
        queued.cancel()
        // Answered at once, while the worker is still blocked.
        await #expect(throws: CancellationError.self) { try await queued.value }
        gate.open()
        try await blocker.value
        while worker.outstanding > 0 { await Task.yield() }
        #expect(ran.withLock { $0 } == false)
    }

    @Test func aJobOfAnAlreadyCancelledTaskNeverRuns() async throws {
        let pool = BlockingExecutor(name: "test-precancel", threads: 1)
        let ran = Locked(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pool.run { ran.withLock { $0 = true } }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ran.withLock { $0 } == false)
    }

    @Test func aShortJobDoesNotWaitBehindALongOneWhileAnotherWorkerIdles() async throws {
        let pool = BlockingExecutor(name: "test-short", threads: 2)
        let gate = Latch()
        let long = Task { try await pool.run { gate.wait() as Void } }
        while pool.outstanding == 0 { await Task.yield() }
        // One shared queue: the idle thread takes every short job while the other is blocked.
        for i in 0..<4 { #expect(try await pool.run { i } == i) }
        gate.open()
        try await long.value
    }
}

extension BlockingExecutorTests {
    @Test func aShutDownExecutorRefusesJobsAndFinishesQueuedOnes() async throws {
        let executor = BlockingExecutor(name: "test-shutdown")
        #expect(try await executor.run { 7 } == 7)
        executor.shutdown()
        #expect(executor.execute {} == false)
        await #expect(throws: CancellationError.self) { try await executor.run { 1 } }
    }

    @Test func threadsAreNamedAndDedicated() async throws {
        let executor = BlockingExecutor(name: "osprey-test", threads: 1)
        let name = try await executor.run { () -> String in
            var buffer = [UInt8](repeating: 0, count: 64)
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            defer { close(fd) }
            let n = read(fd, &buffer, 64)
            return String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
        }
        #expect(name == "osprey-test-0\n")
    }
}
