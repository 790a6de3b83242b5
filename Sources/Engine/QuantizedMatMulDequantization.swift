import ONNX
import Tensor

// quantize_static writes every weight MatMul of a transformer as QLinearMatMul -> DequantizeLinear -> Add(bias) (the
// QDQ form becomes the same after `fuseQuantizedPatterns`): the product's bytes go through memory, are read back as
// floats, and read and written once more by the bias Add. This pass fuses the three when B is constant and every
// parameter is a per-tensor constant, and the fused kernel dequantizes the saturated bytes and adds the bias in the
// GEMM's epilogue: the same integer requantization, then the same float subtraction, product and sum, so its floats
// equal the unfused graph's bit for bit (`QuantizedMatMulDequantizationTests` compare the two).

/// Op type of QLinearMatMul -> DequantizeLinear [-> Add of a bias per column] as one node: inputs QLinearMatMul's
/// eight, the DequantizeLinear's scale and zero point (or ""), then the bias when there is one; float32 output.
let dequantizedQLinearMatMulOp = "QLinearMatMulDequantized"

extension GraphOptimizer {
    /// Fuses QLinearMatMul (constant B, constant per-tensor output scale and zero point) -> DequantizeLinear (constant
    /// per-tensor parameters of the same 8-bit type) [-> Add of a constant float32 bias of shape [N]] (see above).
    mutating func fuseQuantizedMatMulDequantization() {
        let readers = readingNodes()
        func scalar(_ name: String) -> Tensor? { constants[name].flatMap { $0.count == 1 ? $0 : nil } }
        var removed = Set<Int>()
        for i in nodes.indices {
            let product = nodes[i].node
            guard product.opType == "QLinearMatMul", isDefaultDomain(product.domain), product.inputs.count == 8, product.outputs.count == 1,
                  let b = constants[product.inputs[3]], b.rank == 2, scalar(product.inputs[6]) != nil,
                  let yZero = scalar(product.inputs[7]), yZero.dtype == .uint8 || yZero.dtype == .int8,
                  let dq = soleReader(of: product.outputs[0], "DequantizeLinear", readers), (2...3).contains(dq.node.inputs.count),
                  Set(dq.node.attributes.keys).isSubset(of: ["axis"]), let dqScale = scalar(dq.node.inputs[1]), dqScale.dtype == .float32
            else { continue }
            let dqZero = dq.node.inputs.count == 3 ? dq.node.inputs[2] : ""
            guard dqZero.isEmpty || scalar(dqZero)?.dtype == yZero.dtype else { continue }
            var inputs = product.inputs + [dq.node.inputs[1], dqZero]
            var members = [i, dq.index]
            var output = dq.node.outputs[0]
            if let add = biasAdd(after: output, columns: b.shape[1], readers) {
                inputs.append(add.bias)
                members.append(add.index)
                output = add.output
            }
            // The fused node takes the last member's place: every input it reads is available there.
            let last = members.max()!
            nodes[last] = PlannedNode(node: Node(name: product.name, opType: dequantizedQLinearMatMulOp, domain: fusedDomain,
                                                 inputs: inputs, outputs: [output]))
            for m in members where m != last { removed.insert(m) }
        }
        nodes = nodes.indices.filter { !removed.contains($0) }.map { nodes[$0] }
    }
}

/// The kernel of `QLinearMatMulDequantized`: the row GEMM with the dequantizing epilogue; when the operands do not fit
/// it (A not 8-bit, B outside the u8 x s8 range), QLinearMatMul's own kernel, DequantizeLinear and the bias Add in turn.
let dequantizedQLinearMatMulKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let plan = quantizedMatMulPlan(ctx, b: 3, zero: 5)
    let product = try ctx.delegate("QLinearMatMul", inputs: Array(0..<8), attributes: [:])
    return PreparedKernel { inputs in
        let scale = try inputs.required(8, ctx), zero = inputs[9]
        let bias = try inputs[10].map { try floatValues($0, "bias", ctx) }
        if let plan {
            let step = QuantizedMatMulDequantization(scale: Float(scale.doubleValue(at: 0)), zero: Float(zero?.doubleValue(at: 0) ?? 0), bias: bias)
            if let fast = try qlinearMatMul(plan: plan, inputs, dequantize: step, ctx) { return [fast] }
        }
        var operands = KernelInputs(values: Array(inputs.values.prefix(8)))
        let q = try product.kernel(&operands)[0]
        guard var y = try dequantizeLinearFast(ctx, q, scale: scale, zeroPoint: zero, axis: 1) else {
            throw ctx.error(.unsupportedDType, "QLinearMatMul output \(q.dtype) cannot be dequantized with a \(scale.dtype) scale")
        }
        guard let bias else { return [y] }
        let n = bias.count
        y.withUnsafeMutableBufferPointer(of: Float.self) { p in
            for i in 0..<p.count { p[i] += bias[i % n] }
        }
        return [y]
    }
}
