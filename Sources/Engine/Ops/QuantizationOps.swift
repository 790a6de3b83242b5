import Foundation
import Tensor

/// Per-element scale and zero point of (De)QuantizeLinear: per-tensor, or per-channel along `axis`.
private func quantParameters(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int) throws -> (Int, Int, [Double], [Double]) {
    let layout = try quantLayout(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis, blockSize: 0)
    return (layout.channels, layout.inner, layout.scales, layout.zeros)
}

/// Where each element of x finds its scale and zero point: per tensor, per channel along an axis, or (opset 21's
/// `block_size`) per block of `blockSize` consecutive channels, the parameters then having x's rank.
struct QuantLayout {
    /// Size of x along the axis (1 per tensor), the product of the dimensions after it (x.count per tensor).
    var channels: Int, inner: Int
    /// Channels per parameter entry along the axis (0: one per channel, or one per tensor).
    var blockSize: Int
    /// The parameters in row-major order (zeros are 0 when there is no zero point).
    var scales: [Double], zeros: [Double]

    /// Index into `scales` / `zeros` of element `i`.
    @inline(__always) func parameterIndex(_ i: Int) -> Int {
        let c = (i / inner) % channels
        guard blockSize > 0 else { return c }
        let blocks = (channels + blockSize - 1) / blockSize
        return ((i / (inner * channels)) * blocks + c / blockSize) * inner + i % inner
    }
}

/// The parameter layout of a (De)QuantizeLinear, checking the parameter shapes against x's.
func quantLayout(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int, blockSize: Int) throws -> QuantLayout {
    let scales = scale.doubles
    let zeros = zeroPoint?.doubles ?? [Double](repeating: 0, count: scales.count)
    guard zeros.count == scales.count else { throw ctx.error(.executionFailed, "scale \(scale.shape) and zero point \(zeroPoint?.shape ?? []) differ") }
    if blockSize > 0 {
        let a = try ctx.axis(axis, rank: x.rank)
        var expected = x.shape
        expected[a] = (x.shape[a] + blockSize - 1) / blockSize
        guard scale.shape == expected else {
            throw ctx.error(.executionFailed, "blocked scale \(scale.shape) does not match x \(x.shape) with blocks of \(blockSize) along axis \(a)")
        }
        return QuantLayout(channels: x.shape[a], inner: x.shape[(a + 1)...].reduce(1, *), blockSize: blockSize, scales: scales, zeros: zeros)
    }
    if scale.count == 1 { return QuantLayout(channels: 1, inner: max(x.count, 1), blockSize: 0, scales: scales, zeros: zeros) }
    guard scale.rank == 1 else { throw ctx.error(.executionFailed, "scale \(scale.shape) is neither a scalar nor a vector (block_size is 0)") }
    let a = try ctx.axis(axis, rank: x.rank)
    guard x.shape[a] == scales.count else { throw ctx.error(.executionFailed, "\(scales.count) scales do not match axis \(a) of \(x.shape)") }
    return QuantLayout(channels: x.shape[a], inner: x.shape[(a + 1)...].reduce(1, *), blockSize: 0, scales: scales, zeros: zeros)
}

