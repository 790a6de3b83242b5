import ONNX
import Tensor

// QDQ graphs (onnxruntime's quantize_static in QDQ format, and other QDQ exporters) wrap every float operator in
// DequantizeLinear -> op -> QuantizeLinear. Run as written, each op dequantizes to float32 and requantizes. Like
// onnxruntime's QDQ transformer, the compiler recognises the patterns whose integer operator computes the same
// thing and rewrites them before constant folding (which would otherwise turn the weights' DequantizeLinear into
// float32 weights):
//   DQ(x), DQ(w const)[, DQ(int32 bias const)] -> Conv -> Q    => QLinearConv
//   DQ(a), DQ(b const) -> MatMul -> Q                         => QLinearMatMul
//   DQ(a), DQ(b) -> MatMul -> Q, per-tensor parameters          => QLinearMatMul (B packed per call)
//   DQ(a), DQ(b const)[, DQ(int32 bias const)] -> Gemm -> Q   => com.microsoft QGemm
//   DQ(a), DQ(b) -> Add / Mul -> Q                            => com.microsoft QLinearAdd / QLinearMul
//   DQ(x) -> GlobalAveragePool -> Q                           => com.microsoft QLinearGlobalAveragePool
//   DQ(x) -> Reshape / Flatten / Squeeze / Unsqueeze / Transpose / MaxPool -> Q with the same scale and zero point
//                                                             => the op on the 8-bit tensor (exact: it moves values)
// Each rewrite needs the float intermediate to have no other reader and not be a graph output; a DequantizeLinear
// left without readers is dropped. Tests compare the fused graph against the same graph compiled unfused.

extension GraphOptimizer {
    /// Rewrites DequantizeLinear -> op -> QuantizeLinear patterns into integer operators (see the file comment).
    mutating func fuseQuantizedPatterns() {
        var patterns = QuantizedPatterns(nodes: nodes, constants: constants, graphOutputs: graphOutputs)
        var readers: [String: Int] = [:]
        for planned in nodes { for input in planned.node.inputs where !input.isEmpty { readers[input, default: 0] += 1 } }
        for o in graphOutputs { readers[o, default: 0] += 1 }
        var removed = Set<Int>()
        for i in nodes.indices {
            let node = nodes[i].node
            guard isDefaultDomain(node.domain), let out = node.outputs.first, !out.isEmpty, readers[out] == 1, !graphOutputs.contains(out),
                  let q = patterns.quantizer(reading: out), !removed.contains(q.index), let fused = patterns.integerNode(for: node, q: q)
            else { continue }
            // Readers move from the float intermediates to the 8-bit values.
            for input in node.inputs where !input.isEmpty { readers[input, default: 1] -= 1 }
            for input in fused.inputs where !input.isEmpty { readers[input, default: 0] += 1 }
            readers[out] = 0
            nodes[i] = PlannedNode(node: fused)
            removed.insert(q.index)
        }
        // DequantizeLinear nodes nothing reads any more.
        for (i, planned) in nodes.enumerated() where !removed.contains(i) && planned.node.opType == "DequantizeLinear" {
            if let o = planned.node.outputs.first, readers[o, default: 0] == 0 { removed.insert(i) }
        }
        nodes = nodes.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
        for (name, value) in patterns.added { constants[name] = value }
    }
}

/// The pattern matcher behind `fuseQuantizedPatterns`: reads the graph as it was before the rewrite (only
/// non-quantization nodes are replaced, so the DequantizeLinear / QuantizeLinear nodes it inspects never change).
private struct QuantizedPatterns {
    let nodes: [PlannedNode]
    let constants: [String: Tensor]
    let graphOutputs: Set<String>
    /// Constant zero points created for DequantizeLinear nodes that had none.
    var added: [String: Tensor] = [:]
    private var producer: [String: Int] = [:]
    private var firstReader: [String: Int] = [:]

    init(nodes: [PlannedNode], constants: [String: Tensor], graphOutputs: Set<String>) {
        self.nodes = nodes
        self.constants = constants
        self.graphOutputs = graphOutputs
        for (i, planned) in nodes.enumerated() {
            for o in planned.node.outputs where !o.isEmpty { producer[o] = i }
            for input in planned.node.inputs where !input.isEmpty && firstReader[input] == nil { firstReader[input] = i }
        }
    }

    /// The DequantizeLinear node producing `value`: (input, scale, zero point or "", axis).
    func dequantized(_ value: String) -> (x: String, scale: String, zero: String, axis: Int)? {
        guard let p = producer[value] else { return nil }
        let node = nodes[p].node
        guard node.opType == "DequantizeLinear", isDefaultDomain(node.domain) || node.domain == contribDomain,
              node.inputs.count >= 2, integer(node, "block_size", 0) == 0 else { return nil }
        return (node.inputs[0], node.inputs[1], node.inputs.count > 2 ? node.inputs[2] : "", integer(node, "axis", 1))
    }

