import Testing
@testable import Engine
import TestSupport

/// Output size of one pooled axis per ONNX, floor or ceil mode (a ceil window must start inside input + begin pad).
private func pooledSize(_ size: Int, kernel: Int, stride: Int, dilation: Int, padBegin: Int, padEnd: Int, ceil: Bool) -> Int {
    let span = size + padBegin + padEnd - dilation * (kernel - 1) - 1
    if span < 0 { return 0 }
    var out = (ceil ? (span + stride - 1) / stride : span / stride) + 1
    if ceil && (out - 1) * stride >= size + padBegin { out -= 1 }
    return out
}

@Suite struct KernelPoolingTests {
    @Test func randomizedWindowsMatchReference() {
        var rng = SeededGenerator(seed: 31)
        var cases = 0
        while cases < 80 {
            let kh = Int.random(in: 1...4, using: &rng), kw = Int.random(in: 1...4, using: &rng)
            let dilated = Bool.random(using: &rng)
            var g = PoolGeometry(planes: Int.random(in: 1...5, using: &rng), inHeight: Int.random(in: 1...12, using: &rng),
                                 inWidth: Int.random(in: 1...40, using: &rng), outHeight: 0, outWidth: 0, window: SlidingWindow(kernelHeight: kh, kernelWidth: kw,
                                 strideHeight: Int.random(in: 1...3, using: &rng), strideWidth: Int.random(in: 1...3, using: &rng),
                                 dilationHeight: dilated ? Int.random(in: 1...2, using: &rng) : 1,
                                 dilationWidth: dilated ? Int.random(in: 1...2, using: &rng) : 1,
                                 padTop: Int.random(in: 0..<kh, using: &rng), padLeft: Int.random(in: 0..<kw, using: &rng),
                                 padBottom: Int.random(in: 0..<kh, using: &rng), padRight: Int.random(in: 0..<kw, using: &rng)))
            let ceil = Bool.random(using: &rng)
            g.outHeight = pooledSize(g.inHeight, kernel: kh, stride: g.strideHeight, dilation: g.dilationHeight, padBegin: g.padTop, padEnd: g.padBottom, ceil: ceil)
            g.outWidth = pooledSize(g.inWidth, kernel: kw, stride: g.strideWidth, dilation: g.dilationWidth, padBegin: g.padLeft, padEnd: g.padRight, ceil: ceil)
            guard g.outHeight >= 1 && g.outWidth >= 1 else { continue }
            checkPools(g, rng: &rng)
            cases += 1
        }
    }

