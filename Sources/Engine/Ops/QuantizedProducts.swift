import Tensor

// MatMulInteger / QLinearMatMul and ConvInteger / QLinearConv on the integer kernels (Kernels/Quantized): 8-bit operands,
// exact int32 sums of (x - x_zero) * (w - w_zero). `integerMatMul` and `integerConvolution` stay as their reference
// twins (and run the shapes these paths do not take: per-batch zero points, 1-D and 3-D convolutions).

/// An 8-bit dtype the integer GEMM reads, or nil.
private func isEightBit(_ dtype: DType) -> Bool { dtype == .uint8 || dtype == .int8 }

/// Zero points as Int32: absent = [0], else every value (scalar, or one per row/column).
private func zeroPoints(_ t: Tensor?) -> [Int32] { t.map { $0.doubles.map { Int32($0) } } ?? [0] }

/// Calls `body` with the tensor's 8-bit values as a typed pointer.
private func withEightBits<R>(_ t: Tensor, _ body: (UnsafePointer<UInt8>?, UnsafePointer<Int8>?) -> R) -> R {
    t.dtype == .uint8 ? t.withUnsafeBufferPointer(of: UInt8.self) { body($0.baseAddress, nil) }
                      : t.withUnsafeBufferPointer(of: Int8.self) { body(nil, $0.baseAddress) }
}

/// B of a MatMulInteger-style product packed at compile time when it and its zero point are constants (2-D, 8-bit,
/// zero point scalar or per column); nil otherwise (the kernel packs per call).
func packedConstantMatrix(_ b: Tensor?, zero: Tensor?, zeroIsConstant: Bool) -> PackedQuantizedMatrix? {
    guard let b, b.rank == 2, isEightBit(b.dtype), zeroIsConstant else { return nil }
    let (k, n) = (b.shape[0], b.shape[1])
    let zeros = zeroPoints(zero)
    guard zeros.count == 1 || zeros.count == n else { return nil }
    return packMatrix(b, k: k, n: n, offset: 0, zeros: zeros)
}

private func packMatrix(_ b: Tensor, k: Int, n: Int, offset: Int, zeros: [Int32]) -> PackedQuantizedMatrix {
    withEightBits(b) { u, s in
        if let u { return PackedQuantizedMatrix(k: k, n: n, values: u + offset, rowStride: n, zeroPoints: zeros) }
        return PackedQuantizedMatrix(k: k, n: n, values: s! + offset, rowStride: n, zeroPoints: zeros)
    }
}

/// (A - a_zero) x (B - b_zero) with numpy MatMul broadcasting as int32, on the integer GEMM; nil when the operands
/// are not 8-bit or a zero point is neither a scalar nor per row (A) / per column (B) (the caller falls back).
func fastIntegerMatMul(_ a: Tensor, zero aZeroT: Tensor?, _ b: Tensor, zero bZeroT: Tensor?, packed: PackedQuantizedMatrix?,
                       _ ctx: OpContext) throws -> Tensor? {
    guard a.rank >= 1, b.rank >= 1, isEightBit(a.dtype), isEightBit(b.dtype),
          aZeroT.map({ $0.rank <= 1 }) ?? true, bZeroT.map({ $0.rank <= 1 }) ?? true else { return nil }
    let aShape = a.rank == 1 ? [1, a.shape[0]] : a.shape, bShape = b.rank == 1 ? [b.shape[0], 1] : b.shape
    let (m, k, n) = (aShape[aShape.count - 2], aShape[aShape.count - 1], bShape[bShape.count - 1])
    guard bShape[bShape.count - 2] == k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
    let aZero = zeroPoints(aZeroT), bZero = zeroPoints(bZeroT)
    guard aZero.count == 1 || aZero.count == m, bZero.count == 1 || bZero.count == n else { return nil }
    let aBatch = Array(aShape.dropLast(2)), bBatch = Array(bShape.dropLast(2))
    guard let batch = broadcastShape(aBatch, bBatch) else { throw ctx.error(.executionFailed, "cannot broadcast \(a.shape) and \(b.shape)") }
    let aStrides = broadcastStrides(aBatch, to: batch), bStrides = broadcastStrides(bBatch, to: batch)
    let batchStrides = Tensor.contiguousStrides(batch), count = batch.reduce(1, *)
    var shape = batch + [m, n]
    if a.rank == 1 { shape.remove(at: shape.count - 2) }
    if b.rank == 1 { shape.removeLast() }
    var out = Tensor(dtype: .int32, shape: shape)
    guard m > 0, n > 0 else { return out }
    let stride = quantizedRowStride(k)
    let widened = UnsafeMutablePointer<Int16>.allocate(capacity: max(1, m * stride))
    defer { widened.deallocate() }
    out.withUnsafeMutableBufferPointer(of: Int32.self) { c in
        for i in 0..<count {
            var rem = i, ao = 0, bo = 0
            for d in 0..<batch.count {
                let q = rem / batchStrides[d]; rem %= batchStrides[d]
                ao += q * aStrides[d]; bo += q * bStrides[d]
            }
            withEightBits(a) { u, s in
                if let u { widenQuantizedRows(m: m, k: k, values: u + ao * m * k, rowStride: k, zeroPoints: aZero, into: widened) }
                else { widenQuantizedRows(m: m, k: k, values: s! + ao * m * k, rowStride: k, zeroPoints: aZero, into: widened) }
            }
            let matrix = packed ?? packMatrix(b, k: k, n: n, offset: bo * k * n, zeros: bZero)
            quantizedGemm(m: m, a: widened, b: matrix, c: c.baseAddress! + i * m * n, ldc: n)
        }
    }
    return out
}

