import Foundation
import Tensor

/// Output shape, and the output strides seen from the input (0 on reduced axes), of a reduction.
func reductionLayout(_ shape: [Int], axes: Set<Int>, keepDims: Bool) -> (outShape: [Int], strides: [Int]) {
    let kept = shape.indices.map { axes.contains($0) ? 1 : shape[$0] }
    let keptStrides = Tensor.contiguousStrides(kept)
    let strides = shape.indices.map { axes.contains($0) ? 0 : keptStrides[$0] }
    let outShape = keepDims ? kept : shape.indices.filter { !axes.contains($0) }.map { shape[$0] }
    return (outShape, strides)
}

/// Generic reduction: `initial`, `combine(acc, pre(x))`, then `post(acc, count)`.
@inline(__always)
func reduce<T: TensorScalar>(_ x: Tensor, axes: Set<Int>, keepDims: Bool, initial: T,
                             pre: (T) -> T, combine: (T, T) -> T, post: (T, Int) -> T) -> Tensor {
    let (outShape, outStrides) = reductionLayout(x.shape, axes: axes, keepDims: keepDims)
    var out = Tensor(uninitialized: T.dtype, shape: outShape)
    let reducedCount = axes.reduce(1) { $0 * x.shape[$1] }
    if let first = axes.min(), axes.count == x.rank - first {
        // Trailing axes: each output reduces one contiguous run.
        out.withUnsafeMutableBufferPointer(of: T.self) { o in
            x.withUnsafeBufferPointer(of: T.self) { src in
                guard let s = src.baseAddress else {
                    for i in 0..<o.count { o[i] = post(initial, reducedCount) }
                    return
                }
                for i in 0..<o.count {
                    var acc = initial
                    let run = s + i * reducedCount
                    for j in 0..<reducedCount { acc = combine(acc, pre(run[j])) }
                    o[i] = post(acc, reducedCount)
                }
            }
        }
        return out
    }
    out.withUnsafeMutableBufferPointer(of: T.self) { o in
        for i in 0..<o.count { o[i] = initial }
        guard x.count > 0, let ob = o.baseAddress else {
            // An empty reduction still finishes (ReduceLogSum of nothing is log 0 = -inf).
            for i in 0..<o.count { o[i] = post(o[i], reducedCount) }
            return
        }
        x.withUnsafeBufferPointer(of: T.self) { src in
            let s = src.baseAddress!
            forEachRun(shape: x.shape, strides: [x.strides, outStrides]) { off, n, inner in
                let xs = s + off[0], os = inner[1]
                if os == 0 {
                    var acc = ob[off[1]]
                    for i in 0..<n { acc = combine(acc, pre(xs[i])) }
                    ob[off[1]] = acc
                } else {
                    for i in 0..<n { ob[off[1] + i * os] = combine(ob[off[1] + i * os], pre(xs[i])) }
                }
            }
        }
        for i in 0..<o.count { o[i] = post(o[i], reducedCount) }
    }
    return out
}

/// Sum of `count` floats with eight partial sums (vectorises; the order differs from a serial sum only by rounding).
@inline(__always) func sumFloats(_ p: UnsafePointer<Float>, _ count: Int) -> Float {
    var acc = SIMD8<Float>(repeating: 0)
    var i = 0
    let raw = UnsafeRawPointer(p)
    while i + 8 <= count {
        acc += raw.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
        i += 8
    }
    var total = acc.sum()
    while i < count { total += p[i]; i += 1 }
    return total
}

/// Softmax (or log-softmax) along one axis of a [outer, dim, inner] view.
func softmax(_ x: Tensor, outer: Int, dim: Int, inner: Int, log: Bool) -> Tensor {
    var out = Tensor(uninitialized: .float32, shape: x.shape)
    x.withUnsafeBufferPointer(of: Float.self) { src in out.withUnsafeMutableBufferPointer(of: Float.self) { dst in
        guard let s = src.baseAddress, let d = dst.baseAddress else { return }
        for o in 0..<outer {
            for i in 0..<inner {
                let base = o * dim * inner + i
                var m = -Float.infinity
                for k in 0..<dim { m = Swift.max(m, s[base + k * inner]) }
                var sum: Float = 0
                for k in 0..<dim {
                    let e = Foundation.exp(s[base + k * inner] - m)
                    d[base + k * inner] = e
                    sum += e
                }
                if log {
                    let l = Foundation.log(sum)
                    for k in 0..<dim { d[base + k * inner] = s[base + k * inner] - m - l }
                } else {
                    let r = 1 / sum
                    for k in 0..<dim { d[base + k * inner] *= r }
                }
            }
        }
    } }
    return out
}

