import COpenBLAS
import Foundation
import Tensor

/// Batched, broadcasting float32 matrix product with numpy MatMul semantics (1-D operands promoted and dropped).
func matmul(_ a: Tensor, _ b: Tensor, _ ctx: OpContext) throws -> Tensor {
    guard a.dtype == .float32, b.dtype == .float32 else { throw ctx.error(.unsupportedDType, "MatMul needs float32, got \(a.dtype) x \(b.dtype)") }
    guard a.rank >= 1, b.rank >= 1 else { throw ctx.error(.executionFailed, "MatMul operands must have rank >= 1") }
    let aShape = a.rank == 1 ? [1, a.shape[0]] : a.shape
    let bShape = b.rank == 1 ? [b.shape[0], 1] : b.shape
    let m = aShape[aShape.count - 2], k = aShape[aShape.count - 1]
    let k2 = bShape[bShape.count - 2], n = bShape[bShape.count - 1]
    guard k == k2 else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
    let aBatch = Array(aShape.dropLast(2)), bBatch = Array(bShape.dropLast(2))
    guard let batch = broadcastShape(aBatch, bBatch) else { throw ctx.error(.executionFailed, "cannot broadcast batch dims of \(a.shape) and \(b.shape)") }
    var outShape = batch + [m, n]
    let batchCount = batch.reduce(1, *)
    var out = Tensor.pooled(.float32, shape: outShape)
    out.withUnsafeMutableBufferPointer(of: Float.self) { o in
        guard let op = o.baseAddress else { return }
        if k == 0 { op.initialize(repeating: 0, count: o.count); return }
        a.floatPointer { ap in b.floatPointer { bp in
            if bBatch.reduce(1, *) == 1 && aBatch == batch {
                // Stacked rows of A against one B: a single sgemm.
                sgemm(transposeA: false, transposeB: false, m: batchCount * m, n: n, k: k, alpha: 1, a: ap, lda: k, b: bp, ldb: n, beta: 0, c: op, ldc: n)
                return
            }
            let aStrides = broadcastStrides(aBatch, to: batch), bStrides = broadcastStrides(bBatch, to: batch)
            let batchStrides = Tensor.contiguousStrides(batch)
            // Per-head products whose B fits in L2 skip OpenBLAS's packing (smallMatmul).
            let small = k <= 512 && k * n <= 1 << 16
            let product = { (i: Int) in
                var rem = i, ao = 0, bo = 0
                for d in 0..<batch.count {
                    let c = rem / batchStrides[d]
                    rem %= batchStrides[d]
                    ao += c * aStrides[d]; bo += c * bStrides[d]
                }
                if small {
                    smallMatmul(m: m, n: n, k: k, a: ap + ao * m * k, lda: k, b: bp + bo * k * n, ldb: n, c: op + i * m * n, ldc: n)
                } else {
                    sgemm(transposeA: false, transposeB: false, m: m, n: n, k: k, alpha: 1, a: ap + ao * m * k, lda: k,
                          b: bp + bo * k * n, ldb: n, beta: 0, c: op + i * m * n, ldc: n)
                }
            }
            // Attention heads: smallMatmul runs on the calling thread and sgemm splits only products of a million
            // multiply-adds or more, so the threads take whole heads (ViT-B/16's 197 x 64 x 197 heads ran on one).
            if EngineThreads.threads > 1 && batchCount > 1 && (small || m * n * k < 1 << 20) && batchCount * m * n * k >= 1 << 18 {
                parallelFor(batchCount, product)
            } else {
                for i in 0..<batchCount { product(i) }
            }
        } }
    }
    if a.rank == 1 { outShape.remove(at: outShape.count - 2) }
    if b.rank == 1 { outShape.removeLast() }
    return out.reshaped(outShape)
}

