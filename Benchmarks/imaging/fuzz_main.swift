// Mutation fuzzer for the decoders: flips, overwrites, deletes and inserts bytes in the test fixtures and runs
// decode + preprocess; any crash or AddressSanitizer report is a bug. Usage: imaging-fuzz SEED [ITERATIONS]
import Foundation
import Imaging

var state = UInt64(CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1 : 1)
func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}
let iterations = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 100_000 : 100_000
let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Tests/Fixtures/images").path + "/"
let files = try FileManager.default.contentsOfDirectory(atPath: dir)
    .filter { $0.hasSuffix(".png") || $0.hasSuffix(".jpg") }.sorted()
    .map { [UInt8](FileManager.default.contents(atPath: dir + $0)!) }
    .filter { !$0.isEmpty }
let config = PreprocessConfig(width: 7, height: 5, resizeMode: .letterbox)
var decoded = 0, refused = 0
for _ in 0..<iterations {
    var bytes = files[Int(next() % UInt64(files.count))]
    let mode = next() % 4
    for _ in 0..<(Int(next() % 8) + 1) {
        let i = Int(next() % UInt64(bytes.count))
        switch mode {
        case 0: bytes[i] ^= UInt8(truncatingIfNeeded: next() | 1)
        case 1: bytes[i] = [0x00, 0xFF, 0x7F, 0x80, 0xD9, 0xDA][Int(next() % 6)]
        case 2: if bytes.count > 20 { bytes.removeSubrange(i..<min(bytes.count, i + Int(next() % 16))) }
        default: bytes.insert(UInt8(truncatingIfNeeded: next()), at: i)
        }
    }
    do { _ = try decodeAndPreprocess(bytes, config: config, maxPixels: 4_000_000); decoded += 1 } catch { refused += 1 }
}
print("\(iterations) mutated inputs: \(decoded) decoded, \(refused) refused with ImagingError, no crash")
