import Foundation
import Infrastructure
import XCTest
import Engine
import Tensor
@testable import Serving

/// Which runtime entry the batcher calls: batches of a batchable model go to `runBatch` (rows independent), the rest to `run`.
final class BatchScheduleTests: XCTestCase {
    /// `y = x` that records, per execution, its rows and whether it came through `runBatch`.
    final class EntryRuntime: ModelRuntime, @unchecked Sendable {
        let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
        let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
        let calls = Locked<[(rows: Int, batched: Bool)]>([])
        func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] { record(feeds, batched: false) }
        func runBatch(_ feeds: [String: Tensor]) throws -> [String: Tensor] { record(feeds, batched: true) }
        private func record(_ feeds: [String: Tensor], batched: Bool) -> [String: Tensor] {
            calls.withLock { $0.append((feeds["x"]!.shape[0], batched)) }
            usleep(2000)
            return ["y": feeds["x"]!]
        }
    }

    private func serve(_ runtime: EntryRuntime, config: String, requests: Int) async throws {
        let version = try ServedVersion(name: "e", version: 1, config: try ModelConfig(json: Array(config.utf8)), labels: [],
                                        runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<requests {
                group.addTask {
                    let input = rowsTensor(rows: 1, marker: Float(i * 10))
                    let y = try await version.infer(["x": input])["y"]!
                    XCTAssertEqual(y.scalars(as: Float.self), input.scalars(as: Float.self))
                }
            }
            try await group.waitForAll()
        }
    }

    func testBatchesOfABatchableModelRunThroughRunBatch() async throws {
        let runtime = EntryRuntime()
        try await serve(runtime, config: #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#, requests: 12)
        let calls = runtime.calls.withLock { $0 }
        // Every execution of more than one row uses the rows' independence; a lone row runs plainly.
        XCTAssertTrue(calls.contains { $0.rows > 1 }, "\(calls)")
        XCTAssertTrue(calls.filter { $0.rows > 1 }.allSatisfy { $0.batched }, "\(calls)")
        XCTAssertTrue(calls.filter { $0.rows == 1 }.allSatisfy { !$0.batched }, "\(calls)")
    }

    func testAModelWithoutABatchAxisNeverRunsThroughRunBatch() async throws {
        let runtime = EntryRuntime()
        try await serve(runtime, config: #"{"max_batch_size": 1}"#, requests: 4)
        let calls = runtime.calls.withLock { $0 }
        XCTAssertFalse(calls.isEmpty)
        XCTAssertTrue(calls.allSatisfy { !$0.batched }, "\(calls)")
    }

    /// `y = 2x` that can run a batch's requests in place (`runBatch(requests:)`), unless told to decline or to fail.
    final class InPlaceRuntime: ModelRuntime, @unchecked Sendable {
        enum Mode { case accept, decline, fail }
        struct Failure: Error {}
        let inputs = [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
        let outputs = [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N"), .fixed(4)])]
        let mode: Mode
        /// Per execution: the requests' row counts when run in place, else the stacked rows as one entry.
        let calls = Locked<[(rows: [Int], inPlace: Bool)]>([])
        init(_ mode: Mode) { self.mode = mode }
        func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] { double(feeds) }
        func runBatch(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
            calls.withLock { $0.append(([feeds["x"]!.shape[0]], false)) }
            return double(feeds)
        }
        func runBatch(requests: [[String: Tensor]]) throws -> [[String: Tensor]]? {
            usleep(2000)
            switch mode {
            case .decline: return nil
            case .fail: throw Failure()
            case .accept:
                calls.withLock { $0.append((requests.map { $0["x"]!.shape[0] }, true)) }
                return requests.map(double)
            }
        }
        private func double(_ feeds: [String: Tensor]) -> [String: Tensor] {
            let x = feeds["x"]!
            return ["y": Tensor(shape: x.shape, scalars: x.scalars(as: Float.self).map { 2 * $0 })]
        }
    }

    /// Serves `requests` requests of 1, 2, 1, 2... rows; returns how many failed (each success checked: its own rows, doubled).
    private func serveMixedRows(_ runtime: InPlaceRuntime, requests: Int) async throws -> Int {
        let config = #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 20000}}"#
        let version = try ServedVersion(name: "p", version: 1, config: try ModelConfig(json: Array(config.utf8)), labels: [],
                                        runtime: runtime, gate: ComputeGate(), metrics: nil, loadSeconds: 0)
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<requests {
                group.addTask {
                    let input = rowsTensor(rows: 1 + i % 2, marker: Float(i * 10))
                    do {
                        let y = try await version.infer(["x": input])["y"]!
                        XCTAssertEqual(y.shape, input.shape)
                        XCTAssertEqual(y.scalars(as: Float.self), input.scalars(as: Float.self).map { 2 * $0 })
                        return 0
                    } catch {
                        XCTAssertTrue(error is ServingError, "\(error)")
                        return 1
                    }
                }
            }
            return try await group.reduce(0, +)
        }
    }

    func testBatchesRunInPlaceWhenTheRuntimeCan() async throws {
        let runtime = InPlaceRuntime(.accept)
        let failed = try await serveMixedRows(runtime, requests: 12)
        XCTAssertEqual(failed, 0)
        let calls = runtime.calls.withLock { $0 }
        // Each in-place execution gets the requests as they came (mixed row counts), none stacked first.
        XCTAssertTrue(calls.contains { $0.inPlace && $0.rows.count > 1 }, "\(calls)")
        XCTAssertTrue(calls.filter { !$0.inPlace }.allSatisfy { $0.rows == [2] }, "only a lone 2-row request runs stacked: \(calls)")
        XCTAssertTrue(calls.contains { $0.rows.contains(1) && $0.rows.contains(2) }, "\(calls)")
    }

    func testADeclinedInPlaceRunStacksTheBatch() async throws {
        let runtime = InPlaceRuntime(.decline)
        let failed = try await serveMixedRows(runtime, requests: 12)
        XCTAssertEqual(failed, 0)
        let calls = runtime.calls.withLock { $0 }
        XCTAssertTrue(calls.contains { !$0.inPlace && $0.rows[0] > 2 }, "\(calls)")
        XCTAssertTrue(calls.allSatisfy { !$0.inPlace }, "\(calls)")
    }

    func testAFailedInPlaceRunFailsEveryRequestOfTheBatch() async throws {
        let runtime = InPlaceRuntime(.fail)
        // Lone requests run plainly and succeed; every request of a batch of several gets the failure, none hangs.
        let failed = try await serveMixedRows(runtime, requests: 12)
        XCTAssertGreaterThan(failed, 1)
        // A failed batch is not rerun stacked: the only stacked runs are lone requests of 2 rows.
        XCTAssertTrue(runtime.calls.withLock { $0 }.allSatisfy { !$0.inPlace && $0.rows[0] <= 2 })
    }
}
