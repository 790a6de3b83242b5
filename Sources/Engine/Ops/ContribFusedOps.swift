import Foundation
import Tensor

/// x + bias over the last axis (bias is 1-D of the last dimension, or anything that broadcasts).
private func addBias(_ x: Tensor, _ bias: Tensor?, _ ctx: OpContext) throws -> Tensor {
    guard let bias else { return x }
    guard x.dtype == .float32, bias.dtype == .float32 else { throw ctx.error(.unsupportedDType, "inputs must be float32, got \(x.dtype) and \(bias.dtype)") }
    return try broadcastBinary(x, bias, ctx) { (a: Float, b: Float) -> Float in a + b }
}

/// A float32 unary contrib activation with an optional bias input at index 1 added first.
private func biasedUnary(requireBias: Bool, _ make: @escaping @Sendable (OpContext) throws -> @Sendable (Float) -> Float) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let f = try make(ctx)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            let bias = requireBias ? try inputs.required(1, ctx) : inputs[1]
            return [mapFloats(try addBias(x, bias, ctx), f)]
        }
    }
}

/// `x` with its last two axes swapped (rank >= 2).
private func transposedLastTwo(_ x: Tensor) -> Tensor {
    guard x.rank >= 2 else { return x }
    var perm = Array(0..<x.rank)
    perm.swapAt(x.rank - 1, x.rank - 2)
    var shape = x.shape
    shape.swapAt(x.rank - 1, x.rank - 2)
    return permutedCopy(x, viewShape: x.shape, perm: perm, outShape: shape)
}

/// Contrib operators that are an ai.onnx operator plus an epilogue, and the contrib activations.
let contribFusedOperators: OperatorTable = [
    // Conv + activation, with an optional residual Z added before the activation (onnxruntime's Conv+Add+Relu fusion).
    "FusedConv": { ctx in
        let activation = try ctx.fusedActivation()
        let attributes = ctx.attributes(dropping: ["activation", "activation_params"])
        guard ctx.hasInput(3) else { return try ctx.delegate("Conv", inputs: [0, 1, 2], attributes: attributes, activation: activation) }
        if ctx.constants[1] != nil && (!ctx.hasInput(2) || ctx.constants[2] != nil) {
            // Conv's residual slot (input 3) adds Z in the epilogue, then applies the activation.
            return try ctx.delegate("Conv", inputs: [0, 1, 2, 3], attributes: attributes, activation: activation)
        }
        let conv = try ctx.delegate("Conv", inputs: [0, 1, 2], attributes: attributes)
        return PreparedKernel(kernel: { inputs in
            let z = try inputs.required(3, ctx)
            let y = try conv.kernel(&inputs)[0]
            guard z.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Z is \(z.dtype), expected float32") }
            let sum = try broadcastBinary(y, z, ctx) { (a: Float, b: Float) -> Float in a + b }
            return [mapFloats(sum) { activation($0) }]
        }, consumedInputs: conv.consumedInputs)
    },
    "FusedGemm": { ctx in
        let attributes = ctx.attributes(dropping: ["activation", "activation_alpha", "activation_beta", "activation_gamma", "leaky_relu_alpha"])
        return try ctx.delegate("Gemm", inputs: [0, 1, 2], attributes: attributes, activation: try ctx.fusedActivation())
    },
    // alpha * op(A) @ op(B), op transposing the last two axes.
    "FusedMatMul": { ctx in
        let transA = try ctx.int("transA", 0) != 0, transB = try ctx.int("transB", 0) != 0
        if try ctx.int("transBatchA", 0) != 0 { throw ctx.unsupported("transBatchA", "= 1") }
        if try ctx.int("transBatchB", 0) != 0 { throw ctx.unsupported("transBatchB", "= 1") }
        let alpha = try ctx.float("alpha", 1)
        return PreparedKernel { inputs in
            var a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            if transA { a = transposedLastTwo(a) }
            if transB { b = transposedLastTwo(b) }
            let y = try matmul(a, b, ctx)
            return [alpha == 1 ? y : mapFloats(y) { $0 * alpha }]
        }
    },
    // Conv on channels-last input and output (weights stay M x C/group x kH x kW, as the schema says).
    "NhwcConv": { ctx in
        let conv = try ctx.delegate("Conv", inputs: [0, 1, 2], attributes: ctx.node.attributes)
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank >= 3 else { throw ctx.error(.executionFailed, "input \(x.shape) must be N x spatial... x C") }
            let r = x.rank
            let toFirst = [0, r - 1] + Array(1..<(r - 1))
            inputs.values[0] = permutedCopy(x, viewShape: x.shape, perm: toFirst, outShape: toFirst.map { x.shape[$0] })
            let y = try conv.kernel(&inputs)[0]
            let toLast = [0] + Array(2..<r) + [1]
            return [permutedCopy(y, viewShape: y.shape, perm: toLast, outShape: toLast.map { y.shape[$0] })]
        }, consumedInputs: conv.consumedInputs)
    },
    "Gelu": biasedUnary(requireBias: false) { _ in { geluExact($0) } },
    "BiasGelu": biasedUnary(requireBias: true) { _ in { geluExact($0) } },
    "FastGelu": biasedUnary(requireBias: false) { _ in { x in 0.5 * x * (1 + Foundation.tanh(0.7978845608028654 * x + 0.035677408136300125 * x * x * x)) } },
    "QuickGelu": { ctx in
        let alpha = try ctx.float("alpha", 1.702)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            return [mapFloats(x) { $0 / (1 + Foundation.exp(-alpha * $0)) }]
        }
    },
    // X + bias + skip.
    "BiasAdd": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx), bias = try inputs.required(1, ctx), skip = try inputs.required(2, ctx)
        guard skip.dtype == .float32 else { throw ctx.error(.unsupportedDType, "skip is \(skip.dtype), expected float32") }
        let biased = try addBias(x, bias, ctx)
        return [try broadcastBinary(biased, skip, ctx) { (a: Float, b: Float) -> Float in a + b }]
    } },
]
