import Foundation
import Tensor

/// Reflects `x` into [low, high] the way GridSample's reflection padding does.
private func reflect(_ x: Float, _ low: Float, _ high: Float) -> Float {
    let range = high - low
    guard range > 0 else { return low }
    if x < low {
        let dx = low - x, n = Int(dx / range), r = dx - Float(n) * range
        return n % 2 == 0 ? low + r : high - r
    }
    if x > high {
        let dx = x - high, n = Int(dx / range), r = dx - Float(n) * range
        return n % 2 == 0 ? high - r : low + r
    }
    return x
}

/// Cubic convolution weights (a = -0.75) for the four taps around fractional offset `t`.
private func cubicCoefficients(_ t: Float) -> [Float] {
    let a: Float = -0.75
    func near(_ x: Float) -> Float { ((a + 2) * x - (a + 3)) * x * x + 1 }
    func far(_ x: Float) -> Float { ((a * x - 5 * a) * x + 8 * a) * x - 4 * a }
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]
}

/// Batched integer matrix product of (A - a_zero) and (B - b_zero) with numpy MatMul broadcasting; zero points are
/// scalars or per-row (A) / per-column (B) vectors. Returns int64 sums and the output shape.
func integerMatMul(_ a: Tensor, zero aZeroT: Tensor?, _ b: Tensor, zero bZeroT: Tensor?, _ ctx: OpContext) throws -> ([Int64], [Int]) {
    guard a.rank >= 1, b.rank >= 1 else { throw ctx.error(.executionFailed, "operands must have rank >= 1") }
    let aZero = aZeroT?.doubles ?? [0], bZero = bZeroT?.doubles ?? [0]
    let aShape = a.rank == 1 ? [1, a.shape[0]] : a.shape, bShape = b.rank == 1 ? [b.shape[0], 1] : b.shape
    let (m, k, n) = (aShape[aShape.count - 2], aShape[aShape.count - 1], bShape[bShape.count - 1])
    guard bShape[bShape.count - 2] == k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
    guard aZero.count == 1 || aZero.count == m, bZero.count == 1 || bZero.count == n else {
        throw ctx.error(.unsupportedAttribute, "zero points must be scalars or per-row/per-column vectors")
    }
    let aBatch = Array(aShape.dropLast(2)), bBatch = Array(bShape.dropLast(2))
    guard let batch = broadcastShape(aBatch, bBatch) else { throw ctx.error(.executionFailed, "cannot broadcast \(a.shape) and \(b.shape)") }
    let av = a.doubles, bv = b.doubles
    let aStrides = broadcastStrides(aBatch, to: batch), bStrides = broadcastStrides(bBatch, to: batch)
    let batchStrides = Tensor.contiguousStrides(batch)
    let count = batch.reduce(1, *)
    var result = [Int64](repeating: 0, count: count * m * n)
    for i in 0..<count {
        var rem = i, ao = 0, bo = 0
        for d in 0..<batch.count {
            let c = rem / batchStrides[d]; rem %= batchStrides[d]
            ao += c * aStrides[d]; bo += c * bStrides[d]
        }
        for r in 0..<m {
            for col in 0..<n {
                var sum: Int64 = 0
                for p in 0..<k {
                    let x = Int64(av[ao * m * k + r * k + p] - aZero[aZero.count == 1 ? 0 : r])
                    let y = Int64(bv[bo * k * n + p * n + col] - bZero[bZero.count == 1 ? 0 : col])
                    sum += x * y
                }
                result[(i * m + r) * n + col] = sum
            }
        }
    }
    var shape = batch + [m, n]
    if a.rank == 1 { shape.remove(at: shape.count - 2) }
    if b.rank == 1 { shape.removeLast() }
    return (result, shape)
}

