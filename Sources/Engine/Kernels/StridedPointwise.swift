/// 1x1 convolutions with a stride and no padding (the downsampling shortcuts of ResNet, RegNet and ResNeXt stages)
/// as the plain pointwise product over a compact copy of the pixels they read.
///
/// The generic dense path copies the whole input with its (empty) border and gathers every strip with strided loads:
/// at stride 2 that copies four times the pixels the conv reads and gathers them again per strip (RegNetY-400MF
/// batch 8, the 32 -> 48 shortcut over 112x112: 4.8 ms against onnxruntime's 4.0). Here every read pixel is copied once
/// into [N, C, outH, outW], and `denseConvolution` runs on that as a stride-1 pointwise conv (contiguous strips).
extension ConvGeometry {
    /// A 1x1 kernel, no padding and some stride above 1.
    var isStridedPointwise: Bool {
        let w = parts.window
        return w.kernelHeight == 1 && w.kernelWidth == 1 && w.padTop == 0 && w.padLeft == 0 && w.padBottom == 0 && w.padRight == 0
            && (w.strideHeight > 1 || w.strideWidth > 1)
    }

    /// The stride-1 pointwise conv over the subsampled input (outHeight x outWidth planes).
    var subsampledPointwise: ConvGeometry {
        ConvGeometry(batch: parts.batch, inChannels: parts.inChannels, inHeight: outHeight, inWidth: outWidth, outChannels: parts.outChannels,
                     window: SlidingWindow(kernelHeight: 1, kernelWidth: 1), groups: parts.groups)
    }
}

/// Copies the pixels a strided 1x1 conv `g` reads: plane p, row y, column x of `output` ([N * C][outH][outW]) is
/// input plane p at (y * strideHeight, x * strideWidth). Planes are shared out across the compute pool.
func subsamplePlanes(_ g: ConvGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    let oh = g.outHeight, ow = g.outWidth, ih = g.inHeight, iw = g.inWidth, sh = g.strideHeight, sw = g.strideWidth
    let inPlane = ih * iw, outPlane = oh * ow
    parallelRanges(g.batch * g.inChannels, minimumChunk: max(1, 16_384 / max(1, outPlane))) { planes in
        for p in planes {
            let src = input + p * inPlane, dst = output + p * outPlane
            for y in 0..<oh {
                let row = src + y * sh * iw, out = dst + y * ow
                var x = 0
                // 16 outputs per vector while their 16 * stride source floats stay inside the row.
                if sw == 1 {
                    out.update(from: row, count: ow)
                    continue
                }
                if sw == 2 {
                    while (x + 16) * 2 <= iw {
                        (out + x).store(loadEvenLanes16(row + 2 * x))
                        x += 16
                    }
                }
                while x < ow {
                    out[x] = row[x * sw]
                    x += 1
                }
            }
        }
    }
}

/// Runs the strided 1x1 conv `g` (`isStridedPointwise`) through the pointwise dense kernel; arguments as
/// `denseConvolution`'s.
func stridedPointwiseConvolution(_ g: ConvGeometry, weights: ConvWeightPanels, bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                                 activation: Activation, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                                 outputImageStride: Int? = nil) {
    let compact = g.subsampledPointwise
    // The layer slot: the dense kernel's tiles use the other one (and the pointwise path takes no layer scratch).
    withThreadScratch(g.batch * g.inChannels * g.outHeight * g.outWidth, slot: .layer) { buffer in
        subsamplePlanes(g, input: input, output: buffer)
        denseConvolution(compact, weights: weights, bias: bias, residual: residual, activation: activation, input: UnsafePointer(buffer),
                         output: output, outputImageStride: outputImageStride)
    }
}
