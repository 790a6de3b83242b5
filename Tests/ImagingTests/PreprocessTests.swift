import Foundation
import Testing
import Tensor
@testable import Imaging
import TestSupport

@Suite struct PreprocessTests {
    struct Case: CustomStringConvertible, Sendable {
        let name: String
        let configJSON: Data
        let shape: [Int]
        let reference: String
        var description: String { name }
    }

    static func cases() throws -> [Case] {
        let data = try Data(contentsOf: Fixtures.directory.appendingPathComponent("preprocess.json"))
        let list = try JSONSerialization.jsonObject(with: data) as! [[String: Any]]
        return try list.map { entry in
            Case(name: entry["name"] as! String,
                 configJSON: try JSONSerialization.data(withJSONObject: entry["config"]!),
                 shape: (entry["shape"] as! [Any]).map { ($0 as! NSNumber).intValue },
                 reference: entry["reference"] as! String)
        }
    }

    @Test(arguments: try cases()) func matchesPillowReference(testCase: Case) throws {
        let defaults = PreprocessConfig(width: 1, height: 1)
        let config = try PreprocessConfig(jsonData: testCase.configJSON, defaults: defaults)
        let image = try Fixtures.image("pre_source.png")
        let tensor = try preprocess(image, config: config)
        #expect(tensor.shape == testCase.shape)
        let reference = try Fixtures.bytes(testCase.reference)
        if config.dtype == .uint8 {
            let got = tensor.scalars(as: UInt8.self)
            #expect(Fixtures.maxDifference(got, reference)! <= 2)
            return
        }
        let expected = reference.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let got = tensor.scalars(as: Float.self)
        try #require(got.count == expected.count)
        // Pillow rounds to 8 bits between its two passes and at the end; we keep floats: allow 2/255 of range.
        let channels = config.channels
        var worst: Float = 0
        for i in got.indices {
            let ch = config.layout == .nchw ? (i / (config.width * config.height)) % channels : i % channels
            let std = config.std.count == 1 ? config.std[0] : config.std[ch]
            let levels = abs(got[i] - expected[i]) / abs(config.scale / std)
            worst = max(worst, levels)
        }
        #expect(worst <= 2.0, "worst difference \(worst) pixel levels")
    }

    @Test func writesIntoABatchSlot() throws {
        let config = PreprocessConfig(width: 8, height: 6, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25])
        let image = try Fixtures.image("png_rgb8.png")
        let single = try preprocess(image, config: config)
        var batch = Tensor(dtype: .float32, shape: [3, 3, 6, 8])
        try batch.withUnsafeMutableBytes { raw in
            let slot = UnsafeMutableRawBufferPointer(rebasing: raw[config.outputByteCount..<(2 * config.outputByteCount)])
            try preprocess(image, config: config, into: slot)
        }
        #expect(batch.rows(1..<2).scalars(as: Float.self) == single.scalars(as: Float.self))
        #expect(batch.rows(0..<1).scalars(as: Float.self).allSatisfy { $0 == 0 })
        #expect(throws: ImagingError.self) {
            try batch.withUnsafeMutableBytes { try preprocess(image, config: config, into: $0) }
        }
    }

    @Test func identityResizeKeepsPixels() throws {
        let image = try Fixtures.image("png_rgb8.png")
        for interpolation in [PreprocessConfig.Interpolation.bilinear, .nearest, .area] {
            let config = PreprocessConfig(width: 23, height: 17, interpolation: interpolation, layout: .nhwc, dtype: .uint8)
            let tensor = try preprocess(image, config: config)
            #expect(tensor.scalars(as: UInt8.self) == image.pixels, "\(interpolation)")
        }
    }

    @Test func centerCropGeometryFollowsTorchvision() {
        let config = PreprocessConfig(width: 224, height: 224, resizeMode: .centerCrop, resizeShorterSide: 256)
        let g = ResizeGeometry(sourceWidth: 640, sourceHeight: 480, config: config)
        #expect(g.resizedWidth == 341 && g.resizedHeight == 256)
        #expect(g.cropX == 58 && g.cropY == 16)  // round(58.5) == 58 (half to even), round(16) == 16
        #expect(g.regionWidth == 224 && g.placeX == 0)
        let letter = ResizeGeometry(sourceWidth: 640, sourceHeight: 480, config: PreprocessConfig(width: 320, height: 320, resizeMode: .letterbox))
        #expect(letter.resizedWidth == 320 && letter.resizedHeight == 240 && letter.placeY == 40 && letter.placeX == 0)
    }

    @Test func antialiasFalseSamplesFewerPixels() {
        let wide = ResampleWeights(inSize: 100, outSize: 10, first: 0, count: 10, kernel: .triangle, antialias: true)
        let narrow = ResampleWeights(inSize: 100, outSize: 10, first: 0, count: 10, kernel: .triangle, antialias: false)
        #expect(wide.counts[5] > 10 && narrow.counts[5] <= 3)
        for j in 0..<10 {
            let sum = (0..<wide.counts[j]).reduce(Float(0)) { $0 + wide.weights[j * wide.maxTaps + $1] }
            #expect(abs(sum - 1) < 1e-5)
        }
    }

    @Test func scaledDecodeStaysCloseToFullDecode() throws {
        // A 40x30 JPEG (sharp-edged rectangle) down to 8x6: margin 2 decodes at 1/2, margin 1 at 1/4.
        let bytes = try Fixtures.bytes("jpeg_baseline.jpg")
        let config = PreprocessConfig(width: 8, height: 6, layout: .nhwc, dtype: .uint8)
        let slow = try preprocess(try ImageDecoder.decode(bytes), config: config).scalars(as: UInt8.self)
        for (margin, limit) in [(2.0, 4.0), (1.0, 8.0)] {
            let image = try ImageDecoder.decode(bytes, options: DecodeOptions(sizeHint: config, scalingMargin: margin))
            #expect(image.width == (margin == 2 ? 20 : 10))
            let fast = try preprocess(image, config: config).scalars(as: UInt8.self)
            #expect(Fixtures.meanDifference(fast, slow) < limit, "margin \(margin)")
        }
        #expect(try decodeAndPreprocess(bytes, config: config).shape == [1, 6, 8, 3])
    }

    @Test func digitsExampleImagesGiveDatasetRangeInputs() throws {
        // The default model's examples: dark ink on white -> values in 0...16 with ink high.
        let root = Fixtures.directory.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let configData = try Data(contentsOf: root.appendingPathComponent("models/digits/config.json"))
        let object = try JSONSerialization.jsonObject(with: configData) as! [String: Any]
        let config = try PreprocessConfig(json: object["image"] as! [String: Any], defaults: PreprocessConfig(width: 1, height: 1))
        #expect(config.outputShape == [1, 1, 8, 8])
        for name in ["digit_0.png", "digit_1.jpg"] {
            let bytes = [UInt8](try Data(contentsOf: root.appendingPathComponent("models/digits/examples/\(name)")))
            let values = try decodeAndPreprocess(bytes, config: config).scalars(as: Float.self)
            #expect(values.allSatisfy { $0 > -0.5 && $0 < 16.5 })
            #expect(values.max()! > 10 && values.min()! < 1)
        }
    }
}

