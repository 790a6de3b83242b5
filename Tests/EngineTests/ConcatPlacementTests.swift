import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// Concat inputs written straight into the Concat's buffer, compared with the copying plan of the same graph.
@Suite struct ConcatPlacementTests {
    /// Builds nodes and initializers of small NCHW graphs over input x [N, 3, 6, 7].
    private struct GraphBuilder {
        var nodes: [Node] = []
        var inits: [(name: String, tensor: Tensor)] = []
        var rng = SeededGenerator(seed: 11)
        var channels: [String: Int] = ["x": 3]

        /// A 3x3 (padded) or 1x1 Conv with bias from `input` to `output` with `outChannels` channels.
        mutating func conv(_ input: String, _ output: String, _ outChannels: Int, kernel: Int = 3, relu: Bool = false, groups: Int = 1) {
            let c = channels[input]! / groups
            inits.append((name: "\(output)_w", tensor: Tensor(shape: [outChannels, c, kernel, kernel], scalars: rng.floats(outChannels * c * kernel * kernel))))
            inits.append((name: "\(output)_b", tensor: Tensor(shape: [outChannels], scalars: rng.floats(outChannels))))
            let pad = Int64(kernel / 2)
            let target = relu ? "\(output)_pre" : output
            nodes.append(Node(opType: "Conv", inputs: [input, "\(output)_w", "\(output)_b"], outputs: [target],
                              attributes: ["pads": .ints([pad, pad, pad, pad]), "group": .int(Int64(groups))]))
            if relu { nodes.append(Node(opType: "Relu", inputs: [target], outputs: [output])) }
            channels[output] = outChannels
        }

        mutating func concat(_ inputs: [String], _ output: String) {
            nodes.append(Node(opType: "Concat", inputs: inputs, outputs: [output], attributes: ["axis": .int(1)]))
            channels[output] = inputs.reduce(0) { $0 + channels[$1]! }
        }

        /// BatchNormalization with random constant parameters (positive variance), then Relu when asked.
        mutating func batchNorm(_ input: String, _ output: String, relu: Bool) {
            let c = channels[input]!
            for (k, name) in ["scale", "bias", "mean", "var"].enumerated() {
                let values = k == 3 ? rng.floats(c).map { abs($0) + 0.5 } : rng.floats(c)
                inits.append((name: "\(output)_\(name)", tensor: Tensor(shape: [c], scalars: values)))
            }
            let target = relu ? "\(output)_pre" : output
            nodes.append(Node(opType: "BatchNormalization", inputs: [input] + ["scale", "bias", "mean", "var"].map { "\(output)_\($0)" }, outputs: [target]))
            if relu { nodes.append(Node(opType: "Relu", inputs: [target], outputs: [output])) }
            channels[output] = c
        }

        mutating func node(_ op: String, _ inputs: [String], _ output: String) {
            nodes.append(Node(opType: op, inputs: inputs, outputs: [output]))
            channels[output] = channels[inputs[0]]
        }

