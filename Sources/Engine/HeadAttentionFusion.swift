import ONNX
import Tensor

/// Op type (in `fusedDomain`) of MatMul -> [Add(mask)] -> Softmax(last axis) -> MatMul: inputs Q, K^T, V and the
/// optional additive mask; a Softmax whose NaN rows were replaced (`SoftmaxReplaceNaN`) carries its `value` and
/// `minimum_rank` along.
let headAttentionOp = "HeadAttention"

extension GraphOptimizer {
    /// Fuses `MatMul(Softmax(MatMul(q, kT) [+ mask]), v)` into one `HeadAttention` node when the softmax runs along the
    /// last axis (opset 13 and later), every operand is computed at run time, and each intermediate feeds only the next
    /// node: the kernel then keeps each head's scores in cache (`headAttention`). The mask Add is what BERT, GPT-2 and
    /// MiniLM exports put between the product and the Softmax (their Softmax then fused with its NaN guard). Runs
    /// after `fuseMatMulBias`, so products with a bias are left alone.
    mutating func fuseHeadAttention() {
        guard opset >= 13 else { return }
        // A fusion also removes nodes before the one offered (the operands' Transposes), so the nodes that slide past
        // that index are offered on the next pass.
        var fused = true
        while fused {
            fused = false
            rewriteEachNode { optimizer, index in
                let done = optimizer.fuseHeadAttention(scoresAt: index)
                fused = fused || done
                return done
            }
        }
    }

    /// An attention operand traced back through what exporters put before it, each step's output read by nothing
    /// else but the next step (and, for a Transpose, `Shape` nodes: exporters read the dims of the heads' tensors):
    /// a Transpose with `perm` (the heads split out of the projection, [batch, tokens, heads, size] -> [batch, heads,
    /// ...]) and, with `scales`, a Mul by a float32 scalar constant (PyTorch's scaled dot-product export multiplies
    /// both Q and K^T by 1 / size^(1/4)). `source` is what the kernel then reads.
    private struct TracedOperand {
        var source: String
        var transposed = false
        var scale: Float?
        var absorbed: [Int] = []
        /// Shape nodes that read the absorbed Transpose's output, with that Transpose's input and perm.
        var shapeReaders: [(index: Int, input: String, perm: [Int64])] = []
    }

    private func traceOperand(_ value: String, readBy reader: Int, perm: [Int64], scales: Bool) -> TracedOperand {
        var traced = TracedOperand(source: value)
        var consumer = reader
        while !graphOutputs.contains(traced.source),
              let producer = nodes.firstIndex(where: { $0.node.outputs.first == traced.source }), producer < consumer {
            let users = consumers(of: traced.source)
            let others = users.filter { $0 != consumer }
            let node = nodes[producer].node
            guard users.contains(consumer), isDefaultDomain(node.domain), nodes[producer].activation == .none, node.outputs.count == 1 else { break }
            if node.opType == "Transpose", !traced.transposed, node.inputs.count == 1, case .ints(let p)? = node.attributes["perm"], p == perm,
               others.allSatisfy({ isShapeReader(nodes[$0].node, of: traced.source) }) {
                traced.transposed = true
                traced.shapeReaders += others.map { (index: $0, input: node.inputs[0], perm: perm) }
                traced.source = node.inputs[0]
            } else if scales, node.opType == "Mul", traced.scale == nil, others.isEmpty, node.inputs.count == 2,
                      let c = node.inputs.firstIndex(where: { constants[$0].map { $0.dtype == .float32 && $0.count == 1 && $0.rank <= 1 } ?? false }),
                      constants[node.inputs[1 - c]] == nil, !node.inputs[1 - c].isEmpty {
                traced.scale = constants[node.inputs[c]]!.scalars(as: Float.self)[0]
                traced.source = node.inputs[1 - c]
            } else {
                break
            }
            traced.absorbed.append(producer)
            consumer = producer
        }
        return traced
    }

    /// True for a `Shape` node of the default domain reading `value` alone.
    private func isShapeReader(_ node: Node, of value: String) -> Bool {
        node.opType == "Shape" && isDefaultDomain(node.domain) && node.inputs == [value] && node.outputs.count == 1
    }