private func reduceFactory(_ name: String, axesInputFrom: Int) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let keepDims = try ctx.int("keepdims", 1) == 1
        let noop = try ctx.int("noop_with_empty_axes", 0) == 1
        let attrAxes = try ctx.ints("axes")
        @Sendable func compute(_ x: Tensor, _ axes: Set<Int>) throws -> [Tensor] {
            switch x.dtype {
            case .float32:
                if name == "ReduceSum" || name == "ReduceMean",
                   let fast = reduceTrailingFloats(x, axes: axes, keepDims: keepDims, mean: name == "ReduceMean")
                    ?? reduceMiddleFloats(x, axes: axes, keepDims: keepDims, mean: name == "ReduceMean") {
                    return [fast]
                }
                switch name {
                case "ReduceSum": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 }, combine: +, post: { a, _ in a })]
                case "ReduceMean": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 }, combine: +, post: { a, n in a / Float(n) })]
                case "ReduceMax": return [reduce(x, axes: axes, keepDims: keepDims, initial: -Float.infinity, pre: { $0 }, combine: { $0.isNaN || $1.isNaN ? .nan : Swift.max($0, $1) }, post: { a, _ in a })]
                case "ReduceMin": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float.infinity, pre: { $0 }, combine: { $0.isNaN || $1.isNaN ? .nan : Swift.min($0, $1) }, post: { a, _ in a })]
                case "ReduceProd": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(1), pre: { $0 }, combine: *, post: { a, _ in a })]
                case "ReduceL1": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { Swift.abs($0) }, combine: +, post: { a, _ in a })]
                case "ReduceL2": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 * $0 }, combine: +, post: { a, _ in Foundation.sqrt(a) })]
                case "ReduceSumSquare": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 * $0 }, combine: +, post: { a, _ in a })]
                case "ReduceLogSum": return [reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 }, combine: +, post: { a, _ in Foundation.log(a) })]
                default: // ReduceLogSumExp, shifted by the max for stability.
                    let m = reduce(x, axes: axes, keepDims: true, initial: -Float.infinity, pre: { $0 }, combine: { Swift.max($0, $1) }, post: { a, _ in a })
                    let shifted = try broadcastBinary(x, m, ctx) { (a: Float, b: Float) in Foundation.exp(a - (b.isFinite ? b : 0)) }
                    let s = reduce(shifted, axes: axes, keepDims: true, initial: Float(0), pre: { $0 }, combine: +, post: { a, _ in a })
                    let r = try broadcastBinary(s, m, ctx) { (a: Float, b: Float) in Foundation.log(a) + (b.isFinite ? b : 0) }
                    return [r.reshaped(reductionLayout(x.shape, axes: axes, keepDims: keepDims).outShape)]
                }
            case .int64:
                switch name {
                case "ReduceSum": return [reduce(x, axes: axes, keepDims: keepDims, initial: Int64(0), pre: { $0 }, combine: &+, post: { a, _ in a })]
                case "ReduceMean": return [reduce(x, axes: axes, keepDims: keepDims, initial: Int64(0), pre: { $0 }, combine: &+, post: { a, n in a / Int64(n) })]
                case "ReduceMax": return [reduce(x, axes: axes, keepDims: keepDims, initial: Int64.min, pre: { $0 }, combine: { Swift.max($0, $1) }, post: { a, _ in a })]
                case "ReduceMin": return [reduce(x, axes: axes, keepDims: keepDims, initial: Int64.max, pre: { $0 }, combine: { Swift.min($0, $1) }, post: { a, _ in a })]
                case "ReduceProd": return [reduce(x, axes: axes, keepDims: keepDims, initial: Int64(1), pre: { $0 }, combine: &*, post: { a, _ in a })]
                default: throw ctx.error(.unsupportedDType, "int64 input is not supported")
                }
            case .bool where name == "ReduceMax" || name == "ReduceMin":
                // Max is any, min is all (opset 20); an empty max is false, an empty min true.
                let isMax = name == "ReduceMax"
                return [reduce(x, axes: axes, keepDims: keepDims, initial: !isMax, pre: { $0 },
                               combine: { isMax ? ($0 || $1) : ($0 && $1) }, post: { a, _ in a })]
            case .int8, .uint8, .int16, .uint16, .uint32:
                guard ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"].contains(name) else {
                    throw ctx.error(.unsupportedDType, "input dtype \(x.dtype) is not supported (float, int32, int64)")
                }
                let r = try compute(castTensor(x, to: .int64, ctx), axes)
                return [try castTensor(r[0], to: x.dtype, ctx)]
            case .float64, .float16, .int32:
                // Less common dtypes reduce through float32/int64 and convert back.
                let r = try compute(castTensor(x, to: x.dtype == .int32 ? .int64 : .float32, ctx), axes)
                return [try castTensor(r[0], to: x.dtype, ctx)]
            default: throw ctx.error(.unsupportedDType, "input dtype \(x.dtype) is not supported (float, int32, int64; bool for ReduceMax and ReduceMin; 8-32 bit integers for ReduceMax, ReduceMin, ReduceSum and ReduceProd)")
            }
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let given = axesParameter(ctx, inputs, attribute: attrAxes, inputIndex: 1, fromOpset: axesInputFrom)
            if (given?.isEmpty ?? true) && noop && ctx.opset >= axesInputFrom { return [x] }
            let axes = try Set((given.flatMap { $0.isEmpty ? nil : $0 } ?? Array(0..<x.rank)).map { try ctx.axis($0, rank: x.rank) })
            return try compute(x, axes)
        }
    }
}

