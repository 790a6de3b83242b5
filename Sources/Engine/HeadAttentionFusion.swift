import ONNX
import Tensor

/// Op type (in `fusedDomain`) of MatMul -> Softmax(last axis) -> MatMul: inputs Q, K^T, V.
let headAttentionOp = "HeadAttention"

extension GraphOptimizer {
    /// Fuses `MatMul(Softmax(MatMul(q, kT)), v)` into one `HeadAttention` node when the softmax runs along the last
    /// axis (opset 13 and later), every operand is computed at run time, and each intermediate feeds only the next
    /// node: the kernel then keeps each head's scores in cache (`headAttention`). Runs after `fuseMatMulBias`, so
    /// products with a bias are left alone.
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
        guard isPlainProduct(nodes[index]), let scores = soleReader(of: nodes[index].node.outputs[0]), scores > index else { return false }
        let softmax = nodes[scores]
        guard softmax.node.opType == "Softmax", isDefaultDomain(softmax.node.domain), softmax.activation == .none,
              softmax.node.outputs.count == 1, lastAxisAttribute(softmax.node),
              let product = soleReader(of: softmax.node.outputs[0]), product > scores, isPlainProduct(nodes[product]),
              nodes[product].node.inputs[0] == softmax.node.outputs[0], nodes[product].node.inputs[1] != softmax.node.outputs[0]
        else { return false }
        let first = nodes[index].node, last = nodes[product].node
        nodes[index].node = Node(name: last.name, opType: headAttentionOp, domain: fusedDomain, inputs: first.inputs + [last.inputs[1]],
                                 outputs: last.outputs)
        // The value V may be computed between the two products: the fused node runs where the second one did.
        let fused = nodes.remove(at: index)
        nodes.remove(at: product - 1)
        nodes.remove(at: scores - 1)
        nodes.insert(fused, at: product - 2)
        return true
    }

    /// True when a Softmax's `axis` is absent (-1 from opset 13) or -1.
    private func lastAxisAttribute(_ node: Node) -> Bool {
        guard let axis = node.attributes["axis"] else { return true }
        if case .int(-1) = axis { return true }
        return false
    }
}

/// The `HeadAttention` kernel: float32 Q [..., m, d], K^T [..., d, n], V [..., n, w] with the same batch axes run
/// through `headAttention`; any other shape or type through the three original kernels in turn (the unfused path,
/// also the tests' twin).
let headAttentionKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let node = { (op: String, inputs: [String]) in OpContext(node: Node(opType: op, inputs: inputs, outputs: ["y"]), opset: ctx.opset,
                                                             constants: [:], activation: .none) }
    let scores = try matmulFactory(node("MatMul", ["q", "k"])).kernel
    let softmax = try operatorTable["Softmax"]!(node("Softmax", ["s"])).kernel
    let weighted = try matmulFactory(node("MatMul", ["p", "v"])).kernel
    return PreparedKernel { inputs in
        let q = try inputs.required(0, ctx), k = try inputs.required(1, ctx), v = try inputs.required(2, ctx)
        if let fast = fusedHeadAttention(q, k, v) { return [fast] }
        var first = KernelInputs(values: [q, k])
        var second = KernelInputs(values: [try scores(&first)[0]])
        var third = KernelInputs(values: [try softmax(&second)[0], v])
        return try weighted(&third)
    }
}

/// `headAttention` on the operands when they are float32 stacks of per-head matrices of one batch shape and sizes it
/// takes; nil otherwise.
private func fusedHeadAttention(_ q: Tensor, _ k: Tensor, _ v: Tensor) -> Tensor? {
    guard q.dtype == .float32, k.dtype == .float32, v.dtype == .float32, q.rank >= 3, k.rank == q.rank, v.rank == q.rank else { return nil }
    let batch = Array(q.shape.dropLast(2))
    guard Array(k.shape.dropLast(2)) == batch, Array(v.shape.dropLast(2)) == batch else { return nil }
    let m = q.shape[q.rank - 1 - 1], depth = q.shape[q.rank - 1], n = k.shape[k.rank - 1], width = v.shape[v.rank - 1]
    guard k.shape[k.rank - 2] == depth, v.shape[v.rank - 2] == n, headAttentionFits(m: m, depth: depth, n: n, width: width) else { return nil }
    let heads = batch.reduce(1, *)
    var out = Tensor.pooled(.float32, shape: batch + [m, width])
    guard heads > 0 else { return out }
    out.withUnsafeMutableBufferPointer(of: Float.self) { o in
        q.floatPointer { qp in k.floatPointer { kp in v.floatPointer { vp in
            headAttention(q: qp, k: kp, v: vp, heads: heads, m: m, depth: depth, n: n, width: width, out: o.baseAddress!)
        } } }
    }
    return out
}