/// GridSample's per-axis geometry, shared by the 2-D and 3-D paths: grid values in [-1, 1] become source coordinates
/// (`align_corners`, then border clamping or reflection), and out-of-range indices are padded.
private struct GridAxes {
    /// Spatial sizes in X's order (H, W or D, H, W).
    let sizes: [Int]
    let alignCorners: Bool
    let padding: String
    /// The reflection bounds of each axis.
    let bounds: [(Float, Float)]

    init(sizes: [Int], alignCorners: Bool, padding: String) {
        (self.sizes, self.alignCorners, self.padding) = (sizes, alignCorners, padding)
        bounds = sizes.map { alignCorners ? (Float(0), Float($0 - 1)) : (Float(-0.5), Float($0) - 0.5) }
    }

    /// Grid value `v` of spatial axis `d` as a source coordinate, padded.
    func coordinate(_ v: Float, axis d: Int) -> Float {
        let extent = Float(sizes[d])
        let scaled: Float = alignCorners ? (v + 1) / 2 * (extent - 1) : ((v + 1) * extent - 1) / 2
        let c = saneCoordinate(scaled)
        switch padding {
        case "border": return min(max(c, 0), extent - 1)
        case "reflection": return reflect(c, bounds[d].0, bounds[d].1)
        default: return c
        }
    }

    /// Index `i` of axis `d` inside the input once padded, or nil where zero padding reads 0.
    func index(_ i: Int, axis d: Int) -> Int? {
        if i >= 0 && i < sizes[d] { return i }
        switch padding {
        case "border": return min(max(i, 0), sizes[d] - 1)
        case "reflection": return min(max(Int(reflect(Float(i), bounds[d].0, bounds[d].1)), 0), sizes[d] - 1)
        default: return nil
        }
    }
}

/// GridSample over [N, C, D, H, W] with a [N, D_out, H_out, W_out, 3] grid of (x, y, z) in [-1, 1]: trilinear or
/// nearest, each axis denormalised and padded as the 2-D case does.
private func volumetricGridSample(_ x: Tensor, _ grid: Tensor, nearest: Bool, padding: String, alignCorners: Bool,
                                  _ ctx: OpContext) throws -> Tensor {
    guard x.dtype == .float32, grid.rank == 5, grid.shape[0] == x.shape[0], grid.shape[4] == 3 else {
        throw ctx.error(.unsupportedAttribute, "3-D sampling needs float32 X [N, C, D, H, W] and grid [N, D_out, H_out, W_out, 3], got X \(x), grid \(grid)")
    }
    let (n, c) = (x.shape[0], x.shape[1]), size = [x.shape[2], x.shape[3], x.shape[4]]  // D, H, W
    let outSize = [grid.shape[1], grid.shape[2], grid.shape[3]], points = outSize.reduce(1, *), volume = size.reduce(1, *)
    let g = try castTensor(grid, to: .float32, ctx).scalars(as: Float.self), src = x.scalars(as: Float.self)
    let axes = GridAxes(sizes: size, alignCorners: alignCorners, padding: padding)
    func voxel(_ volumeBase: Int, _ at: [Int]) -> Float {
        guard let z = axes.index(at[0], axis: 0), let y = axes.index(at[1], axis: 1), let x = axes.index(at[2], axis: 2) else { return 0 }
        return src[volumeBase + (z * size[1] + y) * size[2] + x]
    }
    return Tensor.makeFloat(shape: [n, c] + outSize) { dst in
        for b in 0..<n {
            for p in 0..<points {
                // The grid's last axis is (x, y, z): W, H, D.
                let at: [Float] = (0..<3).map { d in axes.coordinate(g[(b * points + p) * 3 + (2 - d)], axis: d) }
                for ch in 0..<c {
                    let base = (b * c + ch) * volume
                    var value: Float = 0
                    if nearest {
                        value = voxel(base, at.map { Int($0.rounded(.toNearestOrEven)) })
                    } else {
                        let low = at.map { Int(Foundation.floor($0)) }, fraction = (0..<3).map { at[$0] - Float(low[$0]) }
                        for corner in 0..<8 {
                            var weight: Float = 1, index = low
                            for d in 0..<3 {
                                let high = corner >> (2 - d) & 1 == 1
                                weight *= high ? fraction[d] : 1 - fraction[d]
                                if high { index[d] += 1 }
                            }
                            value += weight * voxel(base, index)
                        }
                    }
                    dst[(b * c + ch) * points + p] = value
                }
            }
        }
    }
}

