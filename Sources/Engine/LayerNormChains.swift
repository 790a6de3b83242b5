import ONNX
import Tensor

/// Op type of a fused decomposed LayerNorm over the last axis: inputs (x, gamma or "", beta or ""), float `epsilon`.
let fusedLayerNormOp = "LayerNorm"

// PyTorch exports (and tf2onnx, and older opsets, which lack LayerNormalization) write LayerNorm as
//   m = ReduceMean(x, -1); d = x - m; v = ReduceMean(d^2, -1); y = d / Sqrt(v + eps) [* gamma] [+ beta]
// which runs as nine steps, two of them general reductions. onnxruntime's LayerNormFusion rewrites it into one
// node; so does this pass. d^2 may be Pow(d, 2) or Mul(d, d); gamma and beta are constants over the last axis.

extension GraphOptimizer {
    /// Replaces each decomposed LayerNorm over the last axis (see the comment above) by one fused node, when every
    /// intermediate has no reader outside the chain and is not a graph output.
    mutating func fuseLayerNormChains() {
        var readers: [String: [Int]] = [:]
        for (i, planned) in nodes.enumerated() {
            for name in planned.node.inputs where !name.isEmpty { readers[name, default: []].append(i) }
        }
        var removed = Set<Int>()
        for i in nodes.indices where !removed.contains(i) {
            guard let chain = layerNormChain(at: i, readers: readers), chain.members.allSatisfy({ !removed.contains($0) }) else { continue }
            var inputs = [chain.x, chain.gamma ?? "", chain.beta ?? ""]
            while inputs.last == "" { inputs.removeLast() }
            let last = chain.members.max()!
            let fused = Node(name: nodes[last].node.name, opType: fusedLayerNormOp, domain: fusedDomain, inputs: inputs,
                             outputs: nodes[last].node.outputs, attributes: ["epsilon": .float(chain.epsilon)])
            nodes[last] = PlannedNode(node: fused)
            for m in chain.members where m != last { removed.insert(m) }
        }
        nodes = nodes.indices.filter { !removed.contains($0) }.map { nodes[$0] }
    }

    /// The decomposed LayerNorm whose first ReduceMean is node `start`: its member nodes, x, epsilon, gamma, beta.
    private func layerNormChain(at start: Int, readers: [String: [Int]])
        -> (members: [Int], x: String, epsilon: Float, gamma: String?, beta: String?)? {
        let mean = nodes[start].node
        guard isLastAxisMean(mean), let x = mean.inputs.first, constants[x] == nil else { return nil }
        // The single reader of `value` when it is node `op` (and the value is no graph output), with its inputs.
        func only(_ value: String, _ op: String) -> (index: Int, node: Node)? {
            guard !graphOutputs.contains(value), let r = readers[value], Set(r).count == 1, case let n = nodes[r[0]].node,
                  n.opType == op, isDefaultDomain(n.domain), n.outputs.count == 1, !n.outputs[0].isEmpty else { return nil }
            return (r[0], n)
        }
        guard let sub = only(mean.outputs[0], "Sub"), sub.node.inputs == [x, mean.outputs[0]] else { return nil }
        let d = sub.node.outputs[0]
        // d feeds the square and the division, nothing else.
        guard !graphOutputs.contains(d), let dReaders = readers[d], Set(dReaders).count == 2 else { return nil }
        let pair = Set(dReaders).sorted().map { (index: $0, node: nodes[$0].node) }
        guard let square = pair.first(where: { isSquare($0.node, of: d) }), let div = pair.first(where: { $0.node.opType == "Div" }),
              isDefaultDomain(div.node.domain), div.node.inputs.count == 2, div.node.inputs[0] == d,
              let variance = only(square.node.outputs[0], "ReduceMean"), isLastAxisMean(variance.node),
              let add = only(variance.node.outputs[0], "Add"), add.node.inputs.count == 2,
              let epsName = add.node.inputs.first(where: { $0 != variance.node.outputs[0] }), let eps = scalarFloat(epsName),
              let sqrt = only(add.node.outputs[0], "Sqrt"), div.node.inputs[1] == sqrt.node.outputs[0],
              readers[sqrt.node.outputs[0]]?.count == 1, !graphOutputs.contains(sqrt.node.outputs[0]) else { return nil }
        var members = [start, sub.index, square.index, variance.index, add.index, sqrt.index, div.index]
        var tail = div.node.outputs[0]
        var gamma: String?, beta: String?
        if let mul = only(tail, "Mul"), mul.node.inputs.count == 2, let g = mul.node.inputs.first(where: { $0 != tail }), isLastAxisVector(g) {
            gamma = g
            members.append(mul.index)
            tail = mul.node.outputs[0]
        }
        if let plus = only(tail, "Add"), plus.node.inputs.count == 2, let b = plus.node.inputs.first(where: { $0 != tail }), isLastAxisVector(b) {
            beta = b
            members.append(plus.index)
        }
        // The fused node sits at the last member; every member must come after x's producer (true: they read x or
        // its descendants) and the constants are always available.
        return (members, x, eps, gamma, beta)
    }

    /// ReduceMean over axis -1 only, keeping dimensions (axes as attribute, or as a constant input from opset 18).
    private func isLastAxisMean(_ node: Node) -> Bool {
        guard node.opType == "ReduceMean", isDefaultDomain(node.domain), node.outputs.count == 1, !node.outputs[0].isEmpty else { return false }
        if case .int(let keep)? = node.attributes["keepdims"], keep != 1 { return false }
        var axes: [Int64]?
        if case .ints(let a)? = node.attributes["axes"] { axes = a }
        if node.inputs.count > 1, !node.inputs[1].isEmpty {
            guard let c = constants[node.inputs[1]], c.dtype == .int64 else { return false }
            axes = c.scalars(as: Int64.self)
        }
        return axes == [-1]
    }

