import Foundation
import Testing
import Tensor
@testable import Imaging

@Suite struct ConfigTests {
    let base = PreprocessConfig(width: 224, height: 224)

    func parse(_ json: String) throws -> PreprocessConfig {
        try PreprocessConfig(jsonData: Data(json.utf8), defaults: base)
    }

    func message(_ json: String) -> String {
        do { _ = try parse(json); return "" } catch let ImagingError.invalidConfig(text) { return text } catch { return "\(error)" }
    }

    @Test func parsesEveryKey() throws {
        let c = try parse("""
        {"width": 32, "height": 16, "resize_mode": "center_crop", "resize_size": 40, "interpolation": "area",
         "antialias": false, "channel_order": "bgr", "layout": "nhwc", "scale": 0.5, "mean": [1, 2, 3],
         "std": [4, 5, 6], "dtype": "uint8", "background": "#102030", "pad_value": 7}
        """)
        #expect(c.width == 32 && c.height == 16 && c.resizeMode == .centerCrop && c.resizeShorterSide == 40)
        #expect(c.interpolation == .area && !c.antialias && c.channelOrder == .bgr && c.layout == .nhwc)
        #expect(c.scale == 0.5 && c.mean == [1, 2, 3] && c.std == [4, 5, 6] && c.dtype == .uint8)
        #expect(c.background == [0x10, 0x20, 0x30] && c.padValue == 7)
        #expect(try parse(#"{"background": [1, 2, 3]}"#).background == [1, 2, 3])
        #expect(try parse("{}") == base)
    }

    @Test func errorsNameKeyAndTypes() {
        #expect(message(#"{"widht": 3}"#).contains("unknown key \"widht\""))
        #expect(message(#"{"width": "3"}"#).contains("width: expected an integer, got string"))
        #expect(message(#"{"width": 2.5}"#).contains("width: expected an integer"))
        #expect(message(#"{"antialias": 1}"#).contains("antialias: expected true or false, got number"))
        #expect(message(#"{"scale": true}"#).contains("scale: expected a number, got boolean"))
        #expect(message(#"{"resize_mode": "fill"}"#).contains(#"resize_mode: expected one of "stretch", "center_crop", "letterbox", got "fill""#))
        #expect(message(#"{"mean": [1, 2]}"#).contains("mean: expected 3 value(s) for rgb, got 2"))
        #expect(message(#"{"std": [1, 0, 1]}"#).contains("std: expected non-zero"))
        #expect(message(#"{"dtype": "float16"}"#).contains(#"dtype: expected "float32" or "uint8", got "float16""#))
        #expect(message(##"{"background": "#12345"}"##).contains("background"))
        #expect(message(#"{"pad_value": 300}"#).contains("pad_value: expected 0...255, got 300"))
        #expect(message(#"{"width": 0}"#).contains("width: expected 1...16384, got 0"))
        #expect(message("[1]").contains("expected a JSON object, got array"))
        #expect(message("{").contains("not valid JSON"))
    }

    @Test func grayCollapsesUniformDefaults() throws {
        let c = try parse(#"{"channel_order": "gray"}"#)
        #expect(c.mean == [0] && c.std == [1] && c.channels == 1 && c.outputShape == [1, 1, 224, 224])
    }

    @Test func defaultsFromInputShape() {
        let nchw = PreprocessConfig.defaults(inputShape: [.symbolic("N"), .fixed(3), .fixed(224), .fixed(224)], dtype: .float32)
        #expect(nchw?.layout == .nchw && nchw?.width == 224 && nchw?.channelOrder == .rgb && nchw?.dtype == .float32)
        let nhwc = PreprocessConfig.defaults(inputShape: [.fixed(1), .fixed(299), .fixed(320), .fixed(3)], dtype: .uint8)
        #expect(nhwc?.layout == .nhwc && nhwc?.height == 299 && nhwc?.width == 320 && nhwc?.dtype == .uint8)
        let gray = PreprocessConfig.defaults(inputShape: [.symbolic("N"), .fixed(1), .fixed(28), .fixed(28)], dtype: .float32)
        #expect(gray?.channelOrder == .gray && gray?.mean == [0] && gray?.outputShape == [1, 1, 28, 28])
        let dynamic = PreprocessConfig.defaults(inputShape: [.symbolic("N"), .fixed(3), .symbolic("H"), .symbolic("W")], dtype: .float32)
        #expect(dynamic?.width == 224 && dynamic?.height == 224)
        #expect(PreprocessConfig.defaults(inputShape: [.symbolic("N"), .fixed(10)], dtype: .float32) == nil)
        #expect(PreprocessConfig.defaults(inputShape: [.fixed(1), .fixed(5), .fixed(5), .fixed(5)], dtype: .float32) == nil)
        #expect(PreprocessConfig.defaults(inputShape: [.fixed(1), .fixed(3), .fixed(8), .fixed(8)], dtype: .int64) == nil)
    }

    @Test func minimumSourceSizeKeepsMargin() {
        let c = PreprocessConfig(width: 224, height: 224, resizeMode: .centerCrop, resizeShorterSide: 256)
        let need = c.minimumSourceSize(width: 4000, height: 3000, margin: 2)
        #expect(need.height == 512 && need.width == 682)
        #expect(c.minimumSourceSize(width: 100, height: 80, margin: 2) == (100, 80))
    }
}
