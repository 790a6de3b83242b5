import CKernelShim
import Foundation
import Tensor

/// A per-tensor quantization parameter pair (scale, zero point); the zero point defaults to 0.
private func scalarParameters(_ scale: Tensor, _ zero: Tensor?, _ what: String, _ ctx: OpContext) throws -> (Double, Double) {
    guard scale.count == 1, zero.map({ $0.count == 1 }) ?? true else {
        throw ctx.error(.unsupportedAttribute, "\(what) scale \(scale.shape) and zero point \(zero?.shape ?? []) must be scalars (per-tensor)")
    }
    return (scale.doubleValue(at: 0), zero?.doubleValue(at: 0) ?? 0)
}

/// The QLinear pools' inputs: X (moved to channels-first when `channelsLast`; must have spatial axes) and the
/// per-tensor scale and zero point of X (inputs 1, 2) and of Y (inputs 3, 4).
private func quantizedPoolInputs(_ inputs: KernelInputs, channelsLast: Bool, _ ctx: OpContext) throws
    -> (x: Tensor, sx: Double, zx: Double, sy: Double, zy: Double) {
    var x = try inputs.required(0, ctx)
    guard x.rank >= 3 else { throw ctx.error(.executionFailed, "X \(x.shape) must have spatial axes") }
    if channelsLast { x = movingChannels(x, toFirst: true) }
    let (sx, zx) = try scalarParameters(inputs.required(1, ctx), inputs[2], "X", ctx)
    let (sy, zy) = try scalarParameters(inputs.required(3, ctx), inputs[4], "Y", ctx)
    return (x, sx, zx, sy, zy)
}

/// Per-column parameters of a [K, N] operand: `count == 1` or `N` values, expanded to N.
private func columnParameters(_ t: Tensor?, columns: Int, fallback: Double, _ what: String, _ ctx: OpContext) throws -> [Double] {
    guard let t else { return [Double](repeating: fallback, count: columns) }
    let v = t.doubles
    if v.count == 1 { return [Double](repeating: v[0], count: columns) }
    guard v.count == columns else { throw ctx.error(.executionFailed, "\(what) has \(v.count) values; expected 1 or \(columns) (one per column)") }
    return v
}

/// B (a 2-D integer matrix) minus its per-column zero points, as doubles for the exact product.
private func centeredColumns(_ b: Tensor, zero: Tensor?, _ ctx: OpContext) throws -> [Double] {
    guard b.rank == 2, b.dtype == .uint8 || b.dtype == .int8 else { throw ctx.error(.unsupportedDType, "B must be a 2-D uint8 or int8 matrix, got \(b.dtype) \(b.shape)") }
    let n = b.shape[1]
    let zeros = try columnParameters(zero, columns: n, fallback: 0, "B's zero point", ctx)
    var values = b.doubles
    for i in 0..<values.count { values[i] -= zeros[i % n] }
    return values
}

/// B (input `b`) minus its zero point (input `zero`), centred once at compile time when both are constants
/// (`onlyMatrices`: and B is 2-D; otherwise the kernel reports the shape): the centred values, the inputs the kernel
/// then no longer needs, and B's shape.
private func constantCenteredB(_ ctx: OpContext, b: Int, zero: Int, onlyMatrices: Bool) throws
    -> (values: [Double]?, consumed: Set<Int>, shape: [Int]?) {
    guard let matrix = ctx.constants[b], !onlyMatrices || matrix.rank == 2, !ctx.hasInput(zero) || ctx.constants[zero] != nil else {
        return (nil, [], ctx.constants[b]?.shape)
    }
    return (try centeredColumns(matrix, zero: ctx.constants[zero], ctx), ctx.hasInput(zero) ? [b, zero] : [b], matrix.shape)
}

/// A [..., K] float or integer operand flattened to [rows, K] with the output's leading shape.
private func rowsOf(_ a: Tensor, k: Int, _ ctx: OpContext) throws -> (rows: Int, leading: [Int]) {
    guard a.rank >= 1, a.shape[a.rank - 1] == k else { throw ctx.error(.executionFailed, "A \(a.shape) does not match B's \(k) rows") }
    return (a.count / max(k, 1), Array(a.shape.dropLast()))
}

