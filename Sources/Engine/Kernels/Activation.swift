import CKernelShim
import Foundation

/// An elementwise function fused into a kernel's epilogue (Conv, Gemm), applied after the bias.
public enum Activation: Sendable, Hashable {
    /// Identity.
    case none
    /// max(x, 0).
    case relu
    /// x if x >= 0 else alpha * x.
    case leakyRelu(alpha: Float)
    /// min(max(x, min), max) (Relu6 is clip(0, 6)).
    case clip(min: Float, max: Float)
    /// 1 / (1 + e^-x).
    case sigmoid
    /// max(0, min(1, alpha * x + beta)).
    case hardSigmoid(alpha: Float, beta: Float)
    /// x * max(0, min(1, x / 6 + 1/2)).
    case hardSwish
    /// tanh(x).
    case tanh
    /// x * sigmoid(x) (SiLU, Swish).
    case silu
    /// 0.5 * x * (1 + erf(x / sqrt 2)) (exact GELU).
    case gelu
    /// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) (GELU's tanh form).
    case geluTanh
    /// x * tanh(softplus(x)).
    case mish

    /// The function on one value (the reference every vectorised epilogue is tested against).
    @inline(__always)
    public func callAsFunction(_ x: Float) -> Float {
        switch self {
        case .none: return x
        case .relu: return x > 0 ? x : 0
        case .leakyRelu(let alpha): return x >= 0 ? x : alpha * x
        case .clip(let lo, let hi): return Swift.min(Swift.max(x, lo), hi)
        case .sigmoid: return 1 / (1 + Foundation.exp(-x))
        case .hardSigmoid(let alpha, let beta): return Swift.max(0, Swift.min(1, alpha * x + beta))
        case .hardSwish: return x * Swift.max(0, Swift.min(1, x / 6 + 0.5))
        case .tanh: return Foundation.tanh(x)
        case .silu: return x / (1 + Foundation.exp(-x))
        case .gelu: return 0.5 * x * (1 + Foundation.erf(x * 0.707_106_781_186_547_5))
        case .geluTanh: return 0.5 * x * (1 + Foundation.tanh(0.797_884_560_802_865_4 * (x + 0.044715 * x * x * x)))
        case .mish: return x * Foundation.tanh(x > 20 ? x : Foundation.log1p(Foundation.exp(x)))
        }
    }

    /// The function on 16 lanes, for epilogues applied in registers.
    @_transparent
    func vector(_ v: FloatVector) -> FloatVector {
        switch self {
        case .none: return v
        case .relu: return v.replacing(with: 0, where: v .< 0)
        case .leakyRelu(let alpha): return v.replacing(with: v * FloatVector(repeating: alpha), where: v .< 0)
        case .clip(let lo, let hi): return clamp(v, FloatVector(repeating: lo), FloatVector(repeating: hi))
        case .sigmoid: return vectorSigmoid(v)
        case .hardSigmoid(let alpha, let beta):
            return clamp(v * FloatVector(repeating: alpha) + FloatVector(repeating: beta), FloatVector(repeating: 0), FloatVector(repeating: 1))
        case .hardSwish:
            return v * clamp(v * FloatVector(repeating: 1 / 6 as Float) + FloatVector(repeating: 0.5), FloatVector(repeating: 0),
                             FloatVector(repeating: 1))
        case .tanh: return vectorTanh(v)
        case .silu: return v * vectorSigmoid(v)
        case .gelu: return FloatVector(repeating: 0.5) * v * (FloatVector(repeating: 1) + vectorErf(v * FloatVector(repeating: 0.707_106_781_186_547_5)))
        case .geluTanh:
            let inner = FloatVector(repeating: 0.797_884_560_802_865_4) * (v + FloatVector(repeating: 0.044715) * v * v * v)
            return FloatVector(repeating: 0.5) * v * (FloatVector(repeating: 1) + vectorTanh(inner))
        case .mish: return vectorMish(v)
        }
    }

    /// Applies the function in place to `count` floats.
    public func apply(_ buffer: UnsafeMutablePointer<Float>, count: Int) {
        if case .none = self { return }
        apply(buffer, count: count, adding: 0, residual: nil)
    }

    /// buffer[i] = f(buffer[i] + addend + residual[i]) for `count` floats, vectorised: the fused conv/gemm epilogue.
    /// SiLU, Sigmoid and GELU in both forms (without addend or residual) run in the C shim's AVX2 + FMA kernels where the
    /// CPU has them.
    public func apply(_ buffer: UnsafeMutablePointer<Float>, count: Int, adding addend: Float, residual: UnsafePointer<Float>?) {
        if case .none = self, addend == 0, residual == nil { return }
        if let silu = logisticKernelFlag {
            osprey_logistic_f32(buffer, count, addend, residual, silu)
            return
        }
        // A lone GELU (after an int8 product, which has no GELU epilogue) in C: Swift's SIMD16 erf runs out of line,
        // 0.9 ns a float against 0.2.
        if case .gelu = self, addend == 0, residual == nil, hasFastLogisticKernel {
            osprey_gelu_f32(buffer, count)
            return
        }
        if case .geluTanh = self, addend == 0, residual == nil, hasFastLogisticKernel {
            osprey_gelu_tanh_f32(buffer, count)
            return
        }
        applyPortable(buffer, count: count, adding: addend, residual: residual)
    }