/// MatMul, with a bias (input 2, a constant from `fuseMatMulBias`) and an activation fused by the optimizer: both run
/// in one pass over each output row while it is in cache, instead of an Add step and an activation step.
func matmulFactory(_ ctx: OpContext) throws -> PreparedKernel {
    let activation = ctx.activation
    let bias = ctx.hasInput(2) ? ctx.constants[2] : nil
    if ctx.hasInput(2) {
        guard let bias, bias.dtype == .float32 else { throw ctx.error(.invalidModel, "a fused MatMul bias must be a float32 constant") }
    }
    if let packed = try packedMatmulKernel(ctx, bias: bias, activation: activation) { return packed }
    return PreparedKernel(kernel: { inputs in
        var y = try matmul(inputs.required(0, ctx), inputs.required(1, ctx), ctx)
        if bias == nil, case .none = activation { return [y] }
        let columns = y.rank == 0 ? 1 : y.shape[y.rank - 1]
        if let b = bias, b.count != columns || y.rank == 0 {
            y = try broadcastBinary(y, b, ctx) { (a: Float, b: Float) in a + b }
            y.withUnsafeMutableBufferPointer(of: Float.self) { p in if let base = p.baseAddress { activation.apply(base, count: p.count) } }
            return [y]
        }
        let rows = columns == 0 ? 0 : y.count / columns
        y.withUnsafeMutableBufferPointer(of: Float.self) { p in
            guard let base = p.baseAddress else { return }
            if let bias {
                bias.floatPointer { applyRowEpilogue(base, rows: rows, columns: columns, bias: $0, residual: nil, activation: activation) }
            } else {
                activation.apply(base, count: p.count)
            }
        }
        return [y]
    }, consumedInputs: bias == nil ? [] : [2])
}

/// `a` as `rows` rows of B's depth times the packed constant B, plus `bias` and `activation` in the kernel's epilogue,
/// into a pooled float32 tensor of `shape`: the run of both MatMul's and Gemm's constant-weight kernels.
func packedProduct(_ a: Tensor, rows: Int, shape: [Int], _ packed: PackedMatrixB, bias: [Float]?, activation: Activation) -> Tensor {
    var y = Tensor.pooled(.float32, shape: shape)
    y.withUnsafeMutableBufferPointer(of: Float.self) { o in
        guard let op = o.baseAddress, rows > 0 else { return }
        a.floatPointer { ap in
            guard let bias else {
                packedMatmul(ap, lda: packed.depth, rows: rows, packed, bias: nil, residual: nil, activation: activation, out: op)
                return
            }
            bias.withUnsafeBufferPointer {
                packedMatmul(ap, lda: packed.depth, rows: rows, packed, bias: $0.baseAddress, residual: nil, activation: activation, out: op)
            }
        }
    }
    return y
}

/// MatMul against a constant 2-D float32 B (a Linear layer): B packed once for `packedMatmul`, which adds the bias
/// and applies the activation in registers; nil when B is not such a constant.
private func packedMatmulKernel(_ ctx: OpContext, bias: Tensor?, activation: Activation) throws -> PreparedKernel? {
    guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 2, w.shape[0] > 0, w.shape[1] > 0 else { return nil }
    if let bias, bias.count != w.shape[1] { return nil }
    let depth = w.shape[0], columns = w.shape[1]
    let packed = w.floatPointer { PackedMatrixB($0, depth: depth, columns: columns) }
    let biasValues = bias.map { $0.floatPointer { Array(UnsafeBufferPointer(start: $0, count: columns)) } }
    return PreparedKernel(kernel: { inputs in
        let a = try inputs.required(0, ctx)
        guard a.dtype == .float32 else { throw ctx.error(.unsupportedDType, "MatMul needs float32, got \(a.dtype) x float32") }
        guard a.rank >= 1, a.shape[a.rank - 1] == depth else {
            throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x [\(depth), \(columns)]")
        }
        return [packedProduct(a, rows: a.count / depth, shape: Array(a.shape.dropLast()) + [columns], packed, bias: biasValues,
                              activation: activation)]
    }, consumedInputs: bias == nil ? [1] : [1, 2])
}