/// Adds an optional per-column float bias and returns the [leading..., N] float tensor of `real`.
private func floatResult(_ real: [Float], leading: [Int], n: Int, bias: Tensor?, _ ctx: OpContext) throws -> Tensor {
    var values = real
    if let bias {
        let b = try floatValues(bias, "bias", ctx)
        guard b.count == n else { throw ctx.error(.executionFailed, "bias has \(b.count) elements, expected \(n)") }
        for i in 0..<values.count { values[i] += b[i % n] }
    }
    return Tensor(shape: leading + [n], scalars: values)
}

/// The float-output integer products (DynamicQuantizeMatMul, MatMulIntegerToFloat): B's centred columns (prepared at
/// compile time, else centred now from inputs 1 and `bZero`) times A centred by `centeredA`, each column rescaled by
/// A's scale times its b_scale, plus the optional bias, as [A's leading axes..., N].
private func scaledIntegerProduct(_ inputs: KernelInputs, _ ctx: OpContext, prepared: [Double]?, bShape: [Int]?, bZero: Int,
                                  bScale: Int, bias: Int, notMatrix: EngineError.Code,
                                  centeredA: (Tensor) throws -> (values: [Double], scale: Float)) throws -> Tensor {
    let a = try inputs.required(0, ctx)
    let shape = try bShape ?? inputs.required(1, ctx).shape
    guard shape.count == 2 else { throw ctx.error(notMatrix, "B must be 2-D, got \(shape)") }
    let (k, n) = (shape[0], shape[1])
    let bc = try prepared ?? centeredColumns(inputs.required(1, ctx), zero: inputs[bZero], ctx)
    let (rows, leading) = try rowsOf(a, k: k, ctx)
    let (ac, aScale) = try centeredA(a)
    let scales = try columnParameters(inputs.required(bScale, ctx), columns: n, fallback: 1, "b_scale", ctx)
    let sums = exactIntegerProduct(ac, bc, m: rows, k: k, n: n)
    let multipliers = scales.map { Float($0) * aScale }
    let real = sums.enumerated().map { Float($0.element) * multipliers[$0.offset % n] }
    return try floatResult(real, leading: leading, n: n, bias: inputs[bias], ctx)
}

/// Dequantized values (q - zero) * scale of a per-tensor quantized input.
private func dequantized(_ q: Tensor, scale: Double, zero: Double) -> [Double] { q.doubles.map { ($0 - zero) * scale } }

/// A quantized tensor of `dtype` from real values: round half to even of real / scale, plus zero, saturated.
private func quantized(_ real: [Double], shape: [Int], scale: Double, zero: Double, dtype: DType, _ ctx: OpContext) throws -> Tensor {
    let bounds = try quantizedBounds(dtype, ctx)
    return try castTensor(Tensor(shape: shape, scalars: real.map { requantize($0 / scale, zero: zero, bounds) }), to: dtype, ctx)
}