let quantizationOperators: OperatorTable = [
    "DequantizeLinear": { ctx in
        let axis = try ctx.int("axis", 1)
        let blockSize = try ctx.int("block_size", 0)
        guard blockSize >= 0 else { throw ctx.unsupported("block_size", "= \(blockSize)") }
        var outputAttr: DType?
        if try ctx.int("output_dtype", 0) != 0 { outputAttr = try dtypeAttribute(ctx, "output_dtype", nil) }
        let requested = outputAttr
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), scale = try inputs.required(1, ctx)
            if requested == nil || requested == scale.dtype,
               let fast = try dequantizeLinearFast(ctx, x, scale: scale, zeroPoint: inputs[2], axis: axis, blockSize: blockSize) { return [fast] }
            return [try dequantizeLinearReference(ctx, x, scale: scale, zeroPoint: inputs[2], axis: axis, blockSize: blockSize,
                                                  outputType: requested)]
        }
    },
    "QuantizeLinear": { ctx in
        let axis = try ctx.int("axis", 1)
        let blockSize = try ctx.int("block_size", 0)
        guard blockSize >= 0 else { throw ctx.unsupported("block_size", "= \(blockSize)") }
        let saturate = try ctx.int("saturate", 1) != 0
        var outputAttr: DType?
        if try ctx.int("output_dtype", 0) != 0 { outputAttr = try dtypeAttribute(ctx, "output_dtype", nil) }
        let requested = outputAttr
        // `precision` (opset 25) names the type of x / scale; float32 division is what every case here rounds with.
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), scale = try inputs.required(1, ctx)
            let zeroPoint = inputs[2]
            let dtype = zeroPoint?.dtype ?? requested ?? .uint8
            if blockSize == 0, let fast = try quantizeLinearFast(ctx, x, scale: scale, zeroPoint: zeroPoint, dtype: dtype, axis: axis) { return [fast] }
            return [try quantizeLinearReference(ctx, x, scale: scale, zeroPoint: zeroPoint, dtype: dtype, axis: axis,
                                                blockSize: blockSize, saturate: saturate)]
        }
    },
    "BitShift": { ctx in
        let direction = try ctx.string("direction", "")
        guard direction == "LEFT" || direction == "RIGHT" else { throw ctx.unsupported("direction", "'\(direction)'") }
        let left = direction == "LEFT"
        return PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            // Signed integers (opset 28): the left shift wraps in the type's width, the right shift is arithmetic, and
            // an amount that is negative or at least the width shifts everything out (0, or -1 for negative x to the right).
            if a.dtype == b.dtype, [DType.int8, .int16, .int32, .int64].contains(a.dtype) {
                let bits = Int64(a.dtype.byteSize * 8)
                let wa = try castTensor(a, to: .int64, ctx), wb = try castTensor(b, to: .int64, ctx)
                let r = try broadcastBinary(wa, wb, ctx) { (x: Int64, s: Int64) -> Int64 in
                    guard s >= 0, s < bits else { return left || x >= 0 ? 0 : -1 }
                    guard left else { return x >> s }
                    let shifted = x << s  // then wrapped to the type's width, sign-extended
                    return bits == 64 ? shifted : (shifted << (64 - bits)) >> (64 - bits)
                }
                return [try castTensor(r, to: a.dtype, ctx)]
            }
            guard a.dtype == b.dtype, [DType.uint8, .uint16, .uint32, .uint64].contains(a.dtype) else {
                throw ctx.error(.unsupportedDType, "BitShift needs matching integers, got \(a.dtype) and \(b.dtype)")
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

/// QuantizeLinear in doubles for any input and zero-point dtype (the reference twin of `quantizeLinearFast`); 8-bit
/// float outputs round x / scale to nearest even, saturating to the largest finite value when `saturate`.
func quantizeLinearReference(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, dtype: DType, axis: Int,
                             blockSize: Int = 0, saturate: Bool = true) throws -> Tensor {
    var bounds: (Double, Double)?
    switch dtype {
    case .uint8: bounds = (0, 255)
    case .int8: bounds = (-128, 127)
    case .uint16: bounds = (0, 65535)
    case .int16: bounds = (-32768, 32767)
    case .int32: bounds = (Double(Int32.min), Double(Int32.max))
    case .uint4: bounds = (0, 15)
    case .int4: bounds = (-8, 7)
    case .uint2: bounds = (0, 3)
    case .int2: bounds = (-2, 1)
    case .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1: bounds = nil
    default: throw ctx.error(.unsupportedDType, "quantizing to \(dtype) is not supported (8/16/32-, 4- and 2-bit integers, 8- and 4-bit floats)")
    }
    let layout = try quantLayout(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis, blockSize: blockSize)
    let values = x.doubles
    guard let bounds else {
        // 8- and 4-bit floats: the zero point (0 by the spec) is added in float32, then the sum is cast with `saturate`
        // (float4e2m1 always saturates: it has no infinity).
        var out = [Float](repeating: 0, count: values.count)
        for i in 0..<values.count {
            let p = layout.parameterIndex(i)
            out[i] = Float(values[i]) / Float(layout.scales[p]) + Float(layout.zeros[p])
        }
        return try castTensor(Tensor(shape: x.shape, scalars: out), to: dtype, saturate: saturate, ctx)
    }
    var out = [Double](repeating: 0, count: values.count)
    for i in 0..<values.count {
        let p = layout.parameterIndex(i)
        // Round half to even on x / scale in float32, as the spec's reference does.
        let q = Double((Float(values[i]) / Float(layout.scales[p])).rounded(.toNearestOrEven)) + layout.zeros[p]
        out[i] = min(max(q, bounds.0), bounds.1)
    }
    return try castTensor(Tensor(shape: x.shape, scalars: out), to: dtype, ctx)
}

/// DequantizeLinear in doubles for any input dtype (the reference twin of `dequantizeLinearFast`); the result has
/// `outputType` when given (opset 23's `output_dtype`), else the scale's type.
func dequantizeLinearReference(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int,
                               blockSize: Int = 0, outputType: DType? = nil) throws -> Tensor {
    let layout = try quantLayout(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis, blockSize: blockSize)
    let values = x.doubles
    var out = [Float](repeating: 0, count: values.count)
    for i in 0..<values.count {
        let p = layout.parameterIndex(i)
        out[i] = Float((values[i] - layout.zeros[p]) * layout.scales[p])
    }
    return try castTensor(Tensor(shape: x.shape, scalars: out), to: outputType ?? scale.dtype, ctx)
}

/// DequantizeLinear of uint8/int8/uint4/int4 (4-bit held one per byte) with float32 scales, per tensor, per channel
/// or blocked (`blockSize`), in float32 arithmetic: (q - zero) * scale is one correctly rounded product either way, so
/// this equals the reference bit for bit. Nil when the dtypes do not apply.
func dequantizeLinearFast(_ ctx: OpContext, _ x: Tensor, scale: Tensor, zeroPoint: Tensor?, axis: Int, blockSize: Int = 0) throws -> Tensor? {
    guard [DType.uint8, .int8, .uint4, .int4].contains(x.dtype), scale.dtype == .float32,
          zeroPoint.map({ $0.dtype == x.dtype }) ?? true else { return nil }
    let layout = try quantLayout(ctx, x, scale: scale, zeroPoint: zeroPoint, axis: axis, blockSize: blockSize)
    let (channels, inner) = (layout.channels, layout.inner)
    let scales = scale.scalars(as: Float.self)
    let zeros = layout.zeros.map { Float($0) }
    let outer = x.count / max(channels * inner, 1)
    let signed = x.dtype == .int8 || x.dtype == .int4
    return Tensor.makeFloat(shape: x.shape) { o in
        x.withUnsafeBytes { raw in
            var i = 0
            guard blockSize > 0 else {
                for _ in 0..<outer {
                    for c in 0..<channels {
                        dequantizeRun(raw.baseAddress! + i, count: inner, scale: scales[c], zero: zeros[c], signed: signed, into: o + i)
                        i += inner
                    }
                }
                return
            }
            // Blocked: each run of `inner` elements reads a run of `inner` parameters (one row of the block).
            for _ in 0..<outer {
                for _ in 0..<channels {
                    let p = layout.parameterIndex(i)
                    for j in 0..<inner {
                        let q = signed ? Float(Int8(bitPattern: raw[i + j])) : Float(raw[i + j])
                        o[i + j] = (q - zeros[p + j]) * scales[p + j]
                    }
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
