import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// BatchNormalization (+ Relu) folded into the 1x1 conv after it, compiled with and without the fusion.
@Suite struct InputAffineFusionTests {
    /// x [N, 8, 6, 7] -> BatchNormalization (-> Relu when `relu`) -> Conv 1x1 (8 -> 12, kernel `kernel`) + Relu -> y;
    /// with `sharedNormalization` the normalized tensor is an output too.
    private static func model(relu: Bool, kernel: Int = 1, sharedNormalization: Bool = false) -> Model {
        var rng = SeededGenerator(seed: 51)
        let inits: [(name: String, tensor: Tensor)] = [
            ("scale", Tensor(shape: [8], scalars: rng.floats(8))), ("bias", Tensor(shape: [8], scalars: rng.floats(8))),
            ("mean", Tensor(shape: [8], scalars: rng.floats(8))), ("var", Tensor(shape: [8], scalars: rng.floats(8).map { abs($0) + 0.1 })),
            ("w", Tensor(shape: [12, 8, kernel, kernel], scalars: rng.floats(12 * 8 * kernel * kernel))),
            ("b", Tensor(shape: [12], scalars: rng.floats(12))),
        ]
        var nodes = [Node(opType: "BatchNormalization", inputs: ["x", "scale", "bias", "mean", "var"], outputs: [relu ? "n0" : "n"])]
        if relu { nodes.append(Node(opType: "Relu", inputs: ["n0"], outputs: ["n"])) }
        nodes += [
            Node(opType: "Conv", inputs: ["n", "w", "b"], outputs: ["c"], attributes: kernel == 1 ? [:] : ["pads": .ints([1, 1, 1, 1])]),
            Node(opType: "Relu", inputs: ["c"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(8), .fixed(6), .fixed(7)])]
        let outputs = [ValueInfo(name: "y")] + (sharedNormalization ? [ValueInfo(name: "n")] : [])
        return Model(opsetImports: ["": 17], graph: Graph(name: "bn", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// `fusedStepKindsMatchingUnfused` on an 8-channel 6x7 input.
    private static func check(_ model: Model) throws -> Set<String> {
        try T.fusedStepKindsMatchingUnfused(model, seed: 9) { batch, rng in Tensor(shape: [batch, 8, 6, 7], scalars: rng.floats(batch * 8 * 42)) }
    }

    @Test(arguments: [false, true])
    func normalizationBeforePointwiseConvFoldsIntoIt(relu: Bool) throws {
        let kinds = try Self.check(Self.model(relu: relu))
        #expect(kinds.contains("BatchNormalization+Conv+relu") && !kinds.contains { $0.hasPrefix("BatchNormalization") && !$0.contains("Conv") },
                "\(kinds)")
    }

    /// A 3x3 conv, or a normalized tensor read elsewhere too, keeps the normalization as its own step.
    @Test func otherConvsAndSharedValuesKeepTheNormalization() throws {
        for model in [Self.model(relu: true, kernel: 3), Self.model(relu: true, sharedNormalization: true)] {
            let kinds = try Self.check(model)
            #expect(kinds.contains("BatchNormalization+relu") && kinds.contains("Conv+relu"), "\(kinds)")
        }
    }
}
