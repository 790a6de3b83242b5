/// Limits and hints for `ImageDecoder.decode`.
public struct DecodeOptions: Sendable {
    /// Largest accepted `width * height` as declared by the header (a decompression-bomb guard).
    public var maxPixels: Int
    /// Largest accepted decoded size in bytes: width x height x channels x bytes per sample as the header declares
    /// them, or the decoder's output buffer when that is larger (a 16-bit RGBA PNG costs 8 bytes per pixel, not 3).
    public var maxBytes: Int = DecodeOptions.defaultMaxBytes
    /// RGB colour that transparent pixels are composited onto.
    public var background: (UInt8, UInt8, UInt8)
    /// When set, JPEGs may be decoded at 1/2, 1/4 or 1/8 scale as long as this preprocessing still
    /// downsamples the result by at least `scalingMargin` (the IDCT does the first, cheap reduction).
    public var sizeHint: PreprocessConfig?
    /// How much larger than the final resampled size a DCT-scaled decode must stay (1 = never upsample).
    /// Default 2 (like Pillow's `reducing_gap=2`): 12 MP to 224 stays within about 0.15 pixel levels (mean) of a
    /// full decode for about 8% more CPU than 1, which drifts about 0.4 levels (Benchmarks/imaging).
    public var scalingMargin: Double

    /// Default limit: 50 megapixels.
    public static let defaultMaxPixels = 50_000_000
    /// Default decoded-bytes limit: 256 MiB.
    public static let defaultMaxBytes = 256 << 20

    /// Options with the given limit, background and optional scaling hint.
    public init(maxPixels: Int = DecodeOptions.defaultMaxPixels, background: (UInt8, UInt8, UInt8) = (255, 255, 255),
                sizeHint: PreprocessConfig? = nil, scalingMargin: Double = 2.0) {
        self.maxPixels = maxPixels
        self.background = background
        self.sizeHint = sizeHint
        self.scalingMargin = scalingMargin
    }

    /// Throws `.tooLarge` when a header's dimensions exceed `maxPixels`.
    func checkSize(width: Int, height: Int) throws {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        if overflow || pixels > maxPixels { throw ImagingError.tooLarge(pixels: overflow ? Int.max : pixels, limit: maxPixels) }
        if width <= 0 || height <= 0 { throw ImagingError.corrupt("image has zero size (\(width)x\(height))") }
    }

    /// Throws `.tooManyBytes` when `width x height x bytesPerPixel` exceeds `maxBytes`; called after `checkSize`.
    func checkBytes(width: Int, height: Int, bytesPerPixel: Int, detail: String) throws {
        let (pixels, o1) = width.multipliedReportingOverflow(by: height)
        let (bytes, o2) = pixels.multipliedReportingOverflow(by: bytesPerPixel)
        if o1 || o2 || bytes > maxBytes {
            throw ImagingError.tooManyBytes(bytes: o1 || o2 ? Int.max : bytes, limit: maxBytes, detail: "\(width)x\(height), \(detail)")
        }
    }
}