/// Pooled output length on one axis (floor or ceil mode; a last window must start inside the padded input).
func pooledLength(input: Int, kernel: Int, stride: Int, dilation: Int, padBegin: Int, padEnd: Int, ceil: Bool) -> Int {
    let span = (kernel - 1) * dilation + 1
    let numerator = input + padBegin + padEnd - span
    if numerator < 0 { return 0 }
    var out = (ceil ? (numerator + stride - 1) / stride : numerator / stride) + 1
    if ceil && (out - 1) * stride >= input + padBegin { out -= 1 }
    return out
}

/// Pooled output sizes: SAME_UPPER / SAME_LOWER give ceil(input / stride), other padding `pooledLength` per axis.
func pooledSpatial(_ attrs: WindowAttributes, _ r: (strides: [Int], dilations: [Int], padBegin: [Int], padEnd: [Int]),
                   input: [Int], kernel: [Int], ceil: Bool) -> [Int] {
    (0..<kernel.count).map { i in
        attrs.autoPad == "SAME_UPPER" || attrs.autoPad == "SAME_LOWER"
            ? (input[i] + r.strides[i] - 1) / r.strides[i]
            : pooledLength(input: input[i], kernel: kernel[i], stride: r.strides[i], dilation: r.dilations[i],
                           padBegin: r.padBegin[i], padEnd: r.padEnd[i], ceil: ceil)
    }
}

private func poolFactory(max isMax: Bool) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let kernel = attrs.kernelShape else { throw ctx.error(.invalidModel, "attribute 'kernel_shape' is required") }
        guard (1...3).contains(kernel.count) else { throw ctx.unsupported("kernel_shape", "\(kernel) (1-D, 2-D and 3-D pooling only)") }
        let ceil = try ctx.int("ceil_mode", 0) == 1
        let includePad = try ctx.int("count_include_pad", 0) == 1
        let wantsIndices = isMax && ctx.node.outputs.count > 1 && !ctx.node.outputs[1].isEmpty
        let columnMajor = try ctx.int("storage_order", 0) == 1
        return PreparedKernel { inputs in
            var x = try inputs.required(0, ctx)
            let original = x.dtype
            if isMax && [DType.uint8, .int8, .float64, .float16].contains(original) { x = try castTensor(x, to: .float32, ctx) }
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            guard x.rank == kernel.count + 2 else { throw ctx.error(.executionFailed, "input \(x.shape) does not match kernel_shape \(kernel)") }
            let spatial = Array(x.shape[2...])
            let r = try attrs.resolve(spatial: kernel.count, inputSpatial: spatial, kernel: kernel, ctx)
            let outSp = pooledSpatial(attrs, r, input: spatial, kernel: kernel, ceil: ceil)
            if kernel.count == 3 {
                if wantsIndices { throw ctx.error(.unsupportedAttribute, "the Indices output of 3-D MaxPool is not supported") }
                let out = poolND(x, kernel: kernel, strides: r.strides, dilations: r.dilations, padBegin: r.padBegin, padEnd: r.padEnd,
                                 outSpatial: outSp, max: isMax, countIncludePad: includePad)
                return [original == .float32 ? out : try castTensor(out, to: original, ctx)]
            }
            let twoD = kernel.count == 2
            let g = PoolGeometry(planes: x.shape[0] * x.shape[1], inHeight: twoD ? spatial[0] : 1, inWidth: spatial.last!,
                                 outHeight: twoD ? outSp[0] : 1, outWidth: outSp.last!,
                                 window: SlidingWindow(kernel: kernel, strides: r.strides, dilations: r.dilations, padBegin: r.padBegin, padEnd: r.padEnd))
            let out = Tensor.makeFloat(shape: Array(x.shape[..<2]) + outSp) { o in
                x.floatPointer { xp in
                    if isMax { maxPool2D(g, input: xp, output: o) } else { averagePool2D(g, countIncludePad: includePad, input: xp, output: o) }
                }
            }
            let y = original == .float32 ? out : try castTensor(out, to: original, ctx)
            if wantsIndices { return [y, maxPoolIndices(g, x, columnMajor: columnMajor).reshaped(out.shape)] }
            return [y]
        }
    }
}

