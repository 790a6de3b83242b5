// Fuzz target: PNG/JPEG decoding (`ImageDecoder.decode`) and decode + preprocess with a size hint
// (JPEG IDCT scaling, EXIF orientation, resize, crop, letterbox). Byte 0 picks the preprocessing config.
import Imaging
import Tensor

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImaging(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size >= 1 else { return 0 }
    let selector = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    _ = try? ImageDecoder.decode(bytes, options: DecodeOptions(maxPixels: 4_000_000))
    let modes: [PreprocessConfig.ResizeMode] = [.stretch, .centerCrop, .letterbox]
    let config = PreprocessConfig(width: 1 + Int(selector & 7), height: 1 + Int(selector >> 3 & 7), resizeMode: modes[Int(selector >> 6) % 3],
                                  layout: selector & 0x40 == 0 ? .nchw : .nhwc, dtype: selector & 0x80 == 0 ? .float32 : .uint8)
    _ = try? decodeAndPreprocess(bytes, config: config, maxPixels: 4_000_000)
    return 0
}
