import Tensor

extension PreprocessConfig {
    /// A config inferred from a model's image input: NCHW when dim 1 is 1 or 3, else NHWC when the last dim
    /// is 1 or 3; fixed H/W give the size (a missing one copies the other, else 224); 1 channel means gray.
    /// Float inputs get 0...1 scaling, uint8 inputs raw pixels. Nil when the input does not look like an image.
    public static func defaults(inputShape: [Dimension], dtype: DType) -> PreprocessConfig? {
        guard inputShape.count == 4, dtype == .float32 || dtype == .uint8 else { return nil }
        func isChannels(_ d: Dimension) -> Bool { d.value == 1 || d.value == 3 }
        let layout: Layout, channels: Int, hDim: Dimension, wDim: Dimension
        if isChannels(inputShape[1]) {
            (layout, channels, hDim, wDim) = (.nchw, inputShape[1].value!, inputShape[2], inputShape[3])
        } else if isChannels(inputShape[3]) {
            (layout, channels, hDim, wDim) = (.nhwc, inputShape[3].value!, inputShape[1], inputShape[2])
        } else {
            return nil
        }
        let h = hDim.value ?? wDim.value ?? 224
        let w = wDim.value ?? hDim.value ?? 224
        guard h > 0, w > 0 else { return nil }
        return PreprocessConfig(width: w, height: h, channelOrder: channels == 1 ? .gray : .rgb, layout: layout,
                                scale: 1.0 / 255.0, mean: Array(repeating: 0, count: channels),
                                std: Array(repeating: 1, count: channels), dtype: dtype)
    }
}