/// QLinearAdd / QLinearMul: (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point), broadcasting.
/// Same-shape 8-bit operands take `osprey_qlinear_binary`; the broadcast below is its reference twin and runs every
/// other shape, with the same float operations (those of onnxruntime's x86 kernels, see `qlinearValue`).
private func qlinearBinary(isMul: Bool) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in PreparedKernel { inputs in
        let a = try inputs.required(0, ctx), b = try inputs.required(3, ctx)
        let (sa, za) = try scalarParameters(inputs.required(1, ctx), inputs[2], "A", ctx)
        let (sb, zb) = try scalarParameters(inputs.required(4, ctx), inputs[5], "B", ctx)
        let (sc, zc) = try scalarParameters(inputs.required(6, ctx), inputs[7], "C", ctx)
        if a.shape == b.shape, a.dtype == b.dtype, a.dtype == .uint8 || a.dtype == .int8, inputs[7].map({ $0.dtype == a.dtype }) ?? true {
            var out = Tensor.pooled(a.dtype, shape: a.shape)
            a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in out.withUnsafeMutableBytes { po in
                osprey_qlinear_binary(isMul ? 1 : 0, a.dtype == .int8 ? 1 : 0, a.count, pa.baseAddress!.assumingMemoryBound(to: UInt8.self), Float(sa), Int32(za),
                                      pb.baseAddress!.assumingMemoryBound(to: UInt8.self), Float(sb), Int32(zb), Float(sc), Int32(zc),
                                      po.baseAddress!.assumingMemoryBound(to: UInt8.self))
            } } }
            return [out]
        }
        let bounds = try quantizedBounds(a.dtype, ctx)
        let value = qlinearValue(isMul: isMul, Float(sa), Float(za), Float(sb), Float(zb), Float(sc), Float(zc))
        let result = try broadcastBinary(Tensor(shape: a.shape, scalars: a.doubles), Tensor(shape: b.shape, scalars: b.doubles), ctx) {
            (x: Double, y: Double) -> Double in min(max(Double(value(Float(x), Float(y)).rounded(.toNearestOrEven)), bounds.0), bounds.1)
        }
        return [try castTensor(result, to: a.dtype, ctx)]
    } }
}

/// The unrounded output of QLinearAdd / QLinearMul for stored values (a, b), in the float operations of onnxruntime's
/// x86 kernels so results match it bit for bit. Add: ra = sa / sc, rb = sb / sc, fixed = zc - fma(ra, za, rb * zb),
/// then fma(a, ra, fma(b, rb, fixed)). Mul: the exact product (a - za)(b - zb), times sa * sb / sc, plus zc.
private func qlinearValue(isMul: Bool, _ sa: Float, _ za: Float, _ sb: Float, _ zb: Float, _ sc: Float, _ zc: Float) -> @Sendable (Float, Float) -> Float {
    if isMul {
        let ratio = sa * sb / sc
        return { a, b in Float((Int32(a) - Int32(za)) * (Int32(b) - Int32(zb))) * ratio + zc }
    }
    let ra = sa / sc, rb = sb / sc
    let fixed = zc - (rb * zb).addingProduct(ra, za)
    return { a, b in fixed.addingProduct(b, rb).addingProduct(a, ra) }
}

/// QLinearSigmoid / QLinearLeakyRelu: (X, X_scale, X_zero_point, Y_scale, Y_zero_point) through a 256-entry table of
/// quantize(f(dequantize(q))), as onnxruntime builds it.
private func qlinearLookup(_ make: @escaping @Sendable (OpContext) throws -> @Sendable (Double) -> Double) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let f = try make(ctx)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .uint8 || x.dtype == .int8 else { throw ctx.error(.unsupportedDType, "X is \(x.dtype), expected uint8 or int8") }
            let (sx, zx) = try scalarParameters(inputs.required(1, ctx), inputs[2], "X", ctx)
            let (sy, zy) = try scalarParameters(inputs.required(3, ctx), inputs[4], "Y", ctx)
            let bounds = try quantizedBounds(x.dtype, ctx)
            let low = Int(bounds.0)
            // Float arithmetic as onnxruntime's table: dequantize, f, quantize with round half to even.
            let table = (0..<256).map { i -> Double in
                let real = Double(Float(Double(low + i) - zx) * Float(sx))
                return requantize(Double(Float(f(real)) / Float(sy)), zero: zy, bounds)
            }
            let out = x.doubles.map { table[Int($0) - low] }
            return [try castTensor(Tensor(shape: x.shape, scalars: out), to: x.dtype, ctx)]
        }
    }
}

/// Moves the last axis to position 1 (channels-last to channels-first) or back.
private func movingChannels(_ x: Tensor, toFirst: Bool) -> Tensor {
    let r = x.rank
    let perm = toFirst ? [0, r - 1] + Array(1..<(r - 1)) : [0] + Array(2..<r) + [1]
    return permutedCopy(x, viewShape: x.shape, perm: perm, outShape: perm.map { x.shape[$0] })
}

