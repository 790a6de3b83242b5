/// The sizes a convolution and a transposed convolution call share: the NCHW input, the output channels, the channel
/// groups (weights are OIHW with I = inChannels / groups, as in ONNX) and the window.
public struct ConvShape: Sendable, Hashable {
    /// N.
    public var batch: Int
    /// C of the input.
    public var inChannels: Int
    /// H of the input (1 for 1-D calls).
    public var inHeight: Int
    /// W of the input.
    public var inWidth: Int
    /// C of the output (M in ONNX).
    public var outChannels: Int
    /// Channel groups (inChannels for depthwise).
    public var groups: Int
    /// Kernel, strides, dilations and pads.
    public var window: SlidingWindow
}

extension ComposedGeometry where Parts == ConvShape {
    /// `g.kernelHeight` and the other window fields in one key-path step: a nested step (through a dynamic member of
    /// `ConvShape`) is not optimised away and made every field read in the conv loops a key-path projection (10x slower).
    @inline(__always)
    public subscript<T>(dynamicMember field: WritableKeyPath<SlidingWindow, T>) -> T {
        get { parts.window[keyPath: field] }
        set { parts.window[keyPath: field] = newValue }
    }

    /// Input channels seen by one group.
    public var inChannelsPerGroup: Int { parts.inChannels / parts.groups }
    /// Output channels produced by one group.
    public var outChannelsPerGroup: Int { parts.outChannels / parts.groups }
}

/// The concrete sizes of one 2-D convolution call (1-D convolutions use height 1).
@dynamicMemberLookup
public struct ConvGeometry: ComposedGeometry, Sendable, Hashable {
    /// Input sizes, output channels, groups and window, read as the geometry's own fields (`g.kernelHeight`).
    public var parts: ConvShape

    /// A geometry; groups default to 1.
    public init(batch: Int, inChannels: Int, inHeight: Int, inWidth: Int, outChannels: Int, window: SlidingWindow, groups: Int = 1) {
        parts = ConvShape(batch: batch, inChannels: inChannels, inHeight: inHeight, inWidth: inWidth, outChannels: outChannels,
                          groups: groups, window: window)
    }

    /// Output height: floor((H + pads - dilation*(k-1) - 1) / stride) + 1.
    public var outHeight: Int {
        let w = parts.window
        return (parts.inHeight + w.padTop + w.padBottom - w.dilationHeight * (w.kernelHeight - 1) - 1) / w.strideHeight + 1
    }
    /// Output width.
    public var outWidth: Int {
        let w = parts.window
        return (parts.inWidth + w.padLeft + w.padRight - w.dilationWidth * (w.kernelWidth - 1) - 1) / w.strideWidth + 1
    }
    /// Multiply-adds of the whole call (for GFLOP/s reports: FLOPs = 2 * this).
    public var multiplyAdds: Int {
        parts.batch * parts.outChannels * outHeight * outWidth * inChannelsPerGroup * parts.window.kernelHeight * parts.window.kernelWidth
    }
}

/// The channel and kernel sizes a packed convolution or transposed convolution was prepared for.
struct PackedShape: Sendable {
    let outChannels: Int, inChannels: Int, kernelHeight: Int, kernelWidth: Int, groups: Int

    /// Checks the counts once: channels divide into groups, outChannels * inChannels / groups * kh * kw weights (the
    /// OIHW and the transposed [C, M/groups, kh, kw] layouts alike) and one bias per output channel.
    init(outChannels: Int, inChannels: Int, kernelHeight: Int, kernelWidth: Int, groups: Int, weights: Int, bias: Int?) {
        precondition(groups > 0 && inChannels % groups == 0 && outChannels % groups == 0, "channels must divide into groups")
        precondition(weights == outChannels * (inChannels / groups) * kernelHeight * kernelWidth, "weight count mismatch")
        precondition(bias == nil || bias == outChannels, "bias count mismatch")
        (self.outChannels, self.inChannels, self.kernelHeight, self.kernelWidth, self.groups)
            = (outChannels, inChannels, kernelHeight, kernelWidth, groups)
    }

    /// Whether a call has the channels, groups and kernel the weights were packed for.
    func matches(_ s: ConvShape) -> Bool {
        s.inChannels == inChannels && s.outChannels == outChannels && s.groups == groups
            && s.window.kernelHeight == kernelHeight && s.window.kernelWidth == kernelWidth
    }
}
