import CPNG

/// PNG decoding through libpng's simplified API (the classic API needs setjmp, which Swift cannot use).
enum PNGDecoder {
    static func decode(_ bytes: UnsafeRawBufferPointer, options: DecodeOptions) throws -> RGBImage {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        defer { png_image_free(&image) }
        guard png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count) != 0 else {
            throw ImagingError.corrupt("PNG header: \(message(of: &image))")
        }
        let width = Int(image.width), height = Int(image.height)
        try options.checkSize(width: width, height: height)

        let hasAlpha = image.format & UInt32(PNG_FORMAT_FLAG_ALPHA) != 0
        if image.format & UInt32(PNG_FORMAT_FLAG_LINEAR) != 0 {
            // 16-bit samples are sRGB-encoded like 8-bit ones; without this flag libpng assumes linear
            // light and gamma-encodes them, which no training pipeline does.
            image.flags |= UInt32(PNG_IMAGE_FLAG_16BIT_sRGB)
        }
        image.format = UInt32(PNG_FORMAT_FLAG_COLOR) | (hasAlpha ? UInt32(PNG_FORMAT_FLAG_ALPHA) : 0)
        let channels = hasAlpha ? 4 : 3
        let pixelCount = width * height

        if !hasAlpha {
            let pixels = try [UInt8](unsafeUninitializedCapacity: pixelCount * 3) { buffer, initialized in
                try finish(&image, into: buffer.baseAddress!)
                initialized = pixelCount * 3
            }
            return RGBImage(width: width, height: height, pixels: pixels)
        }
        let rgba = UnsafeMutablePointer<UInt8>.allocate(capacity: pixelCount * channels)
        defer { rgba.deallocate() }
        try finish(&image, into: rgba)
        let pixels = [UInt8](unsafeUninitializedCapacity: pixelCount * 3) { buffer, initialized in
            ColorConversion.compositeRGBA(rgba, count: pixelCount, background: options.background, into: buffer.baseAddress!)
            initialized = pixelCount * 3
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    private static func finish(_ image: inout png_image, into buffer: UnsafeMutablePointer<UInt8>) throws {
        let ok = png_image_finish_read(&image, nil, buffer, 0, nil)
        if ok == 0 || image.warning_or_error & UInt32(PNG_IMAGE_ERROR) != 0 {
            throw ImagingError.corrupt("PNG data: \(message(of: &image))")
        }
    }

    private static func message(of image: inout png_image) -> String {
        let text = withUnsafeBytes(of: &image.message) { raw -> String in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        return text.isEmpty ? "unknown libpng error" : text
    }
}