/// Index of the max (or min) along `axis`, ties resolved first or last.
func argExtreme(_ ctx: OpContext, _ x: Tensor, axis: Int, keepDims: Bool, max: Bool, last: Bool) throws -> Tensor {
    let f = try castTensor(x, to: .float64, ctx).scalars(as: Double.self)
    let dim = x.shape[axis]
    guard dim > 0 else { throw ctx.error(.executionFailed, "cannot take arg\(max ? "max" : "min") of an empty axis") }
    let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *)
    var result = [Int64](repeating: 0, count: outer * inner)
    for o in 0..<outer {
        for i in 0..<inner {
            var best = 0
            var bestValue = f[o * dim * inner + i]
            for k in 1..<dim {
                let v = f[o * dim * inner + k * inner + i]
                let better = max ? (v > bestValue || (last && v == bestValue)) : (v < bestValue || (last && v == bestValue))
                if better { best = k; bestValue = v }
            }
            result[o * inner + i] = Int64(best)
        }
    }
    var shape = x.shape
    if keepDims { shape[axis] = 1 } else { shape.remove(at: axis) }
    return Tensor(shape: shape, scalars: result)
}

let reduceOperators: OperatorTable = {
    var table: OperatorTable = [:]
    table["ReduceSum"] = reduceFactory("ReduceSum", axesInputFrom: 13)
    for name in ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"] {
        table[name] = reduceFactory(name, axesInputFrom: 18)
    }
    for (name, log) in [("Softmax", false), ("LogSoftmax", true)] {
        table[name] = { ctx in
            let legacy = ctx.opset < 13
            let axisAttr = try ctx.int("axis", legacy ? 1 : -1)
            return PreparedKernel { inputs in
                let x = try inputs.required(0, ctx)
                guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input dtype \(x.dtype) is not supported (float32)") }
                if x.rank == 0 { return [mapFloats(x) { _ in log ? 0 : 1 }] }
                let axis = try ctx.axis(axisAttr, rank: x.rank)
                let outer = x.shape[..<axis].reduce(1, *)
                // Opset < 13: the input is flattened to 2-D at `axis` and normalised per row.
                let dim = legacy ? x.shape[axis...].reduce(1, *) : x.shape[axis]
                let inner = legacy ? 1 : x.shape[(axis + 1)...].reduce(1, *)
                if log { return [softmax(x, outer: outer, dim: dim, inner: inner, log: true)] }
                return [softmaxFast(x, outer: outer, dim: dim, inner: inner)]
            }
        }
    }
    for (name, isMax) in [("ArgMax", true), ("ArgMin", false)] {
        table[name] = { ctx in
            let axisAttr = try ctx.int("axis", 0), keep = try ctx.int("keepdims", 1) == 1, last = try ctx.int("select_last_index", 0) == 1
            return PreparedKernel { inputs in
                let x = try inputs.required(0, ctx)
                return [try argExtreme(ctx, x, axis: try ctx.axis(axisAttr, rank: x.rank), keepDims: keep, max: isMax, last: last)]
            }
        }
    }
    table["TopK"] = { ctx in
        let axisAttr = try ctx.int("axis", -1), largest = try ctx.int("largest", 1) == 1
        let attrK = try ctx.int("k", -1)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let k = ctx.opset >= 10 ? try inputs.required(1, ctx).ints.first ?? -1 : attrK
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let dim = x.shape[axis]
            guard k >= 0 && k <= dim else { throw ctx.error(.executionFailed, "k=\(k) is out of range for axis size \(dim)") }
            let values = try castTensor(x, to: .float64, ctx).scalars(as: Double.self)
            let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *)
            var picked = [Double](repeating: 0, count: outer * k * inner)
            var indices = [Int64](repeating: 0, count: outer * k * inner)
            for o in 0..<outer {
                for i in 0..<inner {
                    let order = (0..<dim).sorted { a, b in
                        let va = values[o * dim * inner + a * inner + i], vb = values[o * dim * inner + b * inner + i]
                        if va == vb { return a < b }
                        return largest ? va > vb : va < vb
                    }
                    for j in 0..<k {
                        picked[o * k * inner + j * inner + i] = values[o * dim * inner + order[j] * inner + i]
                        indices[o * k * inner + j * inner + i] = Int64(order[j])
                    }
                }
            }
            var shape = x.shape
            shape[axis] = k
            return [try castTensor(Tensor(shape: shape, scalars: picked), to: x.dtype, ctx), Tensor(shape: shape, scalars: indices)]
        }
    }
    return table
}()