    /// One fusion at the scores MatMul at `index`; true when it fused (the fused node moves to the second product's
    /// place, so the node now at `index` is offered next).
    private mutating func fuseHeadAttention(scoresAt index: Int) -> Bool {
        func isPlainProduct(_ p: PlannedNode) -> Bool {
            p.node.opType == "MatMul" && isDefaultDomain(p.node.domain) && p.node.inputs.count == 2 && p.node.outputs.count == 1
                && p.activation == .none && p.node.inputs.allSatisfy { !$0.isEmpty && constants[$0] == nil }
        }
        guard isPlainProduct(nodes[index]), var next = soleReader(of: nodes[index].node.outputs[0]), next > index else { return false }
        var absorbed = [index]
        var mask: String?
        let scoresValue = nodes[index].node.outputs[0]
        let add = nodes[next]
        if add.node.opType == "Add", isDefaultDomain(add.node.domain), add.activation == .none, add.node.inputs.count == 2,
           add.node.outputs.count == 1, add.node.inputs.filter({ $0 == scoresValue }).count == 1,
           let other = add.node.inputs.first(where: { $0 != scoresValue }), !other.isEmpty,
           let softmaxIndex = soleReader(of: add.node.outputs[0]), softmaxIndex > next {
            mask = other
            absorbed.append(next)
            next = softmaxIndex
        }
        let softmax = nodes[next]
        let plainSoftmax = softmax.node.opType == "Softmax" && isDefaultDomain(softmax.node.domain)
        let guardedSoftmax = softmax.node.opType == softmaxReplaceNaNOp && softmax.node.domain == fusedDomain
        // The guarded Softmax's fill and minimum rank travel with the fused node.
        let attributes = guardedSoftmax ? ["value": softmax.node.attributes["value"] ?? .float(0),
                                           "minimum_rank": softmax.node.attributes["minimum_rank"] ?? .int(0)] : [:]
        guard plainSoftmax || guardedSoftmax, softmax.activation == .none, softmax.node.inputs.count == 1, softmax.node.outputs.count == 1,
              lastAxisAttribute(softmax.node),
              let product = soleReader(of: softmax.node.outputs[0]), product > next, isPlainProduct(nodes[product]),
              nodes[product].node.inputs[0] == softmax.node.outputs[0], nodes[product].node.inputs[1] != softmax.node.outputs[0]
        else { return false }
        absorbed.append(next)
        let first = nodes[index].node, last = nodes[product].node
        // The heads' Transposes (and scalings) around the products are read in place, and the output written in the
        // layout its Transpose back wanted (MiniLM: four Transposes and two Muls per layer, 3% of its time).
        // (A product of a value with itself keeps its operands: tracing both would absorb the same nodes twice.)
        let distinct = first.inputs[0] != first.inputs[1]
        let q = distinct ? traceOperand(first.inputs[0], readBy: index, perm: [0, 2, 1, 3], scales: true) : TracedOperand(source: first.inputs[0])
        let k = distinct ? traceOperand(first.inputs[1], readBy: index, perm: [0, 2, 3, 1], scales: true) : TracedOperand(source: first.inputs[1])
        let v = traceOperand(last.inputs[1], readBy: product, perm: [0, 2, 1, 3], scales: false)
        var outputs = last.outputs
        var flags = attributes
        if let reader = soleReader(of: last.outputs[0]), reader > product, case let t = nodes[reader], t.node.opType == "Transpose",
           isDefaultDomain(t.node.domain), t.activation == .none, t.node.inputs.count == 1, t.node.outputs.count == 1,
           case .ints([0, 2, 1, 3])? = t.node.attributes["perm"] {
            outputs = t.node.outputs
            absorbed.append(reader)
            flags["out_transposed"] = .int(1)
        }
        for (name, operand) in [("q", q), ("k", k), ("v", v)] {
            if operand.transposed { flags["\(name)_transposed"] = .int(1) }
            if let scale = operand.scale { flags["\(name)_scale"] = .float(scale) }
            absorbed += operand.absorbed
        }
        // Shapes read from an absorbed Transpose's output are the permuted shape of its input.
        for reader in q.shapeReaders + k.shapeReaders + v.shapeReaders {
            let shape = nodes[reader.index].node
            nodes[reader.index] = PlannedNode(node: Node(name: shape.name, opType: permutedShapeOp, domain: fusedDomain, inputs: [reader.input],
                                                         outputs: shape.outputs, attributes: shape.attributes.merging(["perm": .ints(reader.perm)]) { $1 }))
        }
        let fused = PlannedNode(node: Node(name: last.name, opType: headAttentionOp, domain: fusedDomain,
                                           inputs: [q.source, k.source, v.source] + (mask.map { [$0] } ?? []), outputs: outputs,
                                           attributes: flags))
        // V and the mask may be computed between the products: the fused node runs where the second one did.
        nodes[product] = fused
        for removed in absorbed.sorted(by: >) { nodes.remove(at: removed) }
        return true
    }

    /// True when a Softmax's `axis` is absent (-1 from opset 13) or -1.
    private func lastAxisAttribute(_ node: Node) -> Bool {
        guard let axis = node.attributes["axis"] else { return true }
        if case .int(-1) = axis { return true }
        return false
    }
}