@Suite struct ExtremeGeometryTests {
    static let sizes = [(1, 1), (1, 500), (500, 1), (3, 2), (160, 120)]

    @Test(arguments: [PreprocessConfig.ResizeMode.stretch, .centerCrop, .letterbox])
    func anySourceSizeProducesAFullTensor(mode: PreprocessConfig.ResizeMode) throws {
        var rng = SeededGenerator(seed: 3)
        for (w, h) in ExtremeGeometryTests.sizes {
            let pixels = (0..<(w * h * 3)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let image = RGBImage(width: w, height: h, pixels: pixels)
            for interpolation in [PreprocessConfig.Interpolation.bilinear, .nearest, .area] {
                for (tw, th, shorter) in [(7, 5, nil), (16, 16, 20), (3, 9, 2)] as [(Int, Int, Int?)] {
                    let config = PreprocessConfig(width: tw, height: th, resizeMode: mode, resizeShorterSide: shorter,
                                                  interpolation: interpolation, layout: .nhwc, dtype: .uint8, padValue: 9)
                    let t = try preprocess(image, config: config)
                    #expect(t.shape == [1, th, tw, 3])
                    let f = try preprocess(image, config: PreprocessConfig(width: tw, height: th, resizeMode: mode,
                                                                          resizeShorterSide: shorter, interpolation: interpolation))
                    #expect(f.scalars(as: Float.self).allSatisfy { $0 >= -1e-4 && $0 <= 1.0001 })
                }
            }
        }
    }

    @Test func uniformImageStaysUniform() throws {
        let image = RGBImage(width: 37, height: 23, pixels: [UInt8](repeating: 200, count: 37 * 23 * 3))
        for mode in [PreprocessConfig.ResizeMode.stretch, .centerCrop] {
            let t = try preprocess(image, config: PreprocessConfig(width: 13, height: 11, resizeMode: mode, scale: 1))
            #expect(t.scalars(as: Float.self).allSatisfy { abs($0 - 200) < 1e-3 })
        }
    }
}

@Suite struct PipelineTests {
    @Test func backgroundFromConfigReachesTheDecoder() throws {
        let bytes = try Fixtures.bytes("png_rgba8.png")
        var config = PreprocessConfig(width: 23, height: 17, layout: .nhwc, dtype: .uint8, background: [0, 0, 0])
        let black = try decodeAndPreprocess(bytes, config: config).scalars(as: UInt8.self)
        #expect(black.prefix(23 * 3).allSatisfy { $0 == 0 })
        config.background = [10, 20, 30]
        let tinted = try decodeAndPreprocess(bytes, config: config).scalars(as: UInt8.self)
        #expect(Array(tinted.prefix(3)) == [10, 20, 30])
    }

    @Test func decodeErrorsPassThrough() throws {
        let config = PreprocessConfig(width: 8, height: 8)
        #expect(throws: ImagingError.tooLarge(pixels: 10_000_000_000, limit: 50_000_000)) {
            try decodeAndPreprocess(try Fixtures.bytes("bomb.png"), config: config)
        }
        #expect { try decodeAndPreprocess(try Fixtures.bytes("bad_gif.gif"), config: config) } throws: { error in
            if case ImagingError.unsupportedFormat = error { return true }
            return false
        }
    }
}