/// Direct pooling over any number of spatial axes (the 3-D path; 1-D and 2-D use the tuned kernels).
func poolND(_ x: Tensor, kernel: [Int], strides: [Int], dilations: [Int], padBegin: [Int], padEnd: [Int], outSpatial: [Int],
            max isMax: Bool, countIncludePad: Bool) -> Tensor {
    let spatial = Array(x.shape[2...])
    let planes = x.shape[0] * x.shape[1]
    let inPlane = spatial.reduce(1, *), outPlane = outSpatial.reduce(1, *), window = kernel.reduce(1, *)
    let outStrides = Tensor.contiguousStrides(outSpatial)
    let taps = WindowTaps(from: outSpatial, to: spatial, kernel: kernel, strides: strides, dilations: dilations, padBegin: padBegin)
    return Tensor.makeFloat(shape: Array(x.shape[..<2]) + outSpatial) { dst in
        x.floatPointer { src in
            for p in 0..<planes {
                for o in 0..<outPlane {
                    var best = -Float.infinity, sum: Float = 0, valid = 0, padded = 1
                    for a in 0..<kernel.count {
                        let start = (o / outStrides[a]) % outSpatial[a] * strides[a] - padBegin[a]
                        let end = Swift.min(start + (kernel[a] - 1) * dilations[a] + 1, spatial[a] + padEnd[a])
                        padded *= (end - start + dilations[a] - 1) / dilations[a]
                    }
                    for k in 0..<window {
                        guard let offset = taps.offset(o, tap: k) else { continue }
                        let v = src[p * inPlane + offset]
                        best = Swift.max(best, v)
                        sum += v
                        valid += 1
                    }
                    dst[p * outPlane + o] = isMax ? best : (countIncludePad ? sum / Float(padded) : (valid > 0 ? sum / Float(valid) : 0))
                }
            }
        }
    }
}

/// Flat indices of each MaxPool window's maximum (first on ties), over the whole NCHW tensor; column-major within a plane when asked.
func maxPoolIndices(_ g: PoolGeometry, _ x: Tensor, columnMajor: Bool) -> Tensor {
    var result = [Int64](repeating: 0, count: g.planes * g.outHeight * g.outWidth)
    x.floatPointer { src in
        for p in 0..<g.planes {
            let plane = src + p * g.inHeight * g.inWidth
            for y in 0..<g.outHeight {
                for xo in 0..<g.outWidth {
                    var best = -Float.infinity, at = -1
                    g.window.forEachTap(y: y, x: xo, inHeight: g.inHeight, inWidth: g.inWidth) { _, iy, ix in
                        let v = plane[iy * g.inWidth + ix]
                        if at < 0 || v > best {
                            best = v
                            at = columnMajor ? ix * g.inHeight + iy : iy * g.inWidth + ix
                        }
                    }
                    result[(p * g.outHeight + y) * g.outWidth + xo] = Int64(p * g.inHeight * g.inWidth + max(at, 0))
                }
            }
        }
    }
    return Tensor(shape: [result.count], scalars: result)
}

/// BatchNormalization's inference form as y = x * mul[c] + add[c].
func batchNormalizationAffine(scale: [Float], bias: [Float], mean: [Float], variance: [Float], epsilon: Float) -> (mul: [Float], add: [Float]) {
    let mul = (0..<scale.count).map { scale[$0] / (variance[$0] + epsilon).squareRoot() }
    return (mul, (0..<scale.count).map { bias[$0] - mean[$0] * mul[$0] })
}

