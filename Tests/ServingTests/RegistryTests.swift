import Infrastructure
import Foundation
import XCTest
import Tensor
@testable import Serving

final class RegistryTests: XCTestCase {
    private func makeRegistry(_ repo: TempRepository, runtimes: LoadedRuntimes = LoadedRuntimes(), logs: LogSink = LogSink(),
                              metrics: Metrics? = nil, options: RegistryOptions = RegistryOptions()) -> ModelRegistry {
        ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(runtimes), options: options, metrics: metrics, logger: logs.logger)
    }

    private func scaleOf(_ registry: ModelRegistry, _ model: String, version: Int? = nil) async throws -> Float {
        let served = try registry.resolve(model: model, version: version)
        let y = try await served.infer(["x": rowsTensor(rows: 1, marker: 1)])["y"]!
        return y.scalars(as: Float.self)[0]
    }

    func testEmptyRepositoryIsReady() async {
        let repo = TempRepository()
        let registry = makeRegistry(repo)
        await registry.loadAll()
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.index(), [])
        XCTAssertThrowsError(try registry.resolve(model: "nope")) {
            XCTAssertEqual($0 as? ServingError, .modelNotFound(model: "nope"))
        }
    }

    func testLoadAllServesLatestVersionWithConfigAndLabels() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        repo.addVersion("m", 2, "scale=2")
        repo.setConfig("m", #"{"max_batch_size": 4, "output": {"probabilities": false}}"#)
        repo.setLabels("m", "cat\ndog\r\nbird\n")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        XCTAssertTrue(registry.isReady)
        XCTAssertEqual(registry.index(), [
            ModelIndexEntry(name: "m", version: 1, state: .unavailable, reason: "not selected by the version policy"),
            ModelIndexEntry(name: "m", version: 2, state: .ready, reason: nil, memoryBytes: 0),
        ])
        let served = try registry.resolve(model: "m")
        XCTAssertEqual(served.version, 2)
        XCTAssertEqual(served.labels, ["cat", "dog", "bird"])
        XCTAssertEqual(served.maxBatchSize, 4)
        XCTAssertEqual(served.config.outputsAreProbabilities, false)
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 2)
        // The warm-up ran once on zeros with batch 1 before READY.
        let runtime = try XCTUnwrap(runtimes.latest("m", 2)?.value)
        XCTAssertEqual(runtime.batches.withLock { $0 }.first, 1)
        XCTAssertEqual(runtime.executedRowMarkers.withLock { $0 }.first, 0)
        XCTAssertThrowsError(try registry.resolve(model: "m", version: 1)) {
            XCTAssertEqual($0 as? ServingError, .notReady(model: "m", version: 1, reason: "not selected by the version policy"))
        }
        XCTAssertThrowsError(try registry.resolve(model: "m", version: 9)) {
            XCTAssertEqual($0 as? ServingError, .versionNotFound(model: "m", version: 9))
        }
        XCTAssertNil(runtimes.latest("m", 1), "versions outside the policy are never loaded")
        XCTAssertEqual(try registry.versions(of: "m").map(\.version), [1, 2])
        XCTAssertTrue(registry.isModelReady(model: "m"))
        XCTAssertTrue(registry.isModelReady(model: "m", version: 2))
        XCTAssertFalse(registry.isModelReady(model: "m", version: 1))
        XCTAssertFalse(registry.isModelReady(model: "zz"))
    }

    func testVersionPolicies() async throws {
        let repo = TempRepository()
        for v in 1...3 {
            repo.addVersion("all", v, "scale=\(v)")
            repo.addVersion("two", v, "scale=\(v)")
            repo.addVersion("pick", v, "scale=\(v)")
        }
        repo.setConfig("all", #"{"version_policy": {"all": {}}}"#)
        repo.setConfig("two", #"{"version_policy": {"latest": {"num_versions": 2}}}"#)
        repo.setConfig("pick", #"{"version_policy": {"specific": {"versions": [1, 3, 7]}}}"#)
        let registry = makeRegistry(repo)
        await registry.loadAll()
        func ready(_ model: String) -> [Int] {
            registry.index().filter { $0.name == model && $0.state == .ready }.compactMap(\.version)
        }
        XCTAssertEqual(ready("all"), [1, 2, 3])
        XCTAssertEqual(ready("two"), [2, 3])
        XCTAssertEqual(ready("pick"), [1, 3])
        let explicit = try await scaleOf(registry, "all", version: 1)
        XCTAssertEqual(explicit, 1)
        let defaulted = try await scaleOf(registry, "pick")
        XCTAssertEqual(defaulted, 3)
    }

    func testLatestPolicySkipsABrokenNewestVersionAndUnpinReturnsToIt() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        repo.addVersion("m", 2, "scale=2")
        repo.addVersion("m", 3, "garbage")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        // Version 3 fails, so "latest 1" serves the newest version that works.
        let startup = try await scaleOf(registry, "m")
        XCTAssertEqual(startup, 2)
        XCTAssertEqual(registry.index().first { $0.version == 3 }?.state, .failed)
        try await registry.pin(model: "m", version: 1)
        let pinned = try await scaleOf(registry, "m")
        XCTAssertEqual(pinned, 1)
        XCTAssertEqual(registry.index().first { $0.version == 2 }?.state, .ready, "the policy's version stays loaded while pinned")
        try await registry.unpin(model: "m")
        let unpinned = try await scaleOf(registry, "m")
        XCTAssertEqual(unpinned, 2)
        XCTAssertEqual(registry.index().first { $0.version == 1 }?.state, .unavailable)
    }

    func testFailedLoadKeepsTheServedVersionAndReportsWhy() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let logs = LogSink()
        let registry = makeRegistry(repo, logs: logs)
        await registry.loadAll()
        do {
            try await registry.putVersion(model: "m", version: 2, bytes: Array("garbage".utf8))
            XCTFail("expected loadFailed")
        } catch ServingError.loadFailed(let model, let version, let reason) {
            XCTAssertEqual(model, "m")
            XCTAssertEqual(version, 2)
            XCTAssertTrue(reason.contains("not a model file"), reason)
        }
        XCTAssertTrue(registry.isReady)
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1, "version 1 keeps serving")
        XCTAssertNil(registry.index().first { $0.version == 2 }, "a refused upload never reaches the repository")
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/m/2"))
        XCTAssertEqual(registry.index().first { $0.version == 1 }?.state, .ready)
        XCTAssertTrue(logs.messages(atLeast: .error).contains { $0.contains("version 2 failed to load") && $0.contains("nothing stored") },
                      "\(logs.messages(atLeast: .error))")

        // A warm-up failure also keeps version 1.
        repo.addVersion("m", 3, "scale=3 fail=1")
        do {
            try await registry.load(model: "m")
            XCTFail("expected loadFailed")
        } catch ServingError.loadFailed(_, let version, let reason) {
            XCTAssertEqual(version, 3)
            XCTAssertTrue(reason.contains("warm-up"), reason)
        }
        let stillOne = try await scaleOf(registry, "m")
        XCTAssertEqual(stillOne, 1)
        // A polling pass does not retry the same broken file.
        let errorsBefore = logs.messages(atLeast: .error).count
        await registry.poll()
        XCTAssertEqual(logs.messages(atLeast: .error).count, errorsBefore)
    }

    func testHotSwapUnderLoadHasNoFailuresAndFreesTheOldVersion() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1 sleep=1")
        repo.setConfig("m", #"{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 2000}}"#)
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        let oldRuntime = try XCTUnwrap(runtimes.latest("m", 1))
        XCTAssertNotNil(oldRuntime.value)

        let stop = Locked(false)
        let results = Locked<[Float]>([])
        let failures = Locked<[String]>([])
        let clients = (0..<6).map { client in
            Task {
                var i = 0
                while !stop.withLock({ $0 }) {
                    do {
                        let served = try registry.resolve(model: "m")
                        let marker = Float(client * 10_000 + i + 1)
                        let y = try await served.infer(["x": rowsTensor(rows: 1, marker: marker)])["y"]!
                        let factor = y.scalars(as: Float.self)[0] / marker
                        results.withLock { $0.append(factor) }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                    i += 1
                }
            }
        }
        // Ordered by events, not by sleeping: version 1 has answered before the upload, version 2 after it.
        let servedOne = await eventually(10) { results.withLock { $0.count } >= 12 }
        XCTAssertTrue(servedOne, "clients were answered by version 1 before the swap")
        let newBytes = Array("scale=2 sleep=1".utf8)
        try await registry.putVersion(model: "m", version: 2, bytes: newBytes, sha256: SHA256.hexDigest(newBytes).uppercased())
        let servedTwo = await eventually(10) { results.withLock { $0.contains(2) } }
        XCTAssertTrue(servedTwo, "clients were answered by version 2 after the swap")
        stop.withLock { $0 = true }
        for client in clients { await client.value }

        XCTAssertEqual(failures.withLock { $0 }, [])
        let factors = results.withLock { $0 }
        XCTAssertTrue(factors.allSatisfy { $0 == 1 || $0 == 2 })
        let firstTwo = try XCTUnwrap(factors.firstIndex(of: 2), "responses moved to version 2")
        XCTAssertGreaterThan(firstTwo, 0)
        XCTAssertEqual(try registry.resolve(model: "m").version, 2)
        XCTAssertEqual(registry.index().map(\.state), [.unavailable, .ready])
        let freed = await eventually { oldRuntime.value == nil }
        XCTAssertTrue(freed, "the replaced version's runtime is released after its last request")
    }

    func testAdmittedRequestsFinishOnTheirVersionAfterUnload() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=5 sleep=150")
        repo.setConfig("m", #"{"max_batch_size": 1}"#)
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        let weak = try XCTUnwrap(runtimes.latest("m", 1))
        try await requestAcrossUnload(registry, weak)
        // With the admitted request answered and its reference dropped, the runtime goes.
        let freed = await eventually { weak.value == nil }
        XCTAssertTrue(freed)

        await registry.poll()
        XCTAssertThrowsError(try registry.resolve(model: "m"), "polling leaves an unloaded model alone")
        try await registry.load(model: "m")
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 5)
    }

    private func requestAcrossUnload(_ registry: ModelRegistry, _ weak: LoadedRuntimes.Weak) async throws {
        let served = try registry.resolve(model: "m")
        let inflight = Task { try await served.infer(["x": rowsTensor(rows: 1, marker: 1)]) }
        // Unload only once the request is executing (its marker reached the runtime; warm-up runs carry zeros).
        let executing = await eventually(10) { weak.value?.executedRowMarkers.withLock { $0.contains(1) } == true }
        XCTAssertTrue(executing)
        try await registry.unload(model: "m")
        XCTAssertThrowsError(try registry.resolve(model: "m")) {
            guard case ServingError.notReady = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertTrue(registry.isReady, "explicitly unloaded models do not count against readiness")
        XCTAssertEqual(registry.index().first?.state, .unavailable)
        let y = try await inflight.value["y"]!
        XCTAssertEqual(y.scalars(as: Float.self)[0], 5, "the admitted request finished on its version")
        XCTAssertNotNil(weak.value, "still referenced by `served`")
    }

    func testUnloadDuringLoadWins() async throws {
        let repo = TempRepository()
        for v in 1...3 { repo.addVersion("m", v, "scale=\(v) loadsleep=100") }
        repo.setConfig("m", #"{"version_policy": {"all": {}}}"#)
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        let loading = Task { try await registry.load(model: "m") }
        let started = await eventually { registry.index().contains { $0.state == .loading } }
        XCTAssertTrue(started)
        try await registry.unload(model: "m")
        _ = try? await loading.value
        XCTAssertEqual(registry.index().map(\.state), [.unavailable, .unavailable, .unavailable])
        XCTAssertThrowsError(try registry.resolve(model: "m"))
        XCTAssertNil(runtimes.latest("m", 2), "no further version is loaded after the unload")
        let discarded = runtimes.latest("m", 3)
        let freed = await eventually { discarded?.value == nil }
        XCTAssertTrue(freed, "the version that finished loading after the unload is discarded")
    }

    func testPinUnpinAndRollback() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        repo.addVersion("m", 2, "scale=2")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        let before = try await scaleOf(registry, "m")
        XCTAssertEqual(before, 2)
        try await registry.pin(model: "m", version: 1)
        let pinned = await registry.pinnedVersion(model: "m")
        XCTAssertEqual(pinned, 1)
        let rolledBack = try await scaleOf(registry, "m")
        XCTAssertEqual(rolledBack, 1, "pinning an older version rolls back")
        XCTAssertEqual(registry.index().map(\.state), [.ready, .ready])
        // A new version arriving while pinned loads but does not take over.
        try await registry.putVersion(model: "m", version: 3, bytes: Array("scale=3".utf8))
        let stillPinned = try await scaleOf(registry, "m")
        XCTAssertEqual(stillPinned, 1)
        try await registry.unpin(model: "m")
        let latest = try await scaleOf(registry, "m")
        XCTAssertEqual(latest, 3)
        XCTAssertEqual(registry.index().map(\.state), [.unavailable, .unavailable, .ready])

        do {
            try await registry.pin(model: "m", version: 9)
            XCTFail("expected versionNotFound")
        } catch let error as ServingError {
            XCTAssertEqual(error, .versionNotFound(model: "m", version: 9))
        }
        repo.addVersion("m", 4, "broken")
        do {
            try await registry.pin(model: "m", version: 4)
            XCTFail("expected a load failure")
        } catch ServingError.loadFailed(_, let version, _) {
            XCTAssertEqual(version, 4)
        }
        let pinnedAfterFailure = await registry.pinnedVersion(model: "m")
        XCTAssertNil(pinnedAfterFailure)
        let unchanged = try await scaleOf(registry, "m")
        XCTAssertEqual(unchanged, 3)
    }

    func testPutVersionVerifiesDigestAndWritesAtomically() async throws {
        let repo = TempRepository()
        let registry = makeRegistry(repo)
        await registry.loadAll()
        let bytes = Array("scale=7".utf8)
        do {
            try await registry.putVersion(model: "new", version: 1, bytes: bytes, sha256: String(repeating: "0", count: 64))
            XCTFail("expected digestMismatch")
        } catch let error as ServingError {
            XCTAssertEqual(error, .digestMismatch(expected: String(repeating: "0", count: 64), got: SHA256.hexDigest(bytes)))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/new"), "nothing written on a bad digest")
        for bad in ["../evil", "", ".."] {
            do {
                try await registry.putVersion(model: bad, version: 1, bytes: bytes)
                XCTFail("expected invalidName for \(bad)")
            } catch ServingError.invalidName {}
        }
        do {
            try await registry.putVersion(model: "new", version: 0, bytes: bytes)
            XCTFail("expected invalidName")
        } catch ServingError.invalidName {}

        try await registry.putVersion(model: "new", version: 1, bytes: bytes, sha256: "sha256:" + SHA256.hexDigest(bytes))
        let directory = repo.path + "/new/1"
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["model.onnx"], "no temp file left")
        XCTAssertEqual(FileManager.default.contents(atPath: directory + "/model.onnx").map { [UInt8]($0) }, bytes)
        let scale = try await scaleOf(registry, "new")
        XCTAssertEqual(scale, 7)
        XCTAssertTrue(registry.isReady)

        // Replacing the file of the served version reloads it in place.
        try await registry.putVersion(model: "new", version: 1, bytes: Array("scale=8".utf8), replace: true)
        let replaced = try await scaleOf(registry, "new")
        XCTAssertEqual(replaced, 8)
    }

    func testConfigErrorsAndMismatchesAreReported() async throws {
        let repo = TempRepository()
        repo.addVersion("badjson", 1, "scale=1")
        repo.setConfig("badjson", #"{"max_batch_size": "lots"}"#)
        repo.addVersion("fixed", 1, "scale=1 fixed=1")
        repo.setConfig("fixed", #"{"max_batch_size": 8}"#)
        repo.addVersion("fine", 1, "scale=1")
        try FileManager.default.createDirectory(atPath: repo.path + "/empty", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: repo.path + "/bad name", withIntermediateDirectories: true)
        let logs = LogSink()
        let registry = makeRegistry(repo, logs: logs)
        await registry.loadAll()
        XCTAssertFalse(registry.isReady)
        XCTAssertEqual(registry.modelNames, ["badjson", "empty", "fine", "fixed"])
        let index = registry.index()
        let badjson = try XCTUnwrap(index.first { $0.name == "badjson" })
        XCTAssertEqual(badjson.state, .failed)
        XCTAssertEqual(badjson.reason, #"invalid config.json: config key 'max_batch_size': expected an integer >= 0, got "lots""#)
        let fixed = try XCTUnwrap(index.first { $0.name == "fixed" })
        XCTAssertEqual(fixed.state, .failed)
        XCTAssertTrue(fixed.reason?.contains("max_batch_size") == true, "\(fixed)")
        XCTAssertEqual(index.first { $0.name == "empty" }?.state, .unavailable)
        XCTAssertEqual(index.first { $0.name == "empty" }?.version, nil)
        XCTAssertEqual(index.first { $0.name == "fine" }?.state, .ready)
        XCTAssertTrue(logs.messages(atLeast: .warning).contains { $0.contains("bad name") })
        do {
            _ = try registry.resolve(model: "badjson")
            XCTFail("expected notReady")
        } catch ServingError.notReady(_, let version, let reason) {
            XCTAssertNil(version)
            XCTAssertTrue(reason.contains("max_batch_size"), reason)
        }
        do {
            try await registry.load(model: "badjson")
            XCTFail("expected invalidConfig")
        } catch ServingError.invalidConfig(let key, _, _) {
            XCTAssertEqual(key, "max_batch_size")
        }
        // Fixing the config and reloading brings it up.
        repo.setConfig("badjson", #"{"max_batch_size": 2}"#)
        try await registry.load(model: "badjson")
        XCTAssertEqual(try registry.resolve(model: "badjson").maxBatchSize, 2)
    }

    func testInvalidConfigChangeKeepsServingTheLoadedVersion() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        repo.setConfig("m", "{broken")
        await registry.poll()
        XCTAssertTrue(registry.isReady)
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1)
        // A valid config change reloads the version with the new settings.
        let original = try XCTUnwrap(runtimes.latest("m", 1)?.value)
        repo.setConfig("m", #"{"max_batch_size": 3}"#)
        await registry.poll()
        XCTAssertEqual(try registry.resolve(model: "m").maxBatchSize, 3)
        XCTAssertTrue(runtimes.latest("m", 1)?.value === original, "the runtime is reused, not reloaded")
        repo.setLabels("m", "a\nb\n")
        await registry.poll()
        XCTAssertEqual(try registry.resolve(model: "m").labels, ["a", "b"])
        // A config the model cannot honour is refused; the current version keeps serving.
        repo.setConfig("m", #"{"max_batch_size": 3, "dynamic_batching": {"preferred_batch_size": [4]}}"#)
        await registry.poll()
        XCTAssertEqual(try registry.resolve(model: "m").maxBatchSize, 3)
    }

    func testPollingPicksUpAddedAndRemovedVersionsAndModels() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes, options: RegistryOptions(pollInterval: .milliseconds(20)))
        await registry.loadAll()
        let poller = Task { await registry.run() }
        defer { poller.cancel() }

        repo.addVersion("m", 2, "scale=2")
        repo.addVersion("other", 1, "scale=9")
        let swapped = await eventually { (try? registry.resolve(model: "m").version) == 2 && (try? registry.resolve(model: "other")) != nil }
        XCTAssertTrue(swapped)
        let weakTwo = try XCTUnwrap(runtimes.latest("m", 2))

        repo.removeVersion("m", 2)
        let fellBack = await eventually { registry.index().filter { $0.name == "m" }.map(\.version) == [1] && (try? registry.resolve(model: "m").version) == 1 }
        XCTAssertTrue(fellBack, "\(registry.index())")
        let freed = await eventually { weakTwo.value == nil }
        XCTAssertTrue(freed)

        try FileManager.default.removeItem(atPath: repo.path + "/other")
        let gone = await eventually { registry.modelNames == ["m"] }
        XCTAssertTrue(gone)
    }

    func testStatisticsPerVersion() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        for _ in 0..<3 { _ = try await scaleOf(registry, "m") }
        let stats = try registry.statistics(model: "m")
        XCTAssertEqual(stats.count, 1)
        XCTAssertEqual(stats[0].name, "m")
        XCTAssertEqual(stats[0].version, 1)
        XCTAssertEqual(stats[0].success.count, 3)
        XCTAssertEqual(stats[0].inferenceCount, 3)
        XCTAssertGreaterThan(stats[0].lastInferenceMilliseconds, 0)
        XCTAssertThrowsError(try registry.statistics(model: "zzz"))
    }
}
