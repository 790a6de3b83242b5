import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

/// BatchNormalization folded into a ConvTranspose and the activation after it moved into its epilogue (the DB
/// detector head), against the same graph with the conv output kept as a graph output, which blocks both.
@Suite struct ConvTransposeFusionTests {
    private static func model(groups: Int, keepConvOutput: Bool) -> Model {
        let c = 4, perGroup = 6 / groups
        var rng = SeededGenerator(seed: 41)
        let inits: [(name: String, tensor: Tensor)] = [
            (name: "w", tensor: Tensor(shape: [c, perGroup, 2, 2], scalars: rng.floats(c * perGroup * 4))),
            (name: "b", tensor: Tensor(shape: [6], scalars: rng.floats(6))),
            (name: "gamma", tensor: Tensor(shape: [6], scalars: rng.floats(6).map { $0 + 1.5 })),
            (name: "beta", tensor: Tensor(shape: [6], scalars: rng.floats(6))),
            (name: "mean", tensor: Tensor(shape: [6], scalars: rng.floats(6))),
            (name: "var", tensor: Tensor(shape: [6], scalars: rng.floats(6).map { $0 + 1.5 })),
        ]
        let nodes = [
            Node(opType: "ConvTranspose", inputs: ["x", "w", "b"], outputs: ["t"], attributes: ["strides": .ints([2, 2]), "group": .int(Int64(groups))]),
            Node(opType: "BatchNormalization", inputs: ["t", "gamma", "beta", "mean", "var"], outputs: ["n"]),
            Node(opType: "Relu", inputs: ["n"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(c), .fixed(5), .fixed(6)])]
        let outputs = (keepConvOutput ? ["y", "t"] : ["y"]).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": 17], graph: Graph(name: "ct", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    @Test(arguments: [1, 2])
    func batchNormAndReluFoldIntoConvTranspose(groups: Int) throws {
        let fused = try CompiledModel(model: Self.model(groups: groups, keepConvOutput: false))
        let plain = try CompiledModel(model: Self.model(groups: groups, keepConvOutput: true))
        var rng = SeededGenerator(seed: 3)
        let x = Tensor(shape: [2, 4, 5, 6], scalars: rng.floats(2 * 4 * 30))
        let a = try fused.run(["x": x])["y"]!, b = try plain.run(["x": x])["y"]!
        #expect(a.shape == [2, 6, 10, 12])
        #expect(TestSupport.close(TestSupport.floats(a), TestSupport.floats(b)))
        let kinds = Set(try fused.profile(["x": x]).map(\.opType))
        #expect(kinds == ["ConvTranspose+relu"], "\(kinds)")
        #expect(try plain.profile(["x": x]).contains { $0.opType.hasPrefix("BatchNormalization") })
    }
}
