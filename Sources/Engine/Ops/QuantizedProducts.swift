import Tensor

// MatMulInteger / QLinearMatMul and ConvInteger / QLinearConv on the integer GEMM (Kernels/Quantized): 8-bit operands,
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

/// Weights of a 2-D ConvInteger / QLinearConv widened once: per group, M/group rows of C/group * kh * kw values minus
/// the per-output-channel (or scalar) zero point, in `quantizedRowStride` int16 rows.
struct WidenedConvWeights: @unchecked Sendable {
    /// Output channels, input channels per group, kernel height and width, groups.
    let m: Int, cg: Int, kh: Int, kw: Int, groups: Int
    /// Groups x (m / groups) rows, each `quantizedRowStride(cg * kh * kw)` int16s.
    let rows: [Int16]

    /// Widens `w` (OIHW, 8-bit) minus `zero` (scalar or per output channel); nil when the layout does not fit.
    init?(_ w: Tensor, zero: Tensor?, groups: Int) {
        guard w.rank == 4, isEightBit(w.dtype), groups >= 1, w.shape[0] % groups == 0 else { return nil }
        let zeros = zeroPoints(zero)
        guard zeros.count == 1 || zeros.count == w.shape[0] else { return nil }
        (m, cg, kh, kw, self.groups) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3], groups)
        let k = cg * kh * kw, stride = quantizedRowStride(k), m = self.m
        var rows = [Int16](repeating: 0, count: max(1, m * stride))
        rows.withUnsafeMutableBufferPointer { out in
            withEightBits(w) { u, s in
                if let u { widenQuantizedRows(m: m, k: k, values: u, rowStride: k, zeroPoints: zeros, into: out.baseAddress!) }
                else { widenQuantizedRows(m: m, k: k, values: s!, rowStride: k, zeroPoints: zeros, into: out.baseAddress!) }
            }
        }
        self.rows = rows
    }
}

/// 2-D ConvInteger sums (+ int32 bias) on the integer GEMM: per image and group, the input's windows gathered into
/// a K x (oh * ow) column matrix (padding filled with x_zero, so it contributes 0), packed, times the widened weights.
/// Returns nil when the geometry is not 2-D (the caller falls back to `integerConvolution`).
func fastIntegerConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, x: Tensor, xZero: Tensor?, weights: WidenedConvWeights,
                            bias: Tensor?) throws -> Tensor? {
    guard x.rank == 4, isEightBit(x.dtype), xZero.map({ $0.count == 1 }) ?? true else { return nil }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let g = weights.groups, cg = weights.cg, mg = weights.m / g
    guard c == cg * g else { throw ctx.error(.executionFailed, "X \(x.shape) has \(c) channels; W expects \(cg) x \(g) groups") }
    let r = try attrs.resolve(spatial: 2, inputSpatial: [h, w], kernel: [weights.kh, weights.kw], ctx)
    let oh = (h + r.padBegin[0] + r.padEnd[0] - r.dilations[0] * (weights.kh - 1) - 1) / r.strides[0] + 1
    let ow = (w + r.padBegin[1] + r.padEnd[1] - r.dilations[1] * (weights.kw - 1) - 1) / r.strides[1] + 1
    guard oh > 0, ow > 0 else { throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel [\(weights.kh), \(weights.kw)]") }
    let biasValues = bias.map { $0.doubles.map { Int32($0) } }
    if let biasValues, biasValues.count != weights.m { throw ctx.error(.executionFailed, "bias has \(biasValues.count) values, expected \(weights.m)") }
    let xz = Int32(xZero?.doubleValue(at: 0) ?? 0)
    let k = cg * weights.kh * weights.kw, columns = oh * ow
    var out = Tensor(dtype: .int32, shape: [n, weights.m, oh, ow])
    var gathered = [Int32](repeating: 0, count: k * columns)
    out.withUnsafeMutableBufferPointer(of: Int32.self) { dst in
        weights.rows.withUnsafeBufferPointer { wrows in
            for image in 0..<n {
                for group in 0..<g {
                    // Window gather: row (ic, ky, kx), column (oy, ox); outside the input reads as x_zero.
                    gathered.withUnsafeMutableBufferPointer { col in
                        withEightBitValues(x) { value in
                            for ic in 0..<cg {
                                let plane = (image * c + group * cg + ic) * h * w
                                for ky in 0..<weights.kh {
                                    for kx in 0..<weights.kw {
                                        let row = ((ic * weights.kh + ky) * weights.kw + kx) * columns
                                        for oy in 0..<oh {
                                            let iy = oy * r.strides[0] - r.padBegin[0] + ky * r.dilations[0]
                                            for ox in 0..<ow {
                                                let ix = ox * r.strides[1] - r.padBegin[1] + kx * r.dilations[1]
                                                col[row + oy * ow + ox] = iy >= 0 && iy < h && ix >= 0 && ix < w ? value(plane + iy * w + ix) : xz
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    let packed = gathered.withUnsafeBufferPointer {
                        PackedQuantizedMatrix(k: k, n: columns, values: $0.baseAddress!, rowStride: columns, zeroPoints: [xz])
                    }
                    let target = dst.baseAddress! + (image * weights.m + group * mg) * columns
                    quantizedGemm(m: mg, a: wrows.baseAddress! + group * mg * quantizedRowStride(k), b: packed, c: target, ldc: columns)
                    if let biasValues {
                        for oc in 0..<mg {
                            let b = biasValues[group * mg + oc], row = target + oc * columns
                            for j in 0..<columns { row[j] &+= b }
                        }
                    }
                }
            }
        }
    }
    return out
}

/// Calls `body` with an accessor returning element i of an 8-bit tensor as Int32.
private func withEightBitValues<R>(_ t: Tensor, _ body: ((Int) -> Int32) throws -> R) rethrows -> R {
    try t.dtype == .uint8 ? t.withUnsafeBufferPointer(of: UInt8.self) { p in try body { Int32(p[$0]) } }
                          : t.withUnsafeBufferPointer(of: Int8.self) { p in try body { Int32(p[$0]) } }
}
