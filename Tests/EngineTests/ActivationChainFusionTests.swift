import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// Decomposed activations as exporters write them, compiled with and without chain fusion.
@Suite struct ActivationChainFusionTests {
    /// A graph `x -> [Conv ->] chain -> y` over NCHW input; `chain(input)` returns its nodes and output name.
    private static func model(conv: Bool, extraOutputs: [String] = [], scalars: [String: Float], tensors: [String: Tensor] = [:],
                              _ chain: (String) -> ([Node], String)) -> Model {
        let c = 4
        var rng = SeededGenerator(seed: 5)
        var nodes: [Node] = []
        var inits: [(name: String, tensor: Tensor)] = scalars.map { (name: $0.key, tensor: Tensor(shape: [], scalars: [$0.value])) }
        inits += tensors.map { (name: $0.key, tensor: $0.value) }
        var x = "x"
        if conv {
            inits.append((name: "w", tensor: Tensor(shape: [c, c, 3, 3], scalars: rng.floats(c * c * 9).map { $0 * 0.6 })))
            inits.append((name: "b", tensor: Tensor(shape: [c], scalars: rng.floats(c))))
            nodes.append(Node(opType: "Conv", inputs: ["x", "w", "b"], outputs: ["conv"], attributes: ["pads": .ints([1, 1, 1, 1])]))
            x = "conv"
        }
        let (body, out) = chain(x)
        nodes += body
        nodes.append(Node(opType: "Identity", inputs: [out], outputs: ["y"]))
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(c), .fixed(7), .fixed(9)])]
        let outputs = (["y"] + extraOutputs).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": 17], graph: Graph(name: "chain", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// Runs fused and unfused, expects equal outputs, returns the fused plan's step kinds.
    private static func check(_ model: Model) throws -> Set<String> {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 9)
        for batch in [1, 2] {
            let x = Tensor(shape: [batch, 4, 7, 9], scalars: rng.floats(batch * 4 * 63).map { $0 * 8 })
            let a = try fused.run(["x": x]), b = try plain.run(["x": x])
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape)
                #expect(T.close(T.floats(a[name]!), T.floats(expected)), "\(name)")
            }
        }
        return Set(try fused.profile(["x": Tensor(shape: [1, 4, 7, 9], scalars: rng.floats(4 * 63))]).map(\.opType))
    }

    private static func hardSwish(_ x: String, scaleByMultiply: Bool = false) -> ([Node], String) {
        ([Node(opType: "Add", inputs: [x, "three"], outputs: ["a"]),
          Node(opType: "Clip", inputs: ["a", "zero", "six"], outputs: ["c"]),
          Node(opType: "Mul", inputs: scaleByMultiply ? ["c", x] : [x, "c"], outputs: ["m"]),
          scaleByMultiply ? Node(opType: "Mul", inputs: ["m", "sixth"], outputs: ["h"]) : Node(opType: "Div", inputs: ["m", "six"], outputs: ["h"])], "h")
    }

    private static let hardSwishScalars: [String: Float] = ["three": 3, "zero": 0, "six": 6, "sixth": 1 / 6 as Float]

    @Test func hardSwishAfterConvFoldsIntoItsEpilogue() throws {
        let kinds = try Self.check(Self.model(conv: true, scalars: Self.hardSwishScalars) { Self.hardSwish($0) })
        #expect(kinds.contains("Conv+hardSwish"), "\(kinds)")
        #expect(!kinds.contains("Clip") && !kinds.contains("Div"))
    }

    @Test func hardSwishWithMultiplyByOneSixthRunsAsOneStep() throws {
        let kinds = try Self.check(Self.model(conv: false, scalars: Self.hardSwishScalars) { Self.hardSwish($0, scaleByMultiply: true) })
        #expect(kinds == ["Activation+hardSwish", "Identity"], "\(kinds)")
    }

    @Test func hardSigmoidAfterConv() throws {
        let kinds = try Self.check(Self.model(conv: true, scalars: Self.hardSwishScalars) { x in
            ([Node(opType: "Add", inputs: [x, "three"], outputs: ["a"]), Node(opType: "Clip", inputs: ["a", "zero", "six"], outputs: ["c"]),
              Node(opType: "Div", inputs: ["c", "six"], outputs: ["h"])], "h")
        })
        #expect(kinds.contains { $0.hasPrefix("Conv+hardSigmoid") }, "\(kinds)")
    }

    @Test(arguments: [false, true])
    func siluEitherOperandOrder(_ sigmoidFirst: Bool) throws {
        let kinds = try Self.check(Self.model(conv: true, scalars: [:]) { x in
            ([Node(opType: "Sigmoid", inputs: [x], outputs: ["s"]), Node(opType: "Mul", inputs: sigmoidFirst ? ["s", x] : [x, "s"], outputs: ["m"])], "m")
        })
        #expect(kinds.contains("Conv+silu"), "\(kinds)")
    }

    @Test func geluThroughErf() throws {
        let kinds = try Self.check(Self.model(conv: false, scalars: ["root2": 1.4142135, "one": 1, "half": 0.5]) { x in
            ([Node(opType: "Div", inputs: [x, "root2"], outputs: ["d"]), Node(opType: "Erf", inputs: ["d"], outputs: ["e"]),
              Node(opType: "Add", inputs: ["e", "one"], outputs: ["p"]), Node(opType: "Mul", inputs: [x, "p"], outputs: ["m"]),
              Node(opType: "Mul", inputs: ["m", "half"], outputs: ["g"])], "g")
        })
        #expect(kinds.contains("Activation+gelu"), "\(kinds)")
    }

    @Test func geluTanhForm() throws {
        let scalars: [String: Float] = ["three": 3, "k": 0.044715, "s": 0.7978845608, "one": 1, "half": 0.5]
        let kinds = try Self.check(Self.model(conv: false, scalars: scalars) { x in
            ([Node(opType: "Pow", inputs: [x, "three"], outputs: ["cube"]), Node(opType: "Mul", inputs: ["cube", "k"], outputs: ["kc"]),
              Node(opType: "Add", inputs: [x, "kc"], outputs: ["inner"]), Node(opType: "Mul", inputs: ["inner", "s"], outputs: ["scaled"]),
              Node(opType: "Tanh", inputs: ["scaled"], outputs: ["t"]), Node(opType: "Add", inputs: ["t", "one"], outputs: ["p"]),
              Node(opType: "Mul", inputs: ["half", x], outputs: ["hx"]), Node(opType: "Mul", inputs: ["hx", "p"], outputs: ["g"])], "g")
        })
        #expect(kinds.contains("Activation+geluTanh"), "\(kinds)")
    }

    @Test func mishThroughSoftplusOrLogExp() throws {
        let viaSoftplus = try Self.check(Self.model(conv: true, scalars: [:]) { x in
            ([Node(opType: "Softplus", inputs: [x], outputs: ["sp"]), Node(opType: "Tanh", inputs: ["sp"], outputs: ["t"]),
              Node(opType: "Mul", inputs: [x, "t"], outputs: ["m"])], "m")
        })
        #expect(viaSoftplus.contains("Conv+mish"), "\(viaSoftplus)")
        let viaLogExp = try Self.check(Self.model(conv: false, scalars: ["one": 1]) { x in
            ([Node(opType: "Exp", inputs: [x], outputs: ["e"]), Node(opType: "Add", inputs: ["e", "one"], outputs: ["p"]),
              Node(opType: "Log", inputs: ["p"], outputs: ["sp"]), Node(opType: "Tanh", inputs: ["sp"], outputs: ["t"]),
              Node(opType: "Mul", inputs: ["t", x], outputs: ["m"])], "m")
        })
        #expect(viaLogExp.contains("Activation+mish"), "\(viaLogExp)")
    }

    @Test func intermediateThatIsAGraphOutputIsNotFused() throws {
        let kinds = try Self.check(Self.model(conv: true, extraOutputs: ["c"], scalars: Self.hardSwishScalars) { Self.hardSwish($0) })
        #expect(kinds.contains("Clip"), "\(kinds)")
        #expect(!kinds.contains("Conv+hardSwish"))
    }

    @Test func intermediateWithAnotherConsumerIsNotFused() throws {
        let kinds = try Self.check(Self.model(conv: false, scalars: [:]) { x in
            ([Node(opType: "Sigmoid", inputs: [x], outputs: ["s"]), Node(opType: "Mul", inputs: [x, "s"], outputs: ["m"]),
              Node(opType: "Add", inputs: ["m", "s"], outputs: ["r"])], "r")
        })
        #expect(kinds.contains("Sigmoid"), "\(kinds)")
    }

    @Test func chainThatIsNoKnownActivationStaysAsItIs() throws {
        let kinds = try Self.check(Self.model(conv: true, scalars: ["three": 3, "zero": 0, "six": 6, "five": 5]) { x in
            ([Node(opType: "Add", inputs: [x, "three"], outputs: ["a"]), Node(opType: "Clip", inputs: ["a", "zero", "six"], outputs: ["c"]),
              Node(opType: "Mul", inputs: [x, "c"], outputs: ["m"]), Node(opType: "Div", inputs: ["m", "five"], outputs: ["h"])], "h")
        })
        #expect(kinds.contains("Div") && kinds.contains("Clip"), "\(kinds)")
    }

    @Test func constantScaleAndShiftAfterConvFoldsIntoIt() throws {
        let tensors = ["scale": Tensor(shape: [1, 4, 1, 1], scalars: [0.5, -2, 3, 1.5] as [Float]),
                       "shift": Tensor(shape: [4, 1, 1], scalars: [1, 2, -3, 0.25] as [Float])]
        let kinds = try Self.check(Self.model(conv: true, scalars: ["six": 6, "one": 1], tensors: tensors) { x in
            ([Node(opType: "Mul", inputs: [x, "scale"], outputs: ["m"]), Node(opType: "Add", inputs: ["shift", "m"], outputs: ["a"]),
              Node(opType: "Div", inputs: ["a", "six"], outputs: ["d"]), Node(opType: "Sub", inputs: ["d", "one"], outputs: ["s"]),
              Node(opType: "Relu", inputs: ["s"], outputs: ["r"])], "r")
        })
        #expect(kinds == ["Conv+relu", "Identity"], "\(kinds)")
    }

    @Test func constantOverSpatialAxesOrDividedByConvIsNotFolded() throws {
        let tensors = ["rows": Tensor(shape: [7, 1], scalars: (0..<7).map { Float($0) + 1 })]
        let kinds = try Self.check(Self.model(conv: true, scalars: ["two": 2], tensors: tensors) { x in
            ([Node(opType: "Mul", inputs: [x, "rows"], outputs: ["m"]), Node(opType: "Div", inputs: ["two", "m"], outputs: ["d"])], "d")
        })
        #expect(kinds.contains("Mul") && kinds.contains("Div"), "\(kinds)")
    }
}