/// y[n][c][i] = activation(x[n][c][i] * mul[c] + add[c]) for float32 x of rank >= 2 with mul.count channels on axis 1:
/// standalone BatchNormalization (+ its activation) as one vectorised pass over the (image, channel) planes, split
/// across the compute threads; in place when x owns its buffer, else into a pooled tensor (never a copy, then a pass).
/// `batchNormalize` followed by `Activation.apply` is the reference twin.
func scaleShiftChannels(_ x: Tensor, mul: [Float], add: [Float], activation: Activation) -> Tensor {
    var x = x
    let c = mul.count, inner = x.shape[2...].reduce(1, *), planes = x.shape[0] * c
    func run(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>) {
        let body = { (range: Range<Int>) in
            mul.withUnsafeBufferPointer { m in
                add.withUnsafeBufferPointer { a in
                    for plane in range {
                        let ch = plane % c, base = plane * inner
                        let vm = FloatVector(repeating: m[ch]), va = FloatVector(repeating: a[ch])
                        let s = src + base, d = dst + base
                        var i = 0
                        while i + FloatVector.scalarCount <= inner {
                            (d + i).store(activation.vector((s + i).vector(FloatVector.self) * vm + va))
                            i += FloatVector.scalarCount
                        }
                        while i < inner { d[i] = activation(s[i] * m[ch] + a[ch]); i += 1 }
                    }
                }
            }
        }
        if planes * inner >= 32_768 && EngineThreads.threads > 1 {
            parallelRanges(planes, minimumChunk: max(1, 8192 / max(1, inner)), body)
        } else {
            body(0..<planes)
        }
    }
    if x.count == 0 { return x }
    if x.ownsStorage() {
        x.withUnsafeMutableBufferPointer(of: Float.self) { p in run(UnsafePointer(p.baseAddress!), p.baseAddress!) }
        return x
    }
    var out = Tensor.pooled(.float32, shape: x.shape)
    x.withUnsafeBufferPointer(of: Float.self) { s in
        out.withUnsafeMutableBufferPointer(of: Float.self) { d in run(s.baseAddress!, d.baseAddress!) }
    }
    return out
}

/// Y = scale * (X - mean) / sqrt(var + eps) + B over channel axis 1.
func batchNormalize(_ x: Tensor, scale: [Float], bias: [Float], mean: [Float], variance: [Float], epsilon: Float, _ ctx: OpContext) throws -> Tensor {
    guard x.dtype == .float32, x.rank >= 2 else { throw ctx.error(.unsupportedDType, "input \(x) must be float32 with rank >= 2") }
    let c = x.shape[1]
    guard scale.count == c, bias.count == c, mean.count == c, variance.count == c else {
        throw ctx.error(.executionFailed, "parameters do not match \(c) channels")
    }
    let inner = x.shape[2...].reduce(1, *)
    let mul = (0..<c).map { scale[$0] / (variance[$0] + epsilon).squareRoot() }
    let add = (0..<c).map { bias[$0] - mean[$0] * mul[$0] }
    var y = x
    y.withUnsafeMutableBufferPointer(of: Float.self) { p in
        var i = 0
        for _ in 0..<x.shape[0] {
            for ch in 0..<c {
                let a = mul[ch], b = add[ch]
                for _ in 0..<inner { p[i] = p[i] * a + b; i += 1 }
            }
        }
    }
    return y
}

/// Gemm rows up to which matrix-vector products beat sgemm (whose packing copies all of B each call).
let gemmVectorRows = 4