let samplingOperators: OperatorTable = [
    "GridSample": { ctx in
        let given = try ctx.string("mode", ctx.opset >= 20 ? "linear" : "bilinear")
        let mode = given == "linear" ? "bilinear" : (given == "cubic" ? "bicubic" : given)
        let padding = try ctx.string("padding_mode", "zeros")
        let alignCorners = try ctx.int("align_corners", 0) == 1
        guard ["bilinear", "nearest", "bicubic"].contains(mode) else { throw ctx.unsupported("mode", "'\(mode)'") }
        guard ["zeros", "border", "reflection"].contains(padding) else { throw ctx.unsupported("padding_mode", "'\(padding)'") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), grid = try inputs.required(1, ctx)
            if x.rank == 5 {
                guard mode != "bicubic" else { throw ctx.error(.unsupportedAttribute, "cubic sampling is defined for 2-D inputs only, got X \(x)") }
                return [try volumetricGridSample(x, grid, nearest: mode == "nearest", padding: padding, alignCorners: alignCorners, ctx)]
            }
            guard x.dtype == .float32, x.rank == 4, grid.rank == 4, grid.shape[0] == x.shape[0], grid.shape[3] == 2 else {
                throw ctx.error(.unsupportedAttribute, "only 2-D and 3-D float32 sampling is supported: X \(x), grid \(grid) (expected [N, C, H, W] and [N, H_out, W_out, 2], or [N, C, D, H, W] and [N, D_out, H_out, W_out, 3])")
            }
            let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let (oh, ow) = (grid.shape[1], grid.shape[2])
            let g = try castTensor(grid, to: .float32, ctx).scalars(as: Float.self)
            let src = x.scalars(as: Float.self)
            let axes = GridAxes(sizes: [h, w], alignCorners: alignCorners, padding: padding)
            func pixel(_ plane: Int, _ yy: Int, _ xx: Int) -> Float {
                guard let row = axes.index(yy, axis: 0), let col = axes.index(xx, axis: 1) else { return 0 }
                return src[plane * h * w + row * w + col]
            }
            let out = Tensor.makeFloat(shape: [n, c, oh, ow]) { dst in
                for b in 0..<n {
                    for p in 0..<(oh * ow) {
                        let gx = axes.coordinate(g[(b * oh * ow + p) * 2], axis: 1)
                        let gy = axes.coordinate(g[(b * oh * ow + p) * 2 + 1], axis: 0)
                        for ch in 0..<c {
                            let plane = b * c + ch
                            var value: Float
                            switch mode {
                            case "nearest":
                                value = pixel(plane, Int(gy.rounded(.toNearestOrEven)), Int(gx.rounded(.toNearestOrEven)))
                            case "bilinear":
                                let x0 = Int(Foundation.floor(gx)), y0 = Int(Foundation.floor(gy))
                                let fx = gx - Float(x0), fy = gy - Float(y0)
                                value = (1 - fy) * ((1 - fx) * pixel(plane, y0, x0) + fx * pixel(plane, y0, x0 + 1))
                                    + fy * ((1 - fx) * pixel(plane, y0 + 1, x0) + fx * pixel(plane, y0 + 1, x0 + 1))
                            default:
                                let x0 = Int(Foundation.floor(gx)) - 1, y0 = Int(Foundation.floor(gy)) - 1
                                let wx = cubicCoefficients(gx - Foundation.floor(gx)), wy = cubicCoefficients(gy - Foundation.floor(gy))
                                value = 0
                                for i in 0..<4 {
                                    var row: Float = 0
                                    for j in 0..<4 { row += wx[j] * pixel(plane, y0 + i, x0 + j) }
                                    value += wy[i] * row
                                }
                            }
                            dst[(plane * oh * ow) + p] = value
                        }
                    }
                }
            }
            return [out]
        }
    },
    "ReverseSequence": { ctx in
        let timeAxis = try ctx.int("time_axis", 0), batchAxis = try ctx.int("batch_axis", 1)
        guard Set([timeAxis, batchAxis]) == Set([0, 1]) else { throw ctx.unsupported("time_axis/batch_axis", "\(timeAxis)/\(batchAxis)") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), lens = try inputs.required(1, ctx).ints
            guard x.rank >= 2, lens.count == x.shape[batchAxis] else { throw ctx.error(.executionFailed, "sequence_lens \(lens.count) do not match \(x.shape)") }
            let inner = x.shape[2...].reduce(1, *) * x.dtype.byteSize
            let strides = x.strides.map { $0 * x.dtype.byteSize }
            var out = x
            out.withUnsafeMutableBytes { dst in x.withUnsafeBytes { src in
                for b in 0..<x.shape[batchAxis] {
                    let length = min(max(lens[b], 0), x.shape[timeAxis])
                    for t in 0..<length {
                        let from = (length - 1 - t) * strides[timeAxis] + b * strides[batchAxis]
                        let to = t * strides[timeAxis] + b * strides[batchAxis]
                        if inner > 0 { (dst.baseAddress! + to).copyMemory(from: src.baseAddress! + from, byteCount: inner) }
                    }
                }
            } }
            return [out]
        }
    },
    "DynamicQuantizeLinear": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        if x.dtype == .float32 { return dynamicQuantizeLinearVector(x) }
        return dynamicQuantizeLinearReference(try castTensor(x, to: .float32, ctx))
    } },
    "MatMulInteger": { ctx in
        // Constant weights are packed for the integer GEMM once, here.
        let plan = quantizedMatMulPlan(ctx, b: 1, zero: 3)
        let packed = plan != nil ? nil : packedConstantMatrix(ctx.constants[1], zero: ctx.constants[3], zeroIsConstant: !ctx.hasInput(3) || ctx.constants[3] != nil)
        return PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            if let plan, let fast = try quantizedMatMul(plan: plan, a: a, aZero: inputs[2], output: .sums, ctx) { return [fast] }
            if let fast = try fastIntegerMatMul(a, zero: inputs[2], b, zero: inputs[3], packed: packed, ctx) { return [fast] }
            let (sums, shape) = try integerMatMulFast(a, zero: inputs[2], b, zero: inputs[3], ctx) ?? integerMatMul(a, zero: inputs[2], b, zero: inputs[3], ctx)
            return [Tensor(shape: shape, scalars: sums.map { Int32(truncatingIfNeeded: $0) })]
        }
    },
    "QLinearMatMul": { ctx in
        let plan = quantizedMatMulPlan(ctx, b: 3, zero: 5)
        let packed = plan != nil ? nil : packedConstantMatrix(ctx.constants[3], zero: ctx.constants[5], zeroIsConstant: !ctx.hasInput(5) || ctx.constants[5] != nil)
        return PreparedKernel { inputs in
        if let plan, let fast = try qlinearMatMul(plan: plan, inputs, ctx) { return [fast] }
        let a = try inputs.required(0, ctx), b = try inputs.required(3, ctx)
        if packed == nil, let fast = try qlinearMatMulRuntimeB(a: a, aScale: inputs.required(1, ctx), aZero: inputs[2], b: b, bScale: inputs.required(4, ctx),
                                                               bZero: inputs[5], yScale: inputs.required(6, ctx), yZero: inputs.required(7, ctx), ctx) {
            return [fast]
        }
        let aScale = try inputs.required(1, ctx).doubles, bScale = try inputs.required(4, ctx).doubles
        let yScale = try inputs.required(6, ctx).doubleValue(at: 0), yZeroT = try inputs.required(7, ctx)
        let sums: [Int64], shape: [Int]
        if let fast = try fastIntegerMatMul(a, zero: inputs[2], b, zero: inputs[5], packed: packed, ctx) {
            if let y = requantizedMatMulSums(fast, aScale: aScale, bScale: bScale, yScale: yScale, yZero: yZeroT) { return [y] }
            (sums, shape) = (fast.scalars(as: Int32.self).map { Int64($0) }, fast.shape)
        } else {
            (sums, shape) = try integerMatMulFast(a, zero: inputs[2], b, zero: inputs[5], ctx) ?? integerMatMul(a, zero: inputs[2], b, zero: inputs[5], ctx)
        }
        let n = shape.last ?? 1, m = shape.count >= 2 ? shape[shape.count - 2] : 1
        guard aScale.count == 1 || aScale.count == m, bScale.count == 1 || bScale.count == n else {
            throw ctx.error(.unsupportedAttribute, "scales must be scalars or per-row/per-column vectors")
        }
        let bounds: (Double, Double) = yZeroT.dtype == .int8 ? (-128, 127) : (0, 255)
        let yZero = yZeroT.doubleValue(at: 0)
        let values = sums.enumerated().map { i, sum -> Double in
            let row = (i / n) % m, col = i % n
            // In float as onnxruntime (and the fused integer epilogue) computes it: float(sum) * (a_scale * b_scale / y_scale).
            let scale = Float(aScale[aScale.count == 1 ? 0 : row]) * Float(bScale[bScale.count == 1 ? 0 : col]) / Float(yScale)
            return min(max(Double((Float(sum) * scale).rounded(.toNearestOrEven)) + yZero, bounds.0), bounds.1)
        }
        return [try castTensor(Tensor(shape: shape, scalars: values), to: yZeroT.dtype, ctx)]
        }
    },
]

