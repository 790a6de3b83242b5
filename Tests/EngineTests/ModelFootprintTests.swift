import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// What a compiled model reports about its memory (constants, activations) and the pool shrinking after a release.
@Suite(.serialized) struct ModelFootprintTests {
    /// x [N, 64] -> Conv-free MLP: MatMul by w1 [64, 256], Relu, MatMul by w2 [256, 10].
    private static func mlp() -> Model {
        let w1 = Tensor(shape: [64, 256], scalars: (0..<(64 * 256)).map { Float($0 % 7) / 7 - 0.5 })
        let w2 = Tensor(shape: [256, 10], scalars: (0..<(256 * 10)).map { Float($0 % 5) / 5 - 0.5 })
        let nodes = [
            Node(name: "m1", opType: "MatMul", inputs: ["x", "w1"], outputs: ["h"]),
            Node(name: "r", opType: "Relu", inputs: ["h"], outputs: ["a"]),
            Node(name: "m2", opType: "MatMul", inputs: ["a", "w2"], outputs: ["y"]),
        ]
        let graph = Graph(name: "mlp", nodes: nodes, initializers: [(name: "w1", tensor: w1), (name: "w2", tensor: w2)],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(64)])],
                          outputs: [ValueInfo(name: "y")])
        return Model(opsetImports: ["": 17], graph: graph)
    }

    @Test func constantsAndActivationsAreCounted() throws {
        let model = try CompiledModel(model: Self.mlp())
        #expect(model.retainedConstantBytes == (64 * 256 + 256 * 10) * 4)
        let one = try model.measurePeakActivationBytes(["x": Tensor(dtype: .float32, shape: [1, 64])])
        let eight = try model.measurePeakActivationBytes(["x": Tensor(dtype: .float32, shape: [8, 64])])
        // At most the input, one hidden map (Relu runs in place or replaces it) and the output are alive together.
        #expect(one >= 256 * 4 && one <= (64 + 2 * 256 + 10) * 4, "batch 1: \(one)")
        #expect(eight == 8 * one, "activations scale with the batch: \(one) -> \(eight)")
    }

    @Test func trimReleasesFreeBlocksAndRestartsThePeak() {
        // A private pool: the shared one is busy with other suites running in parallel.
        let pool = BufferPool()
        do {
            let a = pool.storage(byteCount: 1 << 20)
            let b = pool.storage(byteCount: 1 << 19)
            _ = (a, b)
        }
        let before = pool.statistics
        #expect(before.inUseBytes == 0 && before.heldBytes >= (1 << 20) + (1 << 19), "\(before)")
        #expect(pool.trim() == before.heldBytes)
        let after = pool.statistics
        #expect(after.heldBytes == 0 && after.peakInUseBytes == 0, "\(after)")
        // With the peak restarted, blocks given back beyond three times the new peak are freed, not kept.
        let held = pool.storage(byteCount: 1 << 16)
        _ = held
        #expect(pool.statistics.peakInUseBytes < before.peakInUseBytes)
    }
}