let denseOperators: OperatorTable = [
    "MatMul": { ctx in try matmulFactory(ctx) },
    "Gemm": { ctx in
        let transA = try ctx.int("transA", 0) == 1, transB = try ctx.int("transB", 0) == 1
        let alpha = try ctx.float("alpha", 1), beta = try ctx.float("beta", 1)
        if let packed = try packedGemmKernel(ctx, transA: transA, transB: transB, alpha: alpha, beta: beta) { return packed }
        let activation = ctx.activation
        return PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            guard a.dtype == .float32, b.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Gemm needs float32, got \(a.dtype), \(b.dtype)") }
            guard a.rank == 2, b.rank == 2 else { throw ctx.error(.executionFailed, "Gemm needs 2-D operands, got \(a.shape) and \(b.shape)") }
            let m = transA ? a.shape[1] : a.shape[0], k = transA ? a.shape[0] : a.shape[1]
            let kb = transB ? b.shape[1] : b.shape[0], n = transB ? b.shape[0] : b.shape[1]
            guard k == kb else { throw ctx.error(.executionFailed, "inner dimensions differ: A \(a.shape) (transA=\(transA)) and B \(b.shape) (transB=\(transB))") }
            var out: Tensor
            var effectiveBeta: Float = 0
            if let c = inputs[2], beta != 0 {
                guard c.dtype == .float32, let s = broadcastShape(c.shape, [m, n]), s == [m, n] else {
                    throw ctx.error(.executionFailed, "C \(c) does not broadcast to [\(m), \(n)]")
                }
                out = stridedCopy(c, shape: [m, n], strides: broadcastStrides(c.shape, to: [m, n]), offset: 0)
                effectiveBeta = beta
            } else {
                out = Tensor.pooled(.float32, shape: [m, n])
            }
            out.withUnsafeMutableBufferPointer(of: Float.self) { o in
                guard let op = o.baseAddress else { return }
                if k == 0 {
                    for i in 0..<o.count { o[i] = effectiveBeta == 0 ? 0 : o[i] * effectiveBeta }
                } else if m <= gemmVectorRows {
                    // A classifier head at small batch: one matrix-vector product per row streams B once, where
                    // sgemm would first copy (pack) all of B.
                    if effectiveBeta == 0 { op.initialize(repeating: 0, count: o.count) }
                    a.floatPointer { ap in b.floatPointer { bp in
                        // Output columns split over the compute threads: each streams its own rows (transB) or
                        // columns of B, which is what bounds a 5 MB classifier head.
                        let ldb = b.shape[1]
                        parallelRanges(n, minimumChunk: max(16, 131_072 / max(1, k))) { columns in
                            let block = transB ? bp + columns.lowerBound * ldb : bp + columns.lowerBound
                            let rows = transB ? columns.count : k, cols = transB ? k : columns.count
                            for i in 0..<m {
                                let row = transA ? ap + i : ap + i * k, step = Int32(transA ? m : 1)
                                cblas_sgemv(CblasRowMajor, transB ? CblasNoTrans : CblasTrans, Int32(rows), Int32(cols), alpha,
                                            block, Int32(ldb), row, step, effectiveBeta, op + i * n + columns.lowerBound, 1)
                            }
                        }
                    } }
                } else {
                    a.floatPointer { ap in b.floatPointer { bp in
                        sgemm(transposeA: transA, transposeB: transB, m: m, n: n, k: k, alpha: alpha, a: ap, lda: a.shape[1],
                              b: bp, ldb: b.shape[1], beta: effectiveBeta, c: op, ldc: n)
                    } }
                }
                activation.apply(op, count: o.count)
            }
            return [out]
        }
    },
    "MaxPool": poolFactory(max: true),
    "AveragePool": poolFactory(max: false),
    "GlobalAveragePool": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        guard x.dtype == .float32, x.rank >= 3 else { throw ctx.error(.unsupportedDType, "input \(x) must be float32 NC...") }
        let planes = x.shape[0] * x.shape[1], size = x.shape[2...].reduce(1, *)
        return [x.floatPointer { src in
            Tensor.makeFloat(shape: Array(x.shape[..<2]) + Array(repeating: 1, count: x.rank - 2)) { dst in
                for p in 0..<planes { dst[p] = size == 0 ? .nan : sumFloats(src + p * size, size) / Float(size) }
            }
        }]
    } },
    "GlobalMaxPool": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        guard x.dtype == .float32, x.rank >= 3 else { throw ctx.error(.unsupportedDType, "input \(x) must be float32 NC...") }
        return [reduce(x, axes: Set(2..<x.rank), keepDims: true, initial: -Float.infinity, pre: { $0 }, combine: { Swift.max($0, $1) }, post: { a, _ in a })]
    } },
    "BatchNormalization": { ctx in
        let epsilon = try ctx.float("epsilon", 1e-5)
        if try ctx.int("spatial", 1) != 1 { throw ctx.unsupported("spatial", "= 0") }
        if try ctx.int("training_mode", 0) != 0 { throw ctx.unsupported("training_mode", "= 1 (inference only)") }
        if ctx.node.outputs.dropFirst().contains(where: { !$0.isEmpty }) {
            throw ctx.error(.unsupportedAttribute, "training outputs (running mean/var) are not supported")
        }
        let activation = ctx.activation
        // Constant parameters (the usual case) become the per-channel multiplier and addend once, here.
        let known = (1...4).compactMap { ctx.constants[$0] }
        let folded: (mul: [Float], add: [Float])? = known.count == 4 && known.allSatisfy({ $0.dtype == .float32 && $0.count == known[0].count })
            ? batchNormalizationAffine(scale: known[0].scalars(as: Float.self), bias: known[1].scalars(as: Float.self),
                                       mean: known[2].scalars(as: Float.self), variance: known[3].scalars(as: Float.self), epsilon: epsilon)
            : nil
        return PreparedKernel(kernel: { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing input") }
            if let folded, x.dtype == .float32, x.rank >= 2, x.shape[1] == folded.mul.count {
                return [scaleShiftChannels(x, mul: folded.mul, add: folded.add, activation: activation)]
            }
            let p = try (1...4).map { try inputs.required($0, ctx) }
            guard p.allSatisfy({ $0.dtype == .float32 }) else { throw ctx.error(.unsupportedDType, "parameters must be float32") }
            var y = try batchNormalize(x, scale: p[0].scalars(as: Float.self), bias: p[1].scalars(as: Float.self),
                                       mean: p[2].scalars(as: Float.self), variance: p[3].scalars(as: Float.self), epsilon: epsilon, ctx)
            y.withUnsafeMutableBufferPointer(of: Float.self) { p in if let base = p.baseAddress { activation.apply(base, count: p.count) } }
            return [y]
        }, consumedInputs: folded == nil ? [] : [1, 2, 3, 4])
    },
    "InstanceNormalization": { ctx in
        let epsilon = try ctx.float("epsilon", 1e-5)
        return PreparedKernel { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing input") }
            guard x.dtype == .float32, x.rank >= 3 else { throw ctx.error(.unsupportedDType, "input \(x) must be float32 NC...") }
            let scale = try inputs.required(1, ctx).scalars(as: Float.self), bias = try inputs.required(2, ctx).scalars(as: Float.self)
            let c = x.shape[1], inner = x.shape[2...].reduce(1, *)
            guard scale.count == c, bias.count == c else { throw ctx.error(.executionFailed, "scale/B do not match \(c) channels") }
            var y = x
            y.withUnsafeMutableBufferPointer(of: Float.self) { p in
                for plane in 0..<(x.shape[0] * c) {
                    let base = plane * inner
                    var sum: Double = 0, sq: Double = 0
                    for i in 0..<inner { let v = Double(p[base + i]); sum += v; sq += v * v }
                    let mean = sum / Double(inner), variance = max(0, sq / Double(inner) - mean * mean)
                    let a = scale[plane % c] / Float((variance + Double(epsilon)).squareRoot()), b = bias[plane % c] - Float(mean) * a
                    for i in 0..<inner { p[base + i] = p[base + i] * a + b }
                }
            }
            return [y]
        }
    },
    "LayerNormalization": { ctx in
        let axis = try ctx.int("axis", -1), epsilon = try ctx.float("epsilon", 1e-5)
        return PreparedKernel { inputs in
            let normalized = try layerNormalization(inputs, axis: axis, epsilon: epsilon, simplified: false, ctx)
            return [normalized.y, normalized.mean, normalized.inverse]
        }
    },
]
