import Foundation
import Tensor

/// float32 Add/Sub/Mul/Div through the specialised broadcasting kernel (`floatBinary`), written into whichever
/// operand has the output's shape (in place when the executor handed over its last reference), else into a new
/// tensor; nil when an operand is not float32 (the generic `arithmetic` path, also the reference twin, takes those).
func floatArithmetic(_ op: FloatBinaryOperation, _ inputs: inout KernelInputs, _ ctx: OpContext) throws -> Tensor? {
    // Only shapes are read before the take: holding the tensors would keep extra references and force a copy.
    guard inputs[0]?.dtype == .float32, inputs[1]?.dtype == .float32, let aShape = inputs[0]?.shape, let bShape = inputs[1]?.shape else { return nil }
    guard let shape = broadcastShape(aShape, bShape) else {
        throw ctx.error(.executionFailed, "cannot broadcast shapes \(aShape) and \(bShape)")
    }
    let aStrides = broadcastStrides(aShape, to: shape), bStrides = broadcastStrides(bShape, to: shape)
    if aShape == shape || bShape == shape {
        let intoFirst = aShape == shape
        var target = inputs.take(intoFirst ? 0 : 1)!
        let other = inputs[intoFirst ? 1 : 0]!
        if target.count == 0 { return target }
        target.withUnsafeMutableBufferPointer(of: Float.self) { t in
            other.withUnsafeBufferPointer(of: Float.self) { o in
                let tp = t.baseAddress!, op0 = o.baseAddress!
                if intoFirst {
                    floatBinary(op, tp, strides: aStrides, op0, strides: bStrides, into: tp, shape: shape)
                } else {
                    floatBinary(op, op0, strides: aStrides, tp, strides: bStrides, into: tp, shape: shape)
                }
            }
        }
        return target
    }
    let a = inputs[0]!, b = inputs[1]!
    var out = Tensor.pooled(.float32, shape: shape)
    if out.count == 0 { return out }
    a.withUnsafeBufferPointer(of: Float.self) { pa in
        b.withUnsafeBufferPointer(of: Float.self) { pb in
            out.withUnsafeMutableBufferPointer(of: Float.self) { po in
                floatBinary(op, pa.baseAddress!, strides: aStrides, pb.baseAddress!, strides: bStrides, into: po.baseAddress!, shape: shape)
            }
        }
    }
    return out
}

/// Applies `activation` to a float32 tensor in one vectorised pass split across the compute threads, in place when
/// the executor handed over the last reference.
func applyActivation(_ activation: Activation, taking index: Int, from inputs: inout KernelInputs) -> Tensor {
    var t = inputs.take(index)!
    t.withUnsafeMutableBufferPointer(of: Float.self) { p in
        guard let base = p.baseAddress else { return }
        applyActivationParallel(activation, base, count: p.count)
    }
    return t
}

/// `activation.apply` over `count` floats, in chunks across the compute threads when there are enough of them.
func applyActivationParallel(_ activation: Activation, _ base: UnsafeMutablePointer<Float>, count: Int) {
    let block = 4096
    if count >= 32_768 && EngineThreads.threads > 1 {
        parallelRanges((count + block - 1) / block, minimumChunk: 4) { range in
            let start = range.lowerBound * block, end = min(count, range.upperBound * block)
            activation.apply(base + start, count: end - start)
        }
    } else {
        activation.apply(base, count: count)
    }
}

/// A float32 unary kernel with a vectorised body: `vector` on 16 lanes, `scalar` for the tail (and the reference).
func vectorUnary(_ name: String, vector: @escaping @Sendable (FloatVector) -> FloatVector, scalar: @escaping @Sendable (Float) -> Float)
    -> (String, @Sendable (OpContext) throws -> PreparedKernel) {
    (name, { ctx in
        PreparedKernel(kernel: { inputs in
            guard let dtype = inputs[0]?.dtype else { throw ctx.error(.invalidModel, "missing input") }
            switch dtype {
            case .float32:
                var t = inputs.take(0)!
                t.withUnsafeMutableBufferPointer(of: Float.self) { p in
                    guard let base = p.baseAddress else { return }
                    let width = FloatVector.scalarCount
                    var i = 0
                    while i + width <= p.count { (base + i).store(vector((base + i).vector(FloatVector.self))); i += width }
                    while i < p.count { base[i] = scalar(base[i]); i += 1 }
                }
                return [t]
            case .float64: return [mapElements(inputs[0]!) { (v: Double) in Double(scalar(Float(v))) }]
            default: throw ctx.error(.unsupportedDType, "input dtype \(dtype) is not supported (float32)")
            }
        })
    })
}

/// A unary operator that is one of the epilogue activations: float32 runs `Activation.apply` (vectorised, threaded),
/// float64 goes through the scalar definition.
func activationUnary(_ name: String, _ make: @escaping @Sendable (OpContext) throws -> Activation, int intOp: (@Sendable (Int64) -> Int64)? = nil)
    -> (String, @Sendable (OpContext) throws -> PreparedKernel) {
    (name, { ctx in
        let activation = try make(ctx)
        return PreparedKernel(kernel: { inputs in
            guard let dtype = inputs[0]?.dtype else { throw ctx.error(.invalidModel, "missing input") }
            switch dtype {
            case .float32: return [applyActivation(activation, taking: 0, from: &inputs)]
            case .float64: return [mapElements(inputs[0]!) { (v: Double) in Double(activation(Float(v))) }]
            case .int64 where intOp != nil: return [mapElements(inputs[0]!) { (v: Int64) in intOp!(v) }]
            case .int32 where intOp != nil: return [mapElements(inputs[0]!) { (v: Int32) in Int32(truncatingIfNeeded: intOp!(Int64(v))) }]
            default: throw ctx.error(.unsupportedDType, "input dtype \(dtype) is not supported (float32)")
            }
        })
    })
}