/// a_scale * b_scale[j] per output column, in float as onnxruntime multiplies them.
private func scaledMultipliers(_ aScale: Float, _ bScale: [Double]) -> [Float] { bScale.map { Float($0) * aScale } }

/// A float bias with one value per output column.
private func columnBias(_ bias: Tensor, _ n: Int, _ ctx: OpContext) throws -> [Float] {
    let b = try floatValues(bias, "bias", ctx)
    guard b.count == n else { throw ctx.error(.executionFailed, "bias has \(b.count) elements, expected \(n)") }
    return b
}

/// DynamicQuantizeMatMul on the u8 x s8 GEMM: A quantized to uint8 with onnxruntime's dynamic range (one scale and
/// zero point for the whole tensor), the product scaled to float and biased in the GEMM's epilogue.
private func dynamicQuantizeMatMul(plan: QuantizedMatMulPlan, a: Tensor, bScale: Tensor, bias: Tensor?, _ ctx: OpContext) throws -> Tensor? {
    guard a.dtype == .float32, a.rank >= 1 else { return nil }
    guard a.shape[a.rank - 1] == plan.k else { throw ctx.error(.executionFailed, "A \(a.shape) does not match B's \(plan.k) rows") }
    let multipliersB = try columnParameters(bScale, columns: plan.n, fallback: 1, "b_scale", ctx)
    let biasValues = try bias.map { try columnBias($0, plan.n, ctx) }
    return a.floatPointer { x -> Tensor in
        let values = UnsafeBufferPointer(start: x, count: a.count)
        let (scale, zero) = dynamicQuantizationParameters(values)
        let q = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, a.count))
        defer { q.deallocate() }
        quantizeRun(x, count: a.count, scale: scale, zero: zero, signed: false, into: q)
        return runQuantizedMatMul(plan: plan, a: q, signed: false, aZero: Int32(zero), shape: a.shape,
                                  output: .scaled(multipliers: scaledMultipliers(scale, multipliersB), bias: biasValues))
    }
}

/// QGemm on the u8 x s8 GEMM: (A - a_zero) B' + C scaled by alpha * a_scale * b_scale[j], requantized with
/// (y_scale, y_zero) or left as float. Nil when A is not 2-D 8-bit with a per-tensor scale or C is not one int32 per
/// column (the double-precision path runs those).
/// `pieces` > 1: the plan is a `SplitQuantizedMatMulPlan`'s (full-range B), A's values are repeated to match.
private func qgemm(plan: QuantizedMatMulPlan, pieces: Int = 1, alpha: Float, _ inputs: KernelInputs,
                   _ ctx: OpContext) throws -> Tensor? {
    let a = try inputs.required(0, ctx), aScale = try inputs.required(1, ctx)
    guard a.rank == 2, a.dtype == .uint8 || a.dtype == .int8, aScale.count == 1, inputs[2].map({ $0.count == 1 && $0.dtype == a.dtype }) ?? true else { return nil }
    var bias: [Int32]?
    if let c = inputs[6] {
        guard c.dtype == .int32, c.count == plan.n, c.rank <= 1 || (c.rank == 2 && c.shape[0] == 1) else { return nil }
        bias = c.scalars(as: Int32.self)
    }
    let bScale = try columnParameters(inputs.required(4, ctx), columns: plan.n, fallback: 1, "b_scale", ctx)
    let scale = alpha * Float(aScale.doubleValue(at: 0))
    let output: QuantizedMatMulOutput
    if let yScale = inputs[7] {
        let (sy, zy) = try scalarParameters(yScale, inputs[8], "Y", ctx)
        let dtype = inputs[8]?.dtype ?? .uint8
        guard dtype == .uint8 || dtype == .int8 else { return nil }
        output = .requantized(multipliers: bScale.map { scale * Float($0) / Float(sy) }, zero: Int32(zy), dtype: dtype)
    } else {
        output = .scaled(multipliers: bScale.map { scale * Float($0) }, bias: nil)
    }
    let z = Int32(inputs[2]?.doubleValue(at: 0) ?? 0)
    guard a.shape[1] * pieces == plan.k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x [\(plan.k / pieces), \(plan.n)]") }
    func product(_ bytes: UnsafePointer<UInt8>, _ shape: [Int]) -> Tensor {
        runQuantizedMatMul(plan: plan, a: bytes, signed: a.dtype == .int8, aZero: z, shape: shape, output: output, columnBias: bias)
    }
    return a.withUnsafeBytes { p in
        let bytes = p.baseAddress!.assumingMemoryBound(to: UInt8.self)
        guard pieces > 1 else { return product(bytes, a.shape) }
        var repeated = [UInt8](repeating: 0, count: a.count * pieces)
        for i in 0..<a.count { for j in 0..<pieces { repeated[i * pieces + j] = bytes[i] } }
        return repeated.withUnsafeBufferPointer { product($0.baseAddress!, [a.shape[0], plan.k]) }
    }
}

