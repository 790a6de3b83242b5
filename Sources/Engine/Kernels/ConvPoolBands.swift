import CKernelShim

/// A stem convolution (few input taps) and the MaxPool after it, computed band by band of pooled rows: each band's
/// conv rows (all channels, about 512 KB) are made in a per-thread scratch by the direct kernel
/// (`osprey_direct_conv_rows_f32`) and pooled from there, so the full-size conv output (SqueezeNet 1.1 at batch 8:
/// 25 MB) is never written to memory and read back. The unfused pair (`PackedConvolution.run`, then `maxPool2D`)
/// is the twin.
final class DirectConvWeights: @unchecked Sendable {
    /// Output channels, input channels and kernel size the weights were packed for.
    let outChannels: Int, inChannels: Int, kernelHeight: Int, kernelWidth: Int
    /// Output channels per block: 8 for the NCHW kernel, 32 for the NHWC one.
    let block: Int
    /// [ceil(M / block)][C * kH * kW][block], channels past M zero.
    let pointer: UnsafeMutablePointer<Float>
    /// [M] or nil.
    let bias: UnsafeMutablePointer<Float>?

    /// Most taps (C * kH * kW) the direct kernel takes.
    static let maximumTaps = 256

    /// Packs OIHW `weights` of one group and an optional bias in blocks of `block` output channels.
    init(weights: UnsafePointer<Float>, bias: UnsafePointer<Float>?, outChannels: Int, inChannels: Int, kernelHeight: Int, kernelWidth: Int,
         block: Int = 8) {
        (self.outChannels, self.inChannels, self.kernelHeight, self.kernelWidth) = (outChannels, inChannels, kernelHeight, kernelWidth)
        self.block = block
        let taps = inChannels * kernelHeight * kernelWidth, blocks = (outChannels + block - 1) / block
        pointer = allocateFloats(blocks * taps * block)
        pointer.initialize(repeating: 0, count: blocks * taps * block)
        for m in 0..<outChannels {
            for k in 0..<taps { pointer[((m / block) * taps + k) * block + m % block] = weights[m * taps + k] }
        }
        self.bias = bias.map { b in
            let copy = allocateFloats(outChannels)
            copy.initialize(from: b, count: outChannels)
            return copy
        }
    }

    deinit {
        pointer.deallocate()
        bias?.deallocate()
    }
}

/// Whether `convMaxPoolBands` runs conv `c` followed by pool `p` (p's planes = c's batch * outChannels, its input c's
/// output): AVX-512F, one group, unit dilations, at most `DirectConvWeights.maximumTaps` taps, and a pool the row
/// kernel takes whose pads are smaller than its kernel (every pooled row then reads at least one conv row).
func convMaxPoolBandsFit(_ c: ConvGeometry, _ p: PoolGeometry) -> Bool {
    c.groups == 1 && c.dilationHeight == 1 && c.dilationWidth == 1 && c.inChannels * c.kernelHeight * c.kernelWidth <= DirectConvWeights.maximumTaps
        && c.outHeight > 0 && c.outWidth > 0 && c.batch > 0
        && p.planes == c.batch * c.outChannels && p.inHeight == c.outHeight && p.inWidth == c.outWidth
        && p.padTop < p.kernelHeight && p.padBottom < p.kernelHeight && rowMaxPoolFits(p)
}

