/// The concrete sizes of one 2-D transposed convolution (ONNX ConvTranspose; 1-D uses height 1).
///
/// Pads are the ones ONNX applies to the full output (the caller resolves `output_shape` and auto_pad into them).
@dynamicMemberLookup
public struct ConvTransposeGeometry: ComposedGeometry, Sendable, Hashable {
    /// Input sizes, output channels (M = groups * weight dim 1), groups, and the window whose pads are cropped from
    /// the full output; read as the geometry's own fields.
    public var parts: ConvShape
    /// Extra rows added at the bottom (output_padding[0]).
    public var outputPaddingHeight: Int
    /// Extra columns added at the right (output_padding[1]).
    public var outputPaddingWidth: Int

    /// A geometry; output padding defaults to 0, groups to 1.
    public init(batch: Int, inChannels: Int, inHeight: Int, inWidth: Int, outChannels: Int, window: SlidingWindow,
                outputPaddingHeight: Int = 0, outputPaddingWidth: Int = 0, groups: Int = 1) {
        parts = ConvShape(batch: batch, inChannels: inChannels, inHeight: inHeight, inWidth: inWidth, outChannels: outChannels,
                          groups: groups, window: window)
        (self.outputPaddingHeight, self.outputPaddingWidth) = (outputPaddingHeight, outputPaddingWidth)
    }

    /// Output height: stride*(H-1) + output_padding + dilation*(k-1) + 1 - pads.
    public var outHeight: Int {
        let w = parts.window
        return w.strideHeight * (parts.inHeight - 1) + outputPaddingHeight + w.dilationHeight * (w.kernelHeight - 1) + 1 - w.padTop - w.padBottom
    }
    /// Output width.
    public var outWidth: Int {
        let w = parts.window
        return w.strideWidth * (parts.inWidth - 1) + outputPaddingWidth + w.dilationWidth * (w.kernelWidth - 1) + 1 - w.padLeft - w.padRight
    }
    /// Multiply-adds of the whole call (FLOPs = 2 * this).
    public var multiplyAdds: Int {
        parts.batch * parts.inChannels * parts.inHeight * parts.inWidth * outChannelsPerGroup * parts.window.kernelHeight * parts.window.kernelWidth
    }
}

/// ConvTranspose weights prepared once: one sgemm per image and group into the workspace, then col2im into the output.
public final class PackedConvolutionTranspose: @unchecked Sendable {
    /// Channels, groups and kernel the weights were packed for.
    let shape: PackedShape
    /// Epilogue applied after the bias.
    public let activation: Activation
    /// Per group, the transposed ONNX weights: [mg*kh*kw, cg] row-major, so the gemm reads A untransposed.
    private let weights: UnsafeMutablePointer<Float>
    private let bias: UnsafeMutablePointer<Float>?

    /// Packs ONNX ConvTranspose `weights` [C, M/groups, kh, kw] and an optional bias [M].
    public init(weights: UnsafeBufferPointer<Float>, bias: UnsafeBufferPointer<Float>?, inChannels: Int, outChannels: Int,
                kernelHeight: Int, kernelWidth: Int, groups: Int, activation: Activation = .none) {
        shape = PackedShape(outChannels: outChannels, inChannels: inChannels, kernelHeight: kernelHeight, kernelWidth: kernelWidth,
                            groups: groups, weights: weights.count, bias: bias?.count)
        self.activation = activation
        let cg = inChannels / groups, rows = (outChannels / groups) * kernelHeight * kernelWidth
        let packed = allocateFloats(weights.count)
        for group in 0..<groups {
            for c in 0..<cg {
                for r in 0..<rows { packed[(group * rows + r) * cg + c] = weights[(group * cg + c) * rows + r] }
            }
        }
        self.weights = packed
        self.bias = bias.map(copiedFloats)
    }

    deinit {
        weights.deallocate()
        bias?.deallocate()
    }

    /// Floats of scratch memory `run` needs: one group's columns [mg*kh*kw, H*W].
    public func workspaceCount(for g: ConvTransposeGeometry) -> Int {
        g.outChannelsPerGroup * g.kernelHeight * g.kernelWidth * g.inHeight * g.inWidth
    }

