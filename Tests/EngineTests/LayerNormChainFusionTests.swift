import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// Decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), fused and unfused.
@Suite struct LayerNormChainFusionTests {
    /// x [N, 3, width] -> decomposed LayerNorm over the last axis -> y. `squareByMul` spells d^2 as Mul(d, d);
    /// opset 18 gives ReduceMean its axes as an input; `extraOutputs` makes intermediates graph outputs.
    private static func model(width: Int = 20, opset: Int64 = 13, squareByMul: Bool = false, affine: Bool = true,
                              extraOutputs: [String] = []) -> Model {
        var rng = SeededGenerator(seed: 11)
        var inits: [(name: String, tensor: Tensor)] = [(name: "two", tensor: Tensor(shape: [], scalars: [Float(2)])),
                                                      (name: "eps", tensor: Tensor(shape: [], scalars: [Float(1e-12)]))]
        let reduceMeanAttributes: [String: Attribute] = opset >= 18 ? [:] : ["axes": .ints([-1])]
        let axesInput = opset >= 18 ? ["axes"] : []
        if opset >= 18 { inits.append((name: "axes", tensor: Tensor(shape: [1], scalars: [Int64(-1)]))) }
        var nodes = [Node(opType: "ReduceMean", inputs: ["x"] + axesInput, outputs: ["mean"], attributes: reduceMeanAttributes),
                     Node(opType: "Sub", inputs: ["x", "mean"], outputs: ["d"]),
                     squareByMul ? Node(opType: "Mul", inputs: ["d", "d"], outputs: ["sq"]) : Node(opType: "Pow", inputs: ["d", "two"], outputs: ["sq"]),
                     Node(opType: "ReduceMean", inputs: ["sq"] + axesInput, outputs: ["var"], attributes: reduceMeanAttributes),
                     Node(opType: "Add", inputs: ["var", "eps"], outputs: ["ve"]),
                     Node(opType: "Sqrt", inputs: ["ve"], outputs: ["s"]),
                     Node(opType: "Div", inputs: ["d", "s"], outputs: affine ? ["n"] : ["y"])]
        if affine {
            inits.append((name: "gamma", tensor: Tensor(shape: [width], scalars: rng.floats(width).map { $0 + 1.5 })))
            inits.append((name: "beta", tensor: Tensor(shape: [width], scalars: rng.floats(width))))
            nodes += [Node(opType: "Mul", inputs: ["n", "gamma"], outputs: ["g"]), Node(opType: "Add", inputs: ["beta", "g"], outputs: ["y"])]
        }
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(width)])]
        let outputs = (["y"] + extraOutputs).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": opset], graph: Graph(name: "ln", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// Runs fused and unfused on batches 1 and 2, expects outputs within tolerance, returns the fused plan's step kinds.
    private static func check(_ model: Model, width: Int = 20) throws -> Set<String> {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 5)
        for batch in [1, 2] {
            let feeds = ["x": Tensor(shape: [batch, 3, width], scalars: rng.floats(batch * 3 * width).map { $0 * 3 + 0.5 })]
            let a = try fused.run(feeds), b = try plain.run(feeds)
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape, "\(name)")
                #expect(T.close(T.floats(a[name]!), T.floats(expected)), "\(name)")
            }
        }
        let feeds = ["x": Tensor(shape: [1, 3, width], scalars: rng.floats(3 * width))]
        return Set(try fused.profile(feeds).map(\.opType))
    }

    @Test func powSpellingFusesIntoOneNode() throws {
        #expect(try Self.check(Self.model()) == [fusedLayerNormOp])
    }

    @Test func mulSpellingAndOpset18AxesInputFuse() throws {
        #expect(try Self.check(Self.model(opset: 18, squareByMul: true)) == [fusedLayerNormOp])
    }

    @Test func chainWithoutScaleAndShiftFuses() throws {
        #expect(try Self.check(Self.model(affine: false)) == [fusedLayerNormOp])
    }

    @Test func widthsOnAndOffTheVectorLaneFuse() throws {
        for width in [1, 16, 48, 384] {
            #expect(try Self.check(Self.model(width: width), width: width) == [fusedLayerNormOp], "width \(width)")
        }
    }

    @Test func intermediateGraphOutputKeepsTheChain() throws {
        let kinds = try Self.check(Self.model(extraOutputs: ["d"]))
        #expect(kinds.contains("ReduceMean") && !kinds.contains(fusedLayerNormOp), "\(kinds)")
    }

    @Test func vectorKernelMatchesTheScalarReference() {
        var rng = SeededGenerator(seed: 9)
        for (rows, width) in [(1, 1), (3, 15), (4, 16), (5, 33), (7, 384)] {
            let x = rng.floats(rows * width).map { $0 * 4 - 1 }
            let gamma = rng.floats(width), beta = rng.floats(width)
            var fast = x, reference = x
            fast.withUnsafeMutableBufferPointer { layerNormRows($0.baseAddress!, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: 1e-5) }
            reference.withUnsafeMutableBufferPointer {
                _ = normalizeRows($0.baseAddress!, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: 1e-5, simplified: false)
            }
            expectClose(fast, reference, "rows \(rows) width \(width)")
        }
    }

    /// The out-of-place form LayerNormalization uses: rows split across two threads, with each row's mean and inverse
    /// standard deviation, against the scalar reference.
    @Test func outOfPlaceRowsWithStatisticsMatchTheReference() {
        var rng = SeededGenerator(seed: 10)
        EngineThreads.configure(threads: 2)
        for (rows, width) in [(2, 7), (300, 96), (130, 384)] {
            let x = rng.floats(rows * width).map { $0 * 4 - 1 }
            let gamma = rng.floats(width), beta = rng.floats(width)
            var fast = [Float](repeating: .nan, count: x.count), reference = x
            var means = [Float](repeating: .nan, count: rows), inverse = means
            x.withUnsafeBufferPointer { source in
                means.withUnsafeMutableBufferPointer { m in inverse.withUnsafeMutableBufferPointer { v in
                    fast.withUnsafeMutableBufferPointer {
                        layerNormRows($0.baseAddress!, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: 1e-5,
                                      source: source.baseAddress!, statistics: (m.baseAddress!, v.baseAddress!))
                    }
                } }
            }
            let stats = reference.withUnsafeMutableBufferPointer {
                normalizeRows($0.baseAddress!, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: 1e-5, simplified: false)
            }
            expectClose(fast, reference, "rows \(rows) width \(width)")
            expectClose(means, stats.0, "means \(rows)x\(width)")
            expectClose(inverse, stats.1, "inverse \(rows)x\(width)")
        }
    }
}
