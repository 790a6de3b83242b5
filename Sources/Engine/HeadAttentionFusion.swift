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
        rewriteEachNode { $0.fuseHeadAttention(scoresAt: $1) }
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
        let fused = PlannedNode(node: Node(name: last.name, opType: headAttentionOp, domain: fusedDomain,
                                           inputs: first.inputs + [last.inputs[1]] + (mask.map { [$0] } ?? []), outputs: last.outputs,
                                           attributes: attributes))
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
/// original kernels in turn (the unfused path, also the tests' twin).
let headAttentionKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let node = { (op: String, domain: String, inputs: [String], attributes: [String: Attribute]) in
        OpContext(node: Node(opType: op, domain: domain, inputs: inputs, outputs: ["y"], attributes: attributes), opset: ctx.opset,
                  constants: [:], activation: .none)
    }
    let replacesNaN = ctx.has("value")
    let fill = try ctx.float("value", 0), minimumRank = try ctx.int("minimum_rank", 0)
    let scores = try matmulFactory(node("MatMul", "", ["q", "k"], [:])).kernel
    let addMask = try operatorTable["Add"]!(node("Add", "", ["s", "mask"], [:])).kernel
    let softmax = replacesNaN
        ? try softmaxReplaceNaNKernel(node(softmaxReplaceNaNOp, fusedDomain, ["s"], ["value": .float(fill), "minimum_rank": .int(Int64(minimumRank))])).kernel
        : try operatorTable["Softmax"]!(node("Softmax", "", ["s"], [:])).kernel
    let weighted = try matmulFactory(node("MatMul", "", ["p", "v"], [:])).kernel
    return PreparedKernel { inputs in
        let q = try inputs.required(0, ctx), k = try inputs.required(1, ctx), v = try inputs.required(2, ctx)
        let mask = inputs[3]
        if let fast = fusedHeadAttention(q, k, v, mask: mask, fill: replacesNaN ? fill : nil, minimumRank: minimumRank) { return [fast] }
        var first = KernelInputs(values: [q, k])
        var product = try scores(&first)[0]
        if let mask {
            var sum = KernelInputs(values: [product, mask])
            product = try addMask(&sum)[0]
        }
        var second = KernelInputs(values: [product])
        var third = KernelInputs(values: [try softmax(&second)[0], v])
        return try weighted(&third)
    }
}

/// `headAttention` on the operands when they are float32 stacks of per-head matrices of one batch shape and sizes it
/// takes, with a float32 mask that broadcasts to the scores; nil otherwise.
private func fusedHeadAttention(_ q: Tensor, _ k: Tensor, _ v: Tensor, mask: Tensor?, fill: Float?, minimumRank: Int) -> Tensor? {
    guard q.dtype == .float32, k.dtype == .float32, v.dtype == .float32, q.rank >= 3, k.rank == q.rank, v.rank == q.rank,
          q.rank >= minimumRank else { return nil }
    let batch = Array(q.shape.dropLast(2))
    guard Array(k.shape.dropLast(2)) == batch, Array(v.shape.dropLast(2)) == batch else { return nil }
    let m = q.shape[q.rank - 1 - 1], depth = q.shape[q.rank - 1], n = k.shape[k.rank - 1], width = v.shape[v.rank - 1]
    guard k.shape[k.rank - 2] == depth, v.shape[v.rank - 2] == n, headAttentionFits(m: m, depth: depth, n: n, width: width) else { return nil }
    let heads = batch.reduce(1, *)
    var layout: AttentionMask.Layout?
    if let mask {
        guard mask.dtype == .float32, let l = AttentionMask.Layout(mask: mask.shape, scores: batch + [m, n]) else { return nil }
        layout = l
    }
    var out = Tensor.pooled(.float32, shape: batch + [m, width])
    guard heads > 0 else { return out }
    out.withUnsafeMutableBufferPointer(of: Float.self) { o in
        q.floatPointer { qp in k.floatPointer { kp in v.floatPointer { vp in
            func run(_ maskPointer: UnsafePointer<Float>?) {
                var attentionMask: AttentionMask?
                if let maskPointer, let layout { attentionMask = AttentionMask(base: maskPointer, layout: layout) }
                headAttention(q: qp, k: kp, v: vp, heads: heads, m: m, depth: depth, n: n, width: width, mask: attentionMask, fill: fill,
                              out: o.baseAddress!)
            }
            if let mask { mask.floatPointer { run($0) } } else { run(nil) }
        } } }
    }
    return out
}
