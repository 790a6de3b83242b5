/// Decodes PNG and JPEG bytes to 8-bit RGB (EXIF orientation applied, alpha composited).
public enum ImageDecoder {
    /// Decodes `bytes`, sniffing the format from its magic bytes.
    public static func decode(_ bytes: UnsafeRawBufferPointer, options: DecodeOptions = DecodeOptions()) throws -> RGBImage {
        switch ImageFormat.sniff(bytes) {
        case .png: return try PNGDecoder.decode(bytes, options: options)
        case .jpeg: return try JPEGDecoder.decode(bytes, options: options)
        case nil: throw ImagingError.unsupportedFormat(ImageFormat.describe(bytes))
        }
    }

    /// Decodes `bytes`, sniffing the format from its magic bytes.
    public static func decode(_ bytes: [UInt8], options: DecodeOptions = DecodeOptions()) throws -> RGBImage {
        try bytes.withUnsafeBytes { try decode($0, options: options) }
    }
}
