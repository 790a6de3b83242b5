import CKernelShim

/// Patches of an NCHW image for output rows [first, end): row (y - first) * outW + x holds in[c][y*sh - pt + i][x*sw - pl + j]
/// for c, i, j in that order (the weights' [M][C][kH][kW] order), zero outside the image. `g.channels` is the image's.
/// One kernel row of one channel at a time across the output row, so the interior columns copy without bounds checks.
func gatherPatches(_ g: ChannelsLastDepthwiseGeometry, image: UnsafePointer<Float>, rows: Range<Int>, into patches: UnsafeMutablePointer<Float>) {
    let kw = g.kernelWidth, k = g.channels * g.kernelHeight * kw, sw = g.strideWidth, pl = g.padLeft
    // Columns whose taps all fall inside the image: [xLo, xHi).
    let xLo = min(g.outWidth, (pl + sw - 1) / sw)
    let xHi = max(xLo, min(g.outWidth, g.inWidth + pl - kw >= 0 ? (g.inWidth + pl - kw) / sw + 1 : 0))
    for y in rows {
        let outRow = patches + (y - rows.lowerBound) * g.outWidth * k
        for c in 0..<g.channels {
            for i in 0..<g.kernelHeight {
                let iy = y * g.strideHeight - g.padTop + i, offset = (c * g.kernelHeight + i) * kw
                guard iy >= 0 && iy < g.inHeight else {
                    for x in 0..<g.outWidth { (outRow + x * k + offset).initialize(repeating: 0, count: kw) }
                    continue
                }
                let source = image + (c * g.inHeight + iy) * g.inWidth
                func edge(_ x: Int) {
                    let d = outRow + x * k + offset, left = x * sw - pl
                    for j in 0..<kw { let ix = left + j; d[j] = ix >= 0 && ix < g.inWidth ? source[ix] : 0 }
                }
                for x in 0..<xLo { edge(x) }
                var d = outRow + xLo * k + offset, s = source + xLo * sw - pl
                if kw == 3 {
                    for _ in xLo..<xHi { d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d += k; s += sw }
                } else {
                    for _ in xLo..<xHi { for j in 0..<kw { d[j] = s[j] }; d += k; s += sw }
                }
                for x in xHi..<g.outWidth { edge(x) }
            }
        }
    }
}

/// A small dense convolution (a network's stem: few input channels, one group, dilation 1) from an NCHW input
/// straight to an NHWC output [N][outH][outW][M]: bands of output rows gather their patches (about 32 KB, in L1) and go
/// through the channels-last product with bias and activation in its epilogue, so the region that follows needs no
/// layout conversion. `w` packs the weights as [C * kH * kW] x M.
func channelsLastPatchConv(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, _ w: PackedMatrixB, bias: UnsafePointer<Float>?,
                           activation: Activation, output: UnsafeMutablePointer<Float>) {
    let k = w.depth, m = w.columns, pixels = g.outHeight * g.outWidth, inImage = g.channels * g.inHeight * g.inWidth
    guard hasChannelsLastProduct else {
        let patches = allocateFloats(g.batch * pixels * k)
        defer { patches.deallocate() }
        for n in 0..<g.batch { gatherPatches(g, image: input + n * inImage, rows: 0..<g.outHeight, into: patches + n * pixels * k) }
        pointwiseProduct(patches, rows: g.batch * pixels, w, bias: bias, residual: nil, activation: activation, output: output)
        return
    }
    let band = max(1, min(g.outHeight, 8192 / max(1, g.outWidth * k)))
    let bands = (g.outHeight + band - 1) / band
    let epilogue = DepthwisePlaneEpilogue(activation)
    parallelRanges(g.batch * bands) { range in
        let patches = allocateFloats(band * g.outWidth * k)
        defer { patches.deallocate() }
        for task in range {
            let n = task / bands, first = (task % bands) * band, end = min(g.outHeight, first + band)
            gatherPatches(g, image: input + n * inImage, rows: first..<end, into: patches)
            let rows = (end - first) * g.outWidth, at = (n * pixels + first * g.outWidth) * m
            osprey_nhwc_pointwise_f32(0, rows, k, patches, k, w.pointer, m, bias, nil, output + at, epilogue.code, epilogue.low, epilogue.high)
            if !epilogue.complete { activation.apply(output + at, count: rows * m) }
        }
    }
}
