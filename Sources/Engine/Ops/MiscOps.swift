import Foundation
import Tensor

/// Generalized cosine window a0 - a1 cos(2πn/N) + a2 cos(4πn/N) (periodic uses N = size, symmetric N = size - 1).
private func cosineWindow(_ ctx: OpContext, _ coefficients: [Double]) -> @Sendable (inout KernelInputs) throws -> [Tensor] {
    { inputs in
        let size = Int(try inputs.required(0, ctx).doubleValue(at: 0))
        guard size >= 0, size < 1 << 28 else { throw ctx.error(.executionFailed, "window size \(size) is out of range") }
        let periodic = try ctx.int("periodic", 1) == 1
        let dtype = try dtypeAttribute(ctx, "output_datatype", .float32)
        let denominator = Double(periodic ? size : size - 1)
        let values = (0..<size).map { n -> Double in
            let phase = denominator == 0 ? 0 : 2 * Double.pi * Double(n) / denominator
            return coefficients[0] - coefficients[1] * Foundation.cos(phase) + coefficients[2] * Foundation.cos(2 * phase)
        }
        return [try castTensor(Tensor(shape: [size], scalars: values), to: dtype, ctx)]
    }
}

let miscOperators: OperatorTable = [
    "LRN": { ctx in
        let alpha = try ctx.float("alpha", 1e-4), beta = try ctx.float("beta", 0.75), bias = try ctx.float("bias", 1)
        let size = try ctx.int("size", 0)
        guard size >= 1 else { throw ctx.error(.invalidModel, "attribute 'size' must be at least 1") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32, x.rank >= 3 else { throw ctx.error(.unsupportedDType, "input \(x) must be float32 [N, C, ...]") }
            let (n, c) = (x.shape[0], x.shape[1])
            let inner = x.shape[2...].reduce(1, *)
            let before = (size - 1) / 2, after = size - 1 - before
            let src = x.scalars(as: Float.self)
            return [Tensor.makeFloat(shape: x.shape) { dst in
                for b in 0..<n {
                    for ch in 0..<c {
                        let lo = max(0, ch - before), hi = min(c - 1, ch + after)
                        for i in 0..<inner {
                            var sum: Float = 0
                            for k in lo...hi { let v = src[(b * c + k) * inner + i]; sum += v * v }
                            let at = (b * c + ch) * inner + i
                            dst[at] = src[at] / Foundation.pow(bias + alpha / Float(size) * sum, beta)
                        }
                    }
                }
            }]
        }
    },
    "HannWindow": { ctx in PreparedKernel(kernel: cosineWindow(ctx, [0.5, 0.5, 0])) },
    "HammingWindow": { ctx in PreparedKernel(kernel: cosineWindow(ctx, [25.0 / 46.0, 21.0 / 46.0, 0])) },
    "BlackmanWindow": { ctx in PreparedKernel(kernel: cosineWindow(ctx, [0.42, 0.5, 0.08])) },
    "Det": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        guard x.rank >= 2, x.shape[x.rank - 1] == x.shape[x.rank - 2], x.dtype.isFloatingPoint else {
            throw ctx.error(.executionFailed, "Det needs floating-point [..., M, M], got \(x)")
        }
        let m = x.shape[x.rank - 1]
        let values = x.doubles
        let count = x.count / max(m * m, 1)
        var dets = [Double](repeating: 1, count: count)
        for b in 0..<count {
            // Gaussian elimination with partial pivoting.
            var a = Array(values[(b * m * m)..<((b + 1) * m * m)])
            var det: Double = 1
            for col in 0..<m {
                var pivot = col
                for r in (col + 1)..<max(col + 1, m) where abs(a[r * m + col]) > abs(a[pivot * m + col]) { pivot = r }
                if a[pivot * m + col] == 0 { det = 0; break }
                if pivot != col {
                    for k in 0..<m { a.swapAt(pivot * m + k, col * m + k) }
                    det = -det
                }
                det *= a[col * m + col]
                for r in (col + 1)..<max(col + 1, m) {
                    let factor = a[r * m + col] / a[col * m + col]
                    for k in col..<m { a[r * m + k] -= factor * a[col * m + k] }
                }
            }
            dets[b] = det
        }
        return [try castTensor(Tensor(shape: Array(x.shape.dropLast(2)), scalars: dets), to: x.dtype, ctx)]
    } },
    "MaxUnpool": { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let kernel = attrs.kernelShape else { throw ctx.error(.invalidModel, "attribute 'kernel_shape' is required") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), indices = try inputs.required(1, ctx).ints
            guard x.rank == kernel.count + 2, indices.count == x.count else { throw ctx.error(.executionFailed, "X \(x.shape) and indices do not match kernel_shape \(kernel)") }
            let strides = attrs.strides ?? Array(repeating: 1, count: kernel.count)
            let pads = attrs.pads ?? Array(repeating: 0, count: 2 * kernel.count)
            // Indices address the default (inferred) output; an explicit output_shape places the same coordinates in a larger tensor.
            let inferred = Array(x.shape[..<2]) + (0..<kernel.count).map { (x.shape[2 + $0] - 1) * strides[$0] + kernel[$0] - pads[$0] - pads[$0 + kernel.count] }
            let outShape = inputs[2]?.ints ?? inferred
            guard outShape.count == x.rank, outShape.allSatisfy({ $0 >= 0 }), inferred.allSatisfy({ $0 >= 0 }) else {
                throw ctx.error(.executionFailed, "output shape \(outShape) is invalid")
            }
            let total = outShape.reduce(1, *), inferredTotal = inferred.reduce(1, *)
            let inferredStrides = Tensor.contiguousStrides(inferred), outStrides = Tensor.contiguousStrides(outShape)
            let values = x.doubles
            var out = [Double](repeating: 0, count: total)
            for (i, index) in indices.enumerated() {
                guard index >= 0 && index < inferredTotal else { throw ctx.error(.executionFailed, "index \(index) is outside the unpooled size \(inferredTotal)") }
                var target = 0, inside = true
                for a in 0..<x.rank {
                    let coordinate = (index / inferredStrides[a]) % inferred[a]
                    if coordinate >= outShape[a] { inside = false; break }
                    target += coordinate * outStrides[a]
                }
                if inside { out[target] = values[i] }
            }
            return [try castTensor(Tensor(shape: outShape, scalars: out), to: x.dtype, ctx)]
        }
    },
    "ConvInteger": { ctx in
        let attrs = try WindowAttributes(ctx)
        let groups = try ctx.int("group", 1)
        guard groups >= 1 else { throw ctx.error(.invalidModel, "group must be at least 1") }
        // Constant 2-D weights are prepared for the integer kernels once, here.
        let plan = quantizedConvolutionPlan(ctx, weights: 1, zero: 3, groups: groups)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            if let plan, let fast = try quantizedConvolution(ctx, attrs, plan: plan, x: x, xZero: inputs[2], bias: nil, output: .sums) {
                return [fast]
            }
            let w = try inputs.required(1, ctx)
            let (sums, shape) = try integerConvolutionFast(ctx, attrs, groups: groups, x: x, xZero: inputs[2], w: w, wZero: inputs[3], bias: nil)
                ?? integerConvolution(ctx, attrs, groups: groups, x: x, xZero: inputs[2], w: w, wZero: inputs[3], bias: nil)
            return [Tensor(shape: shape, scalars: sums.map { Int32(truncatingIfNeeded: $0) })]
        }
    },
    "QLinearConv": { ctx in
        let attrs = try WindowAttributes(ctx)
        let groups = try ctx.int("group", 1)
        guard groups >= 1 else { throw ctx.error(.invalidModel, "group must be at least 1") }
        let plan = quantizedConvolutionPlan(ctx, weights: 3, zero: 5, groups: groups)
        let epilogue = plan.flatMap { qlinearConvolutionEpilogue(ctx, plan: $0) }
        // Weights the integer kernels cannot take (non-2-D) are centred once for the double-precision path.
        var centered: [Double]?
        if plan == nil, let w = ctx.constants[3], !ctx.hasInput(5) || ctx.constants[5] != nil { centered = centeredConvolutionWeights(w, zero: ctx.constants[5]) }
        let prepared = centered
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), w = try inputs.required(3, ctx)
            if let plan, let epilogue, let fast = try runQuantizedConvolution(ctx, attrs, plan: plan, x: x, epilogue: epilogue) { return [fast] }
            if let plan, let fast = try qlinearConvolution(ctx, attrs, plan: plan, inputs) { return [fast] }
            let xScale = try inputs.required(1, ctx).doubleValue(at: 0), wScale = try inputs.required(4, ctx).doubles
            let yScale = try inputs.required(6, ctx).doubleValue(at: 0), yZeroT = try inputs.required(7, ctx)
            guard wScale.count == 1 || wScale.count == w.shape[0] else { throw ctx.error(.executionFailed, "w_scale must be a scalar or per output channel") }
            let (sums, shape) = try integerConvolutionFast(ctx, attrs, groups: groups, x: x, xZero: inputs[2], w: w, wZero: inputs[5], bias: inputs[8],
                                                           centeredWeights: prepared)
                ?? integerConvolution(ctx, attrs, groups: groups, x: x, xZero: inputs[2], w: w, wZero: inputs[5], bias: inputs[8])
            let bounds: (Double, Double) = yZeroT.dtype == .int8 ? (-128, 127) : (0, 255)
            let yZero = yZeroT.doubleValue(at: 0)
            let plane = shape[2...].reduce(1, *), channels = shape[1]
            // In float as onnxruntime (and the fused integer epilogue) computes it: float(sum) * (x_scale * w_scale / y_scale).
            let values = sums.enumerated().map { i, sum -> Double in
                let scale = Float(xScale) * Float(wScale[wScale.count == 1 ? 0 : (i / plane) % channels]) / Float(yScale)
                return min(max(Double((Float(sum) * scale).rounded(.toNearestOrEven)) + yZero, bounds.0), bounds.1)
            }
            return [try castTensor(Tensor(shape: shape, scalars: values), to: yZeroT.dtype, ctx)]
        }
    },
]

