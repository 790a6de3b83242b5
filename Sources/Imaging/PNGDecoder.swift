import CPNG

/// PNG decoding through libpng's simplified API (the classic API needs setjmp, which Swift cannot use).
enum PNGDecoder {
    static func decode(_ bytes: UnsafeRawBufferPointer, options: DecodeOptions) throws -> RGBImage {
        // libpng would gamma-correct files carrying a gAMA chunk to sRGB; Pillow, OpenCV and torchvision ignore
        // it, so models were trained on the stored values: drop the chunk and decode those.
        let gammaChunks = chunkRanges(named: "gAMA", in: bytes)
        if !gammaChunks.isEmpty {
            var copy = [UInt8]()
            copy.reserveCapacity(bytes.count)
            var cursor = 0
            for range in gammaChunks {
                copy.append(contentsOf: bytes[cursor..<range.lowerBound])
                cursor = range.upperBound
            }
            copy.append(contentsOf: bytes[cursor...])
            return try copy.withUnsafeBytes { try decodeStoredValues($0, options: options) }
        }
        return try decodeStoredValues(bytes, options: options)
    }

    /// Byte ranges (header to CRC) of the chunks named `name` before the first IDAT.
    static func chunkRanges(named name: String, in bytes: UnsafeRawBufferPointer) -> [Range<Int>] {
        let wanted = Array(name.utf8)
        var ranges = [Range<Int>]()
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let type = bytes[(offset + 4)..<(offset + 8)]
            if type.elementsEqual("IDAT".utf8) || type.elementsEqual("IEND".utf8) { break }
            let end = offset + 12 + length
            guard length >= 0, length < Int(Int32.max), end <= bytes.count else { break }
            if type.elementsEqual(wanted) { ranges.append(offset..<end) }
            offset = end
        }
        return ranges
    }

    private static func decodeStoredValues(_ bytes: UnsafeRawBufferPointer, options: DecodeOptions) throws -> RGBImage {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        defer { png_image_free(&image) }
        guard png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count) != 0 else {
            throw ImagingError.corrupt("PNG header: \(message(of: &image))")
        }
        let width = Int(image.width), height = Int(image.height)
        try options.checkSize(width: width, height: height)

        let hasAlpha = image.format & UInt32(PNG_FORMAT_FLAG_ALPHA) != 0
        // Source samples: gray or colour, optional alpha, 8 or 16 bits (PNG_IMAGE_SAMPLE_* macros do not import).
        let sourceChannels = (image.format & UInt32(PNG_FORMAT_FLAG_COLOR) != 0 ? 3 : 1) + (hasAlpha ? 1 : 0)
        let sampleBytes = image.format & UInt32(PNG_FORMAT_FLAG_LINEAR) != 0 ? 2 : 1
        try options.checkBytes(width: width, height: height, bytesPerPixel: max(sourceChannels * sampleBytes, hasAlpha ? 4 : 3),
                               detail: "\(sourceChannels) channels x \(sampleBytes) bytes per sample")
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
