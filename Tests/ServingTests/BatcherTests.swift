import Infrastructure
import Foundation
import XCTest
import Engine
import Tensor
@testable import Serving

final class BatcherTests: XCTestCase {
    func testConcurrentRequestsAreBatchedAndEachGetsItsOwnRows() async throws {
        let runtime = ScaleRuntime(scale: 3, sleepMilliseconds: 5)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#)
        XCTAssertTrue(version.batchingEnabled)
        try await Self.inferConcurrently(version, scale: 3)
        let batches = runtime.batches.withLock { $0 }
        XCTAssertEqual(batches.reduce(0, +), (0..<24).reduce(0) { $0 + $1 % 3 + 1 })
        XCTAssertTrue(batches.allSatisfy { $0 <= 8 }, "\(batches)")
        XCTAssertTrue(batches.contains { $0 > 3 }, "some executions coalesce several requests: \(batches)")
        let stats = version.statistics
        XCTAssertEqual(stats.success.count, 24)
        XCTAssertEqual(stats.inferenceCount, 48)
        XCTAssertEqual(stats.executionCount, UInt64(batches.count))
        XCTAssertLessThan(stats.executionCount, 24)
        XCTAssertEqual(stats.batchStatistics.reduce(0) { $0 + $1.computeInfer.count }, stats.executionCount)
    }