    /// The QuantizeLinear reading `value` (its only reader, checked by the caller) when it is per tensor with a zero point.
    func quantizer(reading value: String) -> (index: Int, scale: String, zero: String, output: String)? {
        guard let q = firstReader[value] else { return nil }
        let node = nodes[q].node
        guard node.opType == "QuantizeLinear", isDefaultDomain(node.domain) || node.domain == contribDomain, node.inputs.count >= 3,
              node.inputs[0] == value, !node.inputs[2].isEmpty, isScalar(node.inputs[1]), isScalar(node.inputs[2]), isEightBit(node.inputs[2]),
              integer(node, "block_size", 0) == 0, node.attributes["output_dtype"] == nil, !node.outputs[0].isEmpty else { return nil }
        return (q, node.inputs[1], node.inputs[2], node.outputs[0])
    }

    /// A per-tensor DequantizeLinear of `value` with a constant 8-bit zero point.
    func perTensor(_ value: String) -> (x: String, scale: String, zero: String)? {
        guard let d = dequantized(value), isScalar(d.scale), !d.zero.isEmpty, isScalar(d.zero), isEightBit(d.zero) else { return nil }
        return (d.x, d.scale, d.zero)
    }

    /// The integer node replacing `node` and its QuantizeLinear `q`, or nil when the pattern does not apply.
    mutating func integerNode(for node: Node, q: (index: Int, scale: String, zero: String, output: String)) -> Node? {
        switch node.opType {
        case "Conv" where node.inputs.count >= 2:
            return quantizedConv(node, q: q)
        case "MatMul" where node.inputs.count == 2:
            // B computed at run time (attention's products): per-tensor parameters, as onnxruntime's QDQ selector takes it.
            if let a = perTensor(node.inputs[0]), let b = perTensor(node.inputs[1]), constants[b.x] == nil {
                return Node(name: node.name, opType: "QLinearMatMul", inputs: [a.x, a.scale, a.zero, b.x, b.scale, b.zero, q.scale, q.zero], outputs: [q.output])
            }
            guard let a = perTensor(node.inputs[0]), let b = dequantized(node.inputs[1]), constants[b.x]?.rank == 2,
                  isScalar(b.scale) || (constants[b.scale]?.rank == 1 && (b.axis == 1 || b.axis == -1)), let bZero = zeroPoint(b) else { return nil }
            return Node(name: node.name, opType: "QLinearMatMul", inputs: [a.x, a.scale, a.zero, b.x, b.scale, bZero, q.scale, q.zero], outputs: [q.output])
        case "Gemm" where node.inputs.count >= 2:
            return quantizedGemm(node, q: q)
        case "Add" where node.inputs.count == 2, "Mul" where node.inputs.count == 2:
            guard let a = perTensor(node.inputs[0]), let b = perTensor(node.inputs[1]), constants[a.zero]?.dtype == constants[q.zero]?.dtype,
                  constants[b.zero]?.dtype == constants[q.zero]?.dtype else { return nil }
            return Node(name: node.name, opType: "QLinear" + node.opType, domain: contribDomain,
                        inputs: [a.x, a.scale, a.zero, b.x, b.scale, b.zero, q.scale, q.zero], outputs: [q.output])
        case "GlobalAveragePool":
            guard let x = perTensor(node.inputs[0]), constants[x.zero]?.dtype == constants[q.zero]?.dtype else { return nil }
            return Node(name: node.name, opType: "QLinearGlobalAveragePool", domain: contribDomain,
                        inputs: [x.x, x.scale, x.zero, q.scale, q.zero], outputs: [q.output], attributes: ["channels_last": .int(0)])
        case "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "MaxPool":
            // Moving values keeps them representable: only when Q re-applies DQ's own parameters.
            guard node.outputs.count == 1, let x = perTensor(node.inputs[0]), sameConstant(x.scale, q.scale), sameConstant(x.zero, q.zero)
            else { return nil }
            var moved = node
            moved.inputs[0] = x.x
            moved.outputs = [q.output]
            return moved
        default:
            return nil
        }
    }

