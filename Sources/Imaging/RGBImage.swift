/// A decoded image: 8-bit RGB, interleaved, rows top to bottom, no padding.
public struct RGBImage: Sendable, Equatable {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// `width * height * 3` bytes: R, G, B per pixel.
    public var pixels: [UInt8]

    /// Wraps `pixels`, which must hold exactly `width * height * 3` bytes.
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width >= 0 && height >= 0 && pixels.count == width * height * 3,
                     "RGBImage \(width)x\(height) needs \(width * height * 3) bytes, got \(pixels.count)")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// The RGB triple at column `x`, row `y`.
    public subscript(x: Int, y: Int) -> (UInt8, UInt8, UInt8) {
        let i = (y * width + x) * 3
        return (pixels[i], pixels[i + 1], pixels[i + 2])
    }
}

/// The container formats Osprey decodes.
public enum ImageFormat: String, Sendable, CaseIterable {
    /// Portable Network Graphics.
    case png
    /// JPEG / JFIF / EXIF.
    case jpeg

    /// The format announced by the leading magic bytes, or nil when neither PNG nor JPEG.
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        if bytes.count >= png.count && zip(bytes.prefix(png.count), png).allSatisfy({ $0 == $1 }) { return .png }
        if bytes.count >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF { return .jpeg }
        return nil
    }

    /// The format announced by the leading magic bytes, or nil when neither PNG nor JPEG.
    public static func sniff(_ bytes: [UInt8]) -> ImageFormat? {
        bytes.withUnsafeBytes { sniff($0) }
    }

    /// A short name for what the magic bytes look like, for error messages.
    static func describe(_ bytes: UnsafeRawBufferPointer) -> String {
        if bytes.isEmpty { return "empty body" }
        func starts(_ prefix: String) -> Bool {
            let p = Array(prefix.utf8)
            return bytes.count >= p.count && zip(bytes.prefix(p.count), p).allSatisfy { $0 == $1 }
        }
        if starts("GIF8") { return "GIF" }
        if starts("RIFF") && bytes.count >= 12 && String(decoding: bytes[8..<12], as: UTF8.self) == "WEBP" { return "WebP" }
        if starts("BM") { return "BMP" }
        if starts("II*\u{0}") || starts("MM\u{0}*") { return "TIFF" }
        if bytes.count >= 12 && String(decoding: bytes[4..<8], as: UTF8.self) == "ftyp" { return "HEIF/AVIF/MP4" }
        let head = bytes.prefix(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined(separator: " ")
        return "unknown magic bytes \(head)"
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
