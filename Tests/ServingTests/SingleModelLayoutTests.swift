import Foundation
import XCTest
@testable import Serving

/// KServe's single-model layout (`--model-name`): the repository folder itself is one model.
final class SingleModelLayoutTests: XCTestCase {
    private func write(_ path: String, _ text: String) {
        try! FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    func testTheRootsModelFileIsVersionOneWithConfigAndLabelsBesideIt() async throws {
        let repo = TempRepository()
        write(repo.path + "/model.onnx", "scale=3")
        write(repo.path + "/labels.txt", "cat\ndog\n")
        write(repo.path + "/config.json", "{\"max_batch_size\": 4}")
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(LoadedRuntimes()),
                                     options: RegistryOptions(singleModel: "pets"))
        await registry.loadAll()
        XCTAssertEqual(registry.isReady, true)
        let served = try registry.resolve(model: "pets", version: nil)
        XCTAssertEqual(served.version, 1)
        XCTAssertEqual(served.labels, ["cat", "dog"])
        XCTAssertThrowsError(try registry.resolve(model: "model.onnx", version: nil))
    }

    func testAnOnlyOnnxFileKeepsItsNameAndIntegerFoldersAddVersions() throws {
        let repo = TempRepository()
        write(repo.path + "/resnet.onnx", "scale=1")
        write(repo.path + "/2/model.onnx", "scale=2")
        let layout = ModelRepository(root: repo.path, singleModel: "resnet")
        XCTAssertEqual(try layout.listModels().valid, ["resnet"])
        XCTAssertEqual(try layout.scan(model: "resnet")?.versions.keys.sorted(), [1, 2])
        XCTAssertEqual(layout.modelFile("resnet", version: 1), repo.path + "/resnet.onnx")
        XCTAssertEqual(layout.modelFile("resnet", version: 2), repo.path + "/2/model.onnx")
        // Two candidate files are ambiguous: neither is taken as version 1.
        write(repo.path + "/other.onnx", "scale=9")
        XCTAssertEqual(try layout.scan(model: "resnet")?.versions.keys.sorted(), [2])
    }

    func testUploadsAreRefusedWithoutTouchingTheFolder() async throws {
        let repo = TempRepository()
        write(repo.path + "/model.onnx", "scale=1")
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(LoadedRuntimes()),
                                     options: RegistryOptions(singleModel: "m"))
        await registry.loadAll()
        do {
            try await registry.putVersion(model: "m", version: 2, bytes: Array("scale=2".utf8))
            XCTFail("expected the single-model layout to refuse uploads")
        } catch let error as ServingError {
            guard case .repositoryReadOnly(let message) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(message.contains("--model-name"), message)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: repo.path).sorted(), ["model.onnx"])
    }
}
