import Foundation
import Protobuf
import Tensor
import TestSupport
import Testing
@testable import ONNX

/// `Model(contentsOf:)` reads the file into pages it releases as large initializers are copied out; the tensors must be
/// exactly those decoded from the same bytes in memory, whatever their offsets and sizes.
struct FileLoadingTests {
    /// A ModelProto whose graph holds `sizes.count` float initializers (seeded values) and no nodes.
    static func model(sizes: [Int], seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        var writer = WireWriter()
        writer.int64(1, 8)                                   // ir_version
        writer.message(8) { $0.string(1, ""); $0.int64(2, 17) }   // opset_import
        writer.message(7) { graph in
            graph.string(2, "g")
            for (index, size) in sizes.enumerated() {
                let values = (0..<size).map { _ in Float.random(in: -1...1, using: &generator) }
                graph.message(5) { tensor in
                    tensor.packedInt64s(1, [Int64(size)])
                    tensor.int64(2, 1)                        // FLOAT
                    // Names of different lengths move each raw_data to another offset within its page.
                    tensor.string(8, "w" + String(repeating: "x", count: index * 3))
                    values.withUnsafeBytes { tensor.bytesAlways(9, $0) }
                }
            }
        }
        return writer.bytes
    }

    @Test func tensorsReadFromAFileEqualThoseDecodedInMemory() throws {
        // Small and large (past the release threshold), back to back, so released pages border other tensors' fields.
        let sizes = [3, 300_001, 70_000, 1 << 20, 5, 262_147, 1]
        let bytes = Self.model(sizes: sizes, seed: 41)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-file-\(UUID().uuidString).onnx").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try Model(contentsOf: path)
        let inMemory = try Model(serialized: bytes)
        #expect(fromFile.graph.initializers.count == sizes.count)
        for (file, memory) in zip(fromFile.graph.initializers, inMemory.graph.initializers) {
            #expect(file.name == memory.name)
            #expect(file.tensor.shape == memory.tensor.shape)
            let same = file.tensor.withUnsafeBytes { a in memory.tensor.withUnsafeBytes { b in a.elementsEqual(b) } }
            #expect(same, "initializer \(file.name) differs")
        }
    }

    @Test func aMissingOrShortFileIsAnIOError() throws {
        #expect(throws: ONNXError.self) { try Model(contentsOf: "/nonexistent/model.onnx") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("osprey-short-\(UUID().uuidString).onnx").path
        try Data(Self.model(sizes: [400_000], seed: 2).prefix(1000)).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: ONNXError.self) { try Model(contentsOf: path) }
    }
}