/// The `HeadAttention` kernel: float32 Q [..., m, d], K^T [..., d, n], V [..., n, w] with the same batch axes, and a
/// mask that broadcasts to the scores [..., m, n], run through `headAttention`; any other shape or type through the
/// original kernels in turn (the unfused path, also the tests' twin). Operands marked `*_transposed` arrive before
/// their exporter's Transpose ([batch, tokens, heads, size]; K's before (0, 2, 3, 1)), `*_scale` before their Mul by a
/// scalar, and `out_transposed` asks for the output after a Transpose (0, 2, 1, 3): the kernel reads and writes those
/// layouts in place, the unfused path runs the absorbed nodes.
let headAttentionKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let node = { (op: String, domain: String, inputs: [String], attributes: [String: Attribute]) in
        OpContext(node: Node(opType: op, domain: domain, inputs: inputs, outputs: ["y"], attributes: attributes), opset: ctx.opset,
                  constants: [:], activation: .none)
    }
    let replacesNaN = ctx.has("value")
    let fill = try ctx.float("value", 0), minimumRank = try ctx.int("minimum_rank", 0)
    let layout = HeadAttentionLayout(q: try ctx.int("q_transposed", 0) != 0, k: try ctx.int("k_transposed", 0) != 0,
                                     v: try ctx.int("v_transposed", 0) != 0, out: try ctx.int("out_transposed", 0) != 0,
                                     qScale: ctx.has("q_scale") ? try ctx.float("q_scale", 1) : nil,
                                     kScale: ctx.has("k_scale") ? try ctx.float("k_scale", 1) : nil)
    let scores = try matmulFactory(node("MatMul", "", ["q", "k"], [:])).kernel
    let addMask = try operatorTable["Add"]!(node("Add", "", ["s", "mask"], [:])).kernel
    let softmax = replacesNaN
        ? try softmaxReplaceNaNKernel(node(softmaxReplaceNaNOp, fusedDomain, ["s"], ["value": .float(fill), "minimum_rank": .int(Int64(minimumRank))])).kernel
        : try operatorTable["Softmax"]!(node("Softmax", "", ["s"], [:])).kernel
    let weighted = try matmulFactory(node("MatMul", "", ["p", "v"], [:])).kernel
    let transpose = { (perm: [Int64]) in try operatorTable["Transpose"]!(node("Transpose", "", ["x"], ["perm": .ints(perm)])).kernel }
    // (0, 2, 1, 3) is its own inverse: it splits the heads out of Q and V and puts the output's back.
    let (swapHeads, keysOut) = (try transpose([0, 2, 1, 3]), try transpose([0, 2, 3, 1]))
    let multiply = try operatorTable["Mul"]!(node("Mul", "", ["x", "c"], [:])).kernel
    /// The operand as the unfused graph had it: transposed, then scaled (the order the exporters' nodes ran in does
    /// not change a value).
    let restore: @Sendable (Tensor, Bool, Kernel, Float?) throws -> Tensor = { t, transposed, perm, scale in
        var t = t
        if transposed {
            var x = KernelInputs(values: [t])
            t = try perm(&x)[0]
        }
        if let scale {
            var x = KernelInputs(values: [t, Tensor(shape: [], scalars: [scale])])
            t = try multiply(&x)[0]
        }
        return t
    }
    return PreparedKernel { inputs in
        let q = try inputs.required(0, ctx), k = try inputs.required(1, ctx), v = try inputs.required(2, ctx)
        let mask = inputs[3]
        if let fast = fusedHeadAttention(q, k, v, layout: layout, mask: mask, fill: replacesNaN ? fill : nil, minimumRank: minimumRank) {
            return [fast]
        }
        var first = KernelInputs(values: [try restore(q, layout.q, swapHeads, layout.qScale),
                                          try restore(k, layout.k, keysOut, layout.kScale)])
        var product = try scores(&first)[0]
        if let mask {
            var sum = KernelInputs(values: [product, mask])
            product = try addMask(&sum)[0]
        }
        var second = KernelInputs(values: [product])
        var third = KernelInputs(values: [try softmax(&second)[0], try restore(v, layout.v, swapHeads, nil)])
        let result = try weighted(&third)
        guard layout.out else { return result }
        var back = KernelInputs(values: result)
        return try swapHeads(&back)
    }
}

/// Which operands of a fused `HeadAttention` arrive before their Transpose or Mul, and whether the output leaves after
/// its Transpose back.
struct HeadAttentionLayout {
    var q = false, k = false, v = false, out = false
    var qScale: Float?, kScale: Float?
}

