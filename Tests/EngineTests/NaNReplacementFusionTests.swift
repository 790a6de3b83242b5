import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// `Where(IsNaN(x), c, x)` after a masked Softmax (as PyTorch exports attention) or another op, fused and unfused.
@Suite struct NaNReplacementFusionTests {
    /// x [N, 3, 8] -> Add(mask) -> Softmax (or `producer`) -> Where(IsNaN(s), c, s) -> y. Row 1 and column 5 of the
    /// mask are -inf, so Softmax along either axis has a fully masked slice and gives NaN there.
    private static func model(fill: Tensor = Tensor(shape: [], scalars: [Float(0)]), producer: String = "Softmax", axis: Int = -1,
                              swapped: Bool = false, extraOutputs: [String] = [], extraNodes: [Node] = [], fillIsInput: Bool = false) -> Model {
        var mask = [Float](repeating: 0, count: 24)
        for j in 8..<16 { mask[j] = -.infinity }
        for r in 0..<3 { mask[r * 8 + 5] = -.infinity }
        var inits: [(name: String, tensor: Tensor)] = [(name: "mask", tensor: Tensor(shape: [3, 8], scalars: mask))]
        var inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(8)])]
        if fillIsInput {
            inputs.append(ValueInfo(name: "fill", elementType: .float32, shape: []))
        } else {
            inits.append((name: "fill", tensor: fill))
        }
        let nodes = [Node(opType: "Add", inputs: ["x", "mask"], outputs: ["scores"]),
                     Node(opType: producer, inputs: ["scores"], outputs: ["s"], attributes: producer == "Softmax" ? ["axis": .int(Int64(axis))] : [:]),
                     Node(opType: "IsNaN", inputs: ["s"], outputs: ["nan"]),
                     Node(opType: "Where", inputs: swapped ? ["nan", "s", "fill"] : ["nan", "fill", "s"], outputs: ["y"])] + extraNodes
        let outputs = (["y"] + extraOutputs).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": 17], graph: Graph(name: "nan", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// Runs fused and unfused on batches 1 and 2, expects equal outputs (NaN where the other has NaN), returns
    /// the fused plan's step kinds and the fused batch-2 output y.
    private static func check(_ model: Model, fill: Float? = nil) throws -> (Set<String>, Tensor) {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 3)
        var last: Tensor?
        for batch in [1, 2] {
            var feeds = ["x": Tensor(shape: [batch, 3, 8], scalars: rng.floats(batch * 24).map { $0 * 4 })]
            if let fill { feeds["fill"] = Tensor(shape: [], scalars: [fill]) }
            let a = try fused.run(feeds), b = try plain.run(feeds)
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape, "\(name)")
                if expected.dtype == .bool {
                    #expect(a[name]!.scalars(as: Bool.self) == expected.scalars(as: Bool.self), "\(name)")
                } else {
                    #expect(T.close(T.floats(a[name]!), T.floats(expected)), "\(name)")
                }
            }
            last = a["y"]
        }
        var feeds = ["x": Tensor(shape: [1, 3, 8], scalars: rng.floats(24))]
        if let fill { feeds["fill"] = Tensor(shape: [], scalars: [fill]) }
        return (Set(try fused.profile(feeds).map(\.opType)), last!)
    }

    @Test func nanGuardFoldsIntoTheSoftmax() throws {
        let (kinds, y) = try Self.check(Self.model(fill: Tensor(shape: [], scalars: [Float(-2)])))
        #expect(kinds == ["Add", softmaxReplaceNaNOp], "\(kinds)")
        let values = T.floats(y)
        #expect(y.shape == [2, 3, 8])
        // The fully masked row is the fill value; the others are probabilities summing to 1.
        for b in 0..<2 {
            #expect(values[(b * 3 + 1) * 8..<(b * 3 + 2) * 8].allSatisfy { $0 == -2 })
            for r in [0, 2] { #expect(abs(values[(b * 3 + r) * 8..<(b * 3 + r + 1) * 8].reduce(0, +) - 1) < 1e-5) }
        }
    }

    @Test func softmaxOverAnInnerAxisFillsItsNaNColumns() throws {
        let (kinds, y) = try Self.check(Self.model(fill: Tensor(shape: [], scalars: [Float(3)]), axis: 1))
        #expect(kinds == ["Add", softmaxReplaceNaNOp], "\(kinds)")
        let values = T.floats(y)
        for b in 0..<2 { for r in 0..<3 { #expect(values[(b * 3 + r) * 8 + 5] == 3) } }
        #expect(!values.contains { $0.isNaN })
    }

    @Test func nanGuardAfterAnotherOpRunsAsOnePass() throws {
        let (kinds, y) = try Self.check(Self.model(producer: "Sqrt"))
        #expect(kinds == ["Add", "Sqrt", replaceNaNOp], "\(kinds)")
        #expect(!T.floats(y).contains { $0.isNaN })
    }

    @Test func softmaxThatIsAGraphOutputKeepsItsOwnStep() throws {
        let (kinds, _) = try Self.check(Self.model(extraOutputs: ["s"]))
        #expect(kinds == ["Add", "Softmax", replaceNaNOp], "\(kinds)")
    }

    @Test func fillOfHigherRankBroadcastsTheOutputUp() throws {
        let (kinds, y) = try Self.check(Self.model(fill: Tensor(shape: [1, 1, 1, 1], scalars: [Float(0)])))
        #expect(kinds.contains(softmaxReplaceNaNOp), "\(kinds)")
        #expect(y.shape == [1, 2, 3, 8])
    }

    @Test func maskThatIsAGraphOutputIsNotFused() throws {
        let (kinds, _) = try Self.check(Self.model(extraOutputs: ["nan"]))
        #expect(kinds == ["Add", "Softmax", "IsNaN", "Where"], "\(kinds)")
    }

    @Test func maskWithAnotherConsumerIsNotFused() throws {
        let other = Node(opType: "Not", inputs: ["nan"], outputs: ["finite"])
        let (kinds, _) = try Self.check(Self.model(extraOutputs: ["finite"], extraNodes: [other]))
        #expect(kinds.isSuperset(of: ["Softmax", "IsNaN", "Where"]), "\(kinds)")
    }

    @Test func swappedOperandsAreNotFused() throws {
        let (kinds, _) = try Self.check(Self.model(swapped: true))
        #expect(kinds.isSuperset(of: ["Softmax", "IsNaN", "Where"]), "\(kinds)")
    }

    @Test func fillThatIsNoScalarConstantIsNotFused() throws {
        let (wide, _) = try Self.check(Self.model(fill: Tensor(shape: [8], scalars: [Float](repeating: 1, count: 8))))
        #expect(wide.isSuperset(of: ["Softmax", "IsNaN", "Where"]), "\(wide)")
        let (runtime, _) = try Self.check(Self.model(fillIsInput: true), fill: 5)
        #expect(runtime.isSuperset(of: ["Softmax", "IsNaN", "Where"]), "\(runtime)")
    }

    @Test func replaceNaNKernelCoversVectorBodyAndTail() {
        var values: [Float] = (0..<37).map { $0 % 5 == 0 ? .nan : Float($0) - 18 }
        values[36] = .infinity
        let expected = values.map { $0.isNaN ? 7 : $0 }
        values.withUnsafeMutableBufferPointer { replaceNaN($0.baseAddress!, count: $0.count, with: 7) }
        #expect(values == expected)
    }
}
