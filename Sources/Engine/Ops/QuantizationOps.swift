import Foundation
import Tensor

/// Per-element scale and zero point of (De)QuantizeLinear: per-tensor, or per-channel along `axis`.
private func quantParameters(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int) throws -> (Int, Int, [Double], [Double]) {
    let scales = scale.doubles
    let zeros = zeroPoint?.doubles ?? [Double](repeating: 0, count: scales.count)
    guard zeros.count == scales.count else { throw ctx.error(.executionFailed, "scale \(scale.shape) and zero point \(zeroPoint?.shape ?? []) differ") }
    if scale.count == 1 { return (1, x.count, scales, zeros) }
    guard scale.rank == 1 else { throw ctx.unsupported("block_size", "(blocked quantization)") }
    let a = try ctx.axis(axis, rank: x.rank)
    guard x.shape[a] == scales.count else { throw ctx.error(.executionFailed, "\(scales.count) scales do not match axis \(a) of \(x.shape)") }
    return (x.shape[a], x.shape[(a + 1)...].reduce(1, *), scales, zeros)
}

let quantizationOperators: OperatorTable = [
    "DequantizeLinear": { ctx in
        let axis = try ctx.int("axis", 1)
        if try ctx.int("block_size", 0) != 0 { throw ctx.unsupported("block_size", "(blocked quantization)") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), scale = try inputs.required(1, ctx)
            if let fast = try dequantizeLinearFast(ctx, x, scale: scale, zeroPoint: inputs[2], axis: axis) { return [fast] }
            return [try dequantizeLinearReference(ctx, x, scale: scale, zeroPoint: inputs[2], axis: axis)]
        }
    },
    "QuantizeLinear": { ctx in
        let axis = try ctx.int("axis", 1)
        if try ctx.int("block_size", 0) != 0 { throw ctx.unsupported("block_size", "(blocked quantization)") }
        var outputAttr: DType?
        if try ctx.int("output_dtype", 0) != 0 { outputAttr = try dtypeAttribute(ctx, "output_dtype", nil) }
        let requested = outputAttr
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), scale = try inputs.required(1, ctx)
            let zeroPoint = inputs[2]
            let dtype = zeroPoint?.dtype ?? requested ?? .uint8
            if let fast = try quantizeLinearFast(ctx, x, scale: scale, zeroPoint: zeroPoint, dtype: dtype, axis: axis) { return [fast] }
            return [try quantizeLinearReference(ctx, x, scale: scale, zeroPoint: zeroPoint, dtype: dtype, axis: axis)]
        }
    },
    "BitShift": { ctx in
        let direction = try ctx.string("direction", "")
        guard direction == "LEFT" || direction == "RIGHT" else { throw ctx.unsupported("direction", "'\(direction)'") }
        let left = direction == "LEFT"
        return PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            guard a.dtype == b.dtype, [DType.uint8, .uint16, .uint32, .uint64].contains(a.dtype) else {
                throw ctx.error(.unsupportedDType, "BitShift needs matching unsigned integers, got \(a.dtype) and \(b.dtype)")
            }
            let wa = try castTensor(a, to: .uint64, ctx), wb = try castTensor(b, to: .uint64, ctx)
            let r = try broadcastBinary(wa, wb, ctx) { (x: UInt64, s: UInt64) -> UInt64 in s >= 64 ? 0 : (left ? x << s : x >> s) }
            // Narrowing keeps the low bits, as a shift in the original width would.
            let bytes = a.dtype.byteSize
            let masked = mapElements(r) { (v: UInt64) -> UInt64 in bytes == 8 ? v : v & ((1 << UInt64(bytes * 8)) - 1) }
            return [try castTensor(masked, to: a.dtype, ctx)]
        }
    },
]