/// `headAttention` on the operands when they are float32 stacks of per-head matrices of one batch shape and sizes it
/// takes (read in their layouts: `[batch, tokens, heads, size]` for the transposed ones, always of rank 4), with a
/// float32 mask that broadcasts to the scores; nil otherwise.
private func fusedHeadAttention(_ q: Tensor, _ k: Tensor, _ v: Tensor, layout: HeadAttentionLayout, mask: Tensor?, fill: Float?,
                                minimumRank: Int) -> Tensor? {
    guard q.dtype == .float32, k.dtype == .float32, v.dtype == .float32 else { return nil }
    let interleaved = layout.q || layout.k || layout.v || layout.out
    guard !interleaved || (q.rank == 4 && k.rank == 4 && v.rank == 4) else { return nil }
    // The shapes the products see: [..., m, d], [..., d, n], [..., n, w].
    let qs = layout.q ? [q.shape[0], q.shape[2], q.shape[1], q.shape[3]] : q.shape
    let ks = layout.k ? [k.shape[0], k.shape[2], k.shape[3], k.shape[1]] : k.shape
    let vs = layout.v ? [v.shape[0], v.shape[2], v.shape[1], v.shape[3]] : v.shape
    guard qs.count >= 3, ks.count == qs.count, vs.count == qs.count, qs.count >= minimumRank else { return nil }
    let batch = Array(qs.dropLast(2))
    guard Array(ks.dropLast(2)) == batch, Array(vs.dropLast(2)) == batch else { return nil }
    let m = qs[qs.count - 2], depth = qs[qs.count - 1], n = ks[ks.count - 1], width = vs[vs.count - 1]
    guard ks[ks.count - 2] == depth, vs[vs.count - 2] == n, headAttentionFits(m: m, depth: depth, n: n, width: width) else { return nil }
    let heads = batch.reduce(1, *)
    var maskLayout: AttentionMask.Layout?
    if let mask {
        guard mask.dtype == .float32, let l = AttentionMask.Layout(mask: mask.shape, scores: batch + [m, n]) else { return nil }
        maskLayout = l
    }
    // With the heads interleaved, batch is [N, H] (rank 4).
    let perBatch = interleaved ? batch[1] : 1
    func view(_ transposed: Bool, rows: Int, columns: Int) -> HeadLayout {
        transposed ? .interleaved(rows: rows, heads: perBatch, columns: columns) : .stacked(rows: rows, columns: columns)
    }
    var out = Tensor.pooled(.float32, shape: layout.out ? [batch[0], m, perBatch, width] : batch + [m, width])
    guard heads > 0 else { return out }
    out.withUnsafeMutableBufferPointer(of: Float.self) { o in
        q.floatPointer { qp in k.floatPointer { kp in v.floatPointer { vp in
            func run(_ maskPointer: UnsafePointer<Float>?) {
                var attentionMask: AttentionMask?
                if let maskPointer, let maskLayout { attentionMask = AttentionMask(base: maskPointer, layout: maskLayout) }
                headAttention(q: HeadOperand(base: qp, layout: view(layout.q, rows: m, columns: depth), scale: layout.qScale),
                              k: HeadOperand(base: kp, layout: layout.k ? view(true, rows: n, columns: depth) : view(false, rows: depth, columns: n),
                                             scale: layout.kScale),
                              keysAsRows: layout.k, v: HeadOperand(base: vp, layout: view(layout.v, rows: n, columns: width)), heads: heads,
                              m: m, depth: depth, n: n, width: width, mask: attentionMask, fill: fill, out: o.baseAddress!,
                              outLayout: view(layout.out, rows: m, columns: width))
            }
            if let mask { mask.floatPointer { run($0) } } else { run(nil) }
        } } }
    }
    return out
}

/// Op type (in `fusedDomain`) of `Shape(Transpose(x, perm))` once the Transpose was absorbed: x's shape permuted by
/// `perm`, then sliced by the Shape's own `start` / `end`.
let permutedShapeOp = "PermutedShape"

/// The `PermutedShape` kernel.
let permutedShapeKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let perm = try ctx.ints("perm") ?? []
    let start = try ctx.int("start", 0), end = ctx.has("end") ? try ctx.int("end", 0) : Int.max
    return PreparedKernel { inputs in
        let shape = try inputs.required(0, ctx).shape
        guard perm.count == shape.count, perm.allSatisfy({ $0 >= 0 && $0 < shape.count }) else {
            throw ctx.error(.invalidModel, "Transpose perm \(perm) does not fit input shape \(shape)")
        }
        return [shapeTensor(perm.map { shape[$0] }, start: start, end: end)]
    }
}
