/// The concrete sizes of one 2-D convolution call (1-D convolutions use height 1).
///
/// Tensors are NCHW; weights are OIHW with I = inChannels / groups, as in ONNX.
public struct ConvGeometry: Sendable, Hashable {
    /// N.
    public var batch: Int
    /// C of the input.
    public var inChannels: Int
    /// H of the input.
    public var inHeight: Int
    /// W of the input.
    public var inWidth: Int
    /// C of the output (M in ONNX).
    public var outChannels: Int
    /// Kernel height.
    public var kernelHeight: Int
    /// Kernel width.
    public var kernelWidth: Int
    /// Vertical stride.
    public var strideHeight: Int
    /// Horizontal stride.
    public var strideWidth: Int
    /// Vertical dilation.
    public var dilationHeight: Int
    /// Horizontal dilation.
    public var dilationWidth: Int
    /// Zero padding above.
    public var padTop: Int
    /// Zero padding left.
    public var padLeft: Int
    /// Zero padding below.
    public var padBottom: Int
    /// Zero padding right.
    public var padRight: Int
    /// Channel groups (inChannels for depthwise).
    public var groups: Int

    /// A geometry; strides and dilations default to 1, pads to 0, groups to 1.
    public init(batch: Int, inChannels: Int, inHeight: Int, inWidth: Int, outChannels: Int, kernelHeight: Int, kernelWidth: Int,
                strideHeight: Int = 1, strideWidth: Int = 1, dilationHeight: Int = 1, dilationWidth: Int = 1,
                padTop: Int = 0, padLeft: Int = 0, padBottom: Int = 0, padRight: Int = 0, groups: Int = 1) {
        self.batch = batch
        self.inChannels = inChannels
        self.inHeight = inHeight
        self.inWidth = inWidth
        self.outChannels = outChannels
        self.kernelHeight = kernelHeight
        self.kernelWidth = kernelWidth
        self.strideHeight = strideHeight
        self.strideWidth = strideWidth
        self.dilationHeight = dilationHeight
        self.dilationWidth = dilationWidth
        self.padTop = padTop
        self.padLeft = padLeft
        self.padBottom = padBottom
        self.padRight = padRight
        self.groups = groups
    }

    /// Output height: floor((H + pads - dilation*(k-1) - 1) / stride) + 1.
    public var outHeight: Int { (inHeight + padTop + padBottom - dilationHeight * (kernelHeight - 1) - 1) / strideHeight + 1 }
    /// Output width.
    public var outWidth: Int { (inWidth + padLeft + padRight - dilationWidth * (kernelWidth - 1) - 1) / strideWidth + 1 }
    /// Input channels seen by one group.
    public var inChannelsPerGroup: Int { inChannels / groups }
    /// Output channels produced by one group.
    public var outChannelsPerGroup: Int { outChannels / groups }
    /// Multiply-adds of the whole call (for GFLOP/s reports: FLOPs = 2 * this).
    public var multiplyAdds: Int { batch * outChannels * outHeight * outWidth * inChannelsPerGroup * kernelHeight * kernelWidth }
}