    /// QLinearConv for DQ(x) * DQ(w) [+ DQ(bias)] -> Conv -> Q, or nil when the parameters do not match.
    private mutating func quantizedConv(_ node: Node, q: (index: Int, scale: String, zero: String, output: String)) -> Node? {
        guard let x = perTensor(node.inputs[0]), let w = dequantized(node.inputs[1]),
              let weights = constants[w.x], weights.dtype == .int8 || weights.dtype == .uint8, weights.rank >= 3,
              let wScale = constants[w.scale], wScale.count == 1 || (wScale.rank == 1 && w.axis == 0 && wScale.count == weights.shape[0]),
              let wZero = zeroPoint(w) else { return nil }
        var inputs = [x.x, x.scale, x.zero, w.x, w.scale, wZero, q.scale, q.zero]
        if node.inputs.count > 2, !node.inputs[2].isEmpty {
            // The bias must be int32 quantized with scale x_scale * w_scale (what onnxruntime's quantizer writes) and zero 0.
            guard let b = dequantized(node.inputs[2]), let bias = constants[b.x], bias.dtype == .int32, let bScale = constants[b.scale],
                  let xScale = constants[x.scale], b.zero.isEmpty || constants[b.zero]?.doubles.allSatisfy({ $0 == 0 }) == true else { return nil }
            let xs = xScale.doubleValue(at: 0), ws = wScale.doubles, bs = bScale.doubles
            let channels = weights.shape[0]
            guard bs.count == 1 || bs.count == channels else { return nil }
            for c in 0..<channels {
                let expected = xs * ws[ws.count == 1 ? 0 : c], actual = bs[bs.count == 1 ? 0 : c]
                guard abs(expected - actual) <= 1e-6 * abs(expected) else { return nil }
            }
            inputs.append(b.x)
        }
        return Node(name: node.name, opType: "QLinearConv", inputs: inputs, outputs: [q.output], attributes: node.attributes)
    }

    /// QGemm for DQ(a) x DQ(b) [+ DQ(bias)] -> Gemm -> Q (classifier heads), or nil when the parameters do not match:
    /// A not transposed, alpha and beta 1, B's scale per tensor or per output column, the bias int32 with scale
    /// a_scale * b_scale and zero 0 (QGemm adds C to the integer sums before scaling them).
    private mutating func quantizedGemm(_ node: Node, q: (index: Int, scale: String, zero: String, output: String)) -> Node? {
        let transB = integer(node, "transB", 0) != 0
        guard integer(node, "transA", 0) == 0, real(node, "alpha", 1) == 1, real(node, "beta", 1) == 1,
              let a = perTensor(node.inputs[0]), let b = dequantized(node.inputs[1]),
              let weights = constants[b.x], weights.dtype == .int8 || weights.dtype == .uint8, weights.rank == 2,
              let bScale = constants[b.scale], let aScale = constants[a.scale], let bZero = zeroPoint(b) else { return nil }
        let columns = weights.shape[transB ? 0 : 1]
        guard bScale.count == 1 || (bScale.rank == 1 && bScale.count == columns && (b.axis == (transB ? 0 : 1) || (!transB && b.axis == -1)))
        else { return nil }
        var inputs = [a.x, a.scale, a.zero, b.x, b.scale, bZero]
        if node.inputs.count > 2, !node.inputs[2].isEmpty {
            guard let c = dequantized(node.inputs[2]), let bias = constants[c.x], bias.dtype == .int32, bias.count == columns,
                  let cScale = constants[c.scale], c.zero.isEmpty || constants[c.zero]?.doubles.allSatisfy({ $0 == 0 }) == true else { return nil }
            let xs = aScale.doubleValue(at: 0), ws = bScale.doubles, cs = cScale.doubles
            guard cs.count == 1 || cs.count == columns else { return nil }
            for j in 0..<columns {
                let expected = xs * ws[ws.count == 1 ? 0 : j], actual = cs[cs.count == 1 ? 0 : j]
                guard abs(expected - actual) <= 1e-6 * abs(expected) else { return nil }
            }
            inputs.append(c.x)
        } else {
            inputs.append("")
        }
        return Node(name: node.name, opType: "QGemm", domain: contribDomain, inputs: inputs + [q.scale, q.zero], outputs: [q.output],
                    attributes: ["transB": .int(transB ? 1 : 0)])
    }

    /// The constant zero-point input of a DequantizeLinear of a constant, or a new zero of its dtype when it has none.
    private mutating func zeroPoint(_ d: (x: String, scale: String, zero: String, axis: Int)) -> String? {
        if !d.zero.isEmpty { return constants[d.zero] != nil ? d.zero : nil }
        guard let v = constants[d.x], let scale = constants[d.scale], v.dtype == .int8 || v.dtype == .uint8 else { return nil }
        let name = "\(d.x)__osprey_zero_point"
        added[name] = Tensor(dtype: v.dtype, shape: scale.shape)
        return name
    }

    private func isScalar(_ name: String) -> Bool { constants[name].map { $0.count == 1 } ?? false }
    private func isEightBit(_ name: String) -> Bool { constants[name].map { $0.dtype == .uint8 || $0.dtype == .int8 } ?? false }
    private func sameConstant(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let x = constants[a], let y = constants[b], x.dtype == y.dtype, x.shape == y.shape else { return false }
        return x.doubles == y.doubles
    }
    private func real(_ node: Node, _ name: String, _ fallback: Float) -> Float {
        if case .float(let v)? = node.attributes[name] { return v }
        return fallback
    }
    private func integer(_ node: Node, _ name: String, _ fallback: Int) -> Int {
        if case .int(let v)? = node.attributes[name] { return Int(v) }
        return fallback
    }
}