/// The integer-kernel plan of a ConvInteger / QLinearConv whose weights (input `weights`) and their zero point
/// (input `zero`, when present) are constants; nil otherwise (the kernel then runs the double-precision path).
func quantizedConvolutionPlan(_ ctx: OpContext, weights: Int, zero: Int, groups: Int) -> QuantizedConvolutionPlan? {
    guard let w = ctx.constants[weights], !ctx.hasInput(zero) || ctx.constants[zero] != nil else { return nil }
    return QuantizedConvolutionPlan(w, zero: ctx.constants[zero], groups: groups)
}

/// ConvInteger sums (+ optional int32 bias) through the integer kernels; nil when x or its zero point do not fit
/// (not a 2-D 8-bit input, or a zero point that is not a scalar).
func quantizedConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, plan: QuantizedConvolutionPlan, x: Tensor, xZero: Tensor?,
                          bias: Tensor?, output: QuantizedOutput) throws -> Tensor? {
    guard xZero.map({ $0.count == 1 && $0.dtype == x.dtype }) ?? true else { return nil }
    let z = Int32(xZero?.doubleValue(at: 0) ?? 0)
    return try runQuantizedConvolution(ctx, attrs, plan: plan, x: x, xZero: z, bias: bias.map { $0.dtype == .int32 ? $0.scalars(as: Int32.self) : $0.doubles.map { Int32($0) } },
                                       output: output)
}

/// QLinearConv (x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias) on the integer kernels with the
/// requantization fused: multiplier x_scale * w_scale[c] / y_scale in float, as onnxruntime computes it. Nil when
/// the scales are not per tensor / per channel or the input does not fit (the caller falls back).
func qlinearConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, plan: QuantizedConvolutionPlan, _ inputs: KernelInputs) throws -> Tensor? {
    let x = try inputs.required(0, ctx)
    guard let output = qlinearConvolutionOutput(xScale: try inputs.required(1, ctx), wScale: try inputs.required(4, ctx),
                                                yScale: try inputs.required(6, ctx), yZero: try inputs.required(7, ctx), channels: plan.m) else { return nil }
    return try quantizedConvolution(ctx, attrs, plan: plan, x: x, xZero: inputs[2], bias: inputs[8], output: output)
}

