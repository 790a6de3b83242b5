import ONNX
import Tensor

/// Op type of a fused `Where(IsNaN(x), value, x)`: x with every NaN replaced by the float attribute `value`.
let replaceNaNOp = "ReplaceNaN"

extension GraphOptimizer {
    /// Replaces `Where(IsNaN(x), c, x)` with a scalar float32 constant c (how exporters guard a masked Softmax
    /// against fully masked rows) by one in-place pass, instead of a bool tensor and a three-way broadcast select.
    /// Only when the IsNaN result feeds nothing but that Where and is no graph output; otherwise the graph stays.
    mutating func fuseNaNReplacement() {
        let (producer, readers) = valueUses()
        var removed: Set<Int> = []
        for index in nodes.indices {
            let select = nodes[index].node
            guard select.opType == "Where", isDefaultDomain(select.domain), select.inputs.count == 3, select.outputs.count == 1,
                  !select.outputs[0].isEmpty, let isNaNIndex = producer[select.inputs[0]], !removed.contains(isNaNIndex) else { continue }
            let test = nodes[isNaNIndex].node
            let mask = select.inputs[0], x = select.inputs[2]
            guard test.opType == "IsNaN", isDefaultDomain(test.domain), test.inputs == [x], test.outputs == [mask],
                  readers[mask] == 1, !graphOutputs.contains(mask), constants[x] == nil,
                  let c = constants[select.inputs[1]], c.dtype == .float32, c.count == 1 else { continue }
            let fused = Node(name: select.name, opType: replaceNaNOp, domain: fusedDomain, inputs: [x], outputs: select.outputs,
                             attributes: ["value": .float(c.scalars(as: Float.self)[0]), "minimum_rank": .int(Int64(c.rank))])
            nodes[index] = PlannedNode(node: fused)
            removed.insert(isNaNIndex)
        }
        nodes = nodes.indices.filter { !removed.contains($0) }.map { nodes[$0] }
        fuseSoftmaxIntoNaNReplacement()
    }

    /// The node producing each value, and how many input slots read it.
    private func valueUses() -> (producer: [String: Int], readers: [String: Int]) {
        var producer: [String: Int] = [:]
        var readers: [String: Int] = [:]
        for (i, planned) in nodes.enumerated() {
            for o in planned.node.outputs where !o.isEmpty { producer[o] = i }
            for name in planned.node.inputs where !name.isEmpty { readers[name, default: 0] += 1 }
        }
        return (producer, readers)
    }

    /// A Softmax (opset 13 or later) whose output feeds only a `ReplaceNaN` and is no graph output does the
    /// replacement in its own last pass: NaN rows are written as the fill value instead of scaled.
    private mutating func fuseSoftmaxIntoNaNReplacement() {
        guard opset >= 13 else { return }
        let (producer, readers) = valueUses()
        var removed: Set<Int> = []
        for index in nodes.indices where nodes[index].node.domain == fusedDomain && nodes[index].node.opType == replaceNaNOp {
            let guardNode = nodes[index].node
            let p = guardNode.inputs[0]
            guard let s = producer[p], case let softmax = nodes[s].node, softmax.opType == "Softmax", isDefaultDomain(softmax.domain),
                  softmax.inputs.count == 1, softmax.outputs == [p], readers[p] == 1, !graphOutputs.contains(p),
                  Set(softmax.attributes.keys).isSubset(of: ["axis"]) else { continue }
            var attributes = guardNode.attributes
            attributes["axis"] = softmax.attributes["axis"] ?? .int(-1)
            nodes[index] = PlannedNode(node: Node(name: guardNode.name, opType: softmaxReplaceNaNOp, domain: fusedDomain,
                                                  inputs: softmax.inputs, outputs: guardNode.outputs, attributes: attributes))
            removed.insert(s)
        }
        nodes = nodes.indices.filter { !removed.contains($0) }.map { nodes[$0] }
    }
}

/// Op type of a Softmax along `axis` whose NaN results become the float attribute `value` (Softmax then ReplaceNaN).
let softmaxReplaceNaNOp = "SoftmaxReplaceNaN"

/// The kernel of `SoftmaxReplaceNaN`: the vectorised Softmax with the fill folded into its scaling pass.
let softmaxReplaceNaNKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let value = try ctx.float("value", 0), minimumRank = try ctx.int("minimum_rank", 0), axisAttribute = try ctx.int("axis", -1)
    return PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input dtype \(x.dtype) is not supported (float32)") }
        var y: Tensor
        if x.rank == 0 {
            y = mapFloats(x) { _ in 1 }
        } else {
            let axis = try ctx.axis(axisAttribute, rank: x.rank)
            y = softmaxFast(x, outer: x.shape[..<axis].reduce(1, *), dim: x.shape[axis], inner: x.shape[(axis + 1)...].reduce(1, *), nanFill: value)
        }
        if y.rank < minimumRank { y = y.reshaped([Int](repeating: 1, count: minimumRank - y.rank) + y.shape) }
        return [y]
    }
}

/// The kernel of `ReplaceNaN`: float32 only (as IsNaN), in place when the executor handed over the last reference.
let replaceNaNKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let value = try ctx.float("value", 0), minimumRank = try ctx.int("minimum_rank", 0)
    return PreparedKernel { inputs in
        guard let x = inputs[0] else { throw ctx.error(.invalidModel, "missing input") }
        guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "IsNaN needs float32, got \(x.dtype)") }
        var t = inputs.take(0)!
        if t.rank < minimumRank { t = t.reshaped([Int](repeating: 1, count: minimumRank - t.rank) + t.shape) }
        t.withUnsafeMutableBufferPointer(of: Float.self) { p in
            guard let base = p.baseAddress else { return }
            replaceNaN(base, count: p.count, with: value)
        }
        return [t]
    }
}

/// Writes `value` over every NaN of `count` floats, 16 lanes at a time.
func replaceNaN(_ base: UnsafeMutablePointer<Float>, count: Int, with value: Float) {
    let width = FloatVector.scalarCount
    let fill = FloatVector(repeating: value)
    var i = 0
    while i + width <= count {
        let v = (base + i).vector(FloatVector.self)
        (base + i).store(v.replacing(with: fill, where: v .!= v))
        i += width
    }
    while i < count {
        if base[i].isNaN { base[i] = value }
        i += 1
    }
}