        func model(outputs: [String]) -> Model {
            let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(6), .fixed(7)])]
            return Model(opsetImports: ["": 17], graph: Graph(name: "concat", nodes: nodes, initializers: inits, inputs: inputs,
                                                              outputs: outputs.map { ValueInfo(name: $0) }))
        }
    }

    /// Runs the placed and the copying plan at batch 1 and 8 (each twice: the first run of a shape records the
    /// layout, the second places), expects equal outputs; returns the placed model and its last outputs at batch 1.
    @discardableResult
    private static func check(_ model: Model, batches: [Int] = [8, 1]) throws -> (CompiledModel, [String: Tensor]) {
        let placed = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let copying = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, placeConcatInputs: false)
        var rng = SeededGenerator(seed: 3)
        var last: [String: Tensor] = [:]
        for batch in batches {
            let x = Tensor(shape: [batch, 3, 6, 7], scalars: rng.floats(batch * 3 * 42))
            let expected = try copying.run(["x": x])
            for _ in 0..<3 {
                let actual = try placed.run(["x": x])
                for (name, e) in expected {
                    #expect(actual[name]!.shape == e.shape, "\(name)")
                    #expect(T.close(T.floats(actual[name]!), T.floats(e)), "\(name) at batch \(batch)")
                }
                last = actual
            }
        }
        return (placed, last)
    }

    /// DenseNet's dense block: each layer concatenates the block input and every earlier layer's output
    /// (pre-activation BN -> Relu -> Conv), the block ends with the concat of all of them.
    @Test func denseBlockSharesOneBuffer() throws {
        var g = GraphBuilder()
        g.conv("x", "f0", 4)
        var features = ["f0"]
        for l in 1...3 {
            g.concat(features, "cat\(l)")
            g.batchNorm("cat\(l)", "bn\(l)", relu: true)
            g.conv("bn\(l)", "f\(l)", 2)
            features.append("f\(l)")
        }
        g.concat(features, "block")
        g.node("Identity", ["cat2"], "early")
        g.node("Identity", ["block"], "y")
        let (model, out) = try Self.check(g.model(outputs: ["y", "early"]))
        #expect(model.concatGroupCount == 1 && model.stridedConcatGroupCount == 0)
        // The layer-2 concat is a prefix window of the block's buffer, not a copy.
        #expect(out["early"]!.storage === out["y"]!.storage && out["early"]!.byteOffset == out["y"]!.byteOffset)
    }

    /// SqueezeNet's fire module: two expand convs of one squeeze output, concatenated, then convolved.
    @Test func fireModuleExpandConvsWriteIntoTheirSlices() throws {
        var g = GraphBuilder()
        g.conv("x", "squeeze", 2, kernel: 1, relu: true)
        g.conv("squeeze", "e1", 3, kernel: 1, relu: true)
        g.conv("squeeze", "e3", 5, kernel: 3, relu: true)
        g.concat(["e1", "e3"], "fire")
        g.conv("fire", "y", 4, kernel: 1)
        let (model, _) = try Self.check(g.model(outputs: ["y"]))
        #expect(model.concatGroupCount == 1)
        // At batch 8 the expand convs write their images into strided windows of the buffer.
        #expect(model.stridedConcatGroupCount == 1)
    }

    /// ShuffleNet-like: one part comes from a non-conv op (copied into its strided window), one from a depthwise conv
    /// (no strided kernel: copied too), one from a pointwise conv (written in place); the Concat is also a graph output.
    @Test func stridedWindowsTakeCopiesFromOtherProducers() throws {
        var g = GraphBuilder()
        g.conv("x", "p", 4, kernel: 1)
        g.node("Abs", ["p"], "pass")
        g.conv("x", "dw", 3, relu: true, groups: 3)
        g.conv("dw", "pw", 4, kernel: 1, relu: true)
        g.conv("x", "dw2", 3, groups: 3)
        g.concat(["pass", "dw2", "pw"], "cat")
        g.conv("cat", "y", 2, kernel: 1)
        let (model, _) = try Self.check(g.model(outputs: ["y", "cat"]))
        #expect(model.concatGroupCount == 1 && model.stridedConcatGroupCount == 1)
    }

    /// ShuffleNetV2's split: a channel half of one value goes to the Concat and the other through a conv; at batch 8
    /// the first half is copied once, straight into its strided window.
    @Test func channelSliceWritesIntoItsStridedWindow() throws {
        var g = GraphBuilder()
        g.conv("x", "p", 6, kernel: 1)
        for (name, values) in [("lo", [0]), ("mid", [3]), ("hi", [6]), ("axis", [1])] {
            g.inits.append((name: name, tensor: Tensor.int64(values)))
        }
        g.nodes.append(Node(opType: "Slice", inputs: ["p", "lo", "mid", "axis"], outputs: ["half"]))
        g.nodes.append(Node(opType: "Slice", inputs: ["p", "mid", "hi", "axis"], outputs: ["rest"]))
        g.channels["half"] = 3
        g.channels["rest"] = 3
        g.conv("rest", "b2", 3, kernel: 1, relu: true)
        g.concat(["half", "b2"], "cat")
        g.conv("cat", "y", 2, kernel: 1)
        let (model, _) = try Self.check(g.model(outputs: ["y"]))
        #expect(model.concatGroupCount == 1 && model.stridedConcatGroupCount == 1)
    }

    /// A strided window's rows written from a compact value and gathered back.
    @Test func stridedWindowWritesAndGathersRows() {
        let buffer = Tensor(shape: [2, 5, 2], scalars: [Float](repeating: -1, count: 20))
        let window = OutputPlacement(storage: buffer.storage, byteOffset: 4 * 4, byteCount: 2 * 3 * 2 * 4, rows: 2, rowStride: 10 * 4)
        let value = Tensor(shape: [2, 3, 2], scalars: (0..<12).map { Float($0) })
        value.withUnsafeBytes { window.write(from: $0.baseAddress!, count: $0.count) }
        #expect(T.floats(buffer) == [-1, -1, -1, -1, 0, 1, 2, 3, 4, 5, -1, -1, -1, -1, 6, 7, 8, 9, 10, 11])
        #expect(T.floats(window.gathered(.float32, shape: [2, 3, 2])) == T.floats(value))
        #expect(window.holds(window.tensor(.float32, shape: [2, 3, 2])) && !window.isContiguous)
    }

    /// A concat input also read by other nodes, including ones that write in place: the views stay intact.
    @Test func inputReusedElsewhereIsNotDisturbed() throws {
        var g = GraphBuilder()
        g.conv("x", "a", 3)
        g.conv("x", "b", 2)
        g.concat(["a", "b"], "c")
        g.node("Relu", ["c"], "rc")       // last reader of c: would write in place into the shared buffer
        g.node("Sigmoid", ["a"], "sa")    // last reader of a
        g.node("Neg", ["b"], "nb")
        g.concat(["sa", "rc"], "d")
        let (model, _) = try Self.check(g.model(outputs: ["d", "nb"]))
        #expect(model.concatGroupCount == 2)
        // c's inputs have other readers; d's have none, so only d places at batch 8.
        #expect(model.stridedConcatGroupCount == 1)
    }

    /// A graph input, a constant or a graph output among the inputs keeps that Concat copying.
    @Test func graphInputsConstantsAndOutputsAreCopied() throws {
        var g = GraphBuilder()
        g.conv("x", "a", 3)
        g.concat(["x", "a"], "withInput")
        g.inits.append((name: "k", tensor: Tensor(shape: [1, 1, 6, 7], scalars: g.rng.floats(42))))
        g.channels["k"] = 1
        g.conv("x", "b", 2)
        g.concat(["b", "k"], "withConstant")
        g.conv("x", "out", 2)
        g.conv("x", "e", 1)
        g.concat(["out", "e"], "withOutput")
        let (model, _) = try Self.check(g.model(outputs: ["withInput", "withConstant", "withOutput", "out"]), batches: [1])
        #expect(model.concatGroupCount == 0)
    }

    /// Concat(c, Concat(a, b)): the inner concat's buffer is the outer one's second window.
    @Test func nestedConcatsShareTheOuterBuffer() throws {
        var g = GraphBuilder()
        g.conv("x", "a", 2)
        g.conv("x", "b", 3)
        g.concat(["a", "b"], "inner")
        g.conv("x", "c", 1)
        g.concat(["c", "inner"], "outer")
        g.node("Identity", ["inner"], "innerOut")
        g.node("Identity", ["outer"], "y")
        let (model, out) = try Self.check(g.model(outputs: ["y", "innerOut"]))
        #expect(model.concatGroupCount == 2)
        let inner = out["innerOut"]!, outer = out["y"]!
        #expect(inner.storage === outer.storage)
        #expect(inner.byteOffset == outer.byteOffset + 6 * 7 * 4)
    }

    /// Concats whose inputs are not one contiguous run of the largest one's keep copying.
    @Test func reorderedInputsKeepCopying() throws {
        var g = GraphBuilder()
        g.conv("x", "a", 2)
        g.conv("x", "b", 3)
        g.concat(["a", "b"], "ab")
        g.concat(["b", "a"], "ba")
        let (model, _) = try Self.check(g.model(outputs: ["ab", "ba"]))
        #expect(model.concatGroupCount == 0)
    }

    @Test func adjacentViewNeedsOneBufferInOrderAndUnitOuterDimensions() {
        let whole = Tensor(shape: [1, 5, 2], scalars: (0..<10).map { Float($0) })
        let a = whole.reshaped([5, 2]).rows(0..<2).reshaped([1, 2, 2]), b = whole.reshaped([5, 2]).rows(2..<5).reshaped([1, 3, 2])
        let view = ConcatPlacement.adjacentView([a, b], axis: 1)
        #expect(view.map { T.floats($0) } == T.floats(whole) && view?.shape == [1, 5, 2])
        #expect(ConcatPlacement.adjacentView([b, a], axis: 1) == nil)
        #expect(ConcatPlacement.adjacentView([a, Tensor(shape: [1, 3, 2], scalars: [Float](repeating: 0, count: 6))], axis: 1) == nil)
        let batch = whole.reshaped([2, 5]).rows(0..<1), next = whole.reshaped([2, 5]).rows(1..<2)
        #expect(ConcatPlacement.adjacentView([batch, next], axis: 0)?.shape == [2, 5])
        #expect(ConcatPlacement.adjacentView([batch.reshaped([1, 1, 5]), next.reshaped([1, 1, 5])], axis: 2)?.shape == [1, 1, 10])
        // Two images: [[0, 2], [1, 3]] is not the bytes 0, 1, 2, 3.
        let rows = whole.reshaped([10, 1])
        #expect(ConcatPlacement.adjacentView([rows.rows(0..<2), rows.rows(2..<4)], axis: 1) == nil)
    }

    /// Standalone BatchNormalization (+ Relu) as one pass against the scalar reference, in place and not.
    @Test(arguments: [[1, 3, 5, 7], [2, 4, 16], [3, 6], [1, 2, 40, 41]])
    func batchNormalizationPassMatchesReference(_ shape: [Int]) throws {
        var rng = SeededGenerator(seed: 21)
        let c = shape[1]
        let scale = rng.floats(c), bias = rng.floats(c), mean = rng.floats(c), variance = rng.floats(c).map { abs($0) + 0.1 }
        let x = Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * 4 })
        let ctx = OpContext(node: Node(opType: "BatchNormalization", inputs: ["x"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)
        let affine = batchNormalizationAffine(scale: scale, bias: bias, mean: mean, variance: variance, epsilon: 1e-5)
        for activation in [Activation.none, .relu, .silu] {
            var expected = try batchNormalize(x, scale: scale, bias: bias, mean: mean, variance: variance, epsilon: 1e-5, ctx)
            expected.withUnsafeMutableBufferPointer(of: Float.self) { activation.apply($0.baseAddress!, count: $0.count) }
            let shared = scaleShiftChannels(x, mul: affine.mul, add: affine.add, activation: activation)
            #expect(T.close(T.floats(shared), T.floats(expected)), "\(activation)")
            #expect(x.storage !== shared.storage)
            let owned = Tensor(shape: shape, scalars: T.floats(x))
            #expect(T.close(T.floats(scaleShiftChannels(owned, mul: affine.mul, add: affine.add, activation: activation)), T.floats(expected)))
        }
    }

    /// BatchNormalization followed by Relu compiles to one step.
    @Test func batchNormalizationTakesTheFollowingRelu() throws {
        var g = GraphBuilder()
        g.conv("x", "a", 3)
        g.node("Sigmoid", ["a"], "s")
        g.batchNorm("s", "y", relu: true)
        let (model, out) = try Self.check(g.model(outputs: ["y", "s"]))
        let kinds = Set(try model.profile(["x": Tensor(shape: [1, 3, 6, 7], scalars: [Float](repeating: 0.5, count: 126))]).map(\.opType))
        #expect(kinds.contains("BatchNormalization+relu") && !kinds.contains("Relu"), "\(kinds)")
        // Against the reference: the scalar BatchNormalization, then Relu.
        let p = ["scale", "bias", "mean", "var"].map { name in T.floats(g.inits.first { $0.name == "y_\(name)" }!.tensor) }
        let ctx = OpContext(node: Node(opType: "BatchNormalization", inputs: ["s"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)
        let bn = try batchNormalize(out["s"]!, scale: p[0], bias: p[1], mean: p[2], variance: p[3], epsilon: 1e-5, ctx)
        #expect(T.close(T.floats(out["y"]!), T.floats(bn).map { max($0, 0) }))
    }
}