/// `Unique`: distinct elements (or slices along `axis`) with first indices, inverse indices and counts.
let uniqueOperators: OperatorTable = [
    "Unique": { ctx in
        let sorted = try ctx.int("sorted", 1) == 1
        let axisAttr: Int? = ctx.has("axis") ? try ctx.int("axis", 0) : nil
        return PreparedKernel { inputs in
            var x = try inputs.required(0, ctx)
            if axisAttr == nil { x = x.reshaped([x.count]) }
            let axis = try ctx.axis(axisAttr ?? 0, rank: x.rank)
            let values = x.doubles
            let dim = x.shape[axis], outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *)
            // Each slice along `axis` as a comparable key.
            let slices: [[Double]] = (0..<dim).map { k in
                var slice: [Double] = []
                for o in 0..<outer { for i in 0..<inner { slice.append(values[(o * dim + k) * inner + i]) } }
                return slice
            }
            var firstIndex: [[Double]: Int] = [:]
            var order: [[Double]] = []
            var counts: [[Double]: Int] = [:]
            for (k, slice) in slices.enumerated() {
                if firstIndex[slice] == nil { firstIndex[slice] = k; order.append(slice) }
                counts[slice, default: 0] += 1
            }
            if sorted { order.sort { a, b in a.lexicographicallyPrecedes(b) } }
            let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($0.element, $0.offset) })
            var shape = x.shape
            shape[axis] = order.count
            var y = [Double](repeating: 0, count: outer * order.count * inner)
            for (u, slice) in order.enumerated() {
                var n = 0
                for o in 0..<outer { for i in 0..<inner { y[(o * order.count + u) * inner + i] = slice[n]; n += 1 } }
            }
            return [try castTensor(Tensor(shape: shape, scalars: y), to: x.dtype, ctx),
                    Tensor.int64(order.map { firstIndex[$0]! }),
                    Tensor.int64(slices.map { position[$0]! }),
                    Tensor.int64(order.map { counts[$0]! })]
        }
    },
]
