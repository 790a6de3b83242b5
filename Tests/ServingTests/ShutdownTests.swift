import Infrastructure
import XCTest
@testable import Serving

/// The models' part of the shutdown: versions unloaded, their batchers drain and stop, the gate says so.
final class ShutdownTests: XCTestCase {
    func testABatcherFinishesOnceItsVersionIsReleased() async throws {
        let gate = ComputeGate()
        var version: ServedVersion? = try makeVersion(ScaleRuntime(scale: 2), gate: gate)
        XCTAssertEqual(gate.runningBatchers, 1)
        let y = try await version?.infer(["x": rowsTensor(rows: 1, marker: 3)])["y"]
        XCTAssertEqual(y?.scalars(as: Float.self), [6, 6, 6, 6])
        version = nil
        await gate.batchersFinished()
        XCTAssertEqual(gate.runningBatchers, 0)
    }

    func testUnloadAllStopsEveryBatcherAndQueuedRequestsStillRun() async throws {
        let repo = TempRepository()
        repo.addVersion("a", 1, "scale=2")
        repo.addVersion("b", 1, "scale=3")
        let options = RegistryOptions()
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(), options: options)
        await registry.loadAll()
        XCTAssertEqual(options.computeGate.runningBatchers, 2)
        // A request admitted before the unload keeps its version and is answered.
        let admitted = try registry.resolve(model: "a")
        await registry.unloadAll()
        XCTAssertThrowsError(try registry.resolve(model: "a"))
        let y = try await admitted.infer(["x": rowsTensor(rows: 1, marker: 1)])["y"]
        XCTAssertEqual(y?.scalars(as: Float.self), [2, 2, 2, 2])
        XCTAssertGreaterThanOrEqual(options.computeGate.runningBatchers, 1, "the batcher of the version still referenced runs")
        _ = consume admitted
        await options.computeGate.batchersFinished()
        XCTAssertEqual(options.computeGate.runningBatchers, 0)
    }

    func testUnloadAllWaitsForTheBatchersAtMostTheTimeout() async throws {
        let repo = TempRepository()
        repo.addVersion("a", 1, "scale=2")
        let options = RegistryOptions()
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(), options: options)
        await registry.loadAll()
        // A version still referenced keeps its batcher: the wait ends at the timeout and says one still runs.
        let admitted = try registry.resolve(model: "a")
        let stillRunning = await registry.unloadAll(waitingAtMost: 0.05)
        XCTAssertEqual(stillRunning, 1)
        _ = consume admitted
        let nowRunning = await registry.unloadAll(waitingAtMost: 60)
        XCTAssertEqual(nowRunning, 0, "returns once the last batcher has stopped, long before the timeout")
    }

    func testWaitingForBatchersEndsWhenCancelled() async throws {
        let gate = ComputeGate()
        let version = try makeVersion(ScaleRuntime(scale: 1), gate: gate)
        let waiter = Task { await gate.batchersFinished() }
        waiter.cancel()
        await waiter.value
        XCTAssertEqual(gate.runningBatchers, 1)
        withExtendedLifetime(version) {}
    }
}