    /// Computes the transposed convolution of NCHW `input` into NCHW `output` (batch * outChannels * outHeight * outWidth floats).
    public func run(_ g: ConvTransposeGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                    workspace: UnsafeMutablePointer<Float>, residual: UnsafePointer<Float>? = nil) {
        precondition(shape.matches(g.parts), "geometry does not match the packed transposed convolution")
        let oh = g.outHeight, ow = g.outWidth
        guard g.batch > 0, oh > 0, ow > 0 else { return }
        let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
        let rows = mg * g.kernelHeight * g.kernelWidth
        let inPlane = g.inHeight * g.inWidth, outPlane = oh * ow
        for n in 0..<g.batch {
            let image = input + n * g.inChannels * inPlane
            let result = output + n * g.outChannels * outPlane
            for group in 0..<g.groups {
                sgemm(transposeA: false, transposeB: false, m: rows, n: inPlane, k: cg, alpha: 1,
                      a: weights + group * rows * cg, lda: cg, b: image + group * cg * inPlane, ldb: inPlane,
                      beta: 0, c: workspace, ldc: inPlane)
                col2im(g, columns: UnsafePointer(workspace), firstChannel: group * mg, bias: bias, image: result)
            }
            if residual != nil || activation != .none {
                applyChannelEpilogue(result, channels: g.outChannels, planeSize: outPlane, bias: nil,
                                     residual: residual.map { $0 + n * g.outChannels * outPlane }, activation: activation)
            }
        }
    }
}

/// Scatter-adds one group's columns [mg*kh*kw, H*W] into its output planes, which start at the bias (or zero).
private func col2im(_ g: ConvTransposeGeometry, columns: UnsafePointer<Float>, firstChannel: Int, bias: UnsafePointer<Float>?,
                    image: UnsafeMutablePointer<Float>) {
    let oh = g.outHeight, ow = g.outWidth, kh = g.kernelHeight, kw = g.kernelWidth
    let inPlane = g.inHeight * g.inWidth
    // Each output channel owns its plane, so channels run in parallel without sharing writes.
    parallelRanges(g.outChannelsPerGroup, minimumChunk: max(1, 16_384 / max(1, oh * ow))) { range in
        for m in range {
            let plane = image + (firstChannel + m) * oh * ow
            plane.update(repeating: bias?[firstChannel + m] ?? 0, count: oh * ow)
            for ky in 0..<kh {
                for kx in 0..<kw {
                    let src = columns + ((m * kh + ky) * kw + kx) * inPlane
                    let offsetX = kx * g.dilationWidth - g.padLeft
                    // Input columns whose output column lands inside the cropped output.
                    let xLo = min(g.inWidth, offsetX >= 0 ? 0 : (-offsetX + g.strideWidth - 1) / g.strideWidth)
                    let xHi = max(xLo, min(g.inWidth, offsetX > ow - 1 ? 0 : (ow - 1 - offsetX) / g.strideWidth + 1))
                    for iy in 0..<g.inHeight {
                        let oy = iy * g.strideHeight - g.padTop + ky * g.dilationHeight
                        if oy < 0 || oy >= oh { continue }
                        let from = src + iy * g.inWidth
                        let to = plane + oy * ow + offsetX
                        if g.strideWidth == 1 {
                            var x = xLo
                            while x + 16 <= xHi {
                                (to + x).store((to + x).vector(SIMD16<Float>.self) + (from + x).vector(SIMD16<Float>.self))
                                x += 16
                            }
                            while x < xHi { to[x] += from[x]; x += 1 }
                        } else {
                            for x in xLo..<xHi { to[x * g.strideWidth] += from[x] }
                        }
                    }
                }
            }
        }
    }
}

/// Direct transposed convolution, scattering one input value at a time: the twin `PackedConvolutionTranspose` is tested against.
/// input NCHW, weights [C, M/groups, kh, kw], bias [M] or nil, residual (optional, added before the activation) and output N x M x outH x outW.
public func convolutionTransposeReference(_ g: ConvTransposeGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                                          bias: UnsafePointer<Float>?, activation: Activation, output: UnsafeMutablePointer<Float>,
                                          residual: UnsafePointer<Float>? = nil) {
    let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
    let oh = g.outHeight, ow = g.outWidth
    for n in 0..<g.batch {
        for m in 0..<g.outChannels {
            for i in 0..<(oh * ow) { output[(n * g.outChannels + m) * oh * ow + i] = bias?[m] ?? 0 }
        }
        for c in 0..<g.inChannels {
            let group = c / cg
            for iy in 0..<g.inHeight {
                for ix in 0..<g.inWidth {
                    let value = input[((n * g.inChannels + c) * g.inHeight + iy) * g.inWidth + ix]
                    for j in 0..<mg {
                        let m = group * mg + j
                        for ky in 0..<g.kernelHeight {
                            let oy = iy * g.strideHeight - g.padTop + ky * g.dilationHeight
                            if oy < 0 || oy >= oh { continue }
                            for kx in 0..<g.kernelWidth {
                                let ox = ix * g.strideWidth - g.padLeft + kx * g.dilationWidth
                                if ox < 0 || ox >= ow { continue }
                                let w = weights[((c * mg + j) * g.kernelHeight + ky) * g.kernelWidth + kx]
                                output[((n * g.outChannels + m) * oh + oy) * ow + ox] += value * w
                            }
                        }
                    }
                }
            }
        }
        for i in 0..<(g.outChannels * oh * ow) {
            let index = n * g.outChannels * oh * ow + i
            output[index] = activation(output[index] + (residual?[index] ?? 0))
        }
    }
}
