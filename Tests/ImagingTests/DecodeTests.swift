import Foundation
import Testing
@testable import Imaging
import TestSupport

@Suite struct DecodeTests {
    static let pngExact = ["png_rgb8", "png_gray8", "png_rgba8", "png_gray_alpha8", "png_palette", "png_palette_trns",
                           "png_interlaced", "png_interlaced_rgba", "png_rgb16", "png_gray16", "png_gamma1"]

    @Test(arguments: pngExact) func pngMatchesReferenceExactly(name: String) throws {
        let image = try Fixtures.image(name + ".png")
        let expected = try Fixtures.bytes(name + ".rgb")
        #expect(image.width == 23 && image.height == 17)
        #expect(image.pixels == expected, "max diff \(Fixtures.maxDifference(image.pixels, expected) ?? -1)")
    }

    @Test func sixteenBitAlphaWithinOneLevel() throws {
        let image = try Fixtures.image("png_rgba16.png")
        let expected = try Fixtures.bytes("png_rgba16.rgb")
        #expect(Fixtures.maxDifference(image.pixels, expected)! <= 1)
    }

    static let jpegs = ["jpeg_baseline", "jpeg_progressive", "jpeg_gray", "jpeg_cmyk", "jpeg_ycck", "jpeg_444", "jpeg_orientation6_be"]
        + (1...8).map { "jpeg_orientation\($0)" }

    @Test(arguments: jpegs) func jpegMatchesPillowWithinIDCTTolerance(name: String) throws {
        let image = try Fixtures.image(name + ".jpg")
        let expected = try Fixtures.bytes(name + ".rgb")
        let upright = name.contains("orientation") && ["5", "6", "7", "8", "6_be"].contains { name.hasSuffix($0) }
        #expect(image.width == (upright ? 30 : 40) && image.height == (upright ? 40 : 30))
        let worst = try #require(Fixtures.maxDifference(image.pixels, expected))
        #expect(worst <= 3, "max per-pixel difference \(worst)")
        #expect(Fixtures.meanDifference(image.pixels, expected) < 0.5)
    }

    @Test func backgroundColourIsConfigurable() throws {
        let bytes = try Fixtures.bytes("png_rgba8.png")
        let black = try ImageDecoder.decode(bytes, options: DecodeOptions(background: (0, 0, 0)))
        // Row 0 is fully transparent in the fixture; row 1 is opaque.
        #expect(black.pixels.prefix(23 * 3).allSatisfy { $0 == 0 })
        let white = try ImageDecoder.decode(bytes)
        #expect(white.pixels.prefix(23 * 3).allSatisfy { $0 == 255 })
        #expect(black.pixels[(23 * 3)..<(46 * 3)] == white.pixels[(23 * 3)..<(46 * 3)])
    }

    @Test func compositingMatchesPillowFormula() {
        // Spot values from Pillow's alpha_composite: 100 at alpha 128 over 255 -> 177; over 0 -> 50.
        var out = [UInt8](repeating: 0, count: 6)
        let rgba: [UInt8] = [100, 100, 100, 128, 0, 255, 10, 1]
        ColorConversion.compositeRGBA(rgba, count: 2, background: (255, 255, 255), into: &out)
        #expect(out[0] == 177)
        ColorConversion.compositeRGBA(rgba, count: 2, background: (0, 0, 0), into: &out)
        #expect(out[0] == 50)
    }

    @Test func sniffsFormats() throws {
        #expect(ImageFormat.sniff(try Fixtures.bytes("png_rgb8.png")) == .png)
        #expect(ImageFormat.sniff(try Fixtures.bytes("jpeg_baseline.jpg")) == .jpeg)
        #expect(ImageFormat.sniff(try Fixtures.bytes("bad_gif.gif")) == nil)
        #expect(ImageFormat.sniff([]) == nil)
        #expect(ImageFormat.sniff([0xFF, 0xD8]) == nil)
    }