/// QLinearConv's requantization: multiplier x_scale * w_scale[c] / y_scale per output channel in float, as
/// onnxruntime computes it. Nil when the scales are not per tensor / per channel or y_zero is not one 8-bit value.
private func qlinearConvolutionOutput(xScale: Tensor, wScale: Tensor, yScale: Tensor, yZero: Tensor, channels: Int) -> QuantizedOutput? {
    guard xScale.count == 1, yScale.count == 1, yZero.count == 1, yZero.dtype == .uint8 || yZero.dtype == .int8,
          wScale.count == 1 || wScale.count == channels else { return nil }
    let ratio = Float(xScale.doubleValue(at: 0)), ys = Float(yScale.doubleValue(at: 0))
    let ws = wScale.doubles
    let multipliers = (0..<channels).map { ratio * Float(ws[ws.count == 1 ? 0 : $0]) / ys }
    return .requantized(multipliers: multipliers, zero: Int32(yZero.doubleValue(at: 0)), dtype: yZero.dtype)
}

/// QLinearConv's epilogue folded once when x_scale, x_zero, w_scale, y_scale, y_zero and the bias (if any) are
/// constants, as quantizers write them; nil otherwise (`qlinearConvolution` then folds it per call).
func qlinearConvolutionEpilogue(_ ctx: OpContext, plan: QuantizedConvolutionPlan) -> QuantizedConvolutionEpilogue? {
    guard let xScale = ctx.constants[1], let xZero = ctx.constants[2], let wScale = ctx.constants[4], let yScale = ctx.constants[6],
          let yZero = ctx.constants[7], xZero.count == 1, xZero.dtype == .uint8 || xZero.dtype == .int8,
          let output = qlinearConvolutionOutput(xScale: xScale, wScale: wScale, yScale: yScale, yZero: yZero, channels: plan.m) else { return nil }
    var bias: [Int32]?
    if ctx.hasInput(8) {
        guard let b = ctx.constants[8] else { return nil }
        bias = b.dtype == .int32 ? b.scalars(as: Int32.self) : b.doubles.map { Int32($0) }
    }
    return QuantizedConvolutionEpilogue(plan: plan, xZero: Int32(xZero.doubleValue(at: 0)), signed: xZero.dtype == .int8, bias: bias, output: output)
}

/// The u8 x s8 plan of a MatMul whose B (input `b`) and B zero point (input `zero`, when present) are constants
/// and fit (`QuantizedMatMulPlan`); nil otherwise.
func quantizedMatMulPlan(_ ctx: OpContext, b: Int, zero: Int) -> QuantizedMatMulPlan? {
    guard let matrix = ctx.constants[b], !ctx.hasInput(zero) || ctx.constants[zero] != nil else { return nil }
    return QuantizedMatMulPlan(matrix, zero: ctx.constants[zero])
}

/// A (8-bit, [..., K], scalar zero point) times the plan's B through `runQuantizedMatMul`; nil when A does not fit.
func quantizedMatMul(plan: QuantizedMatMulPlan, a: Tensor, aZero: Tensor?, output: QuantizedMatMulOutput, dequantize: QuantizedMatMulDequantization? = nil,
                     _ ctx: OpContext) throws -> Tensor? {
    guard a.rank >= 1, isEightBit(a.dtype), aZero.map({ $0.count == 1 && $0.dtype == a.dtype }) ?? true else { return nil }
    guard a.shape[a.rank - 1] == plan.k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x [\(plan.k), \(plan.n)]") }
    let z = Int32(aZero?.doubleValue(at: 0) ?? 0)
    return a.withUnsafeBytes { p in
        runQuantizedMatMul(plan: plan, a: p.baseAddress!.assumingMemoryBound(to: UInt8.self), signed: a.dtype == .int8, aZero: z,
                           shape: a.shape, output: output, dequantize: dequantize)
    }
}

