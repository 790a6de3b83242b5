// Kernel micro-harness: times every conv layer of the benchmark models through PackedConvolution, plus an sgemm
// peak for reference. Built by run.sh with swiftc straight from Sources/Engine/Kernels (no package, no tests).
//
// usage: harness LAYERS_JSON THREADS BATCH REPEAT [--layers]
import Foundation

/// One conv layer as written by make_models.py.
struct Layer: Decodable {
    let name: String
    let C: Int, H: Int, W: Int, M: Int, k: Int, stride: Int, pad: Int, groups: Int
    let activation: String
    let residual: Bool
}

/// With one thread, the thread's CPU time (immune to other processes' load on a shared box); else wall time.
nonisolated(unsafe) var clock = CLOCK_MONOTONIC
func now() -> Double {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Fastest of `repeats` calls after one warm-up call: on a shared 2-core box the minimum is the stable statistic
/// (bench_ort.py reports the same for onnxruntime).
func time(_ repeats: Int, _ body: () -> Void) -> Double {
    body()
    var samples: [Double] = []
    for _ in 0..<repeats {
        let start = now()
        body()
        samples.append(now() - start)
    }
    return samples.min()!
}

/// Cheap deterministic data (the system generator's syscalls would dominate the harness's setup).
nonisolated(unsafe) var seed: UInt32 = 12345
func randomFloats(_ count: Int) -> [Float] {
    (0..<count).map { _ in
        seed = seed &* 1_664_525 &+ 1_013_904_223
        return Float(seed >> 8) / Float(1 << 23) - 1
    }
}

let args = CommandLine.arguments
guard args.count >= 5, let threads = Int(args[2]), let batch = Int(args[3]), let repeats = Int(args[4]) else {
    FileHandle.standardError.write("usage: harness LAYERS_JSON THREADS BATCH REPEAT [--layers]\n".data(using: .utf8)!)
    exit(2)
}
let perLayer = args.contains("--layers")
EngineThreads.configure(threads: threads)
if threads == 1 { clock = CLOCK_THREAD_CPUTIME_ID }
let models = try JSONDecoder().decode([String: [Layer]].self, from: Data(contentsOf: URL(fileURLWithPath: args[1])))

// sgemm peak on a large square problem, the ceiling every conv row is compared with.
do {
    let n = 1024
    let a = randomFloats(n * n), b = randomFloats(n * n)
    var c = [Float](repeating: 0, count: n * n)
    let seconds = time(max(3, repeats)) {
        sgemm(transposeA: false, transposeB: false, m: n, n: n, k: n, alpha: 1, a: a, lda: n, b: b, ldb: n, beta: 0, c: &c, ldc: n)
    }
    print(String(format: "sgemm 1024^3 threads %d: %.1f GFLOP/s", threads, 2 * Double(n * n * n) / seconds / 1e9))
}

for name in models.keys.sorted() {
    var total = 0.0, totalMacs = 0
    for layer in models[name]! {
        let g = ConvGeometry(batch: batch, inChannels: layer.C, inHeight: layer.H, inWidth: layer.W, outChannels: layer.M,
                             window: SlidingWindow(kernelHeight: layer.k, kernelWidth: layer.k, strideHeight: layer.stride, strideWidth: layer.stride,
                             padTop: layer.pad, padLeft: layer.pad, padBottom: layer.pad, padRight: layer.pad), groups: layer.groups)
        let activation: Activation = layer.activation == "relu6" ? .clip(min: 0, max: 6) : layer.activation == "relu" ? .relu : .none
        let weights = randomFloats(layer.M * (layer.C / layer.groups) * layer.k * layer.k), bias = randomFloats(layer.M)
        let packed = weights.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                PackedConvolution(weights: w, bias: b, outChannels: layer.M, inChannels: layer.C, kernelHeight: layer.k,
                                  kernelWidth: layer.k, groups: layer.groups, activation: activation, unitStride: layer.stride == 1)
            }
        }
        let input = randomFloats(batch * layer.C * layer.H * layer.W)
        let outCount = batch * layer.M * g.outHeight * g.outWidth
        var output = [Float](repeating: 0, count: outCount)
        let residual = layer.residual ? randomFloats(outCount) : []
        let seconds = time(repeats) {
            input.withUnsafeBufferPointer { i in
                output.withUnsafeMutableBufferPointer { o in
                    residual.withUnsafeBufferPointer { r in
                        packed.run(g, input: i.baseAddress!, output: o.baseAddress!, residual: layer.residual ? r.baseAddress : nil)
                    }
                }
            }
        }
        total += seconds
        totalMacs += g.multiplyAdds
        if perLayer {
            print(String(format: "%@ %@ C%d %dx%d M%d k%d s%d g%d: %.3f ms %.1f GFLOP/s", name, layer.name, layer.C, layer.H, layer.W,
                         layer.M, layer.k, layer.stride, layer.groups, seconds * 1000, 2 * Double(g.multiplyAdds) / seconds / 1e9))
        }
    }
    print(String(format: "%@ convs threads %d batch %d: %.3f ms, %.1f GFLOP/s", name, threads, batch, total * 1000,
                 2 * Double(totalMacs) / total / 1e9))
}

// ResNet-18's max pool (3x3 s2 p1 over 64 x 112 x 112) and the global average pools of both models.
do {
    let g = PoolGeometry(planes: batch * 64, inHeight: 112, inWidth: 112, outHeight: 56, outWidth: 56, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                         strideHeight: 2, strideWidth: 2, padTop: 1, padLeft: 1, padBottom: 1, padRight: 1))
    let input = randomFloats(g.planes * 112 * 112)
    var output = [Float](repeating: 0, count: g.planes * 56 * 56)
    let fast = time(repeats) { maxPool2D(g, input: input, output: &output) }
    let plain = time(max(1, repeats / 5)) { maxPool2DReference(g, input: input, output: &output) }
    print(String(format: "maxpool 3x3 s2 64x112x112 batch %d: %.3f ms (reference %.3f ms), %.1f GB/s read", batch, fast * 1000, plain * 1000,
                 Double(input.count * 4) / fast / 1e9))
    for (channels, size) in [(1280, 49), (512, 49)] {
        let x = randomFloats(batch * channels * size)
        var y = [Float](repeating: 0, count: batch * channels)
        let seconds = time(repeats) { globalAveragePool(planes: batch * channels, planeSize: size, input: x, output: &y) }
        print(String(format: "global average pool %dx%d batch %d: %.3f ms", channels, size, batch, seconds * 1000))
    }
}