    /// The C kernel's `silu` flag when this activation runs there (Sigmoid 0, SiLU 1, on CPUs with AVX2 + FMA), else nil.
    @inline(__always)
    var logisticKernelFlag: Int32? {
        switch self {
        case .sigmoid: return hasFastLogisticKernel ? 0 : nil
        case .silu: return hasFastLogisticKernel ? 1 : nil
        default: return nil
        }
    }

    /// `apply` in Swift SIMD only: the path of CPUs without AVX2 + FMA, and the twin the C kernel is tested against.
    ///
    /// One loop calling `vector` (its switch is loop-invariant and unswitched): passing per-case closures to a shared
    /// loop left them as out-of-line calls on 128-bit halves, 2 cycles a float.
    func applyPortable(_ buffer: UnsafeMutablePointer<Float>, count: Int, adding addend: Float, residual: UnsafePointer<Float>?) {
        let add = FloatVector(repeating: addend), width = FloatVector.scalarCount
        var i = 0
        if let residual {
            while i + width <= count {
                let v = (buffer + i).vector(FloatVector.self) + add + (residual + i).vector(FloatVector.self)
                (buffer + i).store(vector(v))
                i += width
            }
            while i < count { buffer[i] = self(buffer[i] + addend + residual[i]); i += 1 }
        } else {
            while i + width <= count {
                (buffer + i).store(vector((buffer + i).vector(FloatVector.self) + add))
                i += width
            }
            while i < count { buffer[i] = self(buffer[i] + addend); i += 1 }
        }
    }
}

/// Whether the C shim's AVX2 + FMA logistic body runs on this CPU (cpuid, read once).
let hasFastLogisticKernel = osprey_float_activations_fast() == 1

/// Lane-wise min(max(v, lo), hi) as compare + blend: the standard library's `clamped` and `pointwiseMin`, and
/// generic comparisons, do not vectorise (concrete types only).
@_transparent
func clamp(_ v: FloatVector, _ lo: FloatVector, _ hi: FloatVector) -> FloatVector {
    var r = v
    r.replace(with: lo, where: r .< lo)
    r.replace(with: hi, where: r .> hi)
    return r
}

/// NCHW epilogue of one image: data[c][i] = activation(data[c][i] + bias[c] + residual[c][i]) over `channels` planes.
///
/// Splits channels across the compute pool when the block is large; pass `parallel: false` from inside a parallel region.
public func applyChannelEpilogue(_ data: UnsafeMutablePointer<Float>, channels: Int, planeSize: Int, bias: UnsafePointer<Float>?,
                                 residual: UnsafePointer<Float>?, activation: Activation, parallel: Bool = true) {
    if bias == nil && residual == nil, case .none = activation { return }
    let body = { (range: Range<Int>) in
        for c in range {
            activation.apply(data + c * planeSize, count: planeSize, adding: bias?[c] ?? 0, residual: residual.map { $0 + c * planeSize })
        }
    }
    // Small blocks are not worth waking a thread for.
    if parallel && channels * planeSize >= 32_768 {
        parallelRanges(channels, minimumChunk: max(1, 8192 / max(1, planeSize)), body)
    } else {
        body(0..<channels)
    }
}

/// Row-major epilogue (Gemm, MatMul): data[r][j] = activation(data[r][j] + bias[j] + residual[r][j]) for a rows x columns matrix.
public func applyRowEpilogue(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int, bias: UnsafePointer<Float>?,
                             residual: UnsafePointer<Float>?, activation: Activation) {
    for r in 0..<rows {
        let row = data + r * columns
        if let bias {
            let res = residual.map { $0 + r * columns }
            var j = 0
            while j + FloatVector.scalarCount <= columns {
                var v = row.advanced(by: j).vector(FloatVector.self) + bias.advanced(by: j).vector(FloatVector.self)
                if let res { v += res.advanced(by: j).vector(FloatVector.self) }
                row.advanced(by: j).store(v)
                j += FloatVector.scalarCount
            }
            while j < columns { row[j] += bias[j] + (res?[j] ?? 0); j += 1 }
            activation.apply(row, count: columns)
        } else {
            activation.apply(row, count: columns, adding: 0, residual: residual.map { $0 + r * columns })
        }
    }
}
