/// The concrete sizes of one 2-D convolution call (1-D convolutions use height 1).
///
/// Tensors are NCHW; weights are OIHW with I = inChannels / groups, as in ONNX.
@dynamicMemberLookup
public struct ConvGeometry: WindowedGeometry, Sendable, Hashable {
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
    /// Kernel, strides, dilations and zero padding.
    public var window: SlidingWindow
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
        window = SlidingWindow(kernelHeight: kernelHeight, kernelWidth: kernelWidth, strideHeight: strideHeight,
                               strideWidth: strideWidth, dilationHeight: dilationHeight, dilationWidth: dilationWidth,
                               padTop: padTop, padLeft: padLeft, padBottom: padBottom, padRight: padRight)
        self.groups = groups
    }

    /// Output height: floor((H + pads - dilation*(k-1) - 1) / stride) + 1.
    public var outHeight: Int {
        let w = window
        return (inHeight + w.padTop + w.padBottom - w.dilationHeight * (w.kernelHeight - 1) - 1) / w.strideHeight + 1
    }
    /// Output width.
    public var outWidth: Int {
        let w = window
        return (inWidth + w.padLeft + w.padRight - w.dilationWidth * (w.kernelWidth - 1) - 1) / w.strideWidth + 1
    }
    /// Input channels seen by one group.
    public var inChannelsPerGroup: Int { inChannels / groups }
    /// Output channels produced by one group.
    public var outChannelsPerGroup: Int { outChannels / groups }
    /// Multiply-adds of the whole call (for GFLOP/s reports: FLOPs = 2 * this).
    public var multiplyAdds: Int { batch * outChannels * outHeight * outWidth * inChannelsPerGroup * window.kernelHeight * window.kernelWidth }
}
