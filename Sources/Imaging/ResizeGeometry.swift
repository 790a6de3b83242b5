/// Where the resampled source lands in the target: the virtual resized size, the kept window of it, and
/// the window's position in the output (the rest is padding).
struct ResizeGeometry: Equatable {
    /// Size the whole source is resampled to (before cropping).
    var resizedWidth: Int, resizedHeight: Int
    /// Top-left of the kept window inside the resized image.
    var cropX: Int, cropY: Int
    /// Size of the kept window.
    var regionWidth: Int, regionHeight: Int
    /// Top-left of the window inside the output.
    var placeX: Int, placeY: Int

    init(sourceWidth w: Int, sourceHeight h: Int, config: PreprocessConfig) {
        let tw = config.width, th = config.height
        switch config.resizeMode {
        case .stretch:
            (resizedWidth, resizedHeight) = (tw, th)
        case .centerCrop:
            if let s = config.resizeShorterSide {
                // torchvision Resize(int): the shorter side becomes s, the longer is truncated.
                if w <= h { (resizedWidth, resizedHeight) = (s, max(1, Int(Double(s) * Double(h) / Double(w)))) }
                else { (resizedWidth, resizedHeight) = (max(1, Int(Double(s) * Double(w) / Double(h))), s) }
            } else {
                let k = max(Double(tw) / Double(w), Double(th) / Double(h))
                resizedWidth = max(tw, Int((Double(w) * k).rounded()))
                resizedHeight = max(th, Int((Double(h) * k).rounded()))
            }
        case .letterbox:
            let k = min(Double(tw) / Double(w), Double(th) / Double(h))
            resizedWidth = min(tw, max(1, Int((Double(w) * k).rounded())))
            resizedHeight = min(th, max(1, Int((Double(h) * k).rounded())))
        }
        regionWidth = min(tw, resizedWidth)
        regionHeight = min(th, resizedHeight)
        // torchvision center_crop: offsets int(round((size - crop) / 2)), Python rounding half to even.
        cropX = resizedWidth > tw ? Int((Double(resizedWidth - tw) / 2).rounded(.toNearestOrEven)) : 0
        cropY = resizedHeight > th ? Int((Double(resizedHeight - th) / 2).rounded(.toNearestOrEven)) : 0
        placeX = (tw - regionWidth) / 2
        placeY = (th - regionHeight) / 2
    }

    /// True when the window does not cover the whole output.
    var needsPadding: Bool { placeX > 0 || placeY > 0 }
}

extension PreprocessConfig {
    /// Number of channels in the produced tensor (1 for gray, else 3).
    public var channels: Int { channelOrder == .gray ? 1 : 3 }

    /// Shape of one preprocessed image: [1, C, H, W] or [1, H, W, C].
    public var outputShape: [Int] {
        layout == .nchw ? [1, channels, height, width] : [1, height, width, channels]
    }

    /// Bytes of one preprocessed image.
    public var outputByteCount: Int { channels * height * width * dtype.byteSize }

    /// Smallest source size (for a source of `width` x `height`) that this config still downsamples by at
    /// least `margin`; never more than the source. Decoders use it to pick a cheaper scaled decode.
    public func minimumSourceSize(width: Int, height: Int, margin: Double) -> (width: Int, height: Int) {
        guard width > 0, height > 0 else { return (width, height) }
        let g = ResizeGeometry(sourceWidth: width, sourceHeight: height, config: self)
        let needW = Int((Double(g.resizedWidth) * margin).rounded(.up))
        let needH = Int((Double(g.resizedHeight) * margin).rounded(.up))
        return (min(width, needW), min(height, needH))
    }

    /// Throws `.invalidConfig` when the config cannot produce a tensor (bad sizes, counts or dtype).
    public func validate() throws {
        func fail(_ s: String) -> ImagingError { .invalidConfig(s) }
        guard (1...16384).contains(width) else { throw fail("width: expected 1...16384, got \(width)") }
        guard (1...16384).contains(height) else { throw fail("height: expected 1...16384, got \(height)") }
        if let s = resizeShorterSide, !(1...16384).contains(s) { throw fail("resize_size: expected 1...16384, got \(s)") }
        guard mean.count == channels || mean.count == 1 else {
            throw fail("mean: expected \(channels) value(s) for \(channelOrder.rawValue), got \(mean.count)")
        }
        guard std.count == channels || std.count == 1 else {
            throw fail("std: expected \(channels) value(s) for \(channelOrder.rawValue), got \(std.count)")
        }
        guard std.allSatisfy({ $0 != 0 && $0.isFinite }) else { throw fail("std: expected non-zero finite values, got \(std)") }
        guard mean.allSatisfy(\.isFinite), scale.isFinite else { throw fail("scale/mean: expected finite values") }
        guard dtype == .float32 || dtype == .uint8 else { throw fail("dtype: expected float32 or uint8, got \(dtype)") }
        guard background.count == 3 else { throw fail("background: expected 3 values (RGB), got \(background.count)") }
    }
}
