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
        }
    }

    /// The function on 16 lanes, for epilogues applied in registers.
    @inline(__always)
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
        }
    }

    /// Applies the function in place to `count` floats.
    public func apply(_ buffer: UnsafeMutablePointer<Float>, count: Int) {
        if case .none = self { return }
        apply(buffer, count: count, adding: 0, residual: nil)
    }

    /// buffer[i] = f(buffer[i] + addend + residual[i]) for `count` floats, vectorised: the fused conv/gemm epilogue.
    public func apply(_ buffer: UnsafeMutablePointer<Float>, count: Int, adding addend: Float, residual: UnsafePointer<Float>?) {
        switch self {
        case .none:
            if addend == 0 && residual == nil { return }
            transform(buffer, count, addend, residual, { $0 }, { $0 })
        case .relu:
            let zero = FloatVector(repeating: 0)
            transform(buffer, count, addend, residual, { $0.replacing(with: zero, where: $0 .< zero) }, { $0 > 0 ? $0 : 0 })
        case .leakyRelu(let alpha):
            let zero = FloatVector(repeating: 0), a = FloatVector(repeating: alpha)
            transform(buffer, count, addend, residual, { $0.replacing(with: $0 * a, where: $0 .< zero) }, { $0 >= 0 ? $0 : alpha * $0 })
        case .clip(let lo, let hi):
            let l = FloatVector(repeating: lo), h = FloatVector(repeating: hi)
            transform(buffer, count, addend, residual, { clamp($0, l, h) }, { Swift.min(Swift.max($0, lo), hi) })
        case .hardSigmoid(let alpha, let beta):
            let zero = FloatVector(repeating: 0), one = FloatVector(repeating: 1)
            let a = FloatVector(repeating: alpha), b = FloatVector(repeating: beta)
            transform(buffer, count, addend, residual, { clamp($0 * a + b, zero, one) }, {
                Swift.max(0, Swift.min(1, alpha * $0 + beta))
            })
        case .hardSwish:
            let zero = FloatVector(repeating: 0), one = FloatVector(repeating: 1)
            let sixth = FloatVector(repeating: 1 / 6 as Float), half = FloatVector(repeating: 0.5)
            transform(buffer, count, addend, residual, { $0 * clamp($0 * sixth + half, zero, one) }, {
                $0 * Swift.max(0, Swift.min(1, $0 / 6 + 0.5))
            })
        case .sigmoid:
            transform(buffer, count, addend, residual, vectorSigmoid, { 1 / (1 + Foundation.exp(-$0)) })
        case .tanh:
            transform(buffer, count, addend, residual, vectorTanh, { Foundation.tanh($0) })
        }
    }
}

/// Lane-wise min(max(v, lo), hi) as compare + blend: the standard library's `clamped` and `pointwiseMin`, and
/// generic comparisons, do not vectorise (concrete types only).
@inline(__always)
func clamp(_ v: FloatVector, _ lo: FloatVector, _ hi: FloatVector) -> FloatVector {
    var r = v
    r.replace(with: lo, where: r .< lo)
    r.replace(with: hi, where: r .> hi)
    return r
}

/// buffer[i] = vector(buffer[i] + addend + residual[i]) in 16-float steps, `scalar` on the tail.
@inline(__always)
private func transform(_ buffer: UnsafeMutablePointer<Float>, _ count: Int, _ addend: Float, _ residual: UnsafePointer<Float>?,
                       _ vector: (FloatVector) -> FloatVector, _ scalar: (Float) -> Float) {
    let add = FloatVector(repeating: addend)
    var i = 0
    if let residual {
        while i + FloatVector.scalarCount <= count {
            buffer.advanced(by: i).store(vector(buffer.advanced(by: i).vector(FloatVector.self) + add + residual.advanced(by: i).vector(FloatVector.self)))
            i += FloatVector.scalarCount
        }
        while i < count { buffer[i] = scalar(buffer[i] + addend + residual[i]); i += 1 }
    } else {
        while i + FloatVector.scalarCount <= count {
            buffer.advanced(by: i).store(vector(buffer.advanced(by: i).vector(FloatVector.self) + add))
            i += FloatVector.scalarCount
        }
        while i < count { buffer[i] = scalar(buffer[i] + addend); i += 1 }
    }
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
