import Testing
@testable import Engine
import TestSupport

/// Strided 1x1 convolutions (downsampling shortcuts) run as the pointwise kernel over a subsampled copy: compared
/// with the direct reference, including strides of 3 and unequal ones, rows wide enough for the vector copy and
/// output images written into a wider buffer.
@Suite struct KernelStridedPointwiseTests {
    @Test(.serialized, arguments: [1, 2])
    func stridedPointwiseMatchesReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 4242)
        let cases: [(batch: Int, channels: Int, height: Int, width: Int, out: Int, strideHeight: Int, strideWidth: Int)] = [
            (1, 32, 112, 112, 48, 2, 2), (3, 13, 9, 67, 7, 2, 2), (2, 8, 15, 33, 20, 3, 3), (1, 6, 10, 40, 5, 2, 1),
            (2, 5, 7, 31, 9, 1, 2), (1, 104, 28, 28, 208, 2, 2), (8, 5, 1, 1, 4, 2, 2),
        ]
        for c in cases {
            let g = ConvGeometry(batch: c.batch, inChannels: c.channels, inHeight: c.height, inWidth: c.width, outChannels: c.out,
                                 window: SlidingWindow(kernelHeight: 1, kernelWidth: 1, strideHeight: c.strideHeight, strideWidth: c.strideWidth))
            #expect(g.isStridedPointwise)
            for (residual, gap) in [(false, 0), (true, 0), (false, 5)] {
                checkStridedPointwise(g, activation: residual ? .relu : .none, residual: residual, imageGap: gap, rng: &rng)
            }
        }
    }

    @Test func unitStrideAndPaddedConvsAreNotStridedPointwise() {
        let unit = ConvGeometry(batch: 1, inChannels: 4, inHeight: 8, inWidth: 8, outChannels: 4, window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
        let padded = ConvGeometry(batch: 1, inChannels: 4, inHeight: 8, inWidth: 8, outChannels: 4,
                                  window: SlidingWindow(kernelHeight: 1, kernelWidth: 1, strideHeight: 2, strideWidth: 2, padTop: 1))
        #expect(!unit.isStridedPointwise)
        #expect(!padded.isStridedPointwise)
    }
}

/// Runs the packed convolution on `g` (bias, optional residual, images `imageGap` floats apart) against the reference.
private func checkStridedPointwise(_ g: ConvGeometry, activation: Activation, residual withResidual: Bool, imageGap: Int,
                                   rng: inout SeededGenerator, sourceLocation: SourceLocation = #_sourceLocation) {
    let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth)
    let weights = rng.floats(g.outChannels * g.inChannels), bias = rng.floats(g.outChannels)
    let image = g.outChannels * g.outHeight * g.outWidth
    let residual = withResidual ? rng.floats(g.batch * image) : nil
    let expected = convolutionReferenceOutput(g, input: input, weights: weights, bias: bias, residual: residual, activation: activation)
    let packed = weights.withUnsafeBufferPointer { w in
        bias.withUnsafeBufferPointer { b in
            PackedConvolution(weights: w, bias: b, outChannels: g.outChannels, inChannels: g.inChannels, kernelHeight: 1, kernelWidth: 1,
                              groups: 1, activation: activation)
        }
    }
    let stride = image + imageGap
    var actual = [Float](repeating: .nan, count: g.batch * stride)
    input.withUnsafeBufferPointer { i in
        (residual ?? []).withUnsafeBufferPointer { r in
            actual.withUnsafeMutableBufferPointer { o in
                packed.run(g, input: i.baseAddress!, output: o.baseAddress!, residual: residual == nil ? nil : r.baseAddress,
                           outputImageStride: imageGap == 0 ? nil : stride)
            }
        }
    }
    let images = (0..<g.batch).flatMap { actual[($0 * stride)..<($0 * stride + image)] }
    expectClose(images, expected, "\(g) residual \(withResidual) gap \(imageGap)", sourceLocation: sourceLocation)
    let untouched = (0..<g.batch).allSatisfy { n in actual[(n * stride + image)..<((n + 1) * stride)].allSatisfy(\.isNaN) }
    #expect(untouched, "\(g): a write between the output images", sourceLocation: sourceLocation)
}
