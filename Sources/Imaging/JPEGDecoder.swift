import CTurboJPEG

/// JPEG decoding through TurboJPEG: header first (size limit), optional DCT scaling, CMYK conversion, EXIF orientation.
enum JPEGDecoder {
    static func decode(_ bytes: UnsafeRawBufferPointer, options: DecodeOptions) throws -> RGBImage {
        guard let handle = tjInitDecompress() else { throw ImagingError.corrupt("TurboJPEG could not start a decoder") }
        defer { tjDestroy(handle) }
        let source = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var w: Int32 = 0, h: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        guard tjDecompressHeader3(handle, source, UInt(bytes.count), &w, &h, &subsampling, &colorspace) == 0 else {
            throw classify("JPEG header", errorText(handle))
        }
        let width = Int(w), height = Int(h)
        try options.checkSize(width: width, height: height)
        let components = colorspace == Int32(TJCS_GRAY.rawValue) ? 1 : (colorspace == Int32(TJCS_CMYK.rawValue) || colorspace == Int32(TJCS_YCCK.rawValue) ? 4 : 3)
        try options.checkBytes(width: width, height: height, bytesPerPixel: max(components, 3), detail: "\(components) channels x 1 byte per sample")

        let markers = JPEGMarkers.scan(bytes)
        // libjpeg pads a truncated stream with a fake end marker and only warns: refuse it like Pillow does.
        guard markers.hasEndOfImage else {
            throw ImagingError.corrupt("truncated JPEG: no end-of-image marker after the image data (\(bytes.count) bytes)")
        }
        let (outW, outH) = scaledSize(width: width, height: height, orientation: markers.orientation, options: options)
        let isCMYK = colorspace == Int32(TJCS_CMYK.rawValue) || colorspace == Int32(TJCS_YCCK.rawValue)
        let channels = isCMYK ? 4 : 3
        let format = isCMYK ? Int32(TJPF_CMYK.rawValue) : Int32(TJPF_RGB.rawValue)
        let pixelCount = outW * outH

        // RGB decodes straight into the result; CMYK goes through a scratch buffer and the conversion.
        let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: isCMYK ? pixelCount * channels : 0)
        defer { scratch.deallocate() }
        let pixels = try [UInt8](unsafeUninitializedCapacity: pixelCount * 3) { out, initialized in
            let target = isCMYK ? scratch : out.baseAddress!
            let rc = tjDecompress2(handle, source, UInt(bytes.count), target, Int32(outW), 0, Int32(outH), format, 0)
            if rc != 0 {
                let text = errorText(handle)
                // TurboJPEG reports "warning" whenever any warning preceded a fatal error, so classify by the
                // final message: libjpeg's recoverable warnings (stray bytes, a damaged segment) keep the image,
                // as Pillow does; anything else stopped the decoder part-way.
                if tjGetErrorCode(handle) == Int32(TJERR_FATAL.rawValue) || !isRecoverableWarning(text) {
                    throw classify("JPEG data", text)
                }
            }
            if isCMYK {
                ColorConversion.cmykToRGB(scratch, count: pixelCount, inverted: markers.adobe, into: out.baseAddress!)
            }
            initialized = pixelCount * 3
        }
        return Orientation.apply(markers.orientation, to: RGBImage(width: outW, height: outH, pixels: pixels))
    }

    /// The smallest TurboJPEG scaling (1/8 ... 1) that still leaves `sizeHint`'s resampling a margin of downscaling.
    static func scaledSize(width: Int, height: Int, orientation: Int, options: DecodeOptions) -> (Int, Int) {
        guard let hint = options.sizeHint else { return (width, height) }
        // Requirements are stated for the upright image; map them back to the stored axes.
        let upright = Orientation.swapsAxes(orientation) ? (height, width) : (width, height)
        let need = hint.minimumSourceSize(width: upright.0, height: upright.1, margin: options.scalingMargin)
        let needStored = Orientation.swapsAxes(orientation) ? (need.height, need.width) : (need.width, need.height)
        var count: Int32 = 0
        guard let factors = tjGetScalingFactors(&count) else { return (width, height) }
        var best = (width, height)
        for i in 0..<Int(count) {
            let f = factors[i]
            guard f.num > 0, f.denom > 0, f.num <= f.denom else { continue }
            let sw = (width * Int(f.num) + Int(f.denom) - 1) / Int(f.denom)
            let sh = (height * Int(f.num) + Int(f.denom) - 1) / Int(f.denom)
            if sw >= needStored.0 && sh >= needStored.1 && sw * sh < best.0 * best.1 { best = (sw, sh) }
        }
        return best
    }

    /// Valid JPEG variants this libjpeg cannot decode (12-bit, lossless, hierarchical) are unsupported, not corrupt.
    static func classify(_ stage: String, _ text: String) -> ImagingError {
        if text.hasPrefix("Unsupported JPEG") { return .unsupportedFormat("JPEG variant: \(text)") }
        return .corrupt("\(stage): \(text)")
    }

    /// libjpeg's warning messages (JWRN_*) after which the decoded image is complete.
    static func isRecoverableWarning(_ text: String) -> Bool {
        if text.contains("Premature end of JPEG file") { return false }
        let prefixes = ["Corrupt JPEG data", "Inconsistent progression sequence", "Warning:",
                        "Invalid SOS parameters for sequential JPEG", "Application transferred"]
        return prefixes.contains { text.hasPrefix($0) }
    }

    private static func errorText(_ handle: tjhandle) -> String {
        guard let text = tjGetErrorStr2(handle) else { return "unknown TurboJPEG error" }
        return String(cString: text)
    }
}
