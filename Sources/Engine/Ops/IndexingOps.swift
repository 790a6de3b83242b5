import Foundation
import Tensor

/// Copies `x` viewed with `viewShape` (contiguous), permuted by `perm`, into `outShape`.
func permutedCopy(_ x: Tensor, viewShape: [Int], perm: [Int], outShape: [Int]) -> Tensor {
    let strides = Tensor.contiguousStrides(viewShape)
    return stridedCopy(x, shape: perm.map { viewShape[$0] }, strides: perm.map { strides[$0] }, offset: 0).reshaped(outShape)
}

/// Resolves a possibly negative index against `dim`.
@inline(__always) func wrapIndex(_ i: Int, _ dim: Int, _ ctx: OpContext) throws -> Int {
    let j = i < 0 ? i + dim : i
    guard j >= 0 && j < dim else { throw ctx.error(.executionFailed, "index \(i) is out of range for size \(dim)") }
    return j
}

/// Combines an update into an existing float element for Scatter* reductions.
func scatterCombine(_ reduction: String) -> @Sendable (Double, Double) -> Double {
    switch reduction {
    case "add": return { $0 + $1 }
    case "mul": return { $0 * $1 }
    case "max": return { Swift.max($0, $1) }
    case "min": return { Swift.min($0, $1) }
    default: return { _, u in u }
    }
}

