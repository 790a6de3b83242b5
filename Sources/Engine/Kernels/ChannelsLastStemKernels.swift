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
                           activation: Activation, output: UnsafeMutablePointer<Float>, direct: DirectConvWeights? = nil) {
    if let direct, directPatchConvFits(g, direct) {
        directPatchConv(g, input: input, direct, activation: activation, output: output)
        return
    }
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

/// Whether `directPatchConv` runs `g` with `w` (32-channel blocks): AVX-512F, the weights' shape, a non-empty batch.
func directPatchConvFits(_ g: ChannelsLastDepthwiseGeometry, _ w: DirectConvWeights) -> Bool {
    osprey_float_avx512() != 0 && w.block == 32 && w.inChannels == g.channels && w.kernelHeight == g.kernelHeight
        && w.kernelWidth == g.kernelWidth && g.channels * g.kernelHeight * g.kernelWidth <= DirectConvWeights.maximumTaps
        && g.batch > 0 && g.outHeight > 0 && g.outWidth > 0 && g.strideHeight > 0 && g.strideWidth > 0
}

/// `channelsLastPatchConv` by the direct kernel (`osprey_direct_conv_rows_nhwc_f32`): bands of output rows read the
/// column phases of their input rows (no patches), the activation in the kernel's epilogue (Relu, Clip, SiLU,
/// HardSwish), any other over the band's rows while they are in cache. MobileNetV2's and EfficientNet-B0's 3 -> 32 stems spent most of their time
/// gathering 27-tap patches.
func directPatchConv(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, _ w: DirectConvWeights, activation: Activation,
                     output: UnsafeMutablePointer<Float>) {
    let m = w.outChannels, rowFloats = g.outWidth * m, sh = g.strideHeight, sw = g.strideWidth
    // Output rows per band: about 128 KB of output, bands enough for four per thread.
    var band = max(1, min(g.outHeight, 32_768 / max(1, rowFloats)))
    let wantedBands = (4 * EngineThreads.threads + g.batch - 1) / g.batch
    band = min(band, max(1, (g.outHeight + wantedBands - 1) / wantedBands))
    let bands = (g.outHeight + band - 1) / band
    let phaseLength = (g.outWidth + (g.kernelWidth - 1) / sw + 15) / 16 * 16
    let phaseFloats = g.channels * ((band - 1) * sh + g.kernelHeight) * sw * phaseLength + 32
    let epilogue = DepthwisePlaneEpilogue(activation)
    let inImage = g.channels * g.inHeight * g.inWidth
    let weights = UnsafePointer(w.pointer), bias = w.bias.map { UnsafePointer($0) }
    parallelRanges(g.batch * bands) { range in
        withThreadScratch(phaseFloats) { phases in
            // Slack the kernel's loads may read past the last phase row: zeros, not stale floats.
            (phases + phaseFloats - 32).initialize(repeating: 0, count: 32)
            for task in range {
                let n = task / bands, first = (task % bands) * band, end = min(g.outHeight, first + band)
                let rowsIn = (end - first - 1) * sh + g.kernelHeight
                osprey_conv_phase_rows_f32(input + n * inImage, Int32(g.channels), Int32(g.inHeight), Int32(g.inWidth),
                                           Int32(first * sh - g.padTop), Int32(rowsIn), Int32(sw), Int32(g.padLeft), phaseLength, phases)
                let at = output + (n * g.outHeight + first) * rowFloats
                osprey_direct_conv_rows_nhwc_f32(phases, phaseLength, Int32(rowsIn), Int32(g.channels), Int32(g.kernelHeight),
                                                 Int32(g.kernelWidth), Int32(sh), Int32(sw), weights, bias, Int32(m), at,
                                                 Int32(end - first), Int32(g.outWidth), epilogue.code, epilogue.low, epilogue.high)
                if !epilogue.complete { activation.apply(at, count: (end - first) * rowFloats) }
            }
        }
    }
}
