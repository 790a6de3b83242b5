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

    /// A constant B runs on the packed kernel: the same answers as B fed at run time (the OpenBLAS path), rank 1 to 3 A.
    @Test func constantWeightsMatchTheRuntimeOperand() throws {
        var rng = SeededGenerator(seed: 8)
        let w = Tensor(shape: [24, 40], scalars: rng.floats(24 * 40))
        for shape in [[24], [5, 24], [3, 7, 24]] {
            let node = Node(opType: "MatMul", inputs: ["x", "w"], outputs: ["y"])
            func model(constant: Bool) -> Model {
                let x = ValueInfo(name: "x", elementType: .float32, shape: shape.map { .fixed($0) })
                let inputs = constant ? [x] : [x, ValueInfo(name: "w", elementType: .float32, shape: [.fixed(24), .fixed(40)])]
                return Model(opsetImports: ["": 17], graph: Graph(name: "mm", nodes: [node], initializers: constant ? [("w", w)] : [],
                                                                  inputs: inputs, outputs: [ValueInfo(name: "y")]))
            }
            let packed = try CompiledModel(model: model(constant: true), baseDirectory: nil)
            let runtime = try CompiledModel(model: model(constant: false), baseDirectory: nil)
            let x = Tensor(shape: shape, scalars: rng.floats(shape.reduce(1, *)))
            let a = try packed.run(["x": x])["y"]!, b = try runtime.run(["x": x, "w": w])["y"]!
            #expect(a.shape == b.shape, "\(shape)")
            #expect(T.close(T.floats(a), T.floats(b)), "\(shape)")
        }
    }

    /// ConvNeXt's block tail: Mul(Transpose(MatMul(x, W) + b), gamma [C, 1, 1]) + residual, with gamma folded into W and
    /// b, against the unfused graph; a gamma along another axis is left alone.
    @Test(arguments: [[8, 1, 1], [1, 8, 1, 1], [1, 1, 5]])
    func layerScaleFoldsIntoTheLinear(_ gammaShape: [Int]) throws {
        var rng = SeededGenerator(seed: 11)
        let inits: [(name: String, tensor: Tensor)] = [("w", Tensor(shape: [12, 8], scalars: rng.floats(96))),
                                                      ("bias", Tensor(shape: [8], scalars: rng.floats(8))),
                                                      ("gamma", Tensor(shape: gammaShape, scalars: rng.floats(gammaShape.reduce(1, *))))]
        let nodes = [Node(opType: "MatMul", inputs: ["x", "w"], outputs: ["p"]),
                     Node(opType: "Add", inputs: ["p", "bias"], outputs: ["q"]),
                     Node(opType: "Transpose", inputs: ["q"], outputs: ["t"], attributes: ["perm": .ints([0, 3, 1, 2])]),
                     Node(opType: "Mul", inputs: ["gamma", "t"], outputs: ["s"]),
                     Node(opType: "Add", inputs: ["s", "skip"], outputs: ["y"])]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(4), .fixed(5), .fixed(12)]),
                      ValueInfo(name: "skip", elementType: .float32, shape: [.symbolic("N"), .fixed(8), .fixed(4), .fixed(5)])]
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "ls", nodes: nodes, initializers: inits, inputs: inputs,
                                                              outputs: [ValueInfo(name: "y")]))
        let fused = try CompiledModel(model: model, baseDirectory: nil)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        for batch in [1, 2] {
            let feeds = ["x": Tensor(shape: [batch, 4, 5, 12], scalars: rng.floats(batch * 240)),
                         "skip": Tensor(shape: [batch, 8, 4, 5], scalars: rng.floats(batch * 160))]
            #expect(T.close(T.floats(try fused.run(feeds)["y"]!), T.floats(try plain.run(feeds)["y"]!)), "batch \(batch)")
        }
        let kinds = try fused.profile(["x": Tensor(shape: [1, 4, 5, 12], scalars: rng.floats(240)),
                                       "skip": Tensor(shape: [1, 8, 4, 5], scalars: rng.floats(160))]).map(\.opType)
        #expect(kinds.contains("Mul") == (gammaShape.last == 5), "\(kinds)")
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

    /// Gemm with a constant B (either layout, alpha and beta folded) and a constant bias row runs on the packed kernel
    /// with a fused Relu: the same answers as B fed at run time (the sgemm path); a full [m, n] C stays on sgemm.
    @Test(arguments: [false, true])
    func gemmWithConstantWeightsMatchesTheRuntimeOperand(_ transB: Bool) throws {
        var rng = SeededGenerator(seed: 12)
        let (k, n) = (24, 40)
        let w = Tensor(shape: transB ? [n, k] : [k, n], scalars: rng.floats(k * n))
        for cShape in [[n], [1, n], [7, n], []] {
            let c = Tensor(shape: cShape, scalars: rng.floats(cShape.reduce(1, *)))
            let nodes = [Node(opType: "Gemm", inputs: cShape.isEmpty ? ["x", "w"] : ["x", "w", "c"], outputs: ["g"],
                              attributes: ["transB": .int(transB ? 1 : 0), "alpha": .float(0.75), "beta": .float(1.5)]),
                         Node(opType: "Relu", inputs: ["g"], outputs: ["y"])]
            func model(constant: Bool) -> Model {
                let x = ValueInfo(name: "x", elementType: .float32, shape: [.fixed(7), .fixed(k)])
                let inputs = constant ? [x] : [x, ValueInfo(name: "w", elementType: .float32, shape: w.shape.map { .fixed($0) })]
                var inits: [(name: String, tensor: Tensor)] = constant ? [("w", w)] : []
                if !cShape.isEmpty { inits.append(("c", c)) }
                return Model(opsetImports: ["": 17], graph: Graph(name: "gemm", nodes: nodes, initializers: inits,
                                                                  inputs: inputs, outputs: [ValueInfo(name: "y")]))
            }
            let packed = try CompiledModel(model: model(constant: true), baseDirectory: nil)
            let runtime = try CompiledModel(model: model(constant: false), baseDirectory: nil)
            let x = Tensor(shape: [7, k], scalars: rng.floats(7 * k))
            let a = try packed.run(["x": x])["y"]!, b = try runtime.run(["x": x, "w": w])["y"]!
            #expect(a.shape == b.shape, "C \(cShape)")
            #expect(T.close(T.floats(a), T.floats(b)), "C \(cShape)")
            #expect(T.floats(a).contains(0) && T.floats(a).contains { $0 > 0 }, "the Relu ran: C \(cShape)")
        }
    }

    /// GPT-2's MLP: tanh-GELU (as its exporter spells it) of Reshape(Gemm(x, W, b)) moves into the Gemm's epilogue
    /// (the Reshape after it), with the answers of the unfused graph; a product with a second reader keeps its own pass.
    @Test(arguments: [false, true])
    func activationAfterAReshapeMovesIntoTheGemm(_ productIsAlsoOutput: Bool) throws {
        var rng = SeededGenerator(seed: 13)
        let inits: [(name: String, tensor: Tensor)] = [
            ("w", Tensor(shape: [24, 40], scalars: rng.floats(24 * 40))), ("b", Tensor(shape: [40], scalars: rng.floats(40))),
            ("shape", Tensor(shape: [3], scalars: [Int64(2), 3, 40])), ("half", Tensor(shape: [], scalars: [Float(0.5)])),
            ("three", Tensor(shape: [], scalars: [Float(3)])), ("k", Tensor(shape: [], scalars: [Float(0.044715)])),
            ("s", Tensor(shape: [], scalars: [Float(0.7978845608)])), ("one", Tensor(shape: [], scalars: [Float(1)]))]
        let nodes = [Node(opType: "Gemm", inputs: ["x", "w", "b"], outputs: ["g"]),
                     Node(opType: "Reshape", inputs: ["g", "shape"], outputs: ["r"]),
                     Node(opType: "Mul", inputs: ["r", "half"], outputs: ["h"]),
                     Node(opType: "Pow", inputs: ["r", "three"], outputs: ["c"]),
                     Node(opType: "Mul", inputs: ["c", "k"], outputs: ["ck"]),
                     Node(opType: "Add", inputs: ["r", "ck"], outputs: ["in"]),
                     Node(opType: "Mul", inputs: ["in", "s"], outputs: ["ins"]),
                     Node(opType: "Tanh", inputs: ["ins"], outputs: ["t"]),
                     Node(opType: "Add", inputs: ["t", "one"], outputs: ["t1"]),
                     Node(opType: "Mul", inputs: ["h", "t1"], outputs: ["y"])]
        let outputs = [ValueInfo(name: "y")] + (productIsAlsoOutput ? [ValueInfo(name: "g")] : [])
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "mlp", nodes: nodes, initializers: inits,
                                                              inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(6), .fixed(24)])],
                                                              outputs: outputs))
        let fused = try CompiledModel(model: model, baseDirectory: nil)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        let feeds = ["x": Tensor(shape: [6, 24], scalars: rng.floats(144))]
        let a = try fused.run(feeds), b = try plain.run(feeds)
        #expect(a["y"]!.shape == [2, 3, 40])
        for o in outputs { #expect(T.close(T.floats(a[o.name]!), T.floats(b[o.name]!)), "\(o.name)") }
        let kinds = try fused.profile(feeds).map(\.opType)
        #expect(kinds.contains { $0.hasPrefix("Activation") } == productIsAlsoOutput, "\(kinds)")
    }
}
