// Times (thread CPU time) decode + preprocess of one JPEG to a 224x224 float tensor with the Imaging module.
// Usage: imaging-bench FILE [iterations]
import Foundation
import Imaging

let args = CommandLine.arguments
guard args.count >= 2, let data = FileManager.default.contents(atPath: args[1]) else {
    FileHandle.standardError.write(Data("usage: imaging-bench FILE [iterations]\n".utf8))
    exit(2)
}
let bytes = [UInt8](data)
let iterations = args.count >= 3 ? Int(args[2]) ?? 20 : 20
let configs: [(String, PreprocessConfig)] = [
    ("stretch 224 bilinear", PreprocessConfig(width: 224, height: 224, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225])),
    ("resize 256 + center_crop 224", PreprocessConfig(width: 224, height: 224, resizeMode: .centerCrop, resizeShorterSide: 256,
                                                      mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225])),
]

func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
/// Thread CPU time in ms: stable on a box shared with other jobs, where wall time is not.
func cpuMilliseconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) * 1e3 + Double(ts.tv_nsec) / 1e6
}
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = cpuMilliseconds()
    try body()
    return cpuMilliseconds() - start
}

for (name, config) in configs {
    for margin in [1.0, 2.0] {
        var total = [Double](), decode = [Double](), prep = [Double]()
        for _ in 0..<iterations {
            var image: RGBImage!
            let options = DecodeOptions(sizeHint: config, scalingMargin: margin)
            let d = try time { image = try ImageDecoder.decode(bytes, options: options) }
            let p = try time { _ = try preprocess(image, config: config) }
            decode.append(d); prep.append(p); total.append(d + p)
        }
        let image = try ImageDecoder.decode(bytes, options: DecodeOptions(sizeHint: config, scalingMargin: margin))
        print(String(format: "osprey  %-30@ margin %.0f: decoded %dx%d  decode %.2f ms  preprocess %.2f ms  total %.2f ms (median of %d)",
                     name as NSString, margin, image.width, image.height, median(decode), median(prep), median(total), iterations))
    }
    var full = [Double]()
    for _ in 0..<max(3, iterations / 4) {
        full.append(try time { _ = try preprocess(try ImageDecoder.decode(bytes), config: config) })
    }
    print(String(format: "osprey  %-30@ full-size decode + preprocess: %.2f ms", name as NSString, median(full)))
    // Fidelity of DCT-scaled decoding: mean / max difference vs full-size decode, in 0...255 pixel levels.
    let reference = try preprocess(try ImageDecoder.decode(bytes), config: config).scalars(as: Float.self)
    for margin in [1.0, 2.0] {
        let image = try ImageDecoder.decode(bytes, options: DecodeOptions(sizeHint: config, scalingMargin: margin))
        let got = try preprocess(image, config: config).scalars(as: Float.self)
        var sum: Float = 0, worst: Float = 0
        for i in got.indices {
            let levels = abs(got[i] - reference[i]) * 255 * [0.229, 0.224, 0.225][i / (224 * 224)]
            sum += levels; worst = max(worst, levels)
        }
        print(String(format: "osprey  %-30@ margin %.0f vs full decode: mean %.2f, max %.1f levels", name as NSString, margin,
                     sum / Float(got.count), worst))
    }
}