/// Exact integer convolution sum((x - x_zero) * (w - w_zero)) + bias over 1-3 spatial axes (w_zero scalar or per output channel).
func integerConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, groups: Int, x: Tensor, xZero: Tensor?, w: Tensor, wZero: Tensor?,
                        bias: Tensor?) throws -> ([Int64], [Int]) {
    guard x.rank == w.rank, (3...5).contains(x.rank), x.shape[1] == w.shape[1] * groups, w.shape[0] % groups == 0 else {
        throw ctx.error(.executionFailed, "X \(x.shape) does not match W \(w.shape) with group \(groups)")
    }
    let xz = xZero?.doubleValue(at: 0) ?? 0
    let wz = wZero?.doubles ?? [0]
    guard wz.count == 1 || wz.count == w.shape[0] else { throw ctx.error(.executionFailed, "w_zero_point must be a scalar or per output channel") }
    let kernel = Array(w.shape[2...]), spatial = Array(x.shape[2...])
    let r = try attrs.resolve(spatial: kernel.count, inputSpatial: spatial, kernel: kernel, ctx)
    var outSp: [Int] = []
    for a in 0..<kernel.count {
        let extent: Int = spatial[a] + r.padBegin[a] + r.padEnd[a] - r.dilations[a] * (kernel[a] - 1) - 1
        outSp.append(extent / r.strides[a] + 1)
    }
    guard outSp.allSatisfy({ $0 > 0 }) else { throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \(kernel)") }
    let (n, c, m) = (x.shape[0], x.shape[1], w.shape[0])
    let cg = c / groups, mg = m / groups
    let xv = x.doubles.map { Int64($0 - xz) }
    let window = kernel.reduce(1, *)
    let wv = w.doubles.enumerated().map { Int64($0.element - wz[wz.count == 1 ? 0 : $0.offset / (cg * window)]) }
    let b = bias?.ints
    let inPlane = spatial.reduce(1, *), outPlane = outSp.reduce(1, *)
    let inStrides = Tensor.contiguousStrides(spatial), outStrides = Tensor.contiguousStrides(outSp), kStrides = Tensor.contiguousStrides(kernel)
    var result = [Int64](repeating: 0, count: n * m * outPlane)
    for batch in 0..<n {
        for oc in 0..<m {
            let group = oc / mg
            for o in 0..<outPlane {
                var sum = Int64(b?[oc] ?? 0)
                for k in 0..<window {
                    var offset = 0, inside = true
                    for a in 0..<kernel.count {
                        let i = (o / outStrides[a]) % outSp[a] * r.strides[a] - r.padBegin[a] + (k / kStrides[a]) % kernel[a] * r.dilations[a]
                        if i < 0 || i >= spatial[a] { inside = false; break }
                        offset += i * inStrides[a]
                    }
                    guard inside else { continue }
                    for ic in 0..<cg { sum += xv[(batch * c + group * cg + ic) * inPlane + offset] * wv[(oc * cg + ic) * window + k] }
                }
                result[(batch * m + oc) * outPlane + o] = sum
            }
        }
    }
    return (result, [n, m] + outSp)
}
