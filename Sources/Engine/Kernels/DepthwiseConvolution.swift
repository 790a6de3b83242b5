/// Depthwise convolution (one input channel per group, outChannels = multiplier * inChannels), any kernel, stride,
/// dilation and pads. input NCHW, weights [M, kh*kw], bias [M] or nil, residual and output N x M x outH x outW.
///
/// Each input plane is copied once into a zero-bordered scratch plane so every output row is computed with
/// unconditional vector loads; planes are split across the compute pool.
func depthwiseConvolution(_ g: ConvGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>, bias: UnsafePointer<Float>?,
                          residual: UnsafePointer<Float>?, activation: Activation, output: UnsafeMutablePointer<Float>) {
    let oh = g.outHeight, ow = g.outWidth
    let multiplier = g.outChannels / g.inChannels
    let paddedHeight = g.padTop + g.inHeight + g.padBottom
    let paddedWidth = g.padLeft + g.inWidth + g.padRight
    let planes = g.batch * g.outChannels
    let inPlane = g.inHeight * g.inWidth, outPlane = oh * ow
    parallelRanges(planes, minimumChunk: max(1, 4096 / max(1, outPlane))) { range in
        let scratchCount = paddedCount(paddedHeight * paddedWidth)
        let scratch = allocateFloats(scratchCount)
        defer { scratch.deallocate() }
        // Borders stay zero across planes: only the interior is rewritten.
        scratch.initialize(repeating: 0, count: scratchCount)
        var loadedPlane = -1
        for plane in range {
            let n = plane / g.outChannels, m = plane % g.outChannels
            let sourcePlane = n * g.inChannels + m / multiplier
            if sourcePlane != loadedPlane {
                let src = input + sourcePlane * inPlane
                for y in 0..<g.inHeight {
                    (scratch + (g.padTop + y) * paddedWidth + g.padLeft).update(from: src + y * g.inWidth, count: g.inWidth)
                }
                loadedPlane = sourcePlane
            }
            let dst = output + plane * outPlane
            let filter = weights + m * g.kernelHeight * g.kernelWidth
            let b = bias?[m] ?? 0
            if g.kernelHeight == 3 && g.kernelWidth == 3 {
                depthwisePlane3x3(g, padded: UnsafePointer(scratch), paddedWidth: paddedWidth, filter: filter, bias: b, output: dst)
            } else {
                depthwisePlane(g, padded: UnsafePointer(scratch), paddedWidth: paddedWidth, filter: filter, bias: b, output: dst)
            }
            if residual != nil || activation != .none {
                activation.apply(dst, count: outPlane, adding: 0, residual: residual.map { $0 + plane * outPlane })
            }
        }
    }
}

/// One output plane from a padded input plane, any kernel size.
private func depthwisePlane(_ g: ConvGeometry, padded: UnsafePointer<Float>, paddedWidth: Int, filter: UnsafePointer<Float>,
                            bias: Float, output: UnsafeMutablePointer<Float>) {
    let oh = g.outHeight, ow = g.outWidth, kh = g.kernelHeight, kw = g.kernelWidth
    let sw = g.strideWidth, dw = g.dilationWidth
    for y in 0..<oh {
        let top = padded + y * g.strideHeight * paddedWidth
        let out = output + y * ow
        var x = 0
        while x + 16 <= ow {
            var acc = SIMD16<Float>(repeating: bias)
            for ky in 0..<kh {
                let row = top + ky * g.dilationHeight * paddedWidth + x * sw
                for kx in 0..<kw {
                    acc.addProduct(loadStrided16(row + kx * dw, stride: sw), SIMD16(repeating: filter[ky * kw + kx]))
                }
            }
            (out + x).store(acc)
            x += 16
        }
        while x + 4 <= ow {
            var acc = SIMD4<Float>(repeating: bias)
            for ky in 0..<kh {
                let row = top + ky * g.dilationHeight * paddedWidth + x * sw
                for kx in 0..<kw {
                    acc.addProduct(loadStrided4(row + kx * dw, stride: sw), SIMD4(repeating: filter[ky * kw + kx]))
                }
            }
            (out + x).store(acc)
            x += 4
        }
        while x < ow {
            var acc = bias
            for ky in 0..<kh {
                let row = top + ky * g.dilationHeight * paddedWidth + x * sw
                for kx in 0..<kw { acc += row[kx * dw] * filter[ky * kw + kx] }
            }
            out[x] = acc
            x += 1
        }
    }
}

/// One output plane from a padded input plane, 3x3 kernel with the nine weights held in registers.
private func depthwisePlane3x3(_ g: ConvGeometry, padded: UnsafePointer<Float>, paddedWidth: Int, filter: UnsafePointer<Float>,
                               bias: Float, output: UnsafeMutablePointer<Float>) {
    let oh = g.outHeight, ow = g.outWidth
    let sw = g.strideWidth, dw = g.dilationWidth, rowStep = g.dilationHeight * paddedWidth
    let w0 = filter[0], w1 = filter[1], w2 = filter[2], w3 = filter[3], w4 = filter[4]
    let w5 = filter[5], w6 = filter[6], w7 = filter[7], w8 = filter[8]
    @inline(__always)
    func taps<V: SIMD>(_ r0: UnsafePointer<Float>, _ load: (UnsafePointer<Float>) -> V) -> V where V.Scalar == Float {
        let r1 = r0 + rowStep, r2 = r1 + rowStep
        var a = V(repeating: bias)
        var b = load(r0) * V(repeating: w0)
        a.addProduct(load(r0 + dw), V(repeating: w1))
        b.addProduct(load(r0 + 2 * dw), V(repeating: w2))
        a.addProduct(load(r1), V(repeating: w3))
        b.addProduct(load(r1 + dw), V(repeating: w4))
        a.addProduct(load(r1 + 2 * dw), V(repeating: w5))
        b.addProduct(load(r2), V(repeating: w6))
        a.addProduct(load(r2 + dw), V(repeating: w7))
        b.addProduct(load(r2 + 2 * dw), V(repeating: w8))
        return a + b
    }
    for y in 0..<oh {
        let top = padded + y * g.strideHeight * paddedWidth
        let out = output + y * ow
        var x = 0
        if sw == 1 {
            while x + 16 <= ow { (out + x).store(taps(top + x) { $0.vector(SIMD16<Float>.self) }); x += 16 }
            while x + 4 <= ow { (out + x).store(taps(top + x) { $0.vector(SIMD4<Float>.self) }); x += 4 }
        } else if sw == 2 {
            while x + 16 <= ow { (out + x).store(taps(top + 2 * x) { $0.vector(SIMD32<Float>.self).evenHalf }); x += 16 }
            while x + 4 <= ow { (out + x).store(taps(top + 2 * x) { $0.vector(SIMD8<Float>.self).evenHalf }); x += 4 }
        }
        while x < ow {
            let r0 = top + x * sw, r1 = r0 + rowStep, r2 = r1 + rowStep
            var acc = bias
            acc += r0[0] * w0 + r0[dw] * w1 + r0[2 * dw] * w2
            acc += r1[0] * w3 + r1[dw] * w4 + r1[2 * dw] * w5
            acc += r2[0] * w6 + r2[dw] * w7 + r2[2 * dw] * w8
            out[x] = acc
            x += 1
        }
    }
}