    /// Pow(d, 2) or Mul(d, d).
    private func isSquare(_ node: Node, of d: String) -> Bool {
        guard isDefaultDomain(node.domain), node.outputs.count == 1, !node.outputs[0].isEmpty else { return false }
        if node.opType == "Mul" { return node.inputs == [d, d] }
        guard node.opType == "Pow", node.inputs.count == 2, node.inputs[0] == d, let c = constants[node.inputs[1]], c.count == 1 else { return false }
        return c.doubleValue(at: 0) == 2
    }

    private func scalarFloat(_ name: String) -> Float? {
        guard let c = constants[name], c.dtype == .float32, c.count == 1 else { return nil }
        return c.scalars(as: Float.self)[0]
    }

    /// A float32 constant whose only non-1 dimension is the last (a per-feature scale or shift).
    private func isLastAxisVector(_ name: String) -> Bool {
        guard let c = constants[name], c.dtype == .float32, c.rank >= 1 else { return false }
        return c.shape.dropLast().allSatisfy { $0 == 1 }
    }
}

/// The fused LayerNorm's kernel: float32 rows normalized in place (other float types through float32).
let fusedLayerNormKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let epsilon = try ctx.float("epsilon", 1e-5)
    let gamma = ctx.constants[1].map { $0.scalars(as: Float.self) }, beta = ctx.constants[2].map { $0.scalars(as: Float.self) }
    return PreparedKernel { inputs in
        guard let x = inputs[0], x.rank >= 1 else { throw ctx.error(.invalidModel, "missing input or scalar input") }
        let width = x.shape[x.rank - 1]
        for (what, v) in [("scale", gamma), ("bias", beta)] {
            if let v, v.count != width { throw ctx.error(.executionFailed, "\(what) has \(v.count) elements, the last axis of \(x.shape) \(width)") }
        }
        let dtype = x.dtype
        guard dtype == .float32 || dtype == .float64 || dtype == .float16 || dtype == .bfloat16 else {
            throw ctx.error(.unsupportedDType, "input dtype \(dtype) is not supported (float types)")
        }
        var t = dtype == .float32 ? inputs.take(0)! : try castTensor(x, to: .float32, ctx)
        t.withUnsafeMutableBufferPointer(of: Float.self) { p in
            guard let base = p.baseAddress, width > 0 else { return }
            layerNormRows(base, rows: p.count / width, width: width, gamma: gamma, beta: beta, epsilon: epsilon)
        }
        return [dtype == .float32 ? t : try castTensor(t, to: dtype, ctx)]
    }
}

/// Normalizes each of `rows` rows of `width` floats as the decomposed graph does:
/// d = x - mean(x); y = d / sqrt(mean(d * d) + epsilon) * gamma + beta; 16 lanes at a time.
///
/// Reads `source` (default: `data` itself, in place) and writes `data`; with `statistics`, also each row's mean and
/// 1 / sqrt(variance + epsilon) (LayerNormalization's optional outputs). Large inputs split their rows across threads.
func layerNormRows(_ data: UnsafeMutablePointer<Float>, rows: Int, width: Int, gamma: [Float]?, beta: [Float]?, epsilon: Float,
                   source: UnsafePointer<Float>? = nil,
                   statistics: (means: UnsafeMutablePointer<Float>, inverse: UnsafeMutablePointer<Float>)? = nil) {
    let ones = [Float](repeating: 1, count: width), zeros = [Float](repeating: 0, count: width)
    let input = source ?? UnsafePointer(data)
    (gamma ?? ones).withUnsafeBufferPointer { g in
        (beta ?? zeros).withUnsafeBufferPointer { b in
            let gp = g.baseAddress!, bp = b.baseAddress!
            parallelRanges(rows, minimumChunk: max(1, 32_768 / max(1, width))) { range in
                for r in range {
                    let (mean, deviation) = layerNormRow(input + r * width, data + r * width, width: width, gamma: gp, beta: bp, epsilon: epsilon)
                    if let statistics { statistics.means[r] = mean; statistics.inverse[r] = 1 / deviation }
                }
            }
        }
    }
}

/// One row of `layerNormRows` on the calling thread (`to` may be `from`): returns the row's mean and
/// sqrt(variance + epsilon).
@inline(__always)
func layerNormRow(_ from: UnsafePointer<Float>, _ row: UnsafeMutablePointer<Float>, width: Int, gamma gp: UnsafePointer<Float>,
                  beta bp: UnsafePointer<Float>, epsilon: Float) -> (mean: Float, deviation: Float) {
    typealias V = FloatVector
    let lanes = V.scalarCount, body = width - width % lanes
    var acc = V(repeating: 0)
    var i = 0
    while i < body { acc += (from + i).vector(V.self); i += lanes }
    var sum = acc.sum()
    while i < width { sum += from[i]; i += 1 }
    let mean = sum / Float(width)
    let m = V(repeating: mean)
    acc = V(repeating: 0)
    i = 0
    while i < body { let d = (from + i).vector(V.self) - m; acc += d * d; i += lanes }
    var sq = acc.sum()
    while i < width { let d = from[i] - mean; sq += d * d; i += 1 }
    let deviation = (sq / Float(width) + epsilon).squareRoot()
    let s = V(repeating: deviation)
    i = 0
    while i < body {
        let d = (from + i).vector(V.self) - m
        (row + i).store(d / s * (gp + i).vector(V.self) + (bp + i).vector(V.self))
        i += lanes
    }
    while i < width { row[i] = (from[i] - mean) / deviation * gp[i] + bp[i]; i += 1 }
    return (mean, deviation)
}
