import Tensor

/// How a decoded image becomes a model input tensor; the `image` section of a model's `config.json`.
public struct PreprocessConfig: Sendable, Equatable {
    /// How the image is fitted to the target size.
    public enum ResizeMode: String, Sendable {
        /// Scale each axis independently to the target size.
        case stretch
        /// Resize the shorter side (to `resizeShorterSide`, default the target's), then crop the centre.
        case centerCrop = "center_crop"
        /// Scale to fit inside the target keeping aspect ratio, pad the rest with `padValue`.
        case letterbox
    }
    /// Resampling filter.
    public enum Interpolation: String, Sendable {
        /// Bilinear; switches to area averaging when downscaling if `antialias` is true.
        case bilinear
        /// Nearest neighbour.
        case nearest
        /// Area averaging (box filter) when downscaling.
        case area
    }
    /// Channel order of the model input.
    public enum ChannelOrder: String, Sendable {
        /// Red, green, blue.
        case rgb
        /// Blue, green, red (Caffe / OpenCV-trained models).
        case bgr
        /// One luminance channel.
        case gray
    }
    /// Memory layout of the model input.
    public enum Layout: String, Sendable {
        /// Batch, channels, height, width (PyTorch).
        case nchw
        /// Batch, height, width, channels (TensorFlow).
        case nhwc
    }

    /// Target width in pixels.
    public var width: Int
    /// Target height in pixels.
    public var height: Int
    /// Fit mode.
    public var resizeMode: ResizeMode
    /// Shorter-side length before a centre crop; nil means the target size (no margin).
    public var resizeShorterSide: Int?
    /// Resampling filter.
    public var interpolation: Interpolation
    /// Average over the source area when downscaling (like Pillow's and torchvision's antialias).
    public var antialias: Bool
    /// Channel order.
    public var channelOrder: ChannelOrder
    /// Tensor layout.
    public var layout: Layout
    /// Multiplier applied to 0...255 pixel values before mean/std (1/255 maps to 0...1).
    public var scale: Float
    /// Per-channel mean subtracted after scaling (in the model's channel order).
    public var mean: [Float]
    /// Per-channel standard deviation divided by after the mean.
    public var std: [Float]
    /// Element type of the produced tensor (float32 or uint8 in practice).
    public var dtype: DType
    /// RGB colour that transparent pixels are composited onto.
    public var background: [UInt8]
    /// Pixel value (0...255, before scaling) used for letterbox padding.
    public var padValue: UInt8

    /// A config with explicit target size and the common ImageNet-style defaults for the rest.
    public init(width: Int, height: Int, resizeMode: ResizeMode = .stretch, resizeShorterSide: Int? = nil,
                interpolation: Interpolation = .bilinear, antialias: Bool = true, channelOrder: ChannelOrder = .rgb,
                layout: Layout = .nchw, scale: Float = 1.0 / 255.0, mean: [Float] = [0, 0, 0], std: [Float] = [1, 1, 1],
                dtype: DType = .float32, background: [UInt8] = [255, 255, 255], padValue: UInt8 = 0) {
        self.width = width
        self.height = height
        self.resizeMode = resizeMode
        self.resizeShorterSide = resizeShorterSide
        self.interpolation = interpolation
        self.antialias = antialias
        self.channelOrder = channelOrder
        self.layout = layout
        self.scale = scale
        self.mean = mean
        self.std = std
        self.dtype = dtype
        self.background = background
        self.padValue = padValue
    }
}