/// Conv `c` (weights `w`, epilogue clamp `low`...`high`) then MaxPool `p`, NCHW input to NCHW pooled output
/// (`convMaxPoolBandsFit` must hold).
func convMaxPoolBands(_ c: ConvGeometry, _ p: PoolGeometry, weights w: DirectConvWeights, low: Float, high: Float,
                      input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    let m = c.outChannels, convWidth = c.outWidth, ps = p.strideHeight, pkh = p.kernelHeight, ppt = p.padTop
    // Pooled rows per band: the band's conv rows of all channels in about 512 KB (half the L2), and bands enough
    // for four per thread.
    let rowFloats = m * convWidth
    let cacheRows = max(pkh, 131_072 / max(1, rowFloats))
    var band = max(1, (cacheRows - pkh) / ps + 1)
    let wantedBands = (4 * EngineThreads.threads + c.batch - 1) / c.batch
    band = min(band, max(1, (p.outHeight + wantedBands - 1) / wantedBands))
    let bands = (p.outHeight + band - 1) / band
    let maxConvRows = min(c.outHeight, (band - 1) * ps + pkh)
    let sw = c.strideWidth, sh = c.strideHeight
    let phaseLength = (convWidth + (c.kernelWidth - 1) / sw + 15) / 16 * 16
    let phaseFloats = c.inChannels * ((maxConvRows - 1) * sh + c.kernelHeight) * sw * phaseLength + 32
    let scratchFloats = m * maxConvRows * convWidth
    let inImage = c.inChannels * c.inHeight * c.inWidth, outPlane = p.outHeight * p.outWidth
    let weightsPointer = UnsafePointer(w.pointer), biasPointer = w.bias.map { UnsafePointer($0) }
    parallelRanges(c.batch * bands) { range in
        withThreadScratch(scratchFloats + phaseFloats) { buffer in
            let scratch = buffer, phases = buffer + scratchFloats
            // Slack the kernel's whole-vector loads may read past the last phase row: zeros, not stale floats.
            (phases + phaseFloats - 32).initialize(repeating: 0, count: 32)
            // Conv rows [heldFirst, heldEnd) of image heldImage in the scratch: the next band of the same image
            // keeps its overlap (a 3x3 stride-2 pool shares one row between bands) instead of computing it again.
            var heldImage = -1, heldFirst = 0, heldEnd = 0
            for task in range {
                let n = task / bands, p0 = (task % bands) * band, p1 = min(p.outHeight, p0 + band)
                let first = max(0, p0 * ps - ppt), end = min(c.outHeight, (p1 - 1) * ps - ppt + pkh)
                var from = first
                if heldImage == n && heldFirst <= first && first < heldEnd && heldEnd <= end {
                    for channel in 0..<m {
                        let plane = UnsafeMutableRawPointer(scratch + channel * maxConvRows * convWidth)
                        plane.copyMemory(from: plane + (first - heldFirst) * convWidth * 4, byteCount: (heldEnd - first) * convWidth * 4)
                    }
                    from = heldEnd
                }
                if from < end {
                    let rowsIn = (end - from - 1) * sh + c.kernelHeight
                    osprey_conv_phase_rows_f32(input + n * inImage, Int32(c.inChannels), Int32(c.inHeight), Int32(c.inWidth),
                                               Int32(from * sh - c.padTop), Int32(rowsIn), Int32(sw), Int32(c.padLeft), phaseLength, phases)
                    osprey_direct_conv_rows_f32(phases, phaseLength, Int32(rowsIn), Int32(c.inChannels), Int32(c.kernelHeight),
                                                Int32(c.kernelWidth), Int32(sh), Int32(sw), weightsPointer, biasPointer, Int32(m),
                                                scratch + (from - first) * convWidth, maxConvRows * convWidth, Int32(end - from),
                                                Int32(convWidth), Int32(OSPREY_DW_CLAMP), low, high)
                }
                (heldImage, heldFirst, heldEnd) = (n, first, end)
                for channel in 0..<m {
                    osprey_maxpool_rows_f32(scratch + channel * maxConvRows * convWidth,
                                            output + (n * m + channel) * outPlane + p0 * p.outWidth, 0, p1 - p0,
                                            Int32(end - first), Int32(convWidth), Int32(p1 - p0), Int32(p.outWidth),
                                            Int32(pkh), Int32(p.kernelWidth), Int32(ps), Int32(p.strideWidth),
                                            Int32(first + ppt - p0 * ps), Int32(p.padLeft))
                }
            }
        }
    }
}
