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

    /// Applies the function in place to `count` floats.
    public func apply(_ buffer: UnsafeMutablePointer<Float>, count: Int) {
        if case .none = self { return }
        for i in 0..<count { buffer[i] = self(buffer[i]) }
    }
}
