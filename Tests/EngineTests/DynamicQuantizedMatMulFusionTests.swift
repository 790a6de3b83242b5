import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// quantize_dynamic's `DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add bias]`,
/// compiled with the MatMulIntegerToFloat rewrite and without it.
@Suite struct DynamicQuantizedMatMulFusionTests {
    /// x [N, 5, K] -> DynamicQuantizeLinear, read by two products: one with a per-tensor b_scale and a bias Add,
    /// one with per-column b_scale and no bias. `scaleAlsoOutput` makes the first scale product a graph output.
    private static func model(k: Int = 24, n: Int = 10, weights: ClosedRange<Int8> = -64...64, scaleAlsoOutput: Bool = false) -> Model {
        var rng = SeededGenerator(seed: 21)
        let inits: [(name: String, tensor: Tensor)] = [
            ("w1", Tensor(shape: [k, n], scalars: (0..<(k * n)).map { _ in Int8.random(in: weights, using: &rng) })),
            ("w1z", Tensor(shape: [], scalars: [Int8(0)])), ("w1s", Tensor(shape: [], scalars: [Float(0.0123)])),
            ("bias", Tensor(shape: [n], scalars: rng.floats(n))),
            ("w2", Tensor(shape: [k, n], scalars: (0..<(k * n)).map { _ in Int8.random(in: weights, using: &rng) })),
            ("w2z", Tensor(shape: [n], scalars: (0..<n).map { _ in Int8.random(in: -3...3, using: &rng) })),
            ("w2s", Tensor(shape: [n], scalars: (0..<n).map { _ in Float.random(in: 0.005...0.02, using: &rng) })),
        ]
        let nodes = [
            Node(opType: "DynamicQuantizeLinear", inputs: ["x"], outputs: ["q", "qs", "qz"]),
            Node(opType: "Mul", inputs: ["qs", "w1s"], outputs: ["s1"]),
            Node(opType: "MatMulInteger", inputs: ["q", "w1", "qz", "w1z"], outputs: ["p1"]),
            Node(opType: "Cast", inputs: ["p1"], outputs: ["c1"], attributes: ["to": .int(1)]),
            Node(opType: "Mul", inputs: ["c1", "s1"], outputs: ["m1"]),
            Node(opType: "Add", inputs: ["bias", "m1"], outputs: ["y1"]),
            Node(opType: "Mul", inputs: ["w2s", "qs"], outputs: ["s2"]),
            Node(opType: "MatMulInteger", inputs: ["q", "w2", "qz", "w2z"], outputs: ["p2"]),
            Node(opType: "Cast", inputs: ["p2"], outputs: ["c2"], attributes: ["to": .int(1)]),
            Node(opType: "Mul", inputs: ["s2", "c2"], outputs: ["y2"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(5), .fixed(k)])]
        let outputs = (["y1", "y2"] + (scaleAlsoOutput ? ["s1"] : [])).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": 13], graph: Graph(name: "dq", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// Runs fused and unfused on batches 1 and 2, expects the same outputs within tolerance, returns the fused step kinds.
    private static func check(_ model: Model, k: Int = 24) throws -> [String: Int] {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 22)
        for batch in [1, 2] {
            let feeds = ["x": Tensor(shape: [batch, 5, k], scalars: rng.floats(batch * 5 * k).map { $0 * 2 + 0.3 })]
            let a = try fused.run(feeds), b = try plain.run(feeds)
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape, "\(name)")
                #expect(T.close(T.floats(a[name]!), T.floats(expected)), "\(name)")
            }
        }
        let feeds = ["x": Tensor(shape: [1, 5, k], scalars: rng.floats(5 * k))]
        return Dictionary(uniqueKeysWithValues: try fused.profile(feeds).map { ($0.opType, $0.nodes) })
    }

    @Test func productCastAndScaleBecomeOneNode() throws {
        let kinds = try Self.check(Self.model())
        #expect(kinds == ["DynamicQuantizeLinear": 1, "MatMulIntegerToFloat": 2], "\(kinds)")
    }

    @Test func fullRangeWeightsFuseToo() throws {
        let kinds = try Self.check(Self.model(weights: -128...127))
        #expect(kinds == ["DynamicQuantizeLinear": 1, "MatMulIntegerToFloat": 2], "\(kinds)")
    }

    @Test func scaleProductReadElsewhereStays() throws {
        let kinds = try Self.check(Self.model(scaleAlsoOutput: true))
        #expect(kinds["MatMulIntegerToFloat"] == 2 && kinds["Mul"] == 1, "\(kinds)")
    }
}