/// QLinearMatMul (a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero) with the requantization fused: multiplier
/// a_scale * b_scale[j] / y_scale in float, as onnxruntime computes it. Nil when the scales are not per tensor (A, Y)
/// and per tensor or per column (B), or A does not fit.
func qlinearMatMul(plan: QuantizedMatMulPlan, _ inputs: KernelInputs, dequantize: QuantizedMatMulDequantization? = nil, _ ctx: OpContext) throws -> Tensor? {
    let a = try inputs.required(0, ctx), aScale = try inputs.required(1, ctx), bScale = try inputs.required(4, ctx)
    let yScale = try inputs.required(6, ctx), yZero = try inputs.required(7, ctx)
    guard aScale.count == 1, yScale.count == 1, yZero.count == 1, isEightBit(yZero.dtype), bScale.count == 1 || bScale.count == plan.n else { return nil }
    let ratio = Float(aScale.doubleValue(at: 0)), ys = Float(yScale.doubleValue(at: 0)), bs = bScale.doubles
    let multipliers = (0..<plan.n).map { ratio * Float(bs[bs.count == 1 ? 0 : $0]) / ys }
    return try quantizedMatMul(plan: plan, a: a, aZero: inputs[2],
                               output: .requantized(multipliers: multipliers, zero: Int32(yZero.doubleValue(at: 0)), dtype: yZero.dtype),
                               dequantize: dequantize, ctx)
}

/// int32 MatMul sums [..., M, N] requantized to y_zero's 8-bit dtype: saturate(round_half_even(float(sum) *
/// (a_scale[row] * b_scale[col] / y_scale)) + y_zero), in float as onnxruntime and the fused epilogue compute it,
/// straight from the int32 buffer. Nil when y_zero is not 8-bit or a scale fits neither per tensor nor per row/column.
func requantizedMatMulSums(_ sums: Tensor, aScale: [Double], bScale: [Double], yScale: Double, yZero: Tensor) -> Tensor? {
    let shape = sums.shape
    let n = shape.last ?? 1, m = shape.count >= 2 ? shape[shape.count - 2] : 1
    guard sums.dtype == .int32, isEightBit(yZero.dtype), yZero.count == 1, aScale.count == 1 || aScale.count == m,
          bScale.count == 1 || bScale.count == n else { return nil }
    if aScale.count == 1 && bScale.count == 1 {
        // One multiplier: the 16-lane pass (the per-element table below is its twin).
        var out = Tensor.pooled(yZero.dtype, shape: shape)
        let multiplier = Float(aScale[0]) * Float(bScale[0]) / Float(yScale)
        sums.withUnsafeBufferPointer(of: Int32.self) { s in
            out.withUnsafeMutableBytes { raw in
                guard let base = s.baseAddress, let o = raw.baseAddress else { return }
                requantizeRun(base, count: s.count, multiplier: multiplier, zero: Float(yZero.doubleValue(at: 0)), signed: yZero.dtype == .int8, into: o)
            }
        }
        return out
    }
    // One multiplier per (row, column) of the M x N matrix, shared by every batch.
    var multipliers = [Float](repeating: 0, count: m * n)
    for r in 0..<m {
        for c in 0..<n { multipliers[r * n + c] = Float(aScale[aScale.count == 1 ? 0 : r]) * Float(bScale[bScale.count == 1 ? 0 : c]) / Float(yScale) }
    }
    let zero = Float(yZero.doubleValue(at: 0))
    let (low, high): (Float, Float) = yZero.dtype == .int8 ? (-128, 127) : (0, 255)
    var out = Tensor.pooled(yZero.dtype, shape: shape)
    let count = sums.count, plane = m * n
    sums.withUnsafeBufferPointer(of: Int32.self) { s in
        out.withUnsafeMutableBytes { raw in
            multipliers.withUnsafeBufferPointer { mp in
                if yZero.dtype == .int8 {
                    let o = raw.bindMemory(to: Int8.self)
                    for i in 0..<count { o[i] = Int8(saturatedValue((Float(s[i]) * mp[i % plane]).rounded(.toNearestOrEven) + zero, low, high)) }
                } else {
                    let o = raw.bindMemory(to: UInt8.self)
                    for i in 0..<count { o[i] = UInt8(saturatedValue((Float(s[i]) * mp[i % plane]).rounded(.toNearestOrEven) + zero, low, high)) }
                }
            }
        }
    }
    return out
}

/// `v` clamped into [low, high]; NaN (a zero or NaN scale) becomes 0, as the saturating cast of the reference path makes it.
@inline(__always) private func saturatedValue(_ v: Float, _ low: Float, _ high: Float) -> Float {
    v.isNaN ? 0 : Swift.min(Swift.max(v, low), high)
}