/// QuantizeLinear in doubles for any input and zero-point dtype (the reference twin of `quantizeLinearFast`).
func quantizeLinearReference(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, dtype: DType, axis: Int) throws -> Tensor {
    let bounds: (Double, Double)
    switch dtype {
    case .uint8: bounds = (0, 255)
    case .int8: bounds = (-128, 127)
    case .uint16: bounds = (0, 65535)
    case .int16: bounds = (-32768, 32767)
    case .int32: bounds = (Double(Int32.min), Double(Int32.max))
    default: throw ctx.error(.unsupportedDType, "quantizing to \(dtype) is not supported (uint8, int8, uint16, int16, int32)")
    }
    let (channels, inner, scales, zeros) = try quantParameters(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis)
    let values = x.doubles
    var out = [Double](repeating: 0, count: values.count)
    for i in 0..<values.count {
        let c = (i / inner) % channels
        // Round half to even on x / scale in float32, as the spec's reference does.
        let q = Double((Float(values[i]) / Float(scales[c])).rounded(.toNearestOrEven)) + zeros[c]
        out[i] = min(max(q, bounds.0), bounds.1)
    }
    return try castTensor(Tensor(shape: x.shape, scalars: out), to: dtype, ctx)
}

/// DequantizeLinear in doubles for any input dtype (the reference twin of `dequantizeLinearFast`).
func dequantizeLinearReference(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int) throws -> Tensor {
    let (channels, inner, scales, zeros) = try quantParameters(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis)
    let values = x.doubles
    var out = [Float](repeating: 0, count: values.count)
    for i in 0..<values.count {
        let c = (i / inner) % channels
        out[i] = Float((values[i] - zeros[c]) * scales[c])
    }
    return try castTensor(Tensor(shape: x.shape, scalars: out), to: scale.dtype, ctx)
}

/// DequantizeLinear of uint8/int8 with float32 scales in float32 arithmetic: (q - zero) * scale is one correctly
/// rounded product either way, so this equals the reference bit for bit. Nil when the dtypes do not apply.
func dequantizeLinearFast(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int) throws -> Tensor? {
    guard x.dtype == .uint8 || x.dtype == .int8, scale.dtype == .float32, zeroPoint.map({ $0.dtype == x.dtype }) ?? true else { return nil }
    let (channels, inner, _, _) = try quantParameters(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis)
    let scales = scale.scalars(as: Float.self)
    let zeros = zeroPoint.map { z in z.doubles.map { Float($0) } } ?? [Float](repeating: 0, count: scales.count)
    let outer = x.count / max(channels * inner, 1)
    return Tensor.makeFloat(shape: x.shape) { o in
        x.withUnsafeBytes { raw in
            let signed = x.dtype == .int8
            var i = 0
            for _ in 0..<outer {
                for c in 0..<channels {
                    dequantizeRun(raw.baseAddress! + i, count: inner, scale: scales[c], zero: zeros[c], signed: signed, into: o + i)
                    i += inner
                }
            }
        }
    }
}

/// QuantizeLinear of float32 to uint8/int8 with float32 scales: round half to even of x / scale (float32, as the
/// reference), plus zero, saturated. Nil when the dtypes do not apply.
func quantizeLinearFast(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, dtype: DType, axis: Int) throws -> Tensor? {
    guard x.dtype == .float32, scale.dtype == .float32, dtype == .uint8 || dtype == .int8 else { return nil }
    let (channels, inner, _, _) = try quantParameters(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis)
    let scales = scale.scalars(as: Float.self)
    let zeros = zeroPoint.map { z in z.doubles.map { Float($0) } } ?? [Float](repeating: 0, count: scales.count)
    let outer = x.count / max(channels * inner, 1)
    var out = Tensor(uninitialized: dtype, shape: x.shape)
    x.floatPointer { xp in
        out.withUnsafeMutableBytes { raw in
            var i = 0
            for _ in 0..<outer {
                for c in 0..<channels {
                    quantizeRun(xp + i, count: inner, scale: scales[c], zero: zeros[c], signed: dtype == .int8, into: raw.baseAddress! + i)
                    i += inner
                }
            }
        }
    }
    return out
}
