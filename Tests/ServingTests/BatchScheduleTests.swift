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
}