    @Test(arguments: ["bad_gif.gif", "bad_text.txt", "bad_empty.png"])
    func refusesUnknownFormats(name: String) throws {
        let bytes = try Fixtures.bytes(name)
        #expect { try ImageDecoder.decode(bytes) } throws: { error in
            guard case ImagingError.unsupportedFormat(let what) = error else { return false }
            return name.hasSuffix("gif") ? what == "GIF" : !what.isEmpty
        }
    }

    @Test(arguments: ["bad_truncated.png", "bad_corrupt.png", "bad_truncated.jpg", "bad_header_only.jpg"])
    func refusesCorruptFiles(name: String) throws {
        let bytes = try Fixtures.bytes(name)
        #expect { try ImageDecoder.decode(bytes) } throws: { error in
            if case ImagingError.corrupt(let why) = error { return !why.isEmpty }
            return false
        }
    }

    @Test(arguments: ["bomb.png", "bomb.jpg"])
    func refusesDecompressionBombsFromTheHeader(name: String) throws {
        let bytes = try Fixtures.bytes(name)
        let start = Date()
        #expect { try ImageDecoder.decode(bytes) } throws: { error in
            if case ImagingError.tooLarge(let pixels, let limit) = error {
                return pixels >= 3_600_000_000 && limit == DecodeOptions.defaultMaxPixels
            }
            return false
        }
        // Header-only rejection: no 30 GB allocation, so well under a second even in a debug build.
        #expect(Date().timeIntervalSince(start) < 1)
    }

    @Test func limitIsConfigurable() throws {
        let bytes = try Fixtures.bytes("jpeg_baseline.jpg")
        #expect(throws: ImagingError.tooLarge(pixels: 1200, limit: 1000)) {
            try ImageDecoder.decode(bytes, options: DecodeOptions(maxPixels: 1000))
        }
        #expect(throws: ImagingError.tooLarge(pixels: 391, limit: 390)) {
            try ImageDecoder.decode(try Fixtures.bytes("png_rgb8.png"), options: DecodeOptions(maxPixels: 390))
        }
    }

    @Test func everyPrefixOfAValidFileFailsCleanly() throws {
        for name in ["png_rgba8.png", "jpeg_progressive.jpg", "jpeg_orientation6.jpg"] {
            let bytes = try Fixtures.bytes(name)
            // PNG without IEND still holds the whole image (accepted, like Pillow); JPEG needs its EOI.
            let last = name.hasSuffix("png") ? bytes.count - 12 : bytes.count - 1
            for cut in Array(stride(from: 0, to: last, by: 7)) + [last - 1] {
                do {
                    let image = try ImageDecoder.decode(Array(bytes[..<cut]))
                    Issue.record("\(name) cut at \(cut) of \(bytes.count) decoded to \(image.width)x\(image.height)")
                } catch {
                    #expect(error is ImagingError)
                }
            }
        }
    }

    @Test func flippedBytesNeverCrash() throws {
        var generator = SeededGenerator(seed: 7)
        for name in ["png_palette_trns.png", "png_interlaced.png", "jpeg_baseline.jpg", "jpeg_cmyk.jpg", "jpeg_orientation8.jpg"] {
            let original = try Fixtures.bytes(name)
            for _ in 0..<60 {
                var bytes = original
                for _ in 0..<3 { bytes[Int(generator.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: generator.next() | 1) }
                if let image = try? ImageDecoder.decode(bytes) {
                    #expect(image.pixels.count == image.width * image.height * 3)
                }
            }
        }
    }

    @Test func exifParsingHandlesBothByteOrdersAndGarbage() throws {
        try Fixtures.bytes("jpeg_orientation6_be.jpg").withUnsafeBytes { #expect(JPEGMarkers.scan($0).orientation == 6) }
        try Fixtures.bytes("jpeg_orientation3.jpg").withUnsafeBytes { #expect(JPEGMarkers.scan($0).orientation == 3) }
        try Fixtures.bytes("jpeg_cmyk.jpg").withUnsafeBytes { #expect(JPEGMarkers.scan($0).adobe) }
        let junk: [UInt8] = Array("Exif\0\0MM\0*\0\0\0\u{8}\0\u{1}\u{1}\u{12}\0\u{3}\0\0\0\u{1}\0\u{9}\0\0".utf8)
        junk.withUnsafeBytes { #expect(JPEGMarkers.exifOrientation($0) == nil) }  // 9 is out of range
        let short: [UInt8] = Array("Exif\0\0II*\0\u{ff}\u{ff}".utf8)
        short.withUnsafeBytes { #expect(JPEGMarkers.exifOrientation($0) == nil) }
    }

    @Test func scaledJPEGDecodeKeepsOrientationAndMargin() throws {
        let bytes = try Fixtures.bytes("jpeg_orientation6.jpg")
        let hint = PreprocessConfig(width: 4, height: 4)
        let image = try ImageDecoder.decode(bytes, options: DecodeOptions(sizeHint: hint, scalingMargin: 2))
        // 40x30 stored, upright 30x40; 1/2 scale gives 15x20 >= 8x8, 1/4 gives 8x10 (also >= 8x8): smallest wins.
        #expect(image.width == 8 && image.height == 10)
        let full = try ImageDecoder.decode(bytes)
        #expect(full.width == 30 && full.height == 40)
    }
}


@Suite struct JPEGVariantTests {
    @Test func twelveBitJPEGIsUnsupportedNotCorrupt() throws {
        // Patch the baseline SOF0 into SOF1 (extended) with 12-bit precision: valid JPEG, not decodable here.
        var bytes = try Fixtures.bytes("jpeg_baseline.jpg")
        let sof = try #require((0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
        bytes[sof + 1] = 0xC1
        bytes[sof + 4] = 12
        #expect { try ImageDecoder.decode(bytes) } throws: { error in
            if case ImagingError.unsupportedFormat(let what) = error { return what.contains("12") }
            return false
        }
    }
}