let indexingOperators: OperatorTable = [
    "DepthToSpace": { ctx in
        let b = try ctx.int("blocksize", 0), mode = try ctx.string("mode", "DCR")
        guard b > 0 else { throw ctx.error(.invalidModel, "blocksize must be positive") }
        guard mode == "DCR" || mode == "CRD" else { throw ctx.unsupported("mode", "'\(mode)'") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank == 4, x.shape[1] % (b * b) == 0 else { throw ctx.error(.executionFailed, "input \(x.shape) is not NCHW with C divisible by \(b * b)") }
            let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let out = [n, c / (b * b), h * b, w * b]
            if mode == "DCR" { return [permutedCopy(x, viewShape: [n, b, b, c / (b * b), h, w], perm: [0, 3, 4, 1, 5, 2], outShape: out)] }
            return [permutedCopy(x, viewShape: [n, c / (b * b), b, b, h, w], perm: [0, 1, 4, 2, 5, 3], outShape: out)]
        }
    },
    "SpaceToDepth": { ctx in
        let b = try ctx.int("blocksize", 0)
        guard b > 0 else { throw ctx.error(.invalidModel, "blocksize must be positive") }
        // DCR (the default): output channel (by * b + bx) * C + c; CRD (the newer opsets' mode): c * b * b + by * b + bx.
        let mode = try ctx.string("mode", "DCR")
        guard mode == "DCR" || mode == "CRD" else { throw ctx.error(.unsupportedAttribute, "mode must be DCR or CRD, got '\(mode)'") }
        let perm = mode == "DCR" ? [0, 3, 5, 1, 2, 4] : [0, 1, 3, 5, 2, 4]
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank == 4, x.shape[2] % b == 0, x.shape[3] % b == 0 else { throw ctx.error(.executionFailed, "input \(x.shape) is not NCHW with H, W divisible by \(b)") }
            let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            return [permutedCopy(x, viewShape: [n, c, h / b, b, w / b, b], perm: perm, outShape: [n, c * b * b, h / b, w / b])]
        }
    },
    "GatherND": { ctx in
        let batchDims = try ctx.int("batch_dims", 0)
        guard batchDims >= 0 else { throw ctx.error(.invalidModel, "batch_dims must be non-negative, got \(batchDims)") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), idxT = try inputs.required(1, ctx)
            guard idxT.rank >= 1, let k = idxT.shape.last, batchDims + k <= x.rank, x.shape[..<batchDims] == idxT.shape[..<batchDims] else {
                throw ctx.error(.executionFailed, "indices \(idxT.shape) do not fit data \(x.shape) with batch_dims \(batchDims)")
            }
            let indices = idxT.ints
            let batch = x.shape[..<batchDims].reduce(1, *)
            let tuples = idxT.shape[batchDims..<(idxT.rank - 1)].reduce(1, *)
            let slice = x.shape[(batchDims + k)...].reduce(1, *) * x.dtype.byteSize
            let batchStride = x.shape[batchDims...].reduce(1, *) * x.dtype.byteSize
            let strides = Tensor.contiguousStrides(Array(x.shape[batchDims...]))
            var out = Tensor(uninitialized: x.dtype, shape: Array(idxT.shape.dropLast()) + Array(x.shape[(batchDims + k)...]))
            try x.withUnsafeBytes { src in try out.withUnsafeMutableBytes { dst in
                var d = dst.baseAddress
                for bIndex in 0..<batch {
                    for t in 0..<tuples {
                        var offset = 0
                        for j in 0..<k {
                            offset += try wrapIndex(indices[(bIndex * tuples + t) * k + j], x.shape[batchDims + j], ctx) * strides[j]
                        }
                        if slice > 0 {
                            d!.copyMemory(from: src.baseAddress! + bIndex * batchStride + offset * x.dtype.byteSize, byteCount: slice)
                            d! += slice
                        }
                    }
                }
            } }
            return [out]
        }
    },
    "ScatterND": { ctx in
        let reduction = try ctx.string("reduction", "none")
        guard ["none", "add", "mul", "max", "min"].contains(reduction) else { throw ctx.unsupported("reduction", "'\(reduction)'") }
        let combine = scatterCombine(reduction)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), idxT = try inputs.required(1, ctx), updates = try inputs.required(2, ctx)
            guard let k = idxT.shape.last, k <= x.rank, updates.dtype == x.dtype else { throw ctx.error(.executionFailed, "indices \(idxT.shape) do not fit data \(x.shape)") }
            let indices = idxT.ints
            let tuples = idxT.count / max(k, 1)
            let slice = x.shape[k...].reduce(1, *)
            guard updates.count == tuples * slice else { throw ctx.error(.executionFailed, "updates \(updates.shape) do not match indices \(idxT.shape) and data \(x.shape)") }
            let strides = x.strides
            var out = try castTensor(x, to: .float64, ctx)
            let upd = try castTensor(updates, to: .float64, ctx).scalars(as: Double.self)
            try out.withUnsafeMutableBufferPointer(of: Double.self) { o in
                for t in 0..<tuples {
                    var offset = 0
                    for j in 0..<k { offset += try wrapIndex(indices[t * k + j], x.shape[j], ctx) * strides[j] }
                    for i in 0..<slice { o[offset + i] = combine(o[offset + i], upd[t * slice + i]) }
                }
            }
            return [try castTensor(out, to: x.dtype, ctx)]
        }
    },
    "ScatterElements": { ctx in
        let axisAttr = try ctx.int("axis", 0), reduction = try ctx.string("reduction", "none")
        guard ["none", "add", "mul", "max", "min"].contains(reduction) else { throw ctx.unsupported("reduction", "'\(reduction)'") }
        let combine = scatterCombine(reduction)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), idxT = try inputs.required(1, ctx), updates = try inputs.required(2, ctx)
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            guard idxT.shape == updates.shape, idxT.rank == x.rank else { throw ctx.error(.executionFailed, "indices \(idxT.shape) and updates \(updates.shape) must match in shape and rank \(x.rank)") }
            let indices = idxT.ints
            let xs = x.strides, isz = idxT.strides
            var out = try castTensor(x, to: .float64, ctx)
            let upd = try castTensor(updates, to: .float64, ctx).scalars(as: Double.self)
            try out.withUnsafeMutableBufferPointer(of: Double.self) { o in
                for flat in 0..<indices.count {
                    var rem = flat, offset = 0
                    for a in 0..<x.rank {
                        var c = rem / isz[a]
                        rem %= isz[a]
                        if a == axis { c = try wrapIndex(indices[flat], x.shape[a], ctx) }
                        offset += c * xs[a]
                    }
                    o[offset] = combine(o[offset], upd[flat])
                }
            }
            return [try castTensor(out, to: x.dtype, ctx)]
        }
    },
    "CumSum": cumulative(product: false),
    "CumProd": cumulative(product: true),
    "Trilu": { ctx in
        let upper = try ctx.int("upper", 1) == 1
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank >= 2 else { throw ctx.error(.executionFailed, "input must have rank >= 2, got \(x.shape)") }
            let k = inputs[1]?.ints.first ?? 0
            let rows = x.shape[x.rank - 2], cols = x.shape[x.rank - 1], size = x.dtype.byteSize
            var out = x
            out.withUnsafeMutableBytes { raw in
                for m in 0..<(x.count / max(rows * cols, 1)) {
                    for i in 0..<rows {
                        for j in 0..<cols where upper ? (j - i < k) : (j - i > k) {
                            (raw.baseAddress! + ((m * rows + i) * cols + j) * size).initializeMemory(as: UInt8.self, repeating: 0, count: size)
                        }
                    }
                }
            }
            return [out]
        }
    },
    "OneHot": { ctx in
        let axisAttr = try ctx.int("axis", -1)
        return PreparedKernel { inputs in
            let idx = try inputs.required(0, ctx).doubles, idxShape = try inputs.required(0, ctx).shape
            let depthValue = try inputs.required(1, ctx).doubleValue(at: 0)
            let values = try inputs.required(2, ctx)
            // depth is data: refuse NaN and sizes Int(_:) or the allocation cannot hold before converting.
            guard values.count == 2, depthValue >= 1, depthValue <= Double(maxDataDrivenElements) else {
                throw ctx.error(.executionFailed, "values must hold [off, on] and depth must be from 1 to \(maxDataDrivenElements), got \(depthValue)")
            }
            let depth = Int(depthValue)
            let rank = idxShape.count + 1
            let axis = try ctx.axis(axisAttr, rank: rank)
            var shape = idxShape
            shape.insert(depth, at: axis)
            _ = try ctx.checkedShape(shape)
            let outer = idxShape[..<axis].reduce(1, *), inner = idxShape[axis...].reduce(1, *)
            let off = values.doubleValue(at: 0), on = values.doubleValue(at: 1)
            var result = [Double](repeating: off, count: outer * depth * inner)
            for o in 0..<outer {
                for i in 0..<inner {
                    // Indices are request data: NaN or huge values are simply off (out of range), not a trap.
                    let index = idx[o * inner + i]
                    guard index.isFinite, Swift.abs(index) < Double(depth) + 1 else { continue }
                    var hot = Int(index)
                    if hot < 0 { hot += depth }
                    if hot >= 0 && hot < depth { result[(o * depth + hot) * inner + i] = on }
                }
            }
            return [try castTensor(Tensor(shape: shape, scalars: result), to: values.dtype, ctx)]
        }
    },
    "NonZero": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        let values = x.doubles
        let strides = x.strides
        let hits = values.indices.filter { values[$0] != 0 }
        var result = [Int64](repeating: 0, count: x.rank * hits.count)
        for (n, flat) in hits.enumerated() {
            var rem = flat
            for a in 0..<x.rank {
                result[a * hits.count + n] = Int64(rem / strides[a])
                rem %= strides[a]
            }
        }
        return [Tensor(shape: [x.rank, hits.count], scalars: result)]
    } },
    "Compress": { ctx in
        let axisAttr: Int? = ctx.has("axis") ? try ctx.int("axis", 0) : nil
        return PreparedKernel { inputs in
            var x = try inputs.required(0, ctx)
            let cond = try inputs.required(1, ctx).doubles
            if axisAttr == nil { x = x.reshaped([x.count]) }
            let axis = try ctx.axis(axisAttr ?? 0, rank: x.rank)
            let keep = (0..<min(cond.count, x.shape[axis])).filter { cond[$0] != 0 }
            let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *) * x.dtype.byteSize
            var shape = x.shape
            shape[axis] = keep.count
            var out = Tensor(uninitialized: x.dtype, shape: shape)
            let source = x
            out.withUnsafeMutableBytes { dst in source.withUnsafeBytes { src in
                var d = dst.baseAddress
                for o in 0..<outer {
                    for k in keep where inner > 0 {
                        d!.copyMemory(from: src.baseAddress! + (o * source.shape[axis] + k) * inner, byteCount: inner)
                        d! += inner
                    }
                }
            } }
            return [out]
        }
    },
    "EyeLike": { ctx in
        let k = try ctx.int("k", 0)
        let dtypeOverride: DType? = ctx.has("dtype") ? try dtypeAttribute(ctx, "dtype", nil) : nil
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank == 2 else { throw ctx.error(.executionFailed, "input must be 2-D, got \(x.shape)") }
            var values = [Double](repeating: 0, count: x.count)
            for i in 0..<x.shape[0] where i + k >= 0 && i + k < x.shape[1] { values[i * x.shape[1] + i + k] = 1 }
            return [try castTensor(Tensor(shape: x.shape, scalars: values), to: dtypeOverride ?? x.dtype, ctx)]
        }
    },
    "Hardmax": { ctx in
        let legacy = ctx.opset < 13
        let axisAttr = try ctx.int("axis", legacy ? 1 : -1)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let outer = x.shape[..<axis].reduce(1, *)
            let dim = legacy ? x.shape[axis...].reduce(1, *) : x.shape[axis]
            let inner = legacy ? 1 : x.shape[(axis + 1)...].reduce(1, *)
            let src = x.scalars(as: Float.self)
            var dst = [Float](repeating: 0, count: src.count)
            for o in 0..<outer {
                for i in 0..<inner where dim > 0 {
                    var best = 0
                    for k in 1..<max(dim, 1) where src[(o * dim + k) * inner + i] > src[(o * dim + best) * inner + i] { best = k }
                    dst[(o * dim + best) * inner + i] = 1
                }
            }
            return [Tensor(shape: x.shape, scalars: dst)]
        }
    },
    "LpNormalization": { ctx in
        let axisAttr = try ctx.int("axis", -1), p = try ctx.int("p", 2)
        guard p == 1 || p == 2 else { throw ctx.unsupported("p", "= \(p)") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let norm = reduce(x, axes: [axis], keepDims: true, initial: Float(0), pre: { p == 1 ? Swift.abs($0) : $0 * $0 },
                              combine: +, post: { a, _ in p == 1 ? a : a.squareRoot() })
            return [try broadcastBinary(x, norm, ctx) { (a: Float, n: Float) in n == 0 ? 0 : a / n }]
        }
    },
    "Shrink": { ctx in
        let bias = try ctx.float("bias", 0), lambd = try ctx.float("lambd", 0.5)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let wide = try castTensor(x, to: .float64, ctx)
            let r = mapElements(wide) { (v: Double) in v < -Double(lambd) ? v + Double(bias) : (v > Double(lambd) ? v - Double(bias) : 0) }
            return [try castTensor(r, to: x.dtype, ctx)]
        }
    },
    "MeanVarianceNormalization": { ctx in
        let axesAttr = try ctx.ints("axes") ?? [0, 2, 3]
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            let axes = try Set(axesAttr.map { try ctx.axis($0, rank: x.rank) })
            let mean = reduce(x, axes: axes, keepDims: true, initial: Float(0), pre: { $0 }, combine: +, post: { a, n in a / Float(n) })
            let centered = try broadcastBinary(x, mean, ctx) { (a: Float, m: Float) in a - m }
            let variance = reduce(centered, axes: axes, keepDims: true, initial: Float(0), pre: { $0 * $0 }, combine: +, post: { a, n in a / Float(n) })
            return [try broadcastBinary(centered, variance, ctx) { (c: Float, v: Float) in c / (v.squareRoot() + 1e-9) }]
        }
    },
]

/// CumSum, or CumProd (opset 26): running sums or products along an axis, exclusive and reversed on request.
private func cumulative(product: Bool) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let exclusive = try ctx.int("exclusive", 0) == 1, reverse = try ctx.int("reverse", 0) == 1
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let axis = try ctx.axis(inputs.required(1, ctx).ints.first ?? 0, rank: x.rank)
            let wide = try castTensor(x, to: .float64, ctx)
            let dim = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
            let src = wide.scalars(as: Double.self)
            var dst = [Double](repeating: 0, count: src.count)
            for o in 0..<outer {
                for i in 0..<inner {
                    var acc: Double = product ? 1 : 0
                    for step in 0..<dim {
                        let k = reverse ? dim - 1 - step : step
                        let at = (o * dim + k) * inner + i
                        if exclusive { dst[at] = acc }
                        acc = product ? acc * src[at] : acc + src[at]
                        if !exclusive { dst[at] = acc }
                    }
                }
            }
            return [try castTensor(Tensor(shape: x.shape, scalars: dst), to: x.dtype, ctx)]
        }
    }
}
