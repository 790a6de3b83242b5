import Infrastructure
import Foundation
import XCTest
import Tensor
@testable import Serving

/// The readiness rule, swaps without gaps and the memory budget (issue 11, defects 2, 3 and 6; memory).
final class ReadinessAndSwapTests: XCTestCase {
    private func makeRegistry(_ repo: TempRepository, runtimes: LoadedRuntimes = LoadedRuntimes(), logs: LogSink = LogSink(),
                              options: RegistryOptions = RegistryOptions()) -> ModelRegistry {
        ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(runtimes), options: options, logger: logs.logger)
    }

    private static func scale(_ registry: ModelRegistry, _ model: String) async throws -> Float {
        let served = try registry.resolve(model: model)
        return try await served.infer(["x": rowsTensor(rows: 1, marker: 1)])["y"]!.scalars(as: Float.self)[0]
    }

    private func scaleOf(_ registry: ModelRegistry, _ model: String) async throws -> Float {
        try await Self.scale(registry, model)
    }

    func testReadinessWaitsForRequiredModelsOnly() async throws {
        let repo = TempRepository()
        repo.addVersion("good", 1, "scale=1")
        repo.addVersion("good", 2, "garbage")  // a failed newer version while another serves
        try FileManager.default.createDirectory(atPath: repo.path + "/good/3", withIntermediateDirectories: true)  // a partial one
        repo.addVersion("broken", 1, "garbage")
        try FileManager.default.createDirectory(atPath: repo.path + "/empty", withIntermediateDirectories: true)

        let byDefault = makeRegistry(repo)
        await byDefault.loadAll()
        XCTAssertEqual(byDefault.requiredModels, ["broken", "good"], "every model whose directory held a version at start")
        XCTAssertFalse(byDefault.isReady, "a required model with no READY version")

        let named = makeRegistry(repo, options: RegistryOptions(requiredModels: ["good"]))
        await named.loadAll()
        XCTAssertTrue(named.isReady)
        XCTAssertEqual(named.index().first { $0.name == "broken" }?.state, .failed)

        let missing = makeRegistry(repo, options: RegistryOptions(requiredModels: ["good", "absent"]))
        await missing.loadAll()
        XCTAssertFalse(missing.isReady, "a required model that is not in the repository")
        try FileManager.default.removeItem(atPath: repo.path + "/broken")
        repo.addVersion("absent", 1, "scale=3")
        await missing.poll()
        XCTAssertTrue(missing.isReady)
    }

    func testModelsAddedLaterNeverTakeReadinessDown() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        XCTAssertTrue(registry.isReady)
        repo.addVersion("late", 1, "garbage")
        await registry.poll()
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.index().first { $0.name == "late" }?.state, .failed)
        try? await registry.putVersion(model: "uploaded", version: 1, bytes: Array("garbage".utf8))
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.requiredModels, ["m"])
    }

    func testEmptyRepositoryWithNothingRequiredIsReady() async {
        let repo = TempRepository()
        try? FileManager.default.createDirectory(atPath: repo.path + "/shell/1", withIntermediateDirectories: true)
        let registry = makeRegistry(repo)
        await registry.loadAll()
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.requiredModels, [])
    }

    func testDeletingTheServingVersionThenLoadingHasNoGap() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1 loadsleep=200")
        repo.addVersion("m", 2, "scale=2")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        XCTAssertEqual(try registry.resolve(model: "m").version, 2)

        let stop = Locked(false)
        let failures = Locked<[String]>([])
        let answers = Locked<[Float]>([])
        let clients = (0..<4).map { _ in
            Task {
                while !stop.withLock({ $0 }) {
                    do {
                        let scale = try await ReadinessAndSwapTests.scale(registry, "m")
                        answers.withLock { $0.append(scale) }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        repo.removeVersion("m", 2)
        try await registry.load(model: "m")  // version 1 takes 200 ms to load: version 2 must serve meanwhile
        let servedByOne = await eventually(10) { answers.withLock { $0.contains(1) } }
        XCTAssertTrue(servedByOne, "clients reach version 1 once it is READY")
        stop.withLock { $0 = true }
        for client in clients { await client.value }
        XCTAssertEqual(failures.withLock { $0 }, [], "no request failed during the swap")
        XCTAssertEqual(Set(answers.withLock { $0 }), [1, 2])
        XCTAssertEqual(try registry.resolve(model: "m").version, 1)
        XCTAssertEqual(registry.index().compactMap(\.version), [1], "the removed version is gone once its replacement serves")
    }

    func testLoadWithNoVersionOnDiskAnswersAnErrorAndKeepsServing() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        repo.removeVersion("m", 1)
        do {
            try await registry.load(model: "m")
            XCTFail("expected noVersionOnDisk")
        } catch let error as ServingError {
            XCTAssertEqual(error, .noVersionOnDisk(model: "m", serving: 1))
        }
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1)
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.index().first?.reason, "removed from the repository; serves until another version is ready")
        await registry.poll()
        XCTAssertTrue(registry.isReady, "polling does not drop it either")

        try FileManager.default.removeItem(atPath: repo.path + "/m")
        do {
            try await registry.load(model: "m")
            XCTFail("expected noVersionOnDisk")
        } catch let error as ServingError {
            XCTAssertEqual(error, .noVersionOnDisk(model: "m", serving: 1))
        }
        XCTAssertTrue(registry.isReady)
        // A new version on disk takes over and the removed one goes.
        repo.addVersion("m", 2, "scale=2")
        try await registry.load(model: "m")
        let replaced = try await scaleOf(registry, "m")
        XCTAssertEqual(replaced, 2)
        XCTAssertEqual(registry.index().compactMap(\.version), [2])
    }

    func testLoadWithACorruptNewerVersionAnswersAnErrorAndDoesNotSwitch() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        let serving = try XCTUnwrap(runtimes.latest("m", 1)?.value)
        repo.addVersion("m", 2, "garbage")
        do {
            try await registry.load(model: "m")
            XCTFail("expected loadFailed")
        } catch ServingError.loadFailed(_, let version, _) {
            XCTAssertEqual(version, 2)
        }
        XCTAssertTrue(try registry.resolve(model: "m").runtime as? ScaleRuntime === serving, "the same version keeps serving")
        XCTAssertEqual(registry.index().map(\.state), [.ready, .failed])
        XCTAssertTrue(registry.isReady)
    }

    func testMemoryBudgetRefusesALoadThatWouldNotFitAndKeepsServing() async throws {
        let repo = TempRepository()
        // 1000 bytes of weights + 10 bytes per row at the default 32 rows = 1320 bytes.
        repo.addVersion("m", 1, "scale=1 bytes=1000 act=10")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes, options: RegistryOptions(maxModelMemory: 2500))
        await registry.loadAll()
        XCTAssertEqual(registry.index().first?.memoryBytes, 1000 + 32 * 10)
        XCTAssertEqual(registry.loadedMemoryBytes, 1320)
        do {
            try await registry.putVersion(model: "m", version: 2, bytes: Array("scale=2 bytes=1000 act=10".utf8))
            XCTFail("expected memoryBudgetExceeded")
        } catch let error as ServingError {
            XCTAssertEqual(error, .memoryBudgetExceeded(model: "m", version: 2, needed: 1320, loaded: 1320, budget: 2500))
            XCTAssertTrue(error.description.contains("1320 bytes") && error.description.contains("2500 bytes"), error.description)
        }
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/m/2"))
        let refused = runtimes.latest("m", 2)
        let freed = await eventually { refused?.value == nil }
        XCTAssertTrue(freed, "the refused version's runtime is released")

        // A file bigger than the budget is refused before it is compiled at all.
        let big = "scale=3 " + String(repeating: "x=y ", count: 700)
        do {
            try await registry.putVersion(model: "other", version: 1, bytes: Array(big.utf8))
            XCTFail("expected memoryBudgetExceeded")
        } catch ServingError.memoryBudgetExceeded(_, _, let needed, _, _) {
            XCTAssertEqual(needed, big.utf8.count)
        }
        XCTAssertNil(runtimes.latest("other", 1))
        // Within the budget, a swap works (both versions fit during it).
        let metrics = Metrics()
        let small = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(), options: RegistryOptions(maxModelMemory: 4000), metrics: metrics)
        await small.loadAll()
        XCTAssertTrue(metrics.exposition().contains(#"osprey_model_memory_bytes{model="m",version="1"} 1320"#), metrics.exposition())
        try await small.putVersion(model: "m", version: 2, bytes: Array("scale=2 bytes=1000 act=10".utf8))
        XCTAssertEqual(small.loadedMemoryBytes, 1320)
        let text = metrics.exposition()
        XCTAssertTrue(text.contains(#"osprey_model_memory_bytes{model="m",version="2"} 1320"#), text)
        XCTAssertFalse(text.contains(#"osprey_model_memory_bytes{model="m",version="1"}"#), "the unloaded version's series goes")
    }
}
