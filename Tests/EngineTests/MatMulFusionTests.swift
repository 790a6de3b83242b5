import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// MatMul with its bias and activation fused, and batched products split by head.
@Suite(.serialized) struct MatMulFusionTests {
    /// y = act(x [N, 5, 24] x W [24, 40] + bias) compiled with the bias and activation fused, against the plain graph.
    @Test(arguments: [false, true])
    func biasAndActivationFoldIntoTheMatMul(_ biasFirst: Bool) throws {
        var rng = SeededGenerator(seed: 4)
        let inits: [(name: String, tensor: Tensor)] = [("w", Tensor(shape: [24, 40], scalars: rng.floats(24 * 40))),
                                                      ("bias", Tensor(shape: [40], scalars: rng.floats(40)))]
        let nodes = [Node(opType: "MatMul", inputs: ["x", "w"], outputs: ["p"]),
                     Node(opType: "Add", inputs: biasFirst ? ["bias", "p"] : ["p", "bias"], outputs: ["q"]),
                     Node(opType: "Relu", inputs: ["q"], outputs: ["y"]),
                     Node(opType: "MatMul", inputs: ["y", "x2t"], outputs: ["z"])]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(5), .fixed(24)]),
                      ValueInfo(name: "x2t", elementType: .float32, shape: [.symbolic("N"), .fixed(40), .fixed(3)])]
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "mm", nodes: nodes, initializers: inits, inputs: inputs,
                                                              outputs: [ValueInfo(name: "y"), ValueInfo(name: "z")]))
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        for batch in [1, 3] {
            let feeds = ["x": Tensor(shape: [batch, 5, 24], scalars: rng.floats(batch * 120)),
                         "x2t": Tensor(shape: [batch, 40, 3], scalars: rng.floats(batch * 120))]
            let a = try fused.run(feeds), b = try plain.run(feeds)
            for name in ["y", "z"] { #expect(T.close(T.floats(a[name]!), T.floats(b[name]!)), "\(name) batch \(batch)") }
        }
        let kinds = try fused.profile(["x": Tensor(shape: [1, 5, 24], scalars: rng.floats(120)), "x2t": Tensor(shape: [1, 40, 3], scalars: rng.floats(120))])
            .map(\.opType)
        #expect(Set(kinds) == ["MatMul+Add+relu", "MatMul"], "\(kinds)")
    }

    /// [B, 12, 128, 32] x [B, 12, 32, 128] style products: the heads split across threads give the single-thread answer.
    @Test func batchedHeadsSplitAcrossThreads() throws {
        var rng = SeededGenerator(seed: 6)
        let a = Tensor(shape: [2, 12, 32, 16], scalars: rng.floats(2 * 12 * 512)), b = Tensor(shape: [2, 12, 16, 32], scalars: rng.floats(2 * 12 * 512))
        let ctx = OpContext(node: Node(opType: "MatMul", inputs: ["a", "b"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)
        defer { EngineThreads.configure(threads: 2) }
        EngineThreads.configure(threads: 1)
        let one = try matmul(a, b, ctx)
        EngineThreads.configure(threads: 2)
        let two = try matmul(a, b, ctx)
        #expect(T.floats(one) == T.floats(two))
        var expected = [Float](repeating: 0, count: 24 * 1024)
        expected.withUnsafeMutableBufferPointer { e in
            a.floatPointer { ap in b.floatPointer { bp in
                for h in 0..<24 {
                    sgemmReference(transposeA: false, transposeB: false, m: 32, n: 32, k: 16, alpha: 1, a: ap + h * 512, lda: 16,
                                   b: bp + h * 512, ldb: 32, beta: 0, c: e.baseAddress! + h * 1024, ldc: 32)
                }
            } }
        }
        expectClose(T.floats(two), expected, "batched heads")
    }
}