let contribQuantizationOperators: OperatorTable = [
    "QuantizeLinear": quantizationOperators["QuantizeLinear"]!,
    "DequantizeLinear": quantizationOperators["DequantizeLinear"]!,
    // Float A quantized on the fly to uint8 (onnxruntime's dynamic range), times quantized B, rescaled, plus bias.
    "DynamicQuantizeMatMul": { ctx in
        let plan = quantizedMatMulPlan(ctx, b: 1, zero: 3)
        let (prepared, consumed, bShape): ([Double]?, Set<Int>, [Int]?) = try plan != nil ? (nil, [], nil) : constantCenteredB(ctx, b: 1, zero: 3, onlyMatrices: false)
        return PreparedKernel(kernel: { inputs in
            let a = try inputs.required(0, ctx)
            if let plan, let fast = try dynamicQuantizeMatMul(plan: plan, a: a, bScale: inputs.required(2, ctx), bias: inputs[4], ctx) { return [fast] }
            return [try scaledIntegerProduct(inputs, ctx, prepared: prepared, bShape: bShape, bZero: 3, bScale: 2, bias: 4,
                                             notMatrix: .executionFailed) { a in
                let values = try floatValues(a, "A", ctx)
                let (scale, zero) = values.withUnsafeBufferPointer { dynamicQuantizationParameters($0) }
                return (values.withUnsafeBufferPointer { dynamicallyQuantizedCentered($0, scale: scale, zero: zero) }, scale)
            }]
        }, consumedInputs: consumed)
    },
    // Integer A times integer B, rescaled by a_scale * b_scale to float, plus bias.
    "MatMulIntegerToFloat": { ctx in
        let plan = quantizedMatMulPlan(ctx, b: 1, zero: 5)
        let (prepared, consumed, bShape): ([Double]?, Set<Int>, [Int]?) = try plan != nil ? (nil, [], nil) : constantCenteredB(ctx, b: 1, zero: 5, onlyMatrices: true)
        return PreparedKernel(kernel: { inputs in
            let a = try inputs.required(0, ctx)
            if let plan, inputs[2]?.count == 1,
               let fast = try quantizedMatMul(plan: plan, a: a, aZero: inputs[4],
                                              output: .scaled(multipliers: scaledMultipliers(Float(inputs.required(2, ctx).doubleValue(at: 0)),
                                                                                             try columnParameters(inputs.required(3, ctx), columns: plan.n, fallback: 1, "b_scale", ctx)),
                                                              bias: try inputs[6].map { try columnBias($0, plan.n, ctx) }), ctx) {
                return [fast]
            }
            return [try scaledIntegerProduct(inputs, ctx, prepared: prepared, bShape: bShape, bZero: 5, bScale: 3, bias: 6,
                                             notMatrix: .unsupportedAttribute) { a in
                let (aScale, aZero) = try scalarParameters(inputs.required(2, ctx), inputs[4], "A", ctx)
                return (a.doubles.map { $0 - aZero }, Float(aScale))
            }]
        }, consumedInputs: consumed)
    },
    // alpha * a_scale * b_scale * (A'B' + C) as float, or requantized with y_scale / y_zero_point.
    "QGemm": { ctx in
        let transA = try ctx.int("transA", 0) != 0, transB = try ctx.int("transB", 0) != 0
        let alpha = try ctx.float("alpha", 1)
        // Constant B on the u8 x s8 GEMM (A not transposed): C, the scales and the requantization in its epilogue.
        let fits = !transA && (!ctx.hasInput(5) || ctx.constants[5] != nil)
        let plan = fits ? ctx.constants[3].flatMap { QuantizedMatMulPlan($0, zero: ctx.constants[5], transposed: transB) } : nil
        // Full-range B (the plan refuses it): split into parts the u8 x s8 kernels multiply exactly.
        let split = fits && plan == nil ? ctx.constants[3].flatMap { SplitQuantizedMatMulPlan($0, zero: ctx.constants[5], transposed: transB) } : nil
        return PreparedKernel { inputs in
            if let plan = plan ?? split?.plan,
               let fast = try qgemm(plan: plan, pieces: split?.pieces ?? 1, alpha: alpha, inputs, ctx) { return [fast] }
            var a = try inputs.required(0, ctx), b = try inputs.required(3, ctx)
            guard a.rank == 2, b.rank == 2 else { throw ctx.error(.executionFailed, "A \(a.shape) and B \(b.shape) must be 2-D") }
            if transA { a = permutedCopy(a, viewShape: a.shape, perm: [1, 0], outShape: [a.shape[1], a.shape[0]]) }
            if transB { b = permutedCopy(b, viewShape: b.shape, perm: [1, 0], outShape: [b.shape[1], b.shape[0]]) }
            let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1])
            guard b.shape[0] == k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
            let (aScale, aZero) = try scalarParameters(inputs.required(1, ctx), inputs[2], "A", ctx)
            let bScale = try columnParameters(inputs.required(4, ctx), columns: n, fallback: 1, "b_scale", ctx)
            var sums = exactIntegerProduct(a.doubles.map { $0 - aZero }, try centeredColumns(b, zero: inputs[5], ctx), m: m, k: k, n: n)
            if let c = inputs[6] {
                guard let s = broadcastShape(c.shape, [m, n]), s == [m, n] else { throw ctx.error(.executionFailed, "C \(c.shape) does not broadcast to [\(m), \(n)]") }
                let cv = stridedCopy(c, shape: [m, n], strides: broadcastStrides(c.shape, to: [m, n]), offset: 0).doubles
                for i in 0..<sums.count { sums[i] += cv[i] }
            }
            let real = sums.enumerated().map { Double(alpha) * aScale * bScale[$0.offset % n] * $0.element }
            guard let yScale = inputs[7] else { return [Tensor(shape: [m, n], scalars: real.map { Float($0) })] }
            let (sy, zy) = try scalarParameters(yScale, inputs[8], "Y", ctx)
            return [try quantized(real, shape: [m, n], scale: sy, zero: zy, dtype: inputs[8]?.dtype ?? .uint8, ctx)]
        }
    },
    "QLinearAdd": qlinearBinary(isMul: false),
    "QLinearMul": qlinearBinary(isMul: true),
    "QLinearSigmoid": qlinearLookup { _ in { 1 / (1 + Foundation.exp(-$0)) } },
    "QLinearLeakyRelu": qlinearLookup { ctx in let alpha = Double(try ctx.float("alpha", 0.01)); return { $0 >= 0 ? $0 : alpha * $0 } },
    // (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input): each input requantized to Y's parameters, then concatenated.
    "QLinearConcat": { ctx in
        let count = (ctx.node.inputs.count - 2) / 3
        guard count >= 1, ctx.node.inputs.count == 2 + 3 * count else {
            throw ctx.error(.invalidModel, "QLinearConcat needs Y_scale, Y_zero_point and (X, scale, zero point) triples, got \(ctx.node.inputs.count) inputs")
        }
        let concat = try ctx.delegate("Concat", inputs: (0..<count).map { 2 + 3 * $0 }, attributes: ["axis": .int(Int64(try ctx.int("axis", 0)))])
        return PreparedKernel { inputs in
            let (sy, zy) = try scalarParameters(inputs.required(0, ctx), inputs[1], "Y", ctx)
            let dtype = try inputs.required(1, ctx).dtype
            for j in 0..<count {
                let x = try inputs.required(2 + 3 * j, ctx)
                guard x.dtype == dtype else { throw ctx.error(.unsupportedDType, "input \(j) is \(x.dtype), Y is \(dtype)") }
                let (sx, zx) = try scalarParameters(inputs.required(3 + 3 * j, ctx), inputs[4 + 3 * j], "input \(j)", ctx)
                if sx == sy && zx == zy { continue }
                inputs.values[2 + 3 * j] = try quantized(dequantized(x, scale: sx, zero: zx), shape: x.shape, scale: sy, zero: zy, dtype: dtype, ctx)
            }
            return try concat.kernel(&inputs)
        }
    },
    // Mean over the spatial axes computed on integers: round((sum - count * x_zero) * x_scale / (y_scale * count)) + y_zero.
    "QLinearGlobalAveragePool": { ctx in
        let channelsLast = try ctx.int("channels_last", 0) != 0
        return PreparedKernel { inputs in
            let (x, sx, zx, sy, zy) = try quantizedPoolInputs(inputs, channelsLast: channelsLast, ctx)
            let bounds = try quantizedBounds(x.dtype, ctx)
            let planes = x.shape[0] * x.shape[1], size = x.shape[2...].reduce(1, *)
            var sums = [Int32](repeating: 0, count: planes)
            if x.dtype == .uint8 || x.dtype == .int8 {
                x.withUnsafeBytes { p in osprey_qplane_sums(p.baseAddress!.assumingMemoryBound(to: UInt8.self), x.dtype == .int8 ? 1 : 0, planes, size, &sums) }
            } else {
                let values = x.doubles
                for p in 0..<planes { for i in 0..<size { sums[p] &+= Int32(values[p * size + i]) } }
            }
            let multiplier = Float(sx) / (Float(sy) * Float(size))
            let shape = Array(x.shape[..<2]) + Array(repeating: 1, count: x.rank - 2)
            var y: Tensor
            if x.dtype == .uint8 || x.dtype == .int8 {
                // Straight into the 8-bit output (a Double tensor cast afterwards cost 3x the sums at 1280 channels).
                y = Tensor.pooled(x.dtype, shape: shape)
                let signed = x.dtype == .int8
                y.withUnsafeMutableBytes { o in
                    for (i, s) in sums.enumerated() {
                        let v = Int32(requantize(Double(Float(Double(s) - Double(size) * zx) * multiplier), zero: zy, bounds))
                        o[i] = signed ? UInt8(bitPattern: Int8(v)) : UInt8(v)
                    }
                }
            } else {
                let out = sums.map { requantize(Double(Float(Double($0) - Double(size) * zx) * multiplier), zero: zy, bounds) }
                y = try castTensor(Tensor(shape: shape, scalars: out), to: x.dtype, ctx)
            }
            if channelsLast { y = movingChannels(y, toFirst: false) }
            return [y]
        }
    },
    // Dequantize, AveragePool, quantize (onnxruntime averages in float too).
    "QLinearAveragePool": { ctx in
        let channelsLast = try ctx.int("channels_last", 0) != 0
        let pool = try ctx.delegate("AveragePool", inputs: [0], attributes: ctx.attributes(dropping: ["channels_last"]))
        return PreparedKernel { inputs in
            let (x, sx, zx, sy, zy) = try quantizedPoolInputs(inputs, channelsLast: channelsLast, ctx)
            let dtype = x.dtype
            let real = Tensor(shape: x.shape, scalars: x.doubles.map { Float(($0 - zx) * sx) })
            var args = KernelInputs(values: [real])
            let pooled = try pool.kernel(&args)[0]
            var y = try quantized(pooled.scalars(as: Float.self).map(Double.init), shape: pooled.shape, scale: sy, zero: zy, dtype: dtype, ctx)
            if channelsLast { y = movingChannels(y, toFirst: false) }
            return [y]
        }
    },
]
