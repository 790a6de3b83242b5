import ONNX
import Tensor

// onnxruntime's quantize_dynamic writes each MatMul as
//   (q, a_scale, a_zero) = DynamicQuantizeLinear(x)
//   s = Mul(a_scale, b_scale)                      b_scale constant (per tensor or per column)
//   y = Mul(Cast(MatMulInteger(q, B, a_zero, b_zero), to: float), s) [+ bias]
// and leaves the fusion to onnxruntime's graph optimizer (MatMulIntegerToFloatFusion). Run as written, the int32
// product goes through memory twice more (Cast, Mul). This pass rewrites the product, Cast and Mul (and a constant
// bias Add after them) into com.microsoft MatMulIntegerToFloat, which scales and biases in the GEMM's epilogue with
// the same float products (a_scale * b_scale, then sum * that); the DynamicQuantizeLinear stays, shared by the
// products that read it.

extension GraphOptimizer {
    /// Rewrites `Mul(Cast(MatMulInteger(...)), Mul(a_scale, b_scale))` [+ bias] into MatMulIntegerToFloat (see above).
    mutating func fuseDynamicQuantizedMatMuls() {
        let readers = readingNodes()
        var producer: [String: Int] = [:]
        for (i, planned) in nodes.enumerated() {
            for o in planned.node.outputs where !o.isEmpty { producer[o] = i }
        }
        func only(_ value: String, _ op: String) -> (index: Int, node: Node)? { soleReader(of: value, op, readers) }
        var removed = Set<Int>()
        for i in nodes.indices {
            let product = nodes[i].node
            guard product.opType == "MatMulInteger", isDefaultDomain(product.domain), product.inputs.count >= 2, product.outputs.count == 1,
                  let b = constants[product.inputs[1]], b.rank == 2,
                  let cast = only(product.outputs[0], "Cast"), case .int(let to)? = cast.node.attributes["to"], to == Int64(DType.float32.rawValue),
                  let scaling = only(cast.node.outputs[0], "Mul"), scaling.node.inputs.count == 2,
                  let scaleName = scaling.node.inputs.first(where: { $0 != cast.node.outputs[0] }),
                  let scaleIndex = producer[scaleName], case let scales = nodes[scaleIndex].node, scales.opType == "Mul",
                  isDefaultDomain(scales.domain), scales.inputs.count == 2, !removed.contains(scaleIndex) else { continue }
            // One factor is A's per-tensor scale (computed), the other B's constant scale, one value or one per column.
            guard let bScale = scales.inputs.first(where: { constants[$0] != nil }), let aScale = scales.inputs.first(where: { constants[$0] == nil }),
                  let bs = constants[bScale], bs.dtype == .float32, bs.rank <= 1, bs.count == 1 || bs.count == b.shape[1] else { continue }
            var inputs = [product.inputs[0], product.inputs[1], aScale, bScale,
                          product.inputs.count > 2 ? product.inputs[2] : "", product.inputs.count > 3 ? product.inputs[3] : ""]
            var members = [i, cast.index, scaling.index]
            var output = scaling.node.outputs[0]
            if let add = biasAdd(after: output, columns: b.shape[1], readers) {
                inputs.append(add.bias)
                members.append(add.index)
                output = add.output
            }
            while inputs.last == "" { inputs.removeLast() }
            // The fused node takes the last member's place: every input it reads is available there.
            let last = members.max()!
            nodes[last] = PlannedNode(node: Node(name: product.name, opType: "MatMulIntegerToFloat", domain: contribDomain,
                                                 inputs: inputs, outputs: [output]))
            for m in members where m != last { removed.insert(m) }
            // The scale product goes too once nothing else reads it.
            if readers[scaleName]?.count == 1, !graphOutputs.contains(scaleName) { removed.insert(scaleIndex) }
        }
        nodes = nodes.indices.filter { !removed.contains($0) }.map { nodes[$0] }
    }
}

extension GraphOptimizer {
    /// The nodes reading each value, one entry per input slot.
    func readingNodes() -> [String: [Int]] {
        var readers: [String: [Int]] = [:]
        for (i, planned) in nodes.enumerated() {
            for name in planned.node.inputs where !name.isEmpty { readers[name, default: []].append(i) }
        }
        return readers
    }

    /// The single reader of `value` when it is an `op` node in the default domain with one output and the value is
    /// no graph output.
    func soleReader(of value: String, _ op: String, _ readers: [String: [Int]]) -> (index: Int, node: Node)? {
        guard !graphOutputs.contains(value), let r = readers[value], r.count == 1, case let n = nodes[r[0]].node,
              n.opType == op, isDefaultDomain(n.domain), n.outputs.count == 1, !n.outputs[0].isEmpty else { return nil }
        return (r[0], n)
    }

    /// The Add that alone reads a product's float `output` with a constant float32 bias of shape [columns]: its index,
    /// the bias and the Add's output (what a fused product with a bias epilogue takes over).
    func biasAdd(after output: String, columns: Int, _ readers: [String: [Int]]) -> (index: Int, bias: String, output: String)? {
        guard let add = soleReader(of: output, "Add", readers), add.node.inputs.count == 2,
              let biasName = add.node.inputs.first(where: { $0 != output }), let bias = constants[biasName],
              bias.dtype == .float32, bias.rank == 1, bias.count == columns else { return nil }
        return (add.index, biasName, add.node.outputs[0])
    }
}
