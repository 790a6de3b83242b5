/// Convolution weights prepared once at compile time, run many times with any batch and spatial size.
///
/// The fast path (im2col/1x1 + sgemm, vectorised depthwise) and its reference twin `convolutionReference`
/// must agree; the packed layout is private so it can change without touching callers.
public final class PackedConvolution: @unchecked Sendable {
    /// Output channels (M).
    public let outChannels: Int
    /// Input channels (C, all groups).
    public let inChannels: Int
    /// Kernel height.
    public let kernelHeight: Int
    /// Kernel width.
    public let kernelWidth: Int
    /// Channel groups.
    public let groups: Int
    /// Epilogue applied after the bias.
    public let activation: Activation
    private let weights: [Float]
    private let bias: [Float]

    /// Packs OIHW `weights` (count outChannels * inChannels/groups * kh * kw) and an optional per-output-channel bias.
    public init(weights: UnsafeBufferPointer<Float>, bias: UnsafeBufferPointer<Float>?, outChannels: Int, inChannels: Int,
                kernelHeight: Int, kernelWidth: Int, groups: Int, activation: Activation) {
        precondition(weights.count == outChannels * (inChannels / groups) * kernelHeight * kernelWidth, "weight count mismatch")
        self.outChannels = outChannels
        self.inChannels = inChannels
        self.kernelHeight = kernelHeight
        self.kernelWidth = kernelWidth
        self.groups = groups
        self.activation = activation
        self.weights = Array(weights)
        self.bias = bias.map(Array.init) ?? Array(repeating: 0, count: outChannels)
    }

    /// Floats of scratch memory `run` needs for this geometry (the caller's memory plan provides it).
    public func workspaceCount(for geometry: ConvGeometry) -> Int { 0 }

    /// Computes the convolution of NCHW `input` into NCHW `output` (batch * outChannels * outHeight * outWidth floats).
    public func run(_ geometry: ConvGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                    workspace: UnsafeMutablePointer<Float>?) {
        weights.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                convolutionReference(geometry, input: input, weights: w.baseAddress!, bias: b.baseAddress, activation: activation, output: output)
            }
        }
    }
}

/// Direct convolution, one output at a time: the twin the fast kernels are tested against.
/// input NCHW, weights OIHW (I = C/groups), bias [M] or nil, output N x M x outH x outW.
public func convolutionReference(_ g: ConvGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                                 bias: UnsafePointer<Float>?, activation: Activation, output: UnsafeMutablePointer<Float>) {
    let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
    let oh = g.outHeight, ow = g.outWidth
    for n in 0..<g.batch {
        for m in 0..<g.outChannels {
            let group = m / mg
            for y in 0..<oh {
                for x in 0..<ow {
                    var sum = bias?[m] ?? 0
                    for c in 0..<cg {
                        let channel = group * cg + c
                        for ky in 0..<g.kernelHeight {
                            let iy = y * g.strideHeight - g.padTop + ky * g.dilationHeight
                            if iy < 0 || iy >= g.inHeight { continue }
                            for kx in 0..<g.kernelWidth {
                                let ix = x * g.strideWidth - g.padLeft + kx * g.dilationWidth
                                if ix < 0 || ix >= g.inWidth { continue }
                                let iv = input[((n * g.inChannels + channel) * g.inHeight + iy) * g.inWidth + ix]
                                let wv = weights[((m * cg + c) * g.kernelHeight + ky) * g.kernelWidth + kx]
                                sum += iv * wv
                            }
                        }
                    }
                    output[((n * g.outChannels + m) * oh + y) * ow + x] = activation(sum)
                }
            }
        }
    }
}
