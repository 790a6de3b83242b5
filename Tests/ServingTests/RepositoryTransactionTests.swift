import Foundation
import XCTest
import Tensor
@testable import Serving

/// Uploads as transactions, start-up cleanup and the readiness rule (issue 11, defects 1-3).
final class RepositoryTransactionTests: XCTestCase {
    private func makeRegistry(_ repo: TempRepository, runtimes: LoadedRuntimes = LoadedRuntimes(), logs: LogSink = LogSink(),
                              options: RegistryOptions = RegistryOptions()) -> ModelRegistry {
        ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(runtimes), options: options, logger: logs.logger)
    }

    private func scaleOf(_ registry: ModelRegistry, _ model: String, version: Int? = nil) async throws -> Float {
        let served = try registry.resolve(model: model, version: version)
        return try await served.infer(["x": rowsTensor(rows: 1, marker: 1)])["y"]!.scalars(as: Float.self)[0]
    }

    private func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    private func stagingEntries(_ repo: TempRepository) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: repo.path + "/.staging")) ?? []
    }

    func testPutOnAnExistingVersionIsRefusedAndLeavesItsFileUntouched() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        do {
            try await registry.putVersion(model: "m", version: 1, bytes: Array("not onnx".utf8))
            XCTFail("expected versionExists")
        } catch let error as ServingError {
            XCTAssertEqual(error, .versionExists(model: "m", version: 1))
            XCTAssertTrue(error.description.contains("replace=true"), error.description)
        }
        XCTAssertEqual(contents(repo.path + "/m/1/model.onnx"), "scale=1")
        XCTAssertEqual(stagingEntries(repo), [])
        // The next load (or a restart) still finds the good file.
        try await registry.load(model: "m")
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1)
        XCTAssertTrue(registry.isReady)
    }

    func testReplaceKeepsTheOldFileUntilTheNewOneIsReady() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let runtimes = LoadedRuntimes()
        let registry = makeRegistry(repo, runtimes: runtimes)
        await registry.loadAll()
        let original = try XCTUnwrap(runtimes.latest("m", 1)?.value)
        do {
            try await registry.putVersion(model: "m", version: 1, bytes: Array("garbage".utf8), replace: true)
            XCTFail("expected loadFailed")
        } catch ServingError.loadFailed(_, let version, let reason) {
            XCTAssertEqual(version, 1)
            XCTAssertFalse(reason.contains(repo.path), "no absolute repository path in errors: \(reason)")
        }
        XCTAssertEqual(contents(repo.path + "/m/1/model.onnx"), "scale=1", "a replacement that fails never touches the old file")
        XCTAssertTrue(try registry.resolve(model: "m").runtime as? ScaleRuntime === original)
        XCTAssertEqual(registry.index().map(\.state), [.ready])
        XCTAssertEqual(stagingEntries(repo), [])

        try await registry.putVersion(model: "m", version: 1, bytes: Array("scale=4".utf8), replace: true)
        XCTAssertEqual(contents(repo.path + "/m/1/model.onnx"), "scale=4")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: repo.path + "/m/1"), ["model.onnx"])
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 4)
        XCTAssertEqual(stagingEntries(repo), [])
        // Replacing a version that does not exist yet simply adds it.
        try await registry.putVersion(model: "m", version: 2, bytes: Array("scale=5".utf8), replace: true)
        let latest = try await scaleOf(registry, "m")
        XCTAssertEqual(latest, 5)
    }

    func testAFailedUploadOfANewModelLeavesNoDebrisAndReadinessAlone() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        do {
            try await registry.putVersion(model: "fresh", version: 1, bytes: Array("garbage".utf8))
            XCTFail("expected loadFailed")
        } catch ServingError.loadFailed {}
        XCTAssertTrue(registry.isReady)
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/fresh"), "nothing of the failed upload is in the repository")
        XCTAssertEqual(stagingEntries(repo), [])
        XCTAssertEqual(registry.modelNames, ["m"])
        // A restart over the same repository is ready too.
        let restarted = makeRegistry(repo)
        await restarted.loadAll()
        XCTAssertTrue(restarted.isReady)
        XCTAssertEqual(restarted.requiredModels, ["m"])
    }

    func testStagedUploadIsInvisibleToPollingUntilItIsInPlace() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let registry = makeRegistry(repo)
        await registry.loadAll()
        let upload = Task { try await registry.putVersion(model: "m", version: 2, bytes: Array("scale=2 loadsleep=300".utf8)) }
        let staged = await eventually { !self.stagingEntries(repo).isEmpty }
        XCTAssertTrue(staged)
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/m/2"), "the version appears only once it is READY")
        // Another registry sharing the repository (a second replica) sees neither the staging entry nor the version.
        let replica = makeRegistry(repo)
        await replica.loadAll()
        XCTAssertEqual(replica.modelNames, ["m"])
        XCTAssertEqual(replica.index().compactMap(\.version), [1])
        try await upload.value
        XCTAssertEqual(contents(repo.path + "/m/2/model.onnx"), "scale=2 loadsleep=300")
        XCTAssertEqual(stagingEntries(repo), [])
        XCTAssertEqual(try registry.resolve(model: "m").version, 2)
    }

    func testInterruptedUploadDebrisIsRemovedAtStartWhenOldEnough() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        let fm = FileManager.default
        try fm.createDirectory(atPath: repo.path + "/.staging/m.2.123.456", withIntermediateDirectories: true)
        try Data("half a model".utf8).write(to: URL(fileURLWithPath: repo.path + "/.staging/m.2.123.456/model.onnx"))
        // What a SIGKILL during the old in-place write left: a version directory with only the temp file.
        try fm.createDirectory(atPath: repo.path + "/killed/1", withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: URL(fileURLWithPath: repo.path + "/killed/1/.model.onnx.4242.77.tmp"))
        try Data("{".utf8).write(to: URL(fileURLWithPath: repo.path + "/m/.config.json.4242.78.tmp"))
        // Files the server did not write are never deleted.
        let keep = ["m/1/notes.txt", "m/1/.model.onnx.tmp", "m/.model.onnx.1.2.tmp.bak", "m/1/.model.onnx.x.2.tmp", "killed/README"]
        for path in keep { try Data("keep".utf8).write(to: URL(fileURLWithPath: repo.path + "/" + path)) }

        // Younger than the age: left alone (another replica may still be writing it).
        let young = makeRegistry(repo, options: RegistryOptions(staleUploadAge: 3600))
        await young.loadAll()
        XCTAssertTrue(fm.fileExists(atPath: repo.path + "/killed/1/.model.onnx.4242.77.tmp"))
        XCTAssertEqual(stagingEntries(repo), ["m.2.123.456"])
        XCTAssertTrue(young.isReady, "a model directory holding only a temp file is not required")
        XCTAssertEqual(young.requiredModels, ["m"])

        let logs = LogSink()
        let old = makeRegistry(repo, logs: logs, options: RegistryOptions(staleUploadAge: 0))
        await old.loadAll()
        XCTAssertEqual(stagingEntries(repo), [])
        XCTAssertFalse(fm.fileExists(atPath: repo.path + "/killed/1/.model.onnx.4242.77.tmp"))
        XCTAssertFalse(fm.fileExists(atPath: repo.path + "/m/.config.json.4242.78.tmp"))
        for path in keep { XCTAssertTrue(fm.fileExists(atPath: repo.path + "/" + path), path) }
        XCTAssertTrue(fm.fileExists(atPath: repo.path + "/killed/1"), "directories are left in place")
        XCTAssertTrue(old.isReady)
        let removed = logs.messages(atLeast: .info).filter { $0.contains("interrupted upload") }
        XCTAssertEqual(removed.count, 3, "\(removed)")
        XCTAssertFalse(removed.contains { $0.contains(repo.path) }, "logged relative to the repository: \(removed)")
    }

    func testTempFileNamesAreRecognisedExactly() {
        XCTAssertTrue(ModelRepository.isInterruptedWrite(".model.onnx.123.4567.tmp", of: "model.onnx"))
        XCTAssertTrue(ModelRepository.isInterruptedWrite(".config.json.1.2.tmp", of: "config.json"))
        for name in [".model.onnx.tmp", ".model.onnx.1.tmp", ".model.onnx.1.2.3.tmp", ".model.onnx.a.2.tmp", "model.onnx.1.2.tmp",
                     ".model.onnx.1.2.tmpx", ".config.json.1.2.tmp"] {
            XCTAssertFalse(ModelRepository.isInterruptedWrite(name, of: "model.onnx"), name)
        }
    }

    func testFileErrorsAreTypedAndNameNoPath() {
        guard case .repositoryReadOnly(let readOnly) = ModelRepository.fileError(EROFS, "stage the upload") else { return XCTFail() }
        XCTAssertTrue(readOnly.contains("not writable") && readOnly.contains("Read-only file system"), readOnly)
        XCTAssertEqual(ModelRepository.fileError(EACCES, "x").description.contains("not writable"), true)
        guard case .insufficientStorage(let full) = ModelRepository.fileError(ENOSPC, "write the model file (9 bytes)") else { return XCTFail() }
        XCTAssertTrue(full.contains("No space left on device") && full.contains("nothing was stored"), full)
        XCTAssertFalse(full.contains("errno"), full)
        guard case .io(let other) = ModelRepository.fileError(EIO, "write") else { return XCTFail() }
        XCTAssertTrue(other.contains("Input/output error"), other)
    }

    func testUploadsIntoAnUnwritableRepositoryAreRefusedAndServingContinues() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=1")
        // A regular file where the staging directory would go stands in for a repository the server cannot write.
        try Data().write(to: URL(fileURLWithPath: repo.path + "/.staging"))
        let registry = makeRegistry(repo)
        await registry.loadAll()
        do {
            try await registry.putVersion(model: "m", version: 2, bytes: Array("scale=2".utf8))
            XCTFail("expected a write error")
        } catch let error as ServingError {
            XCTAssertFalse(error.description.contains(repo.path), error.description)
            XCTAssertTrue(error.description.contains("cannot stage the upload"), error.description)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: repo.path + "/m/2"))
        let scale = try await scaleOf(registry, "m")
        XCTAssertEqual(scale, 1)
        XCTAssertTrue(registry.isReady)
    }
}
