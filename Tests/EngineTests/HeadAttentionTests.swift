import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// MatMul -> Softmax -> MatMul fused into one per-head kernel, against the three steps unfused.
@Suite(.serialized) struct HeadAttentionTests {
    /// The graph softmax(q kT) v with q [N, H, S, D], kT [N, H, D, T], v [N, H, T, W]; `axis` is the Softmax's attribute.
    private func attentionModel(axis: Int64?, opset: Int64 = 17) -> Model {
        let nodes = [Node(opType: "MatMul", inputs: ["q", "kt"], outputs: ["s"]),
                     Node(opType: "Softmax", inputs: ["s"], outputs: ["p"], attributes: axis.map { ["axis": .int($0)] } ?? [:]),
                     Node(opType: "MatMul", inputs: ["p", "v"], outputs: ["y"])]
        let inputs = ["q", "kt", "v"].map { ValueInfo(name: $0, elementType: .float32, shape: nil) }
        return Model(opsetImports: ["": opset], graph: Graph(name: "attention", nodes: nodes, initializers: [], inputs: inputs,
                                                             outputs: [ValueInfo(name: "y")]))
    }

    /// Odd head sizes (narrow last strips, short bands), ViT's 197-token heads, one head, several batch axes and a
    /// head too large for the per-head kernel (the unfused fallback inside the fused node), at the tests' two threads (the
    /// heads split). Neither the thread count nor the float kernel body is switched here: both are process-wide, and
    /// other suites compare runs bit for bit (smallMatmul's and the softmax rows' bodies have their own tests).
    @Test func fusedAttentionMatchesTheUnfusedGraph() throws {
        var rng = SeededGenerator(seed: 21)
        let fused = try CompiledModel(model: attentionModel(axis: nil), baseDirectory: nil)
        let plain = try CompiledModel(model: attentionModel(axis: nil), baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        for (batch, m, d, n, w) in [([1, 12], 197, 64, 197, 64), ([2, 3], 7, 5, 19, 33), ([1], 1, 1, 1, 1), ([3], 13, 17, 40, 9),
                                    ([1, 2], 20, 600, 30, 8)] {
            let feeds = ["q": Tensor(shape: batch + [m, d], scalars: rng.floats(batch.reduce(1, *) * m * d).map { $0 * 3 }),
                         "kt": Tensor(shape: batch + [d, n], scalars: rng.floats(batch.reduce(1, *) * d * n)),
                         "v": Tensor(shape: batch + [n, w], scalars: rng.floats(batch.reduce(1, *) * n * w))]
            let a = try fused.run(feeds)["y"]!, b = try plain.run(feeds)["y"]!
            #expect(a.shape == b.shape, "\(batch) \(m)x\(d)x\(n)x\(w)")
            #expect(T.close(T.floats(a), T.floats(b)), "\(batch) \(m)x\(d)x\(n)x\(w)")
        }
        let kinds = try fused.profile(["q": Tensor(shape: [2, 4, 3], scalars: rng.floats(24)), "kt": Tensor(shape: [2, 3, 5], scalars: rng.floats(30)),
                                       "v": Tensor(shape: [2, 5, 6], scalars: rng.floats(60))]).map(\.opType)
        #expect(kinds == [headAttentionOp], "\(kinds)")
    }

    /// softmax(q kT + mask) v as exporters write it (BERT, GPT-2, MiniLM): the mask Add between the products, and with
    /// `guardNaN` the Softmax's NaN rows replaced by 0 through IsNaN and Where (which `SoftmaxReplaceNaN` fuses first).
    private func maskedModel(guardNaN: Bool) -> Model {
        var nodes = [Node(opType: "MatMul", inputs: ["q", "kt"], outputs: ["s"]),
                     Node(opType: "Add", inputs: ["s", "mask"], outputs: ["a"]),
                     Node(opType: "Softmax", inputs: ["a"], outputs: [guardNaN ? "p0" : "p"])]
        if guardNaN {
            nodes += [Node(opType: "IsNaN", inputs: ["p0"], outputs: ["nan"]), Node(opType: "Where", inputs: ["nan", "zero", "p0"], outputs: ["p"])]
        }
        nodes.append(Node(opType: "MatMul", inputs: ["p", "v"], outputs: ["y"]))
        let inputs = ["q", "kt", "v", "mask"].map { ValueInfo(name: $0, elementType: .float32, shape: nil) }
        return Model(opsetImports: ["": 17], graph: Graph(name: "masked", nodes: nodes,
                                                          initializers: guardNaN ? [(name: "zero", tensor: Tensor(shape: [], scalars: [Float(0)]))] : [],
                                                          inputs: inputs, outputs: [ValueInfo(name: "y")]))
    }

    /// The mask fused in: padding masks ([N, 1, 1, T]), causal ones ([1, 1, S, T], [S, T]), full ones, a single value
    /// and masks whose -infinity rows make whole softmax rows NaN (replaced by 0 under the guard), against the graph
    /// unfused; the fused plan is one HeadAttention step.
    @Test(arguments: [false, true]) func maskedAttentionMatchesTheUnfusedGraph(_ guardNaN: Bool) throws {
        var rng = SeededGenerator(seed: 23)
        let fused = try CompiledModel(model: maskedModel(guardNaN: guardNaN), baseDirectory: nil)
        let plain = try CompiledModel(model: maskedModel(guardNaN: guardNaN), baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        let (s, d, t, w) = (9, 8, 21, 10)
        for (batch, maskShape) in [([2, 3], [2, 1, 1, t]), ([2, 3], [1, 1, s, t]), ([2, 3], [s, t]), ([2, 3], [2, 3, s, t]), ([4], [1]),
                                   ([1, 12], [1, 1, 1, t])] {
            let heads = batch.reduce(1, *)
            var maskValues = rng.floats(maskShape.reduce(1, *)).map { $0 < -0.6 ? -Float.infinity : $0 }
            if guardNaN, maskShape.count == 2 { for j in 0..<t { maskValues[j] = -.infinity } }  // row 0 all masked: NaN
            let feeds = ["q": Tensor(shape: batch + [s, d], scalars: rng.floats(heads * s * d).map { $0 * 3 }),
                         "kt": Tensor(shape: batch + [d, t], scalars: rng.floats(heads * d * t)),
                         "v": Tensor(shape: batch + [t, w], scalars: rng.floats(heads * t * w)),
                         "mask": Tensor(shape: maskShape, scalars: maskValues)]
            let a = try fused.run(feeds)["y"]!, b = try plain.run(feeds)["y"]!
            #expect(a.shape == b.shape, "\(batch) mask \(maskShape)")
            let (x, y) = (T.floats(a), T.floats(b))
            #expect(x.map(\.isNaN) == y.map(\.isNaN), "NaNs differ: \(batch) mask \(maskShape)")
            #expect(T.close(x.map { $0.isNaN ? 0 : $0 }, y.map { $0.isNaN ? 0 : $0 }), "\(batch) mask \(maskShape)")
            let kinds = try fused.profile(feeds).map(\.opType)
            #expect(kinds == [headAttentionOp], "\(kinds)")
        }
    }

    /// Attention as PyTorch's scaled dot-product export writes it around the products: Q and V split into heads by
    /// Transpose(0, 2, 1, 3), K by Transpose(0, 2, 3, 1), Q and K^T each times a scalar, a Shape read of the heads' V,
    /// and the output put back by Transpose(0, 2, 1, 3). Inputs are [N, tokens, heads, size].
    private func headsModel(mask: Bool) -> Model {
        var nodes = [Node(opType: "Transpose", inputs: ["xq"], outputs: ["tq"], attributes: ["perm": .ints([0, 2, 1, 3])]),
                     Node(opType: "Mul", inputs: ["tq", "scale"], outputs: ["q"]),
                     Node(opType: "Transpose", inputs: ["xk"], outputs: ["tk"], attributes: ["perm": .ints([0, 2, 3, 1])]),
                     Node(opType: "Mul", inputs: ["scale", "tk"], outputs: ["kt"]),
                     Node(opType: "Transpose", inputs: ["xv"], outputs: ["v"], attributes: ["perm": .ints([0, 2, 1, 3])]),
                     Node(opType: "Shape", inputs: ["v"], outputs: ["vdims"], attributes: ["start": .int(1)]),
                     Node(opType: "MatMul", inputs: ["q", "kt"], outputs: ["s"])]
        if mask { nodes.append(Node(opType: "Add", inputs: ["s", "mask"], outputs: ["a"])) }
        nodes += [Node(opType: "Softmax", inputs: [mask ? "a" : "s"], outputs: ["p"]),
                  Node(opType: "MatMul", inputs: ["p", "v"], outputs: ["heads"]),
                  Node(opType: "Transpose", inputs: ["heads"], outputs: ["y"], attributes: ["perm": .ints([0, 2, 1, 3])])]
        let inputs = ["xq", "xk", "xv"] + (mask ? ["mask"] : [])
        return Model(opsetImports: ["": 17], graph: Graph(name: "heads", nodes: nodes,
                                                          initializers: [(name: "scale", tensor: Tensor(shape: [], scalars: [Float(0.42)]))],
                                                          inputs: inputs.map { ValueInfo(name: $0, elementType: .float32, shape: nil) },
                                                          outputs: [ValueInfo(name: "y"), ValueInfo(name: "vdims")]))
    }

    /// The heads' Transposes and scalings are read in place by the fused kernel (one HeadAttention step, the Shape
    /// read of V answered from its input), bit for bit the graph unfused, with and without a mask; heads too large
    /// for the kernel go through the absorbed nodes and the unfused kernels.
    @Test(arguments: [false, true]) func headTransposesAreReadInPlace(_ masked: Bool) throws {
        var rng = SeededGenerator(seed: 29)
        let fused = try CompiledModel(model: headsModel(mask: masked), baseDirectory: nil)
        let plain = try CompiledModel(model: headsModel(mask: masked), baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        for (n, s, t, h, d, w) in [(2, 9, 21, 3, 8, 10), (1, 128, 128, 12, 32, 32), (3, 5, 7, 2, 17, 5), (1, 4, 6, 2, 600, 3)] {
            var feeds = ["xq": Tensor(shape: [n, s, h, d], scalars: rng.floats(n * s * h * d).map { $0 * 3 }),
                         "xk": Tensor(shape: [n, t, h, d], scalars: rng.floats(n * t * h * d)),
                         "xv": Tensor(shape: [n, t, h, w], scalars: rng.floats(n * t * h * w))]
            if masked { feeds["mask"] = Tensor(shape: [n, 1, 1, t], scalars: rng.floats(n * t)) }
            let a = try fused.run(feeds), b = try plain.run(feeds)
            #expect(a["y"]!.shape == [n, s, h, w] && b["y"]!.shape == [n, s, h, w], "\(n)x\(s)x\(t)x\(h)x\(d)x\(w)")
            #expect(T.floats(a["y"]!) == T.floats(b["y"]!), "\(n)x\(s)x\(t)x\(h)x\(d)x\(w)")
            #expect(a["vdims"]!.ints == [h, t, w] && b["vdims"]!.ints == [h, t, w])
        }
        let kinds = try fused.profile(["xq": Tensor(shape: [1, 3, 2, 4], scalars: rng.floats(24)), "xk": Tensor(shape: [1, 5, 2, 4], scalars: rng.floats(40)),
                                       "xv": Tensor(shape: [1, 5, 2, 6], scalars: rng.floats(60))]
                                      .merging(masked ? ["mask": Tensor(shape: [1, 1, 1, 5], scalars: rng.floats(5))] : [:]) { $1 }).map(\.opType)
        #expect(kinds.sorted() == [headAttentionOp, permutedShapeOp].sorted(), "\(kinds)")
    }

    /// A Softmax along another axis, or before opset 13 (its 2-D coercion), stays three steps.
    @Test func otherSoftmaxAxesAreNotFused() throws {
        var rng = SeededGenerator(seed: 22)
        for (axis, opset) in [(Int64(1), Int64(17)), (Int64(-1), Int64(11))] {
            let model = try CompiledModel(model: attentionModel(axis: axis, opset: opset), baseDirectory: nil)
            let kinds = try model.profile(["q": Tensor(shape: [2, 4, 3], scalars: rng.floats(24)), "kt": Tensor(shape: [2, 3, 5], scalars: rng.floats(30)),
                                           "v": Tensor(shape: [2, 5, 6], scalars: rng.floats(60))]).map(\.opType)
            #expect(Set(kinds) == ["MatMul", "Softmax"], "axis \(axis) opset \(opset): \(kinds)")
        }
    }
}
