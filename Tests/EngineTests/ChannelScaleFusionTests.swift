import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// Squeeze-and-excitation Muls folded into the 1x1 conv after them, compiled with and without the fusion.
@Suite struct ChannelScaleFusionTests {
    /// x [N, 8, 6, 7] -> Conv 3x3 + Relu (a) -> GlobalAveragePool -> 1x1 + Relu -> 1x1 + Sigmoid (s); `tail` adds the
    /// Mul and what reads it and returns the output name.
    private static func model(_ tail: (inout [Node], inout [(name: String, tensor: Tensor)], inout SeededGenerator) -> String) -> Model {
        var rng = SeededGenerator(seed: 31)
        var inits: [(name: String, tensor: Tensor)] = []
        func weights(_ name: String, _ shape: [Int]) {
            inits.append((name: name, tensor: Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * 0.5 })))
        }
        weights("wa", [8, 8, 3, 3]); weights("ba", [8]); weights("w1", [4, 8, 1, 1]); weights("b1", [4]); weights("w2", [8, 4, 1, 1]); weights("b2", [8])
        var nodes = [
            Node(opType: "Conv", inputs: ["x", "wa", "ba"], outputs: ["a0"], attributes: ["pads": .ints([1, 1, 1, 1])]),
            Node(opType: "Relu", inputs: ["a0"], outputs: ["a"]),
            Node(opType: "GlobalAveragePool", inputs: ["a"], outputs: ["p"]),
            Node(opType: "Conv", inputs: ["p", "w1", "b1"], outputs: ["s0"]),
            Node(opType: "Relu", inputs: ["s0"], outputs: ["s1"]),
            Node(opType: "Conv", inputs: ["s1", "w2", "b2"], outputs: ["s2"]),
            Node(opType: "Sigmoid", inputs: ["s2"], outputs: ["s"]),
        ]
        let out = tail(&nodes, &inits, &rng)
        nodes.append(Node(opType: "Identity", inputs: [out], outputs: ["y"]))
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(8), .fixed(6), .fixed(7)])]
        return Model(opsetImports: ["": 17], graph: Graph(name: "se", nodes: nodes, initializers: inits, inputs: inputs, outputs: [ValueInfo(name: "y")]))
    }

    /// A 1x1 conv `name` (8 -> m channels) reading `input`, with the given attributes.
    private static func conv(_ name: String, _ input: String, _ m: Int, kernel: Int = 1, attributes: [String: Attribute] = [:],
                             _ nodes: inout [Node], _ inits: inout [(name: String, tensor: Tensor)], _ rng: inout SeededGenerator) {
        inits.append((name: "\(name)_w", tensor: Tensor(shape: [m, 8, kernel, kernel], scalars: rng.floats(m * 8 * kernel * kernel))))
        inits.append((name: "\(name)_b", tensor: Tensor(shape: [m], scalars: rng.floats(m))))
        nodes.append(Node(opType: "Conv", inputs: [input, "\(name)_w", "\(name)_b"], outputs: [name], attributes: attributes))
    }

    /// Runs fused and unfused at batch 1 and 3, expects equal outputs, returns the fused plan's step kinds.
    private static func check(_ model: Model) throws -> Set<String> {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 8)
        for batch in [1, 3] {
            let x = Tensor(shape: [batch, 8, 6, 7], scalars: rng.floats(batch * 8 * 42))
            let a = try fused.run(["x": x])["y"]!, b = try plain.run(["x": x])["y"]!
            #expect(a.shape == b.shape)
            #expect(T.close(T.floats(a), T.floats(b)), "batch \(batch)")
        }
        return Set(try fused.profile(["x": Tensor(shape: [1, 8, 6, 7], scalars: rng.floats(8 * 42))]).map(\.opType))
    }

    @Test(arguments: [false, true])
    func scaleBeforePointwiseConvFoldsIntoIt(scaleFirst: Bool) throws {
        let kinds = try Self.check(Self.model { nodes, inits, rng in
            nodes.append(Node(opType: "Mul", inputs: scaleFirst ? ["s", "a"] : ["a", "s"], outputs: ["m"]))
            Self.conv("c", "m", 6, &nodes, &inits, &rng)
            return "c"
        })
        #expect(kinds.contains("Conv+Mul") && !kinds.contains("Mul"), "\(kinds)")
    }

    /// RegNetY's block end: the scaled conv adds the block input and applies Relu, all in one step.
    @Test func scaledConvKeepsItsResidualAndActivation() throws {
        let kinds = try Self.check(Self.model { nodes, inits, rng in
            nodes.append(Node(opType: "Mul", inputs: ["a", "s"], outputs: ["m"]))
            Self.conv("c", "m", 8, &nodes, &inits, &rng)
            nodes.append(Node(opType: "Add", inputs: ["c", "a"], outputs: ["r"]))
            nodes.append(Node(opType: "Relu", inputs: ["r"], outputs: ["o"]))
            return "o"
        })
        #expect(kinds.contains("Conv+Mul+Add+relu") && !kinds.contains("Mul"), "\(kinds)")
    }

    /// Fused at compile time but multiplied first at run time: a strided 1x1 conv, a Mul of two full-size tensors.
    @Test func otherShapesAndGeometriesMultiplyFirst() throws {
        let kinds = try Self.check(Self.model { nodes, inits, rng in
            nodes.append(Node(opType: "Mul", inputs: ["a", "s"], outputs: ["m"]))
            Self.conv("c", "m", 6, attributes: ["strides": .ints([2, 2])], &nodes, &inits, &rng)
            nodes.append(Node(opType: "Relu", inputs: ["a"], outputs: ["a2"]))
            nodes.append(Node(opType: "Mul", inputs: ["a", "a2"], outputs: ["m2"]))
            Self.conv("d", "m2", 6, attributes: ["strides": .ints([2, 2])], &nodes, &inits, &rng)
            nodes.append(Node(opType: "Add", inputs: ["c", "d"], outputs: ["o"]))
            return "o"
        })
        #expect(kinds.contains("Conv+Mul"), "\(kinds)")
    }

    /// A 3x3 conv after the Mul, or a Mul read twice, keeps the Mul.
    @Test func otherConsumersKeepTheMul() throws {
        let kinds = try Self.check(Self.model { nodes, inits, rng in
            nodes.append(Node(opType: "Mul", inputs: ["a", "s"], outputs: ["m"]))
            Self.conv("c", "m", 6, kernel: 3, attributes: ["pads": .ints([1, 1, 1, 1])], &nodes, &inits, &rng)
            nodes.append(Node(opType: "Mul", inputs: ["a", "s"], outputs: ["n"]))
            Self.conv("d", "n", 6, &nodes, &inits, &rng)
            Self.conv("e", "n", 6, &nodes, &inits, &rng)
            nodes.append(Node(opType: "Add", inputs: ["c", "d"], outputs: ["cd"]))
            nodes.append(Node(opType: "Add", inputs: ["cd", "e"], outputs: ["o"]))
            return "o"
        })
        #expect(kinds.contains("Mul") && !kinds.contains("Conv+Mul"), "\(kinds)")
    }
}