    @Test func commonWindowsMatchReference() {
        var rng = SeededGenerator(seed: 32)
        // ResNet's 3x3 s2 p1 max pool, 2x2 s2, and a 3x3 s1 window wide enough for the 16-lane loops.
        checkPools(PoolGeometry(planes: 3, inHeight: 40, inWidth: 40, outHeight: 20, outWidth: 20, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                strideHeight: 2, strideWidth: 2, padTop: 1, padLeft: 1, padBottom: 1, padRight: 1)), rng: &rng)
        checkPools(PoolGeometry(planes: 2, inHeight: 34, inWidth: 66, outHeight: 17, outWidth: 33, window: SlidingWindow(kernelHeight: 2, kernelWidth: 2,
                                strideHeight: 2, strideWidth: 2)), rng: &rng)
        checkPools(PoolGeometry(planes: 2, inHeight: 9, inWidth: 50, outHeight: 9, outWidth: 50, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                padTop: 1, padLeft: 1, padBottom: 1, padRight: 1)), rng: &rng)
        // SqueezeNet's ceil-mode 3x3 s2 pools: 111 columns (a 15-column tail) and 56 (the last window runs past the input).
        checkPools(PoolGeometry(planes: 2, inHeight: 9, inWidth: 111, outHeight: 4, outWidth: 55, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                strideHeight: 2, strideWidth: 2)), rng: &rng)
        checkPools(PoolGeometry(planes: 3, inHeight: 8, inWidth: 56, outHeight: 4, outWidth: 28, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                strideHeight: 2, strideWidth: 2)), rng: &rng)
        // SqueezeNet's later pools (27 and 13 outputs per row: one 16-lane step and a masked tail).
        checkPools(PoolGeometry(planes: 3, inHeight: 55, inWidth: 55, outHeight: 27, outWidth: 27, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                strideHeight: 2, strideWidth: 2)), rng: &rng)
        checkPools(PoolGeometry(planes: 4, inHeight: 27, inWidth: 27, outHeight: 13, outWidth: 13, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                strideHeight: 2, strideWidth: 2)), rng: &rng)
    }

    /// Stride-2 windows over rows of 14-47 columns: the parity split's 16-lane loop, its 8-lane step and its scalar tail
    /// (odd and even widths, pad on either side).
    @Test func narrowStrideTwoRowsMatchReference() {
        var rng = SeededGenerator(seed: 33)
        for width in [14, 15, 16, 17, 20, 28, 31, 33, 47] {
            for padLeft in [0, 1] {
                let outWidth = (width + padLeft + 1 - 3) / 2 + 1
                checkPools(PoolGeometry(planes: 2, inHeight: 6, inWidth: width, outHeight: 3, outWidth: outWidth, window: SlidingWindow(kernelHeight: 3,
                                        kernelWidth: 3, strideHeight: 2, strideWidth: 2, padTop: 1, padLeft: padLeft, padBottom: 0,
                                        padRight: 1)), rng: &rng)
            }
        }
    }

    @Test func globalPoolsMatchReference() {
        var rng = SeededGenerator(seed: 33)
        for (planes, size) in [(1, 1), (3, 7), (5, 49), (4, 196), (2, 1000)] {
            let input = rng.floats(planes * size)
            var fastMean = [Float](repeating: 0, count: planes), plainMean = fastMean, fastMax = fastMean, plainMax = fastMean
            input.withUnsafeBufferPointer { i in
                globalAveragePool(planes: planes, planeSize: size, input: i.baseAddress!, output: &fastMean)
                globalAveragePoolReference(planes: planes, planeSize: size, input: i.baseAddress!, output: &plainMean)
                globalMaxPool(planes: planes, planeSize: size, input: i.baseAddress!, output: &fastMax)
                globalMaxPoolReference(planes: planes, planeSize: size, input: i.baseAddress!, output: &plainMax)
            }
            expectClose(fastMean, plainMean, "global average \(planes)x\(size)")
            expectClose(fastMax, plainMax, "global max \(planes)x\(size)")
        }
    }
}

/// Compares max and average pooling (both pad-count modes) with their reference twins.
private func checkPools(_ g: PoolGeometry, rng: inout SeededGenerator, sourceLocation: SourceLocation = #_sourceLocation) {
    let input = rng.floats(g.planes * g.inHeight * g.inWidth)
    let count = g.planes * g.outHeight * g.outWidth
    var fast = [Float](repeating: .nan, count: count), plain = [Float](repeating: .nan, count: count)
    input.withUnsafeBufferPointer { i in maxPool2DReference(g, input: i.baseAddress!, output: &plain) }
    // MaxPool's AVX-512F row kernel and the separable path it falls back to on other CPUs.
    forEachFloatKernelBody { body in
        fast = [Float](repeating: .nan, count: count)
        input.withUnsafeBufferPointer { i in maxPool2D(g, input: i.baseAddress!, output: &fast) }
        expectClose(fast, plain, "max \(body) \(g)", sourceLocation: sourceLocation)
    }
    for includePad in [false, true] {
        input.withUnsafeBufferPointer { i in
            averagePool2D(g, countIncludePad: includePad, input: i.baseAddress!, output: &fast)
            averagePool2DReference(g, countIncludePad: includePad, input: i.baseAddress!, output: &plain)
        }
        expectClose(fast, plain, "average includePad \(includePad) \(g)", sourceLocation: sourceLocation)
    }
}
