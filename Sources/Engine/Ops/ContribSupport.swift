import COpenBLAS
import Foundation
import ONNX
import Tensor

/// onnxruntime's contrib-operator domain (its transformer optimizer, graph fusions and quantization tool emit it).
let contribDomain = "com.microsoft"

/// Operators of the `com.microsoft` domain, by op type.
let contribOperatorTable: OperatorTable = {
    var table: OperatorTable = [:]
    for part in [contribFusedOperators, contribNormalizationOperators, contribAttentionOperators, contribQuantizationOperators,
                 contribQuantizedLSTMOperators, matMulNBitsOperators, contribDecoderOperators] {
        table.merge(part) { first, _ in first }
    }
    return table
}()

extension OpContext {
    /// Prepares the default-domain operator `opType` for this node with other inputs and attributes, so a contrib
    /// operator that is an ai.onnx operator plus an epilogue reuses that operator's kernel (and its packed weights).
    /// `inputs[k]` names the original input index feeding the delegate's input k (nil: omitted).
    func delegate(_ opType: String, inputs: [Int?], attributes: [String: Attribute], activation: Activation = .none) throws -> PreparedKernel {
        guard let factory = operatorTable[opType] else { throw error(.unsupportedOperator, "\(opType) is not available") }
        var node = Node(name: self.node.name, opType: opType, inputs: inputs.map { $0.map { i in hasInput(i) ? self.node.inputs[i] : "" } ?? "" },
                        outputs: self.node.outputs, attributes: attributes)
        if node.name.isEmpty { node.name = self.node.outputs.first ?? "" }
        var known: [Int: Tensor] = [:]
        for (k, source) in inputs.enumerated() { if let s = source, let c = constants[s] { known[k] = c } }
        let inner = OpContext(node: node, opset: opset, constants: known, activation: activation)
        let prepared = try factory(inner)
        inner.releaseConstants()
        // Consumed inputs are reported in this node's numbering.
        let consumed = Set(prepared.consumedInputs.compactMap { $0 < inputs.count ? inputs[$0] : nil })
        let mapping = inputs
        let kernel = prepared.kernel
        return PreparedKernel(kernel: { outer in
            var args = KernelInputs(values: mapping.map { $0.flatMap { outer.take($0) } })
            return try kernel(&args)
        }, consumedInputs: consumed)
    }

    /// This node's attributes without `names`.
    func attributes(dropping names: Set<String>) -> [String: Attribute] { node.attributes.filter { !names.contains($0.key) } }

    /// The epilogue named by onnxruntime's fused-operator attributes (`activation` plus `activation_params`, or
    /// `activation_alpha`/`activation_beta` on FusedGemm).
    func fusedActivation() throws -> Activation {
        let name = try string("activation", "")
        let params = try floats("activation_params") ?? []
        func param(_ i: Int, _ named: String, _ fallback: Float) throws -> Float { i < params.count ? params[i] : try float(named, fallback) }
        switch name {
        case "": return .none
        case "Relu": return .relu
        case "Tanh": return .tanh
        case "Sigmoid": return .sigmoid
        case "LeakyRelu": return .leakyRelu(alpha: try param(0, "activation_alpha", 0.01))
        case "Clip": return .clip(min: try param(0, "activation_alpha", -.greatestFiniteMagnitude), max: try param(1, "activation_beta", .greatestFiniteMagnitude))
        case "HardSigmoid": return .hardSigmoid(alpha: try param(0, "activation_alpha", 0.2), beta: try param(1, "activation_beta", 0.5))
        default: throw unsupported("activation", "'\(name)'")
        }
    }
}

/// A float32 input as a Float array, with a clear error otherwise.
func floatValues(_ t: Tensor, _ what: String, _ ctx: OpContext) throws -> [Float] {
    guard t.dtype == .float32 else { throw ctx.error(.unsupportedDType, "\(what) is \(t.dtype), expected float32") }
    return t.scalars(as: Float.self)
}

/// Exact integer matrix product of integer-valued doubles: every product and partial sum stays below 2^53, so
/// dgemm's result is the int32-accumulated sum the quantized operators specify (wrapping aside, which no
/// realistic K reaches). [m, k] x [k, n] -> [m, n], row-major.
func exactIntegerProduct(_ a: [Double], _ b: [Double], m: Int, k: Int, n: Int) -> [Double] {
    var c = [Double](repeating: 0, count: m * n)
    guard m > 0, n > 0, k > 0 else { return c }
    a.withUnsafeBufferPointer { ap in b.withUnsafeBufferPointer { bp in c.withUnsafeMutableBufferPointer { cp in
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(m), Int32(n), Int32(k), 1, ap.baseAddress, Int32(k),
                    bp.baseAddress, Int32(n), 0, cp.baseAddress, Int32(n))
    } } }
    return c
}

/// Plain triple-loop twin of `exactIntegerProduct` (tests compare the two).
func exactIntegerProductReference(_ a: [Double], _ b: [Double], m: Int, k: Int, n: Int) -> [Double] {
    var c = [Double](repeating: 0, count: m * n)
    for i in 0..<m { for p in 0..<k { let x = a[i * k + p]; if x == 0 { continue }; for j in 0..<n { c[i * n + j] += x * b[p * n + j] } } }
    return c
}

/// Quantization range of an 8-bit (or 16-bit) integer dtype.
func quantizedBounds(_ dtype: DType, _ ctx: OpContext) throws -> (Double, Double) {
    switch dtype {
    case .uint8: return (0, 255)
    case .int8: return (-128, 127)
    case .uint16: return (0, 65535)
    case .int16: return (-32768, 32767)
    default: throw ctx.error(.unsupportedDType, "quantized values must be uint8, int8, uint16 or int16, got \(dtype)")
    }
}

/// Rounds half to even and saturates into `bounds` after adding `zero`, as QuantizeLinear does.
@inline(__always) func requantize(_ real: Double, zero: Double, _ bounds: (Double, Double)) -> Double {
    min(max(real.rounded(.toNearestOrEven) + zero, bounds.0), bounds.1)
}

/// onnxruntime's dynamic uint8 quantization of a float block: the range is widened to include zero, scale is
/// range / 255 (1 for an all-zero block) and the zero point is rounded half to even.
func dynamicQuantizationParameters(_ values: UnsafeBufferPointer<Float>) -> (scale: Float, zero: Float) {
    var low: Float = 0, high: Float = 0
    for v in values { low = min(low, v); high = max(high, v) }
    let scale: Float = high == low ? 1 : (high - low) / 255
    let zero = min(max(0 - low / scale, 0), 255).rounded(.toNearestOrEven)
    return (scale, zero)
}

/// `values` quantized to uint8 with (scale, zero), returned as the integer minus the zero point (ready for a product).
func dynamicallyQuantizedCentered(_ values: UnsafeBufferPointer<Float>, scale: Float, zero: Float) -> [Double] {
    values.map { v in Double(min(max((v / scale).rounded(.toNearestOrEven) + zero, 0), 255) - zero) }
}
