import Tensor

/// Col2Im (opset 18), the inverse of im2col: sums the columns of sliding blocks back into images; and AffineGrid
/// (opset 20), the sampling grid of an affine transform that GridSample reads. Both follow the ONNX reference.
let col2ImAffineGridOperators: OperatorTable = [
    "Col2Im": { ctx in
        let dilationsAttribute = try ctx.ints("dilations"), padsAttribute = try ctx.ints("pads"), stridesAttribute = try ctx.ints("strides")
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), image = try inputs.required(1, ctx).ints, block = try inputs.required(2, ctx).ints
            let axes = image.count
            guard x.dtype == .float32, x.rank == 3, axes >= 1, block.count == axes, block.allSatisfy({ $0 > 0 }), image.allSatisfy({ $0 > 0 }) else {
                throw ctx.error(.executionFailed, "input must be float32 [N, C * prod(block), L] with image_shape and block_shape of one length, got \(x), \(image), \(block)")
            }
            let dilations = dilationsAttribute ?? Array(repeating: 1, count: axes), strides = stridesAttribute ?? Array(repeating: 1, count: axes)
            let pads = padsAttribute ?? Array(repeating: 0, count: 2 * axes)
            guard dilations.count == axes, strides.count == axes, pads.count == 2 * axes else {
                throw ctx.error(.invalidModel, "dilations, strides and pads must match \(axes) spatial axes")
            }
            let kernel = block.reduce(1, *)
            guard x.shape[1] % kernel == 0 else { throw ctx.error(.executionFailed, "input axis 1 (\(x.shape[1])) is not a multiple of the block size \(kernel)") }
            let blocks = (0..<axes).map { a -> Int in
                let span = dilations[a] * (block[a] - 1) + 1
                return (image[a] + pads[a] + pads[a + axes] - span) / strides[a] + 1
            }
            guard blocks.allSatisfy({ $0 >= 1 }), blocks.reduce(1, *) == x.shape[2] else {
                throw ctx.error(.executionFailed, "input axis 2 (\(x.shape[2])) must be the \(blocks.reduce(1, *)) sliding blocks \(blocks)")
            }
            let batch = x.shape[0], channels = x.shape[1] / kernel, imageSize = image.reduce(1, *), blockCount = x.shape[2]
            let source = x.scalars(as: Float.self)
            let taps = WindowTaps(from: blocks, to: image, kernel: block, strides: strides, dilations: dilations, padBegin: Array(pads[..<axes]))
            let out = Tensor.makeFloat(shape: [batch, channels] + image) { dst in
                dst.initialize(repeating: 0, count: batch * channels * imageSize)
                for n in 0..<batch {
                    for row in 0..<(channels * kernel) {
                        let c = row / kernel, tap = row % kernel
                        for l in 0..<blockCount {
                            guard let at = taps.offset(l, tap: tap) else { continue }
                            dst[(n * channels + c) * imageSize + at] += source[(n * channels * kernel + row) * blockCount + l]
                        }
                    }
                }
            }
            return [out]
        }
    },
    "AffineGrid": { ctx in
        let alignCorners = try ctx.int("align_corners", 0) == 1
        return PreparedKernel { inputs in
            let theta = try inputs.required(0, ctx), size = try inputs.required(1, ctx).ints
            guard theta.dtype == .float32 || theta.dtype == .float64, size.count == 4 || size.count == 5 else {
                throw ctx.error(.executionFailed, "theta must be float [N, 2, 3] or [N, 3, 4] and size [N, C, H, W] or [N, C, D, H, W], got \(theta) and \(size)")
            }
            let dims = size.count - 2, batch = size[0], spatial = Array(size[2...])
            guard theta.shape == [batch, dims, dims + 1], spatial.allSatisfy({ $0 > 0 }) else {
                throw ctx.error(.executionFailed, "theta \(theta.shape) must be [\(batch), \(dims), \(dims + 1)] for size \(size)")
            }
            let t = theta.doubles
            // Normalised coordinate of index i along an axis of `count` points.
            func coordinate(_ i: Int, _ count: Int) -> Double {
                alignCorners ? (count == 1 ? -1 : -1 + 2 * Double(i) / Double(count - 1)) : -1 + (2 * Double(i) + 1) / Double(count)
            }
            let points = spatial.reduce(1, *), strides = Tensor.contiguousStrides(spatial)
            var grid = [Double](repeating: 0, count: batch * points * dims)
            for n in 0..<batch {
                for p in 0..<points {
                    // (x, y[, z], 1): x runs along the last axis.
                    var homogeneous = [Double](repeating: 1, count: dims + 1)
                    for k in 0..<dims {
                        let axis = dims - 1 - k
                        homogeneous[k] = coordinate((p / strides[axis]) % spatial[axis], spatial[axis])
                    }
                    for r in 0..<dims {
                        var v = 0.0
                        for c in 0...dims { v += t[(n * dims + r) * (dims + 1) + c] * homogeneous[c] }
                        grid[(n * points + p) * dims + r] = v
                    }
                }
            }
            return [try castTensor(Tensor(shape: [batch] + spatial + [dims], scalars: grid), to: theta.dtype, ctx)]
        }
    },
]