    func testDefaultGreedyBatchingCoalescesWhileTheModelIsBusy() async throws {
        let runtime = ScaleRuntime(scale: 2, sleepMilliseconds: 30)
        let version = try makeVersion(runtime)
        XCTAssertEqual(version.maxBatchSize, 32)
        let start = SystemClock.nanoseconds()
        _ = try await version.infer(["x": rowsTensor(rows: 1, marker: 1)])
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - start) / 1e9, 1.0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<12 {
                group.addTask {
                    let y = try await version.infer(["x": rowsTensor(rows: 1, marker: Float(i))])["y"]!
                    XCTAssertEqual(y.scalars(as: Float.self), Array(repeating: Float(i) * 2, count: 4))
                }
            }
            try await group.waitForAll()
        }
        let batches = runtime.batches.withLock { $0 }
        XCTAssertEqual(batches.reduce(0, +), 13)
        XCTAssertTrue(batches.contains { $0 > 1 }, "requests queued during an execution run together next: \(batches)")
    }

    func testOnlyRequestsWithIdenticalTrailingShapesBatchTogether() async throws {
        // A model with a free second dimension: rows of different widths must not be stacked.
        final class WidthRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .symbolic("W")])]
            let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .symbolic("W")])]
            let shapes = Locked<[[Int]]>([])
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                shapes.withLock { $0.append(feeds["x"]!.shape) }
                return ["y": feeds["x"]!]
            }
        }
        let runtime = WidthRuntime()
        let version = try ServedVersion(name: "w", version: 1, config: try ModelConfig(json: Array(#"{"dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#.utf8)),
                                        labels: [], runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    let width = i % 2 == 0 ? 2 : 3
                    let input = Tensor(shape: [1, width], scalars: (0..<width).map { Float(i * 100 + $0) })
                    let y = try await version.infer(["x": input])["y"]!
                    XCTAssertEqual(y.shape, [1, width])
                    XCTAssertEqual(y.scalars(as: Float.self), input.scalars(as: Float.self))
                }
            }
            try await group.waitForAll()
        }
        let shapes = runtime.shapes.withLock { $0 }
        XCTAssertEqual(shapes.reduce(0) { $0 + $1[0] }, 8)
        XCTAssertTrue(shapes.contains { $0[0] > 1 }, "\(shapes)")
    }

    func testMaxQueueDelayIsHonoured() async throws {
        // The decision is BatchingMachineTests.testALoneRequestWaitsForCompanyUpToTheDelay (fake clock); here the
        // driver's real timer answers a lone request once the delay is over.
        let runtime = ScaleRuntime(scale: 1)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 80000}}"#)
        let start = SystemClock.nanoseconds()
        _ = try await version.infer(["x": rowsTensor(rows: 1, marker: 1)])
        let elapsed = Double(SystemClock.nanoseconds() - start) / 1e9
        XCTAssertGreaterThanOrEqual(elapsed, 0.075, "a lone request waits for company up to the delay")
        XCTAssertLessThan(elapsed, 1.5)
    }

    func testFullBatchOrPreferredSizeRunsWithoutWaitingForTheDelay() async throws {
        let runtime = ScaleRuntime(scale: 1)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 5000000, "preferred_batch_size": [2]}}"#)
        let start = SystemClock.nanoseconds()
        async let a = version.infer(["x": rowsTensor(rows: 1, marker: 1)])
        async let b = version.infer(["x": rowsTensor(rows: 1, marker: 2)])
        _ = try await (a, b)
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - start) / 1e9, 2.0)
        // A request that fills max_batch_size alone also runs at once.
        let full = SystemClock.nanoseconds()
        _ = try await version.infer(["x": rowsTensor(rows: 8, marker: 3)])
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - full) / 1e9, 2.0)
    }

    func testUnbatchedModelsRunRequestsOneByOne() async throws {
        let runtime = ScaleRuntime(scale: 2, sleepMilliseconds: 2)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 1}"#)
        XCTAssertFalse(version.batchingEnabled)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<6 {
                group.addTask { _ = try await version.infer(["x": rowsTensor(rows: 1, marker: Float(i))]) }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(runtime.batches.withLock { $0 }, Array(repeating: 1, count: 6))

        // max_batch_size 0: no batching and no limit on a request's own batch.
        let free = ScaleRuntime(scale: 2)
        let freeVersion = try makeVersion(free, config: #"{"max_batch_size": 0}"#)
        XCTAssertFalse(freeVersion.batchingEnabled)
        XCTAssertEqual(freeVersion.maxBatchSize, 0)
        async let big = freeVersion.infer(["x": rowsTensor(rows: 50, marker: 0)])
        async let small = freeVersion.infer(["x": rowsTensor(rows: 2, marker: 0)])
        let (bigResult, smallResult) = try await (big, small)
        XCTAssertEqual(bigResult["y"]?.shape, [50, 4])
        XCTAssertEqual(smallResult["y"]?.shape, [2, 4])
        XCTAssertEqual(free.batches.withLock { $0 }.sorted(), [2, 50])

        let fixed = ScaleRuntime(scale: 2, fixedBatch: true)
        let fixedVersion = try makeVersion(fixed)
        XCTAssertFalse(fixedVersion.batchingEnabled)
        XCTAssertEqual(fixedVersion.maxBatchSize, 0)
        let y = try await fixedVersion.infer(["x": rowsTensor(rows: 1, marker: 5)])["y"]!
        XCTAssertEqual(y.scalars(as: Float.self), [10, 10, 10, 10])
    }

    func testFixedBatchModelRejectsBatchingConfig() {
        XCTAssertThrowsError(try makeVersion(ScaleRuntime(scale: 1, fixedBatch: true), config: #"{"max_batch_size": 8}"#)) { error in
            guard case ServingError.invalidConfig(let key, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(key, "max_batch_size")
        }
    }

    func testQueueFullIsRefusedImmediately() async throws {
        let hold = Latch()
        let runtime = ScaleRuntime(scale: 1, hold: hold)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 1, "dynamic_batching": {"max_queue_size": 2}}"#)
        let running = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 1)]) }
        // Wait until the first request executes, so the queue is empty again.
        await runtime.started.wait()
        let queued1 = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 2)]) }
        let queued2 = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 3)]) }
        while version.queueDepth < 2 { await Task.yield() }
        XCTAssertEqual(version.queueDepth, 2)
        let start = SystemClock.nanoseconds()
        do {
            _ = try await version.infer(["x": rowsTensor(rows: 1, marker: 4)])
            XCTFail("expected queueFull")
        } catch ServingError.queueFull(let model, let v, let capacity) {
            XCTAssertEqual(model, "m")
            XCTAssertEqual(v, 1)
            XCTAssertEqual(capacity, 2)
        }
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - start) / 1e9, 0.3, "refused without waiting")
        hold.open()
        for task in [running, queued1, queued2] { _ = try await task.value }
        XCTAssertEqual(version.statistics.fail.count, 1)
    }

    func testTimedOutRequestsAreAnsweredAndNeverExecuted() async throws {
        let hold = Latch()
        let runtime = ScaleRuntime(scale: 1, hold: hold)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 1}"#)
        let running = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 1)]) }
        await runtime.started.wait()
        let start = SystemClock.nanoseconds()
        do {
            _ = try await version.infer(["x": rowsTensor(rows: 1, marker: 99)], timeout: .milliseconds(30))
            XCTFail("expected timeout")
        } catch ServingError.timeout(_, _, let microseconds) {
            XCTAssertEqual(microseconds, 30000)
        }
        // The running batch is held until now: the answer came at the deadline, not after it.
        let waited = Double(SystemClock.nanoseconds() - start) / 1e9
        XCTAssertLessThan(waited, 0.45, "answered at its deadline, not after the running batch")
        hold.open()
        _ = try await running.value
        XCTAssertEqual(version.queueDepth, 0)
        XCTAssertFalse(runtime.executedRowMarkers.withLock { $0 }.contains(99), "an expired request is not executed")
    }

    func testConfigDefaultTimeoutApplies() async throws {
        let hold = Latch()
        let runtime = ScaleRuntime(scale: 1, hold: hold)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 1, "dynamic_batching": {"default_timeout_microseconds": 20000}}"#)
        let first = Task { try? await version.infer(["x": rowsTensor(rows: 1, marker: 1)], timeout: .seconds(5)) }
        await runtime.started.wait()
        do {
            _ = try await version.infer(["x": rowsTensor(rows: 1, marker: 2)])
            XCTFail("expected timeout")
        } catch ServingError.timeout {}
        hold.open()
        _ = await first.value
    }

    func testCancelledRequestLeavesTheQueue() async throws {
        let hold = Latch()
        let runtime = ScaleRuntime(scale: 1, hold: hold)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 1}"#)
        let first = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 1)]) }
        await runtime.started.wait()
        let second = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 77)]) }
        while version.queueDepth < 1 { await Task.yield() }
        XCTAssertEqual(version.queueDepth, 1)
        second.cancel()
        let result = await second.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        hold.open()
        _ = try await first.value
        XCTAssertFalse(runtime.executedRowMarkers.withLock { $0 }.contains(77))
    }

    func testInputValidationSaysExpectedAndGot() async throws {
        let version = try makeVersion(ScaleRuntime(scale: 1), config: #"{"max_batch_size": 4}"#)
        func message(_ feeds: [String: Tensor], outputs: [String]? = nil) async -> String {
            do {
                _ = try await version.infer(feeds, outputs: outputs)
                return "no error"
            } catch ServingError.invalidInput(let message) {
                return message
            } catch {
                return "wrong error \(error)"
            }
        }
        let wrongType = await message(["x": Tensor(shape: [1, 4], scalars: [Int64](repeating: 0, count: 4))])
        XCTAssertEqual(wrongType, "input 'x': expected dtype float32, got int64")
        let wrongRank = await message(["x": Tensor(shape: [4], scalars: [Float](repeating: 0, count: 4))])
        XCTAssertEqual(wrongRank, "input 'x': expected rank 2 shape [N, 4], got rank 1 shape [4]")
        let wrongDim = await message(["x": Tensor(shape: [1, 3], scalars: [Float](repeating: 0, count: 3))])
        XCTAssertEqual(wrongDim, "input 'x': expected shape [N, 4], got [1, 3] (dimension 1 must be 4)")
        let missing = await message([:])
        XCTAssertEqual(missing, "missing input 'x': model 'm' expects inputs [x]")
        let unknown = await message(["x": rowsTensor(rows: 1, marker: 0), "z": rowsTensor(rows: 1, marker: 0)])
        XCTAssertEqual(unknown, "unknown input 'z': model 'm' expects inputs [x]")
        let tooMany = await message(["x": rowsTensor(rows: 5, marker: 0)])
        XCTAssertEqual(tooMany, "batch size must be between 1 and 4 (max_batch_size), got 5")
        let empty = await message(["x": Tensor(dtype: .float32, shape: [0, 4])])
        XCTAssertEqual(empty, "batch size must be between 1 and 4 (max_batch_size), got 0")
        let badOutput = await message(["x": rowsTensor(rows: 1, marker: 0)], outputs: ["nope"])
        XCTAssertEqual(badOutput, "unknown output 'nope': model 'm' has outputs [y]")
        XCTAssertEqual(version.statistics.fail.count, 8)
    }

    func testExecutionFailureReachesEveryWaiter() async throws {
        let version = try makeVersion(ScaleRuntime(scale: 1, failRuns: true), config: #"{"dynamic_batching": {"max_queue_delay_microseconds": 10000}}"#)
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<4 {
                group.addTask {
                    do {
                        _ = try await version.infer(["x": rowsTensor(rows: 1, marker: Float(i))])
                        XCTFail("expected failure")
                    } catch ServingError.executionFailed(let model, let v, let reason) {
                        XCTAssertEqual(model, "m")
                        XCTAssertEqual(v, 1)
                        XCTAssertTrue(reason.contains("runFailed"), reason)
                    } catch {
                        XCTFail("\(error)")
                    }
                }
            }
        }
        XCTAssertEqual(version.statistics.fail.count, 4)
    }

    func testComputeGateSerializesExecutionsAcrossVersions() async throws {
        final class Overlap: Sendable {
            let counts = Locked((running: 0, maximum: 0))
            var maximum: Int { counts.withLock { $0.maximum } }
            func enter() { counts.withLock { $0.running += 1; $0.maximum = max($0.maximum, $0.running) } }
            func leave() { counts.withLock { $0.running -= 1 } }
        }
        final class TrackingRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
            let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
            let overlap: Overlap
            init(_ overlap: Overlap) { self.overlap = overlap }
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                overlap.enter(); defer { overlap.leave() }
                usleep(10_000)
                return ["y": feeds["x"]!]
            }
        }
        let overlap = Overlap()
        let gate = ComputeGate(slots: 1)
        let config = try ModelConfig(json: Array(#"{"max_batch_size": 1}"#.utf8))
        let versions = try (1...3).map {
            try ServedVersion(name: "m\($0)", version: 1, config: config, labels: [], runtime: TrackingRuntime(overlap), gate: gate, metrics: nil, loadSeconds: 0)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<9 {
                group.addTask { _ = try await versions[i % 3].infer(["x": rowsTensor(rows: 1, marker: 0)]) }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(overlap.maximum, 1)
    }

    func testOutputsThatDoNotKeepRowsFallBackToSeparateRuns() async throws {
        // An output whose first dimension is not the batch (here a total over all rows) cannot be split.
        final class TotalRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
            // Declared as batched (wrongly), so the batcher tries and must notice.
            let outputs = [TensorSpec(name: "total", dtype: .float32, shape: [.symbolic("N")])]
            let runs = Locked<[Int]>([])
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                let x = feeds["x"]!
                runs.withLock { $0.append(x.shape[0]) }
                usleep(2000)
                return ["total": Tensor(shape: [1], scalars: [x.scalars(as: Float.self).reduce(0, +)])]
            }
        }
        let runtime = TotalRuntime()
        let version = try ServedVersion(name: "t", version: 1, config: try ModelConfig(json: Array(#"{"dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#.utf8)),
                                        labels: [], runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<6 {
                group.addTask {
                    let total = try await version.infer(["x": rowsTensor(rows: 1, marker: Float(i))])["total"]!
                    XCTAssertEqual(total.scalars(as: Float.self), [Float(i * 4)], "each request gets its own, unbatched answer")
                }
            }
            try await group.waitForAll()
        }
        XCTAssertTrue(runtime.runs.withLock { $0 }.contains { $0 > 1 }, "a batch was attempted first")
    }

    func testFixedOutputDimensionDisablesBatching() throws {
        final class FixedOutputRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
            let outputs = [TensorSpec(name: "scores", dtype: .float32, shape: [.fixed(10)])]
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] { ["scores": Tensor(dtype: .float32, shape: [10])] }
        }
        let version = try ServedVersion(name: "f", version: 1, config: ModelConfig(), labels: [], runtime: FixedOutputRuntime(),
                                        gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        XCTAssertFalse(version.batchingEnabled)
        XCTAssertEqual(version.maxBatchSize, 0)
        XCTAssertThrowsError(try ServedVersion(name: "f", version: 1, config: try ModelConfig(json: Array(#"{"max_batch_size": 4}"#.utf8)),
                                               labels: [], runtime: FixedOutputRuntime(), gate: ComputeGate(), metrics: nil, loadSeconds: 0)) {
            XCTAssertTrue("\($0)".contains("output 'scores' has no dynamic batch dimension"), "\($0)")
        }
    }
}

extension BatcherTests {
    /// Issue 11, defect 5: rows of requests cancelled while queued are dropped, never computed, and the others still batch.
    func testCancelledRowsOfABatchAreDroppedNotComputed() async throws {
        let hold = Latch()
        let runtime = ScaleRuntime(scale: 2, hold: hold)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 1000}}"#)
        let busy = Task { try await version.infer(["x": rowsTensor(rows: 1, marker: 1)]) }
        await runtime.started.wait()
        var tasks: [Task<[String: Tensor], Error>] = []
        for i in 0..<6 {
            tasks.append(Task { try await version.infer(["x": rowsTensor(rows: 1, marker: Float(100 + i))]) })
        }
        while version.queueDepth < 6 { await Task.yield() }
        XCTAssertEqual(version.queueDepth, 6)
        for i in stride(from: 0, to: 6, by: 2) { tasks[i].cancel() }
        for i in stride(from: 0, to: 6, by: 2) { _ = await tasks[i].result }
        hold.open()
        for (i, task) in tasks.enumerated() {
            let result = await task.result
            if i % 2 == 0 {
                XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
            } else {
                XCTAssertEqual(try result.get()["y"]?.scalars(as: Float.self).first, Float(100 + i) * 2)
            }
        }
        _ = try await busy.value
        let executed = runtime.executedRowMarkers.withLock { $0 }
        XCTAssertEqual(executed.filter { $0 >= 100 }.sorted(), [101, 103, 105], "cancelled rows were computed: \(executed)")
    }

    func testStreamedRowsAnswerEachRequestWithItsOwnRowsAndCountEachBatch() async throws {
        let runtime = ScaleRuntime(scale: 3, sleepMilliseconds: 2, streams: true)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#)
        try await Self.inferConcurrently(version, scale: 3)
        let runs = runtime.batches.withLock { $0 }
        XCTAssertEqual(runs.reduce(0, +), 48, "every row computed once")
        XCTAssertTrue(runs.allSatisfy { $0 == 1 }, "streamed rows run one at a time: \(runs)")
        XCTAssertEqual(runtime.concurrentRuns.withLock { $0.most }, 2, "two rows compute at once")
        let stats = version.statistics
        XCTAssertEqual(stats.success.count, 24)
        XCTAssertEqual(stats.inferenceCount, 48)
        XCTAssertLessThan(stats.executionCount, 24, "each execution counted is a batch of several requests")
        XCTAssertEqual(stats.batchStatistics.reduce(0) { $0 + $1.computeInfer.count }, stats.executionCount)
        XCTAssertEqual(stats.batchStatistics.reduce(0) { $0 + UInt64($1.batchSize) * $1.computeInfer.count }, 48)
        XCTAssertTrue(stats.batchStatistics.allSatisfy { $0.batchSize <= 4 }, "\(stats.batchStatistics.map(\.batchSize))")
    }

    func testAStreamedRowFailureReachesItsRequest() async throws {
        let runtime = ScaleRuntime(scale: 2, sleepMilliseconds: 1, failRuns: true, streams: true)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#)
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    do {
                        _ = try await version.infer(["x": rowsTensor(rows: 2, marker: Float(i))])
                        XCTFail("a failed run answered")
                    } catch {
                        XCTAssertTrue("\(error)".contains("runFailed"), "\(error)")
                    }
                }
            }
        }
        XCTAssertEqual(version.statistics.fail.count, 8)
    }

    func testStreamJobsStackSeveralRowsAndAnswerEachRequestWithItsOwnRows() async throws {
        let runtime = ScaleRuntime(scale: 3, sleepMilliseconds: 2, streams: true, jobRows: 3)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#)
        try await Self.inferConcurrently(version, scale: 3)
        let runs = runtime.batches.withLock { $0 }
        XCTAssertEqual(runs.reduce(0, +), 48, "every row computed once")
        XCTAssertTrue(runs.allSatisfy { $0 <= 3 }, "a job takes at most the runtime's rows: \(runs)")
        XCTAssertTrue(runs.contains { $0 > 1 }, "rows of a batch stack into one job: \(runs)")
        let stats = version.statistics
        XCTAssertEqual(stats.success.count, 24)
        XCTAssertEqual(stats.inferenceCount, 48)
        XCTAssertEqual(stats.batchStatistics.reduce(0) { $0 + UInt64($1.batchSize) * $1.computeInfer.count }, 48)
    }

    func testAStreamJobWhoseOutputsDoNotKeepItsRowsRunsEachRowAlone() async throws {
        // y sums the rows of whatever it is given: right for one row, not for a stacked job.
        final class SummingRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(1)])]
            let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(1)])]
            let runs = Locked<[Int]>([])
            func streamsRows(_ requests: [[String: Tensor]]) -> Bool { true }
            func streamJobRows(queued: Int, computing: Int) -> Int { 4 }
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                let x = feeds["x"]!.scalars(as: Float.self)
                runs.withLock { $0.append(x.count) }
                return ["y": Tensor(shape: [1, 1], scalars: [x.reduce(0, +)])]
            }
        }
        let runtime = SummingRuntime()
        // The four requests make the first batch (its preferred size), so the first job stacks all four.
        let config = #"{"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 5000000}}"#
        let version = try ServedVersion(name: "s", version: 1, config: try ModelConfig(json: Array(config.utf8)),
                                        labels: [], runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<4 {
                group.addTask {
                    let y = try await version.infer(["x": Tensor(shape: [1, 1], scalars: [Float(i + 1)])])["y"]
                    XCTAssertEqual(y?.scalars(as: Float.self), [Float(i + 1)], "request \(i) got its own row")
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(runtime.runs.withLock { $0 }, [4, 1, 1, 1, 1], "the stacked job, then each row alone")
    }

    func testAStreamEndsOnEveryThreadOnceOneFoundNothingLeft() async throws {
        // Two stream threads played in turn: the first computes the only row and leaves; a request arrives; only then
        // does the second ask. The stream is over for it (it must not stream the new row alone): the new request
        // starts an execution of its own on every thread.
        final class TurnTakingRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(1)])]
            let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(1)])]
            let streams = Locked(0)
            let lateThreadGotAJob = Locked<Bool?>(nil)
            let arrival: @Sendable () -> Void
            init(arrival: @escaping @Sendable () -> Void) { self.arrival = arrival }
            func streamsRows(_ requests: [[String: Tensor]]) -> Bool { true }
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                ["y": Tensor(shape: feeds["x"]!.shape, scalars: feeds["x"]!.scalars(as: Float.self).map { $0 * 2 })]
            }
            func runRowStream(_ next: () -> (() -> Void)?) {
                let first = streams.withLock { (n: inout Int) -> Bool in n += 1; return n == 1 }
                while let job = next() { job() }
                guard first else { return }
                arrival()
                let late = next()
                lateThreadGotAJob.withLock { $0 = late != nil }
                late?()
                while let job = next() { job() }
            }
        }
        // The late request's task, handed over once the first thread has left (the first answer may come back before).
        let (arrivals, arrived) = AsyncStream<Task<[String: Tensor], Error>>.makeStream()
        let box = Locked<ServedVersion?>(nil)
        let runtime = TurnTakingRuntime(arrival: {
            let version = box.withLock { $0! }
            arrived.yield(Task { try await version.infer(["x": Tensor(shape: [1, 1], scalars: [Float(5)])]) })
            // Queued, not taken: the first thread has left and the second has not asked yet.
            while version.queueDepth == 0 { sched_yield() }
        })
        let version = try ServedVersion(name: "s", version: 1, config: try ModelConfig(json: Array(#"{"max_batch_size": 4}"#.utf8)),
                                        labels: [], runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        box.withLock { $0 = version }
        let first = try await version.infer(["x": Tensor(shape: [1, 1], scalars: [Float(3)])])
        XCTAssertEqual(first["y"]?.scalars(as: Float.self), [6])
        var handedOver = arrivals.makeAsyncIterator()
        let handed = await handedOver.next()
        let late = try await XCTUnwrap(handed).value
        XCTAssertEqual(late["y"]?.scalars(as: Float.self), [10])
        XCTAssertEqual(runtime.lateThreadGotAJob.withLock { $0 }, false, "the second thread streamed on alone")
        XCTAssertEqual(runtime.streams.withLock { $0 }, 2, "the late request ran in an execution of its own")
        XCTAssertEqual(version.statistics.executionCount, 2)
    }

    func testTwoInstancesStreamOneAtATimeAndAnswerEveryRequest() async throws {
        let runtime = ScaleRuntime(scale: 3, sleepMilliseconds: 2, streams: true)
        let version = try makeVersion(runtime, config: #"{"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 20000}, "instance_group": [{"count": 2}]}"#,
                                      gate: ComputeGate(slots: 2))
        try await Self.inferConcurrently(version, scale: 3)
        XCTAssertEqual(runtime.batches.withLock { $0 }.reduce(0, +), 48, "every row computed once")
        XCTAssertEqual(version.statistics.inferenceCount, 48)
    }

    func testStreamedRowsWhoseOutputsDifferInShapeRunTheRequestWhole() async throws {
        // y's width follows the first row's value: rows run alone may not stack into one output.
        final class RaggedRuntime: ModelRuntime, @unchecked Sendable {
            let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(1)])]
            let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .symbolic("W")])]
            func streamsRows(_ requests: [[String: Tensor]]) -> Bool { true }
            func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
                let x = feeds["x"]!.scalars(as: Float.self)
                let width = Int(x[0])
                return ["y": Tensor(shape: [x.count, width], scalars: x.flatMap { Array(repeating: $0, count: width) })]
            }
        }
        let version = try ServedVersion(name: "r", version: 1, config: try ModelConfig(json: Array(#"{"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#.utf8)),
                                        labels: [], runtime: RaggedRuntime(), gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        let output = try await version.infer(["x": Tensor(shape: [2, 1], scalars: [Float(2), 3])])
        let y = try XCTUnwrap(output["y"])
        XCTAssertEqual(y.shape, [2, 2], "the request ran whole")
        XCTAssertEqual(y.scalars(as: Float.self), [2, 2, 3, 3])
    }

    /// Sends 24 requests of 1 to 3 rows (48 rows) at once; each must get its own rows times `scale`.
    private static func inferConcurrently(_ version: ServedVersion, scale: Float) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<24 {
                group.addTask {
                    let rows = i % 3 + 1
                    let input = rowsTensor(rows: rows, marker: Float(i * 10))
                    let output = try await version.infer(["x": input])
                    let y = try XCTUnwrap(output["y"])
                    XCTAssertEqual(y.shape, [rows, 4])
                    XCTAssertEqual(y.scalars(as: Float.self), input.scalars(as: Float.self).map { $0 * scale })
                }
            }
            try await group.waitForAll()
        }
    }
}
